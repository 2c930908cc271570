"""The solver's optimum equals an independent brute-force enumeration on tiny instances."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from planner.solve import solve
from planner.solve.solution import SolveOptions, SolveStatus
from tests.planner.solve.solve_cases import brute_force, tiny_tables

EXACT = dict(time_limit_s=30.0, gap_target=1e-9)
CASES = [
    pytest.param(seed, flags, id=f"seed{seed}-{'-'.join(sorted(flags)) or 'plain'}")
    for seed, flags in [
        (0, set()),
        (1, set()),
        (2, set()),
        (3, set()),
        (4, set()),
        (5, set()),
        (6, {"window"}),
        (7, {"window", "varying_prices"}),
        (8, {"penalty"}),
        (9, {"window", "penalty"}),
        (10, {"varying_prices"}),
        (11, {"window"}),
    ]
]


def _tables(seed: int, flags: set[str]):
    return tiny_tables(
        seed,
        window="window" in flags,
        penalty="penalty" in flags,
        varying_prices="varying_prices" in flags,
    )


@pytest.mark.parametrize(("seed", "flags"), CASES)
@pytest.mark.parametrize("method", ["decompose", "highs"])
def test_matches_brute_force(seed: int, flags: set[str], method: str) -> None:
    tables = _tables(seed, flags)
    expected = brute_force(tables)
    result = solve(tables, SolveOptions(method=method, **EXACT))
    assert result.status is SolveStatus.OPTIMAL, result.message
    tol = 1e-6 * max(1.0, abs(expected))
    assert math.isclose(result.objective_usd, expected, abs_tol=tol), (
        result.objective_usd,
        expected,
    )
    assert result.bound_usd >= expected - tol
    assert result.revenue_usd - result.cost_usd - result.penalty_usd == pytest.approx(
        result.objective_usd, abs=tol
    )


@pytest.mark.parametrize("seed", [20, 21, 22])
def test_reconfiguration_limit_matches_brute_force(seed: int) -> None:
    tables = tiny_tables(seed)
    limit = 0.25
    expected = brute_force(tables, reconfiguration_limit=limit)
    result = solve(tables, SolveOptions(reconfiguration_limit=limit, **EXACT))
    assert result.status is SolveStatus.OPTIMAL, result.message
    assert result.objective_usd == pytest.approx(expected, abs=1e-6 * max(1.0, abs(expected)))


@pytest.mark.parametrize("seed", [300, 301, 302])
@pytest.mark.parametrize("method", ["decompose", "highs"])
def test_unsold_tier_and_two_hour_periods_match_brute_force(seed: int, method: str) -> None:
    """A family that does not sell a tier (combo_offer -1) and periods of two hours."""
    tables = tiny_tables(seed, window=seed % 2 == 0, penalty=True)
    d = tables.demand
    offer, tokens = d.combo_offer.copy(), d.tokens_per_s.copy()
    first = d.combo_family == 0
    offer[first, -1] = -1
    tokens[first, -1, :] = 0.0
    tables = replace(
        tables, demand=replace(d, combo_offer=offer, tokens_per_s=tokens), period_hours=2.0
    )
    expected = brute_force(tables)
    result = solve(tables, SolveOptions(method=method, **EXACT))
    assert result.status is SolveStatus.OPTIMAL, result.message
    assert result.objective_usd == pytest.approx(expected, abs=1e-6 * max(1.0, abs(expected)))
