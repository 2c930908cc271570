"""Closed-loop TTFT: the engine's scheduler and request overhead (``fleet.perf.closed_loop``,
``[engines.scheduling]`` in fleet/data/engines.toml, ``fleet.perf.ttft_fit``).

The physics tests need no data; the bars recompute the TTFT errors from
shared/reference/measured_calibration.csv (docs/calibration.md, "Engines: closed-loop TTFT").
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from msgspec.structs import replace

from fleet.catalog import load_catalog
from fleet.catalog.engines import engine_problem
from fleet.catalog.load import Catalog
from fleet.perf import ttft_fit as tf
from fleet.perf import ttft_layers as tl
from fleet.perf.arrays import CatalogArrays
from fleet.perf.closed_loop import BENCHMARK_WAVES, REQUEST_OVERHEAD_S, burst_share
from fleet.perf.configs import make_configs
from fleet.perf.engines import engine_arrays
from fleet.perf.measured import MeasuredRuns
from fleet.perf.model import estimate
from fleet.perf.types import Configs
from tests.fleet.measured_runs import needs_runs


def _configs(catalog: Catalog, batches: list[int]) -> Configs:
    n = len(batches)
    return make_configs(
        catalog,
        model=["llama-3.1-70b"] * n,
        system=["hgx-h100-8"] * n,
        tp=[4] * n,
        pp=[1] * n,
        dp=[1] * n,
        ep=[1] * n,
        precision=["fp8"] * n,
        batch=batches,
        isl=[2048] * n,
        osl=[256] * n,
    )


def test_burst_share_is_the_first_wave_or_every_wave() -> None:
    assert burst_share(np.asarray(0.0)) == pytest.approx(1.0 / BENCHMARK_WAVES)
    assert burst_share(np.asarray(1.0)) == pytest.approx(1.0)


def test_prefill_first_scheduler_keeps_every_wave_a_burst(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """With waves that stay bursts the mean TTFT is the first wave's (less a mixed scheduler's
    staggered waves), and the gap grows with concurrency, as a wave's prefill does."""
    configs = _configs(catalog, [1, 8, 32, 128])
    mixed = estimate(arrays.with_scheduling(request_overhead_s=0.0, prefill_first=False), configs)
    first = estimate(arrays.with_scheduling(request_overhead_s=0.0, prefill_first=True), configs)
    # one stream has no wave to wait for: the two differ by less than a decode step
    assert abs(first.ttft_burst_s[0] - mixed.ttft_burst_s[0]) < first.aggregated_step_s[0]
    gap = first.ttft_burst_s[1:] - mixed.ttft_burst_s[1:]
    assert np.all(gap > 0)
    assert np.all(np.diff(gap) > 0)
    # a burst of 128 prompts of 2k tokens waits for half the wave: many one-prompt prefills
    assert first.ttft_burst_s[-1] > 20 * first.prefill_s[-1]
    # TPOT and throughput do not depend on the TTFT terms
    np.testing.assert_array_equal(first.tpot_s, mixed.tpot_s)
    np.testing.assert_array_equal(first.tokens_per_s_per_device, mixed.tokens_per_s_per_device)


def test_request_overhead_adds_to_every_ttft(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = _configs(catalog, [4, 64])
    a = estimate(arrays.with_scheduling(request_overhead_s=0.0, prefill_first=False), configs)
    b = estimate(arrays.with_scheduling(request_overhead_s=0.1, prefill_first=False), configs)
    np.testing.assert_allclose(b.ttft_burst_s - a.ttft_burst_s, 0.1)
    np.testing.assert_array_equal(a.ttft_floor_s, b.ttft_floor_s)


def test_engines_carry_their_scheduling(catalog: Catalog, arrays: CatalogArrays) -> None:
    pooled = engine_arrays(catalog, arrays, "any").accelerators
    assert np.all(pooled.request_overhead_s == REQUEST_OVERHEAD_S)
    assert np.all(pooled.prefill_first == 0.0)
    for engine_id in ("trtllm", "vllm", "sglang"):
        sched = catalog.engines[engine_id].scheduling
        assert sched is not None
        given = {"prefill_first", "request_overhead_ms"}
        if sched.kv_cache_of_free_memory:
            given.add("kv_cache_of_free_memory")
        assert set(sched.sources) == given
        acc = engine_arrays(catalog, arrays, engine_id).accelerators
        np.testing.assert_allclose(acc.request_overhead_s, sched.request_overhead_ms * 1e-3)
        assert np.all(acc.prefill_first == (1.0 if sched.prefill_first else 0.0))
        assert np.all(acc.kv_of_free_memory == (1.0 if sched.kv_cache_of_free_memory else 0.0))
    assert catalog.engines["sglang"].scheduling.prefill_first  # type: ignore[union-attr]
    assert not catalog.engines["vllm"].scheduling.prefill_first  # type: ignore[union-attr]


def test_scheduling_without_a_source_is_rejected(catalog: Catalog) -> None:
    engine = catalog.engines["vllm"]
    assert engine.scheduling is not None
    bare = replace(engine, scheduling=replace(engine.scheduling, sources={}))
    problem = engine_problem(bare, set(catalog.accelerators))
    assert problem is not None and problem[0] == "scheduling.sources"
    trt = catalog.engines["trtllm"]
    assert trt.scheduling is not None and trt.scheduling.kv_cache_of_free_memory
    sources = {k: v for k, v in trt.scheduling.sources.items() if k != "kv_cache_of_free_memory"}
    unsourced = replace(trt, scheduling=replace(trt.scheduling, sources=sources))
    problem = engine_problem(unsourced, set(catalog.accelerators))
    assert problem == ("scheduling.sources", "no source for ['kv_cache_of_free_memory']")


def test_scheduling_overhead_is_bounded() -> None:
    from fleet.catalog.engines import Scheduling

    with pytest.raises(msgspec.ValidationError, match="request_overhead_ms"):
        msgspec.convert(
            {"prefill_first": False, "request_overhead_ms": -1.0, "sources": {}}, Scheduling
        )


@pytest.fixture(scope="module")
def fitted(arrays: CatalogArrays, runs: MeasuredRuns) -> tuple[dict[str, float], list[tf.TtftRow]]:
    return tf.fit_all(arrays, runs)


def _row(table: list[tf.TtftRow], engine: str, side: str) -> tf.TtftRow:
    return next(t for t in table if t.engine == engine and t.side == side)


@needs_runs
def test_catalog_overheads_are_the_fit(fitted: tuple[dict[str, float], list[tf.TtftRow]]) -> None:
    overheads, _ = fitted
    stored = load_catalog().engines
    for engine_id, value in overheads.items():
        sched = stored[engine_id].scheduling
        assert sched is not None
        assert sched.request_overhead_ms == pytest.approx(value, abs=0.5), engine_id
        assert sched.prefill_first == tf.SCHEDULERS[engine_id][0]


@needs_runs
def test_pooled_overhead_is_the_fit(arrays: CatalogArrays, runs: MeasuredRuns) -> None:
    assert tf.fit_pooled_overhead_ms(arrays, runs) == pytest.approx(REQUEST_OVERHEAD_S * 1e3)


@needs_runs
def test_engine_ttft_terms_reach_the_bar_on_every_run(
    fitted: tuple[dict[str, float], list[tf.TtftRow]],
) -> None:
    """Each run at its own engine's terms: median absolute TTFT error 24.7% over the 1,054 runs
    (pooled terms 33.3%); the issue's bar is 30%. Per engine on its fit series, pooled -> engine:
    TensorRT-LLM 25.6% -> 24.9%, vLLM 37.7% -> 21.5%, SGLang 72.8% -> 20.0% (24.9% and 21.7%
    before vLLM's and SGLang's own MoE compute forms, SGLang's overhead 82.5 -> 97.5 ms).
    TensorRT-LLM's request overhead (80 ms) is within 15 ms of the pooled one (67.5 ms), so its
    terms differ
    from the pooled ones almost only by its multipliers and kernel terms: held within a point of
    them. (Before the routed experts' prefill compute followed the measured MoE form: 24.8% /
    34.2%, TensorRT-LLM 26.8% -> 26.5%, vLLM 45.7% -> 21.3%, SGLang 67.8% -> 15.4%, overheads
    82.5 and 77.5 ms. Before InferenceX's runs were read at their drawn lengths,
    fleet.perf.protocol: 25.8% / 33.4% over 1,050 runs, the four runs added now fitting at the
    shorter mean lengths; before each MoE layer's call took its measured time: 25.7% / 33.5%;
    1,037 runs, 25.4% and 33.4% before devices had the memory they report: 13 runs that were
    beyond the KV capacity now fit.)"""
    _, table = fitted
    every = _row(table, "all", "every run")
    assert every.rows == 1054
    assert every.pooled <= 0.345
    assert every.engine_terms <= 0.25
    for engine_id in ("trtllm", "vllm", "sglang"):
        fit_side = _row(table, engine_id, "fit")
        slack = 0.01 if engine_id == "trtllm" else 0.0  # its overhead is the pooled one
        assert fit_side.engine_terms <= fit_side.pooled + slack, engine_id
        # TensorRT-LLM's 26.5% was 24.5% before its InferenceX runs were read at their drawn
        # (10% shorter) lengths: their measured TTFT does not fall with them (docs/calibration.md)
        assert fit_side.engine_terms <= (0.27 if engine_id == "trtllm" else 0.25), engine_id


@needs_runs
def test_engine_ttft_terms_hold_on_held_out_series(
    arrays: CatalogArrays, runs: MeasuredRuns
) -> None:
    """The held-out quarter of ``python -m fleet.perf.calibrate --held-out`` (every factor and
    term re-fitted without it): TTFT 28.7% at the pooled terms and 17.7% at each run's engine's
    terms, both under the issue's 30%; per engine, pooled -> engine: TensorRT-LLM 21.8% ->
    20.6% (its request overhead is near the pooled one: within a point), vLLM 58.9% -> 12.3%,
    SGLang 73.4% -> 20.4%. (Before InferenceX's runs were read at their drawn lengths,
    fleet.perf.protocol: 27.0% / 18.7%.) The quarter is drawn over every run series in the file
    (before 2026-11-24, over those the model evaluated: 28.2% / 21.4% on that draw); over twelve
    draws the medians are in tests/fleet/test_held_out_spread.py."""
    table = tf.held_out_series_check(arrays, runs)
    held = _row(table, "all", "held-out")
    assert held.rows > 150
    assert held.pooled <= 0.30
    assert held.engine_terms <= 0.22
    for engine_id in ("trtllm", "vllm", "sglang"):
        side = _row(table, engine_id, "held-out")
        slack = 0.01 if engine_id == "trtllm" else 0.001  # its overhead is the pooled one
        assert side.engine_terms <= side.pooled + slack, engine_id


def test_grid_fit_recovers_a_cost_per_layer() -> None:
    """TTFTs built as a base plus 2 ms per layer: the per-layer form finds 2 ms and fits them
    exactly; one constant per request cannot (the models differ in depth)."""
    rng = np.random.default_rng(7)
    layers = np.repeat([32.0, 64.0, 94.0], 20)
    base = rng.uniform(0.05, 0.5, layers.size)
    measured = base + 2e-3 * layers
    per_layer = tf.grid_best_ms(base, measured, layers, tl.GRID_MS_PER_LAYER)
    assert per_layer == pytest.approx(2.0)
    const = tf.grid_best_ms(base, measured, np.ones(layers.size), tf.GRID_MS)
    const_error = np.median(np.abs((base + const * 1e-3) / measured - 1.0))
    assert const_error > 0.05


@needs_runs
def test_a_cost_per_layer_does_not_beat_the_constant(
    arrays: CatalogArrays, runs: MeasuredRuns
) -> None:
    """Why the catalog's request overhead is one constant per request (docs/calibration.md, "A
    request overhead per layer"): fitted per engine on the Hopper runs, a cost per layer (2.15 /
    0.65 / 2.4 ms for TensorRT-LLM / vLLM / SGLang) scores 31.4% on the engines' held-out series
    and 32.8% on each model left out, against the constant's 29.3% and 29.0%. Should a re-fit
    turn this around, the form is worth adopting: this test then fails."""
    scores = tl.compare(arrays, runs)
    pooled = {s.scope: s for s in scores if s.engine == "all"}
    assert pooled["held-out series"].runs > 150
    assert pooled["each model left out"].runs > 1000
    for scope in ("held-out series", "each model left out"):
        assert pooled[scope].constant_error < pooled[scope].per_layer_error, scope
