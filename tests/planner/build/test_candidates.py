"""Candidates: the SLO filter keeps exactly what meets the SLOs; pruning drops only candidates
another kept one dominates in every period; the no-candidate sentence names the best figure."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from fleet.perf.types import Configs, Estimate, Problem
from planner.build.candidates import (
    Columns,
    Slo,
    _frontier_2d,
    describe,
    eligible,
    frontier,
    prune,
)
from planner.build.queueing import utilization_cap
from planner.build.reasons import GroupTrace, unserved_reason, unserved_sentence
from planner.scenario.schema import Tier


def _estimate(**columns: np.ndarray) -> Estimate:
    n = len(next(iter(columns.values())))
    base = {f.name: np.zeros(n) for f in fields(Estimate)}
    base["problem"] = np.full(n, Problem.OK)
    base["fits"] = np.ones(n, dtype=bool)
    base.update(columns)
    return Estimate(**base)


def _configs(n: int, **columns: np.ndarray) -> Configs:
    base = {f.name: np.ones(n, dtype=np.int64) for f in fields(Configs)}
    base["weight_precision"] = np.ones(n, dtype=np.int64)  # fp8
    base["spec_draft_tokens"] = np.zeros(n, dtype=np.int64)
    base["spec_acceptance"] = np.zeros(n)
    base["prefix_cached_tokens"] = np.zeros(n, dtype=np.int64)
    base["lengths_vary"] = np.zeros(n, dtype=bool)
    base["recv_interval"] = np.ones(n, dtype=np.int64)
    base["ctx_hold_requests"] = np.zeros(n)
    base["ctx_hold_iters"] = np.zeros(n, dtype=np.int64)
    base["ctx_hold_periodic"] = np.zeros(n, dtype=bool)
    base["moe_held_expert_time"] = np.ones(n, dtype=bool)
    base.update(columns)
    return Configs(**base)


SLO = Slo(min_tokens_per_s_per_user=100.0, max_ttft_s=0.5, ttft_quantile=0.99)


def test_eligible_applies_fit_speed_and_ttft() -> None:
    est = _estimate(
        tokens_per_s_per_user=np.array([150.0, 99.0, 150.0, 150.0, 100.0]),
        ttft_floor_s=np.array([0.2, 0.2, 0.5, 0.2, 0.499]),
        fits=np.array([True, True, True, False, True]),
    )
    assert eligible(est, SLO).tolist() == [True, False, False, False, True]
    no_ttft = Slo(min_tokens_per_s_per_user=0.0, max_ttft_s=None, ttft_quantile=0.99)
    assert eligible(est, no_ttft).tolist() == [True, True, True, False, True]


def _random_columns(rng: np.random.Generator, n: int, osl: float) -> Columns:
    batch = rng.choice([1, 4, 16, 64, 256], n)
    request_s = rng.uniform(2.0, 40.0, n)
    return Columns(
        systems_per_unit=rng.choice([1, 2, 4], n),
        tokens_per_s_per_unit=batch * osl / request_s,
        request_s=request_s,
        ttft_floor_s=rng.uniform(0.05, 0.45, n),
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pruning_is_exact(seed: int) -> None:
    rng = np.random.default_rng(seed)
    osl = 400.0
    cols = _random_columns(rng, 300, osl)
    load = rng.uniform(0.0, 60.0, 24)
    load[3] = 0.0
    kept = prune(cols, SLO, load, osl)
    # Independent: every candidate's capacity per period, computed directly.
    erlangs = load[None, :] * cols.request_s[:, None]
    cap = utilization_cap(
        erlangs, (0.5 - cols.ttft_floor_s)[:, None], cols.request_s[:, None], 0.99
    )
    capacity = cols.tokens_per_s_per_unit[:, None] * cap
    np.testing.assert_allclose(kept.tokens_per_s_per_replica, capacity[kept.rows])
    assert 0 < kept.rows.shape[0] < 300
    spr = cols.systems_per_unit
    for j in np.setdiff1d(np.arange(300), kept.rows):
        dominators = (spr[kept.rows] <= spr[j]) & np.all(
            capacity[kept.rows] >= capacity[j] - 1e-9, axis=1
        )
        assert dominators.any(), f"row {j} dropped but no kept row dominates it"
    for i in kept.rows:  # and no kept row is strictly dominated by another row
        others = np.setdiff1d(np.arange(300), [i])
        strictly = (
            (spr[others] <= spr[i])
            & np.all(capacity[others] >= capacity[i], axis=1)
            & ((spr[others] < spr[i]) | np.any(capacity[others] > capacity[i], axis=1))
        )
        assert not strictly.any()


def test_pruning_without_ttft_slo_is_two_dimensional() -> None:
    cols = Columns(
        systems_per_unit=np.array([1, 2, 2, 4]),
        tokens_per_s_per_unit=np.array([100.0, 150.0, 120.0, 150.0]),
        request_s=np.array([10.0, 10.0, 1.0, 10.0]),
        ttft_floor_s=np.zeros(4),
    )
    slo = Slo(min_tokens_per_s_per_user=0.0, max_ttft_s=None, ttft_quantile=0.99)
    kept = prune(cols, slo, np.ones(5), 400.0)
    assert kept.rows.tolist() == [0, 1]
    assert np.all(kept.utilization_cap == 1.0)


def test_describe_names_the_layout() -> None:
    cfg = _configs(
        2,
        tp=np.array([8, 2]),
        pp=np.array([1, 4]),
        ep=np.array([1, 2]),
        batch=np.array([1, 64]),
        spec_draft_tokens=np.array([0, 3]),
    )
    assert describe(cfg, 0) == "tp=8 fp8 batch 1"
    assert describe(cfg, 1) == "tp=2 pp=4 ep=2 fp8 batch 64 spec k=3"


def _tier(**kw) -> Tier:
    return Tier(id="fast", multipliers=(6.0,), reference_multiplier=6.0, **kw)


def test_sentence_for_a_speed_floor_nobody_reaches() -> None:
    tier = _tier(min_tokens_per_s_per_user=170.0, max_ttft_ms=500.0)
    slo = Slo(170.0, 0.5, 0.99)
    trace = GroupTrace()
    for pool, best in (("h100-us-east", 120.0), ("b200-us-east", 143.0)):
        est = _estimate(
            tokens_per_s_per_user=np.array([best - 50, best]), ttft_floor_s=np.array([0.1, 0.1])
        )
        trace.observe(pool, 10, _configs(2, tp=np.array([4, 8]), batch=np.array([8, 1])), est, slo)
    assert unserved_sentence("qwen3-235b-a22b", tier, trace) == (
        "no candidate of qwen3-235b-a22b on any pool reaches the fast tier's 170 tokens/s per "
        "user (best: 143 tokens/s on b200-us-east, tp=8 fp8 batch 1)"
    )


def test_sentences_for_ttft_fit_and_pool_size() -> None:
    tier = _tier(min_tokens_per_s_per_user=100.0, max_ttft_ms=200.0)
    slo = Slo(100.0, 0.2, 0.99)
    cfg = _configs(1)
    slow_prefill = GroupTrace()
    slow_prefill.observe(
        "p",
        4,
        cfg,
        _estimate(tokens_per_s_per_user=np.array([150.0]), ttft_floor_s=np.array([0.35])),
        slo,
    )
    assert "meets the fast tier's 200 ms time to first token at p99" in unserved_sentence(
        "m", tier, slow_prefill
    )
    assert (
        "(best: 350 ms on p, tp=1 fp8 batch 1, the serving stack's per-request cost included)"
        in unserved_sentence("m", tier, slow_prefill)
    )
    nothing_fits = GroupTrace()
    nothing_fits.observe(
        "p", 4, cfg, _estimate(tokens_per_s_per_user=np.array([150.0]), fits=np.array([False])), slo
    )
    assert unserved_sentence("m", tier, nothing_fits).startswith("m fits on no pool (p)")
    too_small = GroupTrace()
    too_small.observe(
        "p",
        1,
        cfg,
        _estimate(
            tokens_per_s_per_user=np.array([150.0]),
            ttft_floor_s=np.array([0.1]),
            systems_per_replica=np.array([2]),
        ),
        slo,
    )
    assert "smallest: 2 systems on p, which has 1 available" in unserved_sentence(
        "m", tier, too_small
    )
    # Each reason names the scenario field that stopped the best configuration.
    paths = [
        unserved_reason("m", 3, tier, trace).path
        for trace in (slow_prefill, nothing_fits, too_small)
    ]
    assert paths == ["$.tiers[3].max_ttft_ms", "$.options.search", "$.fleet.pools"]


@pytest.mark.parametrize(("n", "d", "block"), [(500, 2, 64), (700, 4, 256), (300, 30, 7)])
def test_frontier_matches_pairwise_definition(n: int, d: int, block: int) -> None:
    keys = np.random.default_rng(n).integers(0, 12, (n, d)).astype(np.float64)
    keep = frontier(keys, block=block)
    ge = np.all(keys[:, None, :] >= keys[None, :, :], axis=2)
    gt = np.any(keys[:, None, :] > keys[None, :, :], axis=2)
    strictly_dominated = (ge & gt).any(axis=0)
    undominated = {tuple(row) for row in keys[~strictly_dominated]}
    assert {tuple(row) for row in keys[keep]} == undominated
    assert keep.sum() == len(undominated)  # one row per set of identical rows


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_two_criteria_frontier_keeps_the_scan_rule(seed: int) -> None:
    """(-systems, tokens/s) keys with repeated rows: the sweep ``frontier`` takes for two
    criteria drops exactly the rows an earlier row of the scan (larger sum, then index) weakly
    dominates."""
    rng = np.random.default_rng(seed)
    n = 400
    systems = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    per_system = (
        rng.choice(rng.uniform(10.0, 5e3, 60), n)
        * rng.uniform(0.5, 1.5, 4)[np.log2(systems).astype(int)]
    )
    keys = np.stack([-systems, systems * per_system], axis=1)
    keys[::9, 1] = keys[0, 1]  # the same tokens/s on different system counts
    total = keys.sum(axis=1)
    index = np.arange(n)
    earlier = (total[:, None] > total[None, :]) | (
        (total[:, None] == total[None, :]) & (index[:, None] < index[None, :])
    )
    dominated = (np.all(keys[:, None, :] >= keys[None, :, :], axis=2) & earlier).any(axis=0)
    assert _frontier_2d(keys) is not None  # the sweep, not the scan, decides here
    assert frontier(keys).tolist() == (~dominated).tolist()
    assert 1 < (~dominated).sum() < 60
