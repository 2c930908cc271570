"""Serving engines (TensorRT-LLM, vLLM, SGLang) as a catalog dimension: ``fleet/data/engines.toml``.

The accelerators' efficiency factors are one pooled fit over serving runs of all three engines
(docs/calibration.md). An engine entry scales those factors, per accelerator family where data
exist, by multipliers: ``bandwidth`` (achievable memory bandwidth), ``flops`` per weight precision,
``link`` (achievable link bandwidth), ``step_overhead``, ``layer_overhead`` and
``collective_overhead`` (fixed costs). A multiplier left out (``None``) was not measured and
counts as 1; ``EngineFactors.not_measured`` lists them so faces can say so. An accelerator no
entry names takes multipliers 1 (not measured). The pooled default ``POOLED`` is not in the file:
it is the accelerators' factors as they are.

Every multiplier given carries its source in the entry's ``sources`` table, keyed by multiplier
name (``flops`` covers every precision of the flops table).

An entry may also carry kernel terms that are not multipliers on a fitted factor:
``block_fp8_moe_local_expert_us``, the engine's block-scaled FP8 MoE kernel's fixed time per expert
held on a rank (0 where absent); ``moe_compute``, the engine's own routed-expert compute form per
expert kind, fitted on its MoE kernel table (the part's TensorRT-LLM form where absent); and
``expert_prefill_time``, how long the engine's MoE kernels take on prefill-sized calls against
TensorRT-LLM's at the same shapes, for kinds without a form (1 where absent). One term is fitted
on runs rather than measured on a kernel: ``moe_w4a16_call_us``, a fixed time per MoE layer and
step of weight-only 4-bit experts (0 where absent, as the pooled fit).

An engine's ``scheduling`` table (optional) carries what its scheduler does to a closed-loop
benchmark's TTFT: whether it prefills waiting requests before decoding and its per-request
overhead, each with a source (``fleet.perf.closed_loop``). Absent: the pooled terms.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from fleet.catalog.schema import PRECISIONS, Frozen, Id, MoeCompute, Precision

POOLED = "any"
"""The engine id of the pooled factors (no multiplier): what the catalog's factors are."""
MULTIPLIERS: tuple[str, ...] = (
    "bandwidth",
    "flops",
    "link",
    "step_overhead",
    "layer_overhead",
    "collective_overhead",
)
Multiplier = Annotated[float, Meta(ge=0.1, le=10.0)]
EngineBasis = Literal["fitted-on-runs", "runs-and-kernel-ratios"]
"""Where an entry's multipliers come from (docs/calibration.md, "Engines"):
- fitted-on-runs: fitted end to end on measured serving runs of this engine on these parts;
- runs-and-kernel-ratios: no runs of these parts: the engine's multipliers fitted on another
  family's runs, with each kernel part (GEMM, all-reduce) moved by how this engine's measured
  kernels on these parts compare with its kernels on the fitted family."""


class FlopsMultipliers(Frozen, frozen=True, kw_only=True):
    """Multiplier on the flops fraction per weight precision; absent = not measured (1)."""

    bf16: Multiplier | None = None
    fp8: Multiplier | None = None
    fp4: Multiplier | None = None
    int8: Multiplier | None = None
    int4: Multiplier | None = None

    def get(self, precision: Precision) -> float | None:
        return getattr(self, precision)


EXPERT_KINDS: tuple[str, ...] = ("bf16", "fp8", "fp8_block", "fp4", "int4")
"""Kinds of routed experts whose grouped GEMMs are measured apart: BF16, per-tensor FP8,
block-scaled FP8 (``Model.fp8_block_scaled``), 4-bit floating point (NVFP4 / MXFP4) and INT4
weight-only (W4A16, dequantized to BF16: Kimi K2's checkpoints)."""
MoeForm = tuple[float, float, float]
"""One routed-expert compute form's three figures: (FLOP fraction or ratio,
half_rate_pairs_per_expert, half_rate_width)."""
PrefillTime = Annotated[float, Meta(ge=0.1, le=20.0)]
W4A16_CALL_MAX_US = 500.0
"""Upper bound of ``EngineFactors.moe_w4a16_call_us`` (and of its fit)."""


class ExpertPrefillTime(Frozen, frozen=True, kw_only=True):
    """Time of the engine's routed-expert grouped GEMMs on prefill-sized calls over
    TensorRT-LLM's at the same shapes, per expert kind; absent = not measured (1)."""

    bf16: PrefillTime | None = None
    fp8: PrefillTime | None = None
    fp8_block: PrefillTime | None = None
    fp4: PrefillTime | None = None
    int4: PrefillTime | None = None

    def given(self) -> dict[str, float]:
        return {k: v for k in EXPERT_KINDS if (v := getattr(self, k)) is not None}


class EngineFactors(Frozen, frozen=True, kw_only=True):
    """One engine's multipliers on the pooled factors of ``accelerators``."""

    accelerators: Annotated[tuple[Id, ...], Meta(min_length=1)]
    basis: EngineBasis
    bandwidth: Multiplier | None = None
    flops: FlopsMultipliers = FlopsMultipliers()
    link: Multiplier | None = None
    step_overhead: Multiplier | None = None
    layer_overhead: Multiplier | None = None
    collective_overhead: Multiplier | None = None
    block_fp8_moe_local_expert_us: Annotated[float, Meta(ge=0.0, le=100.0)] | None = None
    """Not a multiplier: the engine's block-scaled FP8 MoE kernel's fixed time per expert held on
    the rank, per MoE layer and forward pass, in microseconds, measured on its kernel tables
    (``fleet.perf.kernel_moe_grid``); charged on models whose FP8 experts are block-scaled
    (``Model.fp8_block_scaled``). None: the engine's kernel shows no such term (0)."""
    moe_w4a16_call_us: Annotated[float, Meta(ge=0.0, le=W4A16_CALL_MAX_US)] | None = None
    """Not a multiplier: a fixed time, in microseconds, of every MoE layer's routed-expert call
    in each forward pass when the experts are weight-only 4-bit (W4A16: MXFP4 or INT4 on parts
    without 4-bit tensor cores), fitted end to end on this engine's runs
    (``fleet.perf.engine_fit``). The pooled fit charges those experts no call time (their
    streaming figure is fitted on runs of every engine); an engine whose W4A16 kernel has a
    larger floor than the others' carries the difference here. None: 0."""
    expert_prefill_time: ExpertPrefillTime = ExpertPrefillTime()
    """Not a multiplier on a fitted factor: how long this engine's MoE kernels take on
    prefill-sized calls against TensorRT-LLM's (the kernels the parts' figures are fitted on),
    per expert kind, measured on both engines' kernel tables (``fleet.perf.kernel_moe_engines``);
    the routed experts' compute on prefill tokens takes that multiple."""
    moe_compute: MoeCompute | None = None
    """Not a multiplier: this engine's own routed-expert compute form per expert kind, fitted on
    its MoE kernel table as the parts' forms are on TensorRT-LLM's (``python -m
    fleet.perf.kernel_moe_efficiency --engine <id>``); on prefill tokens the experts' compute
    follows it instead of the part's form (a kind given here takes no ``expert_prefill_time``)."""
    sources: dict[str, str]

    def moe_forms(self) -> dict[str, MoeForm]:
        """Expert kind -> (flops_fraction, half_rate_pairs_per_expert, half_rate_width) given."""
        if self.moe_compute is None:
            return {}
        return {
            k: (f.flops_fraction, f.half_rate_pairs_per_expert, f.half_rate_width)
            for k in EXPERT_KINDS
            if (f := getattr(self.moe_compute, k)) is not None
        }

    def not_measured(self) -> tuple[str, ...]:
        """Multipliers left at 1 because no data measure them (``flops.<precision>`` for
        precisions)."""
        out = [name for name in MULTIPLIERS if name != "flops" and getattr(self, name) is None]
        out += [f"flops.{p}" for p in PRECISIONS if self.flops.get(p) is None]
        return tuple(out)


SCHEDULING_FIELDS: tuple[str, ...] = ("prefill_first", "request_overhead_ms")


class Scheduling(Frozen, frozen=True, kw_only=True):
    """How the engine's scheduler shapes a closed-loop benchmark's TTFT (serving software, the
    same on every accelerator; ``fleet.perf.closed_loop``)."""

    prefill_first: bool
    """Waiting requests are prefilled before any decode step (prefill and decode not mixed), so
    a closed loop's waves stay bursts; False for mixed chunked-prefill schedulers."""
    request_overhead_ms: Annotated[float, Meta(ge=0.0, le=2000.0)]
    """Per-request cost outside the forward passes (HTTP, tokenization, scheduling)."""
    kv_cache_of_free_memory: bool = False
    """The KV pool is the usable fraction of the memory left after the weights and the warm-up's
    workspace (TensorRT-LLM's ``free_gpu_memory_fraction``), not the usable fraction of the
    device's memory less both (vLLM's ``gpu_memory_utilization``, the default)."""
    sources: dict[str, str]


class Engine(Frozen, frozen=True, kw_only=True):
    id: Id
    name: str
    versions: str
    """The versions behind the figures (serving runs and kernel tables)."""
    factors: tuple[EngineFactors, ...] = ()
    scheduling: Scheduling | None = None
    """None: the pooled closed-loop TTFT terms (not measured for this engine)."""

    def factors_for(self, accelerator_id: str) -> EngineFactors | None:
        """This engine's multipliers on ``accelerator_id``; None = not measured there."""
        for f in self.factors:
            if accelerator_id in f.accelerators:
                return f
        return None


class EngineFile(Frozen, frozen=True, kw_only=True):
    engines: tuple[Engine, ...]


def engine_problem(engine: Engine, accelerators: set[str]) -> tuple[str, str] | None:
    """(path below the entry, problem) for a rule msgspec cannot express, else None."""
    if engine.id == POOLED:
        return "id", f"{POOLED!r} is the pooled default and cannot be redefined"
    if engine.scheduling is not None:
        needed = list(SCHEDULING_FIELDS)
        if engine.scheduling.kv_cache_of_free_memory:
            needed.append("kv_cache_of_free_memory")
        missing = [n for n in needed if n not in engine.scheduling.sources]
        if missing:
            return "scheduling.sources", f"no source for {missing}"
    seen: set[str] = set()
    for j, f in enumerate(engine.factors):
        for acc in f.accelerators:
            if acc not in accelerators:
                return f"factors[{j}].accelerators", f"unknown accelerator {acc!r}"
            if acc in seen:
                return f"factors[{j}].accelerators", f"{acc!r} is in two factor entries"
            seen.add(acc)
        given = [n for n in MULTIPLIERS if n != "flops" and getattr(f, n) is not None]
        if any(f.flops.get(p) is not None for p in PRECISIONS):
            given.append("flops")
        if f.block_fp8_moe_local_expert_us is not None:
            given.append("block_fp8_moe_local_expert_us")
        if f.moe_w4a16_call_us is not None:
            given.append("moe_w4a16_call_us")
        if f.expert_prefill_time.given():
            given.append("expert_prefill_time")
        if f.moe_forms():
            given.append("moe_compute")
            both = sorted(set(f.moe_forms()) & set(f.expert_prefill_time.given()))
            if both:
                return (
                    f"factors[{j}].expert_prefill_time",
                    f"{both} also have an moe_compute form, which replaces the prefill time",
                )
        missing = [n for n in given if n not in f.sources]
        if missing:
            return f"factors[{j}].sources", f"no source for {missing}"
    return None


def decode_engines(path: Path) -> EngineFile:
    """The decoded file; raises msgspec errors (the catalog loader words them)."""
    return msgspec.toml.decode(path.read_bytes(), type=EngineFile)
