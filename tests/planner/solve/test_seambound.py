"""The bound with the reconfiguration limit from PDLP's row prices is valid however loose PDLP's
tolerance: at every combo choice its cut is not below the LP with (6) over the whole horizon,
and the price master with its cuts is not below the brute-force optimum."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from planner.solve import solve
from planner.solve.decompose import one_hot
from planner.solve.grouped import solve_fixed
from planner.solve.linear import Engine
from planner.solve.master import Master
from planner.solve.model import build_structure
from planner.solve.seambound import chunk_bound, chunk_members
from planner.solve.solution import SolveOptions, SolveStatus
from planner.solve.tables import PlanningTables
from tests.planner.solve.solve_cases import brute_force, tiny_tables

LIMIT = 0.25


def combo_choices(tables: PlanningTables) -> list[np.ndarray]:
    """Every choice of one combo per family."""
    fam = tables.demand.combo_family
    per_family = [np.flatnonzero(fam == f) for f in range(len(tables.demand.family_ids))]
    return [np.array(c, dtype=np.int64) for c in itertools.product(*per_family)]


@pytest.mark.parametrize("tolerance", [1e-1, 1e-4])
@pytest.mark.parametrize("seed", range(6))
def test_chunk_cuts_bound_the_lp_with_the_limit_at_every_choice(
    seed: int, tolerance: float
) -> None:
    """Cuts from the prices at the reference choice bound every choice's LP with (6); the chunks
    (one period each, so the seams are dropped) relax it."""
    tables = tiny_tables(seed)
    st = build_structure(tables, reconfiguration_limit=LIMIT)
    seamed = build_structure(tables, LIMIT, st.token_scale, chunk_periods=1)
    assert seamed.n_groups == tables.periods >= 2
    priced = chunk_bound(
        seamed, one_hot(st, tables.demand.reference_combo), time.perf_counter() + 20, tolerance
    )
    assert priced is not None
    for choice in combo_choices(tables):
        z = one_hot(st, choice)
        exact = solve_fixed(st, z, time.perf_counter() + 20, Engine.HIGHS)
        assert exact is not None
        cut = priced.cuts.value(z) - float(st.combo_penalty_usd @ z)
        assert cut >= exact.objective - 1e-6 * max(1.0, abs(exact.objective))


@pytest.mark.parametrize("seed", range(6))
def test_master_with_chunk_cuts_bounds_the_optimum(seed: int) -> None:
    """The chunk cuts on sums of the master's per-group thetas keep its bound above the
    brute-force optimum with the limit (the model without (6) has one group per period here)."""
    tables = tiny_tables(seed, window=seed % 2 == 1)
    expected = brute_force(tables, reconfiguration_limit=LIMIT)
    relaxed = build_structure(tables, None)
    seamed = build_structure(tables, LIMIT, relaxed.token_scale, chunk_periods=1)
    members = chunk_members(relaxed, seamed)
    assert (members.sum(axis=0) == 1).all()  # every group in exactly one chunk
    master = Master(tables.demand.combo_family, relaxed.combo_penalty_usd, relaxed.n_groups)
    for choice in combo_choices(tables)[:3]:
        z = one_hot(relaxed, choice)
        priced = chunk_bound(seamed, z, time.perf_counter() + 20, 1e-1)
        assert priced is not None
        master.add_coarse(priced.cuts, members)
        res = master.solve(10.0, 1e-9)
        assert res.bound >= expected - 1e-6 * max(1.0, abs(expected))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("seed", [20, 21, 22])
def test_limit_with_the_bound_in_the_background_matches_brute_force(
    seed: int, threads: int
) -> None:
    tables = tiny_tables(seed)
    expected = brute_force(tables, reconfiguration_limit=LIMIT)
    options = SolveOptions(
        time_limit_s=30.0, gap_target=1e-9, reconfiguration_limit=LIMIT, threads=threads
    )
    result = solve(tables, options)
    assert result.status is SolveStatus.OPTIMAL, result.message
    assert result.objective_usd == pytest.approx(expected, abs=1e-6 * max(1.0, abs(expected)))
    assert result.bound_usd >= expected - 1e-6 * max(1.0, abs(expected))
