"""Mean TTFT of a closed-loop benchmark at concurrency N: ``ttft_burst_s`` of the model.

A closed-loop benchmark keeps N requests in flight: N start together, and each client sends its
next request when the last one finishes. The run lasts ``BENCHMARK_WAVES`` waves of N requests.
What a wave looks like depends on the engine's scheduler:

- Mixed (chunked-prefill) schedulers (TensorRT-LLM in-flight batching, vLLM V1) put the running
  decodes first in every step and fill the rest of the step's token budget with prompt chunks.
  The first wave is a burst: the mean request waits for half the wave's prompts. Its requests
  then decode side by side and finish in the order their first tokens came, spread by the
  wave's prefill; later waves arrive with that spread, so a request meets the step in flight and
  its own prefill (``staggered_s``), not the whole wave.
- A prefill-first scheduler (SGLang's default: a new prefill batch runs before any decode step
  while requests wait, prefill and decode not mixed) prefills the whole wave before anyone
  decodes, so its requests start decoding together and, with one output length, finish
  together: every wave arrives as a burst again. Its share of burst waves is 1.

- A disaggregated unit's prefill replicas take the first wave's N prompts one per prefill lane
  (an attention rank of a prefill replica) at a time, so the mean request waits behind half the
  wave's prompts on its lane (``disaggregated_wave_wait_s``); its decode replicas start each
  request as its KV arrives, so later waves arrive staggered as under a mixed scheduler.

``prefill_first`` per accelerator row is that share beyond the first wave (0 = mixed scheduler,
1 = prefill-first; the pooled default is 0). ``request_overhead_s`` is the per-request cost
outside the forward passes (HTTP, tokenization, scheduling, first detokenization): pooled,
``REQUEST_OVERHEAD_S``; per engine, fitted on its runs (``fleet.perf.ttft_fit``).

A scheduler that polls for new requests only every N decode steps while it decodes (SGLang's
``--scheduler-recv-interval N``; its ``SchedulerRecvSkipper`` counts a decode step as 1 and any
prefill step as enough to poll at once, and an idle scheduler polls continuously) holds a
request that arrives at a decoding replica until the count comes round: uniform over the N
steps, (N - 1) / 2 decode steps on average (``recv_wait_s``). Only requests that arrive while
the replica decodes pay it: the staggered waves, not a burst that starts an idle replica.

A scheduler that holds new prompts to batch their prefills releases them once ``n`` more prompts
have arrived or a timeout of ``T`` decode iterations has passed (``ctx_hold_steps``), prompts
arriving one by one at λ per decode step (as requests finish). Two clocks:
- counted from the first held prompt (TensorRT-LLM's batch waiting, ``batch_wait_timeout_iters``
  with ``batch_wait_max_tokens_ratio``: n = the prompts that fill that share of the step's token
  budget): when n / λ <= T the batch fills and the mean prompt waits n / (2 λ) steps (the first
  n / λ, the last none); otherwise the first waits T and the λ T that arrive meanwhile T / 2 on
  average: T (1 + λ T / 2) / (1 + λ T);
- free-running (TensorRT-LLM's attention-DP balance, ``attention_dp_config: enable_balance``,
  ``timeout_iters`` T: its counter ticks whenever some rank lacks a prompt, so releases come
  every T iterations; n = the arrivals until every rank has one): a prompt meets the clock at a
  uniform phase, and waits min(U T, n / λ) steps: T / 2 when n / λ >= T, else
  n / λ - (n / λ)^2 / (2 T).
Only staggered arrivals wait: a burst starts idle ranks, which schedule at once.

Whether the benchmark's lengths vary is the benchmark's own (``Configs.lengths_vary``). One that
draws each request's prompt and output length from a range (vLLM's ``benchmark_serving.py``
random dataset at ``--random-range-ratio r < 1``: each length uniform on [int(r L), L]) ends a
wave's requests hundreds of decode steps apart, so even under a prefill-first scheduler the next
wave's requests arrive one by one, as under a mixed scheduler: only the first wave is a burst
(``scheduler_bursts``). Its ``isl`` and ``osl`` are then the range's means
(``fleet.perf.protocol``).
"""

from __future__ import annotations

import numpy as np

from fleet.perf.types import BoolArray, FloatArray, IntArray

BENCHMARK_WAVES = 6.0
"""Waves of ``batch`` requests a closed-loop benchmark runs, chosen with ``REQUEST_OVERHEAD_S`` on
the TTFTs of the measured Hopper runs (docs/calibration.md), where 4-12 waves fit about equally
well."""
REQUEST_OVERHEAD_S = 67.5e-3
"""Per-request serving cost outside the forward passes, pooled over engines (engines.toml carries
each engine's own): the value on a 2.5 ms grid with the smallest median absolute TTFT error on the
fit series of the calibration's held-out check (seeded three quarters of all run series, the
pooled factors re-fitted on them): ``python -m fleet.perf.ttft_fit``. 77.5 ms before the routed
experts' prefill compute followed the measured MoE form (``fleet.perf.kernel_moe_efficiency``;
engines 82.5 / 27.5 / 145 ms -> 80 / 25 / 82.5 ms for TensorRT-LLM / vLLM / SGLang; SGLang's
97.5 ms since its own MoE compute forms, engines.toml ``moe_compute``); 85 ms
before MoE layers paid their routing skew (``fleet.perf.kernel_moe_skew``); 80 ms before
InferenceX's runs were read at their drawn lengths (``fleet.perf.protocol``); 62.5 ms on the draw
before the held-out quarter was drawn over every run series and devices had their reported
memory; 50 ms before that, chosen by hand on all runs."""


def scheduler_bursts(prefill_first: FloatArray, lengths_vary: BoolArray) -> FloatArray:
    """Share of the waves after the first that arrive as a burst: ``prefill_first`` when the
    benchmark's lengths are fixed (a wave's requests finish together), 0 when they vary."""
    return np.where(lengths_vary, 0.0, prefill_first)


def burst_share(prefill_first: FloatArray) -> FloatArray:
    """Share of a benchmark's waves that arrive as a burst: the first, and with a prefill-first
    scheduler every later one too."""
    return (1.0 + (BENCHMARK_WAVES - 1.0) * prefill_first) / BENCHMARK_WAVES


def prefill_share_in_decode(prefill_first: FloatArray) -> FloatArray:
    """Share of the replacement prompts' prefill work inside a benchmark request's decode window
    (the TPOT a closed-loop benchmark measures: ``tpot_burst_s`` of the model).

    Mixed scheduler: a request decodes through the prefill of the prompts behind it in its wave
    and, since requests finish in the order they started, through the prefill of the replacements
    of those ahead of it: a whole wave's prompts, as in steady serving (share 1). Prefill-first
    scheduler: the k-th of the wave's N prompts gets its first token after its own prefill, then
    waits while the N - k behind it are prefilled (decode stalls during a prefill batch); the wave
    then decodes together and finishes together, so no replacement is prefilled inside its decode
    window: (N - k) / N of a wave, a half on average (the other half is in its TTFT).
    """
    return 1.0 - 0.5 * prefill_first


def recv_wait_s(recv_interval: IntArray, step_s: FloatArray) -> FloatArray:
    """Mean wait of a request arriving at a decoding replica for the scheduler's next poll:
    (interval - 1) / 2 decode steps of ``step_s`` (module docstring); 0 at interval 1."""
    return 0.5 * (recv_interval - 1.0) * step_s


def ctx_hold_steps(
    more: FloatArray, timeout: IntArray, periodic: BoolArray, arrivals_per_step: FloatArray
) -> FloatArray:
    """Mean decode steps a staggered prompt is held before its prefill is scheduled: released
    once ``more`` further prompts have arrived or at the timeout, ``timeout`` steps after the
    first held prompt or, ``periodic``, at a free-running clock of that period (module
    docstring); 0 where nothing is held (``more`` or ``timeout`` 0)."""
    lam = np.maximum(arrivals_per_step, 1e-12)
    t = timeout.astype(np.float64)
    fill = more / lam  # steps until the batch is complete
    counted = np.where(fill <= t, 0.5 * fill, t * (1.0 + 0.5 * lam * t) / (1.0 + lam * t))
    clock = np.where(fill >= t, 0.5 * t, fill - fill * fill / np.maximum(2.0 * t, 1e-12))
    return np.where((more > 0) & (t > 0), np.where(periodic, clock, counted), 0.0)


def ttft_closed_loop(
    burst_s: FloatArray,
    staggered_s: FloatArray,
    prefill_first: FloatArray,
    request_overhead_s: FloatArray,
) -> FloatArray:
    """Mean TTFT over the benchmark: burst waves at ``burst_s`` (the mean wait for half a wave's
    prefills, then a decode step), the others at ``staggered_s`` (their poll wait and hold in),
    plus the request overhead."""
    share = burst_share(prefill_first)
    return request_overhead_s + share * burst_s + (1.0 - share) * staggered_s


def disaggregated_wave_wait_s(
    users: FloatArray, lanes: FloatArray, hold_s: FloatArray
) -> FloatArray:
    """Mean wait of a burst wave's request at a disaggregated unit's prefill side, beyond its own
    prefill: ``users`` prompts arrive together at ``lanes`` lanes that each prefill one prompt per
    ``hold_s``; the mean request waits behind half of the prompts queued on its lane before it,
    (users / lanes - 1) / 2 prompts (0 when the wave fits the lanes)."""
    return 0.5 * np.maximum(users / lanes - 1.0, 0.0) * hold_s
