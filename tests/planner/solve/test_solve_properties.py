"""Monotonicity properties of the optimum, checked with Hypothesis on tiny instances solved to a
proven optimum (gap target 1e-9, so the comparisons are between optima, not heuristics)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.solve import solve
from planner.solve.solution import SolveOptions, SolveStatus
from planner.solve.tables import PlanningTables
from tests.planner.solve.solve_cases import tiny_tables, with_systems

EXACT = SolveOptions(time_limit_s=30.0, gap_target=1e-9)
TOL = 1e-6


def optimum(tables: PlanningTables) -> float:
    result = solve(tables, EXACT)
    assert result.status is SolveStatus.OPTIMAL, result.message
    return result.objective_usd


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    window=st.booleans(),
    extra=st.integers(1, 3),
    pool=st.integers(0, 1),
    period=st.integers(0, 3),
)
def test_more_inventory_never_lowers_the_optimum(
    seed: int, window: bool, extra: int, pool: int, period: int
) -> None:
    tables = tiny_tables(seed, window=window, max_assignments=800)
    systems = tables.inventory.systems_available.copy()
    systems[pool % systems.shape[0], period % systems.shape[1]] += extra
    bigger = with_systems(tables, systems)
    assert optimum(bigger) >= optimum(tables) - TOL


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    window=st.booleans(),
    factor=st.floats(0.2, 0.95),
    which=st.integers(0, 2),
)
def test_tighter_slo_never_raises_the_optimum(
    seed: int, window: bool, factor: float, which: int
) -> None:
    """A tighter SLO leaves fewer tokens/s per replica: the optimum cannot rise."""
    tables = tiny_tables(seed, window=window, max_assignments=800)
    cand = tables.candidates
    rate = cand.tokens_per_s_per_replica.copy()
    rate[which % rate.shape[0]] *= factor
    tighter = replace(tables, candidates=replace(cand, tokens_per_s_per_replica=rate))
    assert optimum(tighter) <= optimum(tables) + TOL


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_batch_window_never_lowers_the_optimum(seed: int) -> None:
    tables = tiny_tables(seed, window=False, max_assignments=800)
    windows = tables.demand.window_periods.copy()
    windows[0] = tables.periods
    windowed = replace(tables, demand=replace(tables.demand, window_periods=windows))
    assert optimum(windowed) >= optimum(tables) - TOL


def test_windowed_batch_tier_uses_idle_capacity() -> None:
    """Batch demand arrives in the first hour only; one replica serves 10 tokens/s per hour.
    Without a window it serves 10 of 30; with a 3-hour window the idle hours serve the rest."""
    tables = tiny_tables(0)
    d = tables.demand
    n_tiers, periods = 1, 3
    one = np.array([0], dtype=np.int64)
    demand = replace(
        d,
        family_ids=("fam",),
        tier_ids=("batch",),
        variant_ids=("main",),
        offers=replace(
            d.offers,
            family=one,
            tier=one,
            variant=one,
            multiplier=np.array([1.0]),
            usd_per_output_token=np.full((1, periods), 1.0 / 3600.0),
        ),
        combo_family=one,
        combo_offer=np.zeros((1, n_tiers), dtype=np.int64),
        tokens_per_s=np.array([[[30.0, 0.0, 0.0]]]),
        reference_combo=one,
        window_periods=np.array([1], dtype=np.int64),
        unserved_penalty_usd_per_output_token=np.zeros(1),
    )
    cand = replace(
        tables.candidates,
        pool=one,
        family=one,
        tier=one,
        variant=one,
        systems_per_replica=np.array([1], dtype=np.int64),
        tokens_per_s_per_replica=np.full((1, periods), 10.0),
        max_replicas=np.array([1], dtype=np.int64),
    )
    inv = replace(
        tables.inventory,
        pool_ids=("pool",),
        systems_available=np.ones((1, periods), dtype=np.int64),
        usd_per_system_hour=np.array([1.0]),
    )
    hourly = PlanningTables(inventory=inv, demand=demand, candidates=cand)
    windowed = replace(hourly, demand=replace(demand, window_periods=np.array([3])))
    r_hourly, r_window = solve(hourly, EXACT), solve(windowed, EXACT)
    assert abs(r_hourly.objective_usd - (10.0 - 1.0)) < TOL  # one hour served, one replica-hour
    assert abs(r_window.objective_usd - (30.0 - 3.0)) < TOL
    assert r_window.replicas.tolist() == [[1, 1, 1]]
    assert np.allclose(r_window.served_tokens_per_s, [[10.0, 10.0, 10.0]])
