"""The TPOT a closed-loop benchmark measures (``tpot_burst_s``) under the engine's scheduler.

Under a prefill-first scheduler (SGLang's default) a benchmark's waves return as bursts and a
request's decode window holds half its wave's prefill; under a mixed one all of it, as in steady
serving (``fleet.perf.closed_loop.prefill_share_in_decode``). The physics tests need no data; the
bars recompute SGLang's TPOT errors from shared/reference/measured_calibration.csv
(docs/calibration.md, "Engines").
"""

from __future__ import annotations

import numpy as np
import pytest

from fleet.catalog.load import Catalog
from fleet.perf import engine_fit as ef
from fleet.perf.arrays import CatalogArrays
from fleet.perf.closed_loop import prefill_share_in_decode
from fleet.perf.configs import make_configs
from fleet.perf.engine_check import held_out_by_engine
from fleet.perf.engines import engine_arrays
from fleet.perf.measured import MeasuredRuns
from fleet.perf.model import estimate
from fleet.perf.types import Configs
from tests.fleet.measured_runs import needs_runs


def _configs(catalog: Catalog, batches: list[int], osl: int = 256) -> Configs:
    n = len(batches)
    return make_configs(
        catalog,
        model=["qwen3-32b"] * n,
        system=["hgx-h100-8"] * n,
        tp=[4] * n,
        pp=[1] * n,
        dp=[1] * n,
        ep=[1] * n,
        precision=["bf16"] * n,
        batch=batches,
        isl=[4096] * n,
        osl=[osl] * n,
    )


def _at(arrays: CatalogArrays, prefill_first: bool) -> CatalogArrays:
    return arrays.with_scheduling(request_overhead_s=0.0, prefill_first=prefill_first)


def test_share_is_all_or_half_the_wave() -> None:
    assert prefill_share_in_decode(np.asarray(0.0)) == pytest.approx(1.0)
    assert prefill_share_in_decode(np.asarray(1.0)) == pytest.approx(0.5)


def test_mixed_scheduler_benchmark_tpot_is_the_steady_one(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    est = estimate(_at(arrays, False), _configs(catalog, [1, 16, 128]))
    np.testing.assert_array_equal(est.tpot_burst_s, est.tpot_s)


def test_prefill_first_benchmark_tpot_holds_half_the_prefill(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Decode step + half the prefill interference; steady TPOT, the slot a request holds and
    the throughput (all the prefill work) do not depend on the scheduler."""
    configs = _configs(catalog, [1, 16, 128])
    mixed = estimate(_at(arrays, False), configs)
    first = estimate(_at(arrays, True), configs)
    interference = mixed.aggregated_step_s - mixed.step_s
    assert np.all(interference > 0)
    np.testing.assert_allclose(first.tpot_burst_s, mixed.step_s + 0.5 * interference)
    np.testing.assert_array_equal(first.tpot_s, mixed.tpot_s)
    np.testing.assert_array_equal(first.request_s, mixed.request_s)
    np.testing.assert_array_equal(first.tokens_per_s_per_device, mixed.tokens_per_s_per_device)
    # more streams replace more prompts per step: the gap grows with concurrency
    assert np.all(np.diff(mixed.tpot_burst_s - first.tpot_burst_s) > 0)


def _medians(arrays: CatalogArrays, runs: MeasuredRuns, rows: np.ndarray) -> tuple[float, float]:
    est = estimate(arrays, runs.configs.take(rows))
    return (
        float(np.median(np.abs(est.tpot_burst_s / runs.tpot_s[rows] - 1.0))),
        float(np.median(np.abs(est.tokens_per_s_per_device / runs.tokens_per_s_per_gpu[rows] - 1))),
    )


@needs_runs
def test_sglang_runs_at_its_scheduler(
    catalog: Catalog, arrays: CatalogArrays, runs: MeasuredRuns
) -> None:
    """All 156 single-node SGLang runs at SGLang's multipliers and prefill-first scheduler:
    median absolute TPOT error 9.5% (22.6% at the pooled factors); the same multipliers with a
    mixed scheduler give 25.8%, so the scheduler is what does it. Tokens/s per GPU (6.1%) is
    the same either way: the scheduler moves prefill between TTFT and TPOT, not the work.
    Before each MoE layer's call took its measured time: 14.6% / 23.9% / 28.1%, tokens/s 8.3%.
    Before devices had the memory they report this was 14.2% over 151 runs (bar 0.145): the five
    runs added are Qwen3-32B runs SGLang queued (measured TTFT 6.8-28.9 s at 16-128 users) that
    the model now fits in KV memory, so it scores them unqueued; the bar moves with the rows
    (docs/known-gaps.md, SGLang's KV budget)."""
    split = ef.split(arrays, runs)
    rows = split.rows[split.engine == "sglang"]
    assert len(rows) == 156
    sglang = engine_arrays(catalog, arrays, "sglang")
    assert np.all(sglang.accelerators.prefill_first == 1.0)
    tpot, tput = _medians(sglang, runs, rows)
    mixed_tpot, mixed_tput = _medians(
        sglang.with_scheduling(request_overhead_s=0.0, prefill_first=False), runs, rows
    )
    pooled_tpot, _ = _medians(arrays, runs, rows)
    assert tpot <= 0.147, tpot
    # the scheduler, not the multipliers, takes the error from over 2x this to this
    assert pooled_tpot >= 2.0 * tpot and mixed_tpot >= 2.0 * tpot, (pooled_tpot, mixed_tpot)
    assert tput == pytest.approx(mixed_tput) and tput <= 0.085


@needs_runs
def test_calibrate_held_out_runs_at_their_engine_terms(
    arrays: CatalogArrays, runs: MeasuredRuns
) -> None:
    """calibrate's held-out quarter on its canonical draw (214 runs): the pooled default 14.9%
    TPOT / 9.6% tokens/s per GPU; each run at its engine's multipliers and scheduler 10.8% /
    8.9%, most of it SGLang's prefill-first benchmark TPOT (29.0% -> 10.4% on its 36 runs).
    vLLM's multipliers cost 0.4 point of TPOT on this draw's 44 runs (8.0% -> 8.5%) and gain 0.5
    point of tokens/s (10.1% -> 9.6%); over draws they are no gain either (docs/known-gaps.md,
    Engines). TensorRT-LLM's gain 1.7 points of TPOT. (Since the routed experts' prefill compute
    follows the measured MoE form, 2026-11-25; before it the pooled default read 15.9% / 10.0%,
    the engines' terms 10.2% / 8.6%, SGLang 30.0% -> 11.8%, vLLM's multipliers cost 1.0 point of
    TPOT and gained 1.1 of tokens/s, TensorRT-LLM's gained 2.4. Before InferenceX's runs were
    read at their drawn lengths, fleet.perf.protocol: 15.9% / 10.2% -> 10.4% / 8.6%, vLLM's
    multipliers costing 0.5 point, 8.0% -> 8.5%; before each MoE layer's call took its measured
    time: 16.1% / 10.2% -> 11.9% / 10.9%; the earlier draw, over the series the model evaluated:
    209 runs, 13.6% / 11.7% -> 12.3% / 11.4%; over twelve draws:
    tests/fleet/test_held_out_spread.py.)"""
    table = {r.engine: r for r in held_out_by_engine(arrays, runs)}
    everything = table["all"]
    assert everything.rows == 214
    assert everything.engine_terms[0] <= 0.125 and everything.engine_terms[1] <= 0.115
    assert everything.engine_terms[0] <= everything.pooled[0] - 0.04
    sglang = table["sglang"]
    assert sglang.engine_terms[0] <= sglang.pooled[0] - 0.10, sglang
    trtllm, vllm = table["trtllm"], table["vllm"]
    assert trtllm.engine_terms[0] <= trtllm.pooled[0] - 0.015, trtllm
    # vLLM's multipliers: half a point of TPOT lost, half a point of tokens/s gained (docstring)
    assert vllm.engine_terms[0] <= vllm.pooled[0] + 0.006, vllm
    assert vllm.engine_terms[1] <= vllm.pooled[1] - 0.004, vllm
