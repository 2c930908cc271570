"""The provider's plan (cheapest tokens first, batch in its window's cheapest hours) and the same
with a coordinate search over price cards: feasible, never above the optimum, and doing what a
capacity team does on instances built to show it."""

from __future__ import annotations

import importlib
from dataclasses import replace

import numpy as np
import pytest

from planner.solve import solve
from planner.solve.baselines import greedy
from planner.solve.evaluate import evaluate
from planner.solve.provider import price_search, provider_fill
from planner.solve.solution import SolveOptions
from planner.solve.tables import Candidates, Demand, Inventory, Offers, PlanningTables
from tests.planner.solve.solve_cases import brute_force, tiny_tables


def _assert_feasible(tables: PlanningTables, replicas: np.ndarray) -> None:
    cand, inv = tables.candidates, tables.inventory
    assert replicas.shape == (cand.pool.shape[0], tables.periods)
    assert (replicas >= 0).all()
    assert (replicas <= cand.max_replicas[:, None]).all()
    used = np.zeros_like(inv.systems_available)
    np.add.at(used, cand.pool, replicas * cand.systems_per_replica[:, None])
    assert (used <= inv.systems_available).all()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", ["plain", "window", "penalty", "varying"])
def test_provider_plans_are_feasible_and_never_beat_the_optimum(seed: int, kind: str) -> None:
    tables = tiny_tables(
        seed, window=kind == "window", penalty=kind == "penalty", varying_prices=kind == "varying"
    )
    optimum = brute_force(tables)
    replicas = provider_fill(tables)
    _assert_feasible(tables, replicas)
    listed = evaluate(tables, tables.demand.reference_combo, replicas)
    tol = 1e-6 * max(1.0, abs(optimum))
    assert listed.objective_usd <= optimum + tol
    if kind != "penalty":
        # Every replica it starts pays for itself at the hour's price: it never loses money.
        assert listed.objective_usd >= -1e-9
    searched = price_search(tables)
    _assert_feasible(tables, searched.replicas)
    again = evaluate(tables, searched.combo, searched.replicas)
    assert again.objective_usd == pytest.approx(searched.value.objective_usd)
    assert listed.objective_usd - tol <= searched.value.objective_usd <= optimum + tol


def _two_pool_tables(window: int, systems: list[list[int]]) -> PlanningTables:
    """One family, one tier, one offer; pool 0 makes tokens at half pool 1's cost."""
    periods = len(systems[0])
    offers = Offers(
        family=np.array([0]),
        tier=np.array([0]),
        variant=np.array([0]),
        multiplier=np.array([1.0]),
        usd_per_output_token=np.full((1, periods), 1.0 / 3600.0),
    )
    demand = Demand(
        family_ids=("fam",),
        tier_ids=("tier",),
        variant_ids=("fam",),
        offers=offers,
        combo_family=np.array([0]),
        combo_offer=np.array([[0]]),
        tokens_per_s=np.full((1, 1, periods), 10.0),
        reference_combo=np.array([0]),
        window_periods=np.array([window]),
        unserved_penalty_usd_per_output_token=np.zeros(1),
    )
    candidates = Candidates(
        pool=np.array([0, 1]),
        family=np.zeros(2, dtype=np.int64),
        tier=np.zeros(2, dtype=np.int64),
        variant=np.zeros(2, dtype=np.int64),
        systems_per_replica=np.ones(2, dtype=np.int64),
        tokens_per_s_per_replica=np.full((2, periods), 5.0),
        max_replicas=np.array([10, 10]),
    )
    inventory = Inventory(
        pool_ids=("cheap", "dear"),
        systems_available=np.array(systems, dtype=np.int64),
        usd_per_system_hour=np.array([1.0, 2.0]),
    )
    return PlanningTables(inventory=inventory, demand=demand, candidates=candidates)


def test_cheapest_tokens_fill_first() -> None:
    tables = _two_pool_tables(window=1, systems=[[1, 1], [5, 5]])
    x = provider_fill(tables)
    # Each hour needs 2 replicas: the one cheap system first, then one dear replica.
    assert x.tolist() == [[1, 1], [1, 1]]


def test_batch_goes_to_the_cheapest_hours_of_its_window() -> None:
    # A 2-hour window: the cheap pool has 4 systems in hour 1 and none in hour 0, so the whole
    # block's 20 tokens/s-hours go to hour 1 on cheap replicas, none on the dear pool.
    tables = _two_pool_tables(window=2, systems=[[0, 4], [5, 5]])
    x = provider_fill(tables)
    assert x.tolist() == [[0, 4], [0, 0]]


def test_price_search_finds_a_better_card() -> None:
    tables = _two_pool_tables(window=1, systems=[[4, 4], [0, 0]])
    d = tables.demand
    # A second card at twice the price that keeps 80% of the demand: worth more on this fleet.
    offers = replace(
        d.offers,
        family=np.array([0, 0]),
        tier=np.array([0, 0]),
        variant=np.array([0, 0]),
        multiplier=np.array([1.0, 2.0]),
        usd_per_output_token=np.vstack([d.offers.usd_per_output_token] * 2)
        * np.array([[1.0], [2.0]]),
    )
    demand = replace(
        d,
        offers=offers,
        combo_family=np.array([0, 0]),
        combo_offer=np.array([[0], [1]]),
        tokens_per_s=np.concatenate([d.tokens_per_s, 0.8 * d.tokens_per_s]),
    )
    tables = replace(tables, demand=demand)
    result = price_search(tables)
    assert result.combo.tolist() == [1]
    listed = evaluate(tables, d.reference_combo, provider_fill(tables))
    assert result.value.objective_usd > listed.objective_usd
    assert result.value.objective_usd == pytest.approx(brute_force(tables))


@pytest.mark.parametrize("seed", range(4))
def test_a_limit_shorter_than_the_root_lp_returns_the_searched_provider_plan(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = tiny_tables(seed, varying_prices=True)
    decompose = importlib.import_module("planner.solve.decompose")
    monkeypatch.setattr(decompose, "solve_root", lambda *args, **kwargs: None)
    result = solve(tables, SolveOptions(time_limit_s=5.0, gap_target=1e-9), None)
    assert "(time limit in the root LP)" in result.message
    searched = price_search(tables).value.objective_usd
    greedy_value = evaluate(tables, tables.demand.reference_combo, greedy(tables)).objective_usd
    assert result.objective_usd == pytest.approx(max(searched, greedy_value))
    assert result.objective_usd >= searched - 1e-9
