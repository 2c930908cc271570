"""Column types of the performance model: a batch of configurations in, a batch of estimates out.

Every field is a 1-D numpy array of the same length (one entry per configuration), so the model
evaluates millions of configurations in one vectorized pass. Ids are resolved to integer indices
into the catalog's entries (in catalog order) once, at the edge, by ``fleet.perf.configs``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import IntEnum

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


class Bound(IntEnum):
    """Which term of the decode step binds."""

    COMPUTE = 0
    MEMORY = 1
    COMMUNICATION = 2
    OVERHEAD = 3


class Problem(IntEnum):
    """Why a configuration has no estimate; OK when it has one (it may still not fit)."""

    OK = 0
    BAD_LAYOUT = 1
    """tp does not divide the heads, ep does not divide the experts, a cached prefix not shorter
    than the prompt, and the like."""
    OVER_SCALE_UP = 2
    """tp x ep (x dp for attention data parallel) exceeds the system's scale-up domain."""
    PRECISION_UNSUPPORTED = 3
    """The accelerator runs this precision neither natively nor weight-only."""
    DOES_NOT_FIT = 4
    """Weights, KV cache and workspace exceed the usable memory per device."""


@dataclass(frozen=True, slots=True)
class Configs:
    """One row per configuration. ``batch`` counts concurrent requests of the whole replica."""

    model: IntArray
    system: IntArray
    tp: IntArray
    pp: IntArray
    dp: IntArray
    """Data-parallel attention ranks inside the replica (devices = tp x dp x pp)."""
    ep: IntArray
    """Expert-parallel degree of each MoE layer (1 = experts tensor-parallel with tp)."""
    weight_precision: IntArray
    """Index into ``fleet.catalog.PRECISIONS``."""
    kv_precision: IntArray
    batch: IntArray
    isl: IntArray
    """Prompt tokens per request, cached prefix included."""
    prefix_cached_tokens: IntArray
    """Prompt tokens whose KV comes from the prefix cache: their prefill is skipped, their KV is
    held and read like any other (0 <= cached < isl)."""
    osl: IntArray
    spec_draft_tokens: IntArray
    """Speculative decoding draft length k; 0 = off."""
    spec_acceptance: FloatArray
    """Per-token acceptance probability a of the draft (ignored when k = 0)."""
    lengths_vary: BoolArray
    """The closed-loop benchmark the ``*_burst_s`` figures describe draws each request's prompt
    and output length from a range (``isl`` and ``osl`` are then the range's means), so a wave's
    requests finish apart and later waves arrive staggered under any scheduler
    (``fleet.perf.closed_loop``); False: fixed lengths."""
    recv_interval: IntArray
    """Decode steps between the scheduler's polls for new requests while it decodes (SGLang's
    ``--scheduler-recv-interval``; 1, every engine's default, polls every step): a request that
    arrives at a decoding replica waits (interval - 1) / 2 steps on average before its prefill
    can start (``fleet.perf.closed_loop.recv_wait_s``)."""
    ctx_hold_requests: FloatArray
    """Further prompts (expected arrivals) the scheduler waits for before it schedules a held
    prompt's prefill (TensorRT-LLM's attention-DP balance: until every rank has one; its batch
    waiting: the prompts that fill its token share); 0 = prompts are scheduled as they come,
    every engine's default (``fleet.perf.closed_loop.ctx_hold_steps``)."""
    ctx_hold_iters: IntArray
    """The hold's timeout in decode iterations; 0 = no hold."""
    ctx_hold_periodic: BoolArray
    """The timeout is a free-running clock (released every ``ctx_hold_iters``), not counted from
    the first held prompt."""
    moe_held_expert_time: BoolArray
    """The engine's block-scaled FP8 MoE kernel pays its fixed time per expert held on the rank
    (``block_fp8_moe_local_expert_s``: TensorRT-LLM's CUTLASS on Hopper, DeepGEMM on Blackwell,
    the kernels its tables time); False where a run chose a kernel without it (TensorRT-LLM's
    TRTLLM-Gen backend, ``fleet.perf.serving_recipes.trtllm_moe_backend``). True by default."""

    def __len__(self) -> int:
        return int(self.model.shape[0])

    def take(self, index: IntArray | BoolArray) -> Configs:
        """The rows selected by ``index`` (integer positions or a boolean mask)."""
        return Configs(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


@dataclass(frozen=True, slots=True)
class Estimate:
    """What one configuration does. SI units: bytes, seconds, tokens per second."""

    problem: IntArray
    """``Problem`` code per row."""
    fits: BoolArray
    devices_per_replica: IntArray
    systems_per_replica: IntArray
    weight_bytes_per_device: FloatArray
    kv_bytes_per_device: FloatArray
    workspace_bytes_per_device: FloatArray
    memory_bytes_per_device: FloatArray
    usable_bytes_per_device: FloatArray
    max_batch: IntArray
    """Largest concurrent-request count that fits for this layout and sequence length."""
    step_compute_s: FloatArray
    step_memory_s: FloatArray
    step_comm_s: FloatArray
    step_overhead_s: FloatArray
    step_s: FloatArray
    """One decode step of the replica (all terms combined)."""
    bound: IntArray
    """``Bound`` code of the dominant term."""
    tokens_per_step: FloatArray
    """Accepted tokens per stream per step (1 without speculative decoding)."""
    tpot_s: FloatArray
    """Time per output token seen by a user in steady aggregated serving (incl. prefill
    interference)."""
    tpot_burst_s: FloatArray
    """Mean TPOT of a closed-loop benchmark at concurrency ``batch`` (the waves of
    ``ttft_burst_s``): ``tpot_s`` under a mixed scheduler; under a prefill-first one the waves
    return as bursts and a request's decode window holds only the prompts prefilled after its
    own, half a wave on average (``fleet.perf.closed_loop.prefill_share_in_decode``). Compare it
    with measured TPOTs; the planner uses ``tpot_s``."""
    tokens_per_s_per_user: FloatArray
    tokens_per_s_per_replica: FloatArray
    tokens_per_s_per_device: FloatArray
    prefill_s: FloatArray
    """Prefill of one request's uncached ``isl - prefix_cached_tokens`` tokens alone on the
    replica."""
    prefill_wave_s: FloatArray
    """Prefill of one such request on each of the ``dp`` attention ranks at once (the cycle of a
    prefill-only replica, which prefills dp prompts per wave); ``prefill_s`` when dp = 1."""
    ttft_floor_s: FloatArray
    """Time to first token with no queueing: prefill + one decode step."""
    ttft_burst_s: FloatArray
    """Mean time to first token of a closed-loop benchmark at concurrency ``batch`` whose clients
    start together: a first wave in which the replica prefills all ``batch`` prompts chunk by
    chunk (each request waits for those ahead of it), later waves staggered (or bursts again under
    a prefill-first scheduler), plus a per-request serving overhead (``fleet.perf.closed_loop``;
    the engine's terms in engines.toml). Compare it with measured TTFTs; the planner uses
    ``ttft_floor_s`` and adds its own queueing wait."""
    request_s: FloatArray
    """Time a request holds a batch slot: TTFT floor + (osl - 1) x TPOT."""
    step_draft_s: FloatArray
    """Speculative-decoding draft cost inside ``step_s`` (0 without speculation)."""
    aggregated_step_s: FloatArray
    """One replica step in steady aggregated serving: the decode step plus the fused prefills of
    replacement requests (``tpot_s`` x ``tokens_per_step``)."""

    def __len__(self) -> int:
        return int(self.problem.shape[0])

    def take(self, index: IntArray | BoolArray) -> Estimate:
        return Estimate(**{f.name: getattr(self, f.name)[index] for f in fields(self)})
