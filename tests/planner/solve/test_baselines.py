"""The two baselines the benchmark compares against: feasible plans, never above the optimum."""

from __future__ import annotations

import numpy as np
import pytest

from planner.solve.baselines import greedy, price_list
from planner.solve.evaluate import evaluate
from tests.planner.solve.solve_cases import brute_force, tiny_tables


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("baseline", [greedy, price_list])
def test_baseline_is_a_feasible_plan_no_better_than_the_optimum(seed: int, baseline) -> None:
    tables = tiny_tables(seed)
    replicas = baseline(tables)
    cand, inv = tables.candidates, tables.inventory
    assert replicas.shape == (cand.pool.shape[0], tables.periods)
    assert (replicas >= 0).all()
    assert (replicas <= cand.max_replicas[:, None]).all()
    used = np.zeros_like(inv.systems_available)
    np.add.at(used, cand.pool, replicas * cand.systems_per_replica[:, None])
    assert (used <= inv.systems_available).all()
    value = evaluate(tables, tables.demand.reference_combo, replicas)
    assert value.objective_usd <= brute_force(tables) + 1e-6 * max(1.0, abs(value.objective_usd))
    if baseline is greedy:
        # Greedy starts a replica only where it pays for itself, so it never loses money.
        # (The price list runs ceil(demand / rate) replicas, whose last one may not pay.)
        assert value.objective_usd >= -1e-9
