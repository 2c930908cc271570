"""Revenue-maximizing fleet plan: prices per family, replicas per candidate and period.

The model (data, variables, constraints (1)-(6), objective) is written down once, in
``planner.solve.formulation``: one function per constraint family, in that numbering.

Methods (``SolveOptions.method``): "decompose" (default; ``planner.solve.decompose``: root LP,
Benders over the price binaries with per-period-group cuts from hour-LP duals, integer repair)
or "highs" / "scip" / "cpsat" (``planner.solve.monolithic``: the whole MILP through MathOpt).
Either way the plan is valued by ``planner.solve.evaluate`` and the bound is proven: status
OPTIMAL when (bound - objective) / max(|bound|, 1) <= gap_target, FEASIBLE (with that gap) when
time ran out first, NO_SOLUTION when a MILP found no plan in time, INFEASIBLE when the tables
allow no plan (a family without any price combination).
"""

from __future__ import annotations

import math
import time

import numpy as np

from planner.solve.decompose import decompose
from planner.solve.incumbent import Incumbent
from planner.solve.model import build_structure
from planner.solve.monolithic import ENGINES, monolithic
from planner.solve.result import solve_result
from planner.solve.solution import ProgressCallback, SolveOptions, SolveResult, SolveStatus
from planner.solve.tables import PlanningTables
from planner.solve.validate import check_tables, unservable

__all__ = ["solve"]

METHODS = ("decompose", *ENGINES)


def solve(
    tables: PlanningTables, options: SolveOptions, progress: ProgressCallback | None = None
) -> SolveResult:
    start = time.perf_counter()
    if options.method not in METHODS:
        raise ValueError(f"SolveOptions.method must be one of {METHODS}, not {options.method!r}")
    check_tables(tables)
    d = tables.demand
    empty = [d.family_ids[f] for f in range(len(d.family_ids)) if not (d.combo_family == f).any()]
    if empty:
        return _no_plan(
            tables,
            SolveStatus.INFEASIBLE,
            f"no price combination for family {', '.join(empty)}: every family needs one",
            time.perf_counter() - start,
        )
    deadline = start + options.time_limit_s
    st = build_structure(tables, options.reconfiguration_limit)
    build_s = time.perf_counter() - start
    inc = Incumbent(tables, start, progress, options.reconfiguration_limit)
    if options.method == "decompose":
        why = decompose(st, options, inc, deadline)
    else:
        why = monolithic(st, options, inc, deadline)
    solve_s = time.perf_counter() - start - build_s
    notes = unservable(tables)
    if inc.value is None:
        return _no_plan(tables, SolveStatus.NO_SOLUTION, why, solve_s, build_s)
    status = SolveStatus.OPTIMAL if inc.proven(options.gap_target) else SolveStatus.FEASIBLE
    message = f"{status.value}: gap {inc.gap:.4%} after {solve_s:.2f}s ({why})"
    if notes:
        message += "; " + "; ".join(notes)
    inc.report(message)
    return solve_result(st, inc, status, message, build_s, solve_s)


def _no_plan(
    tables: PlanningTables, status: SolveStatus, message: str, solve_s: float, build_s: float = 0.0
) -> SolveResult:
    """No plan: arrays of the right shapes, all zero; objective and bound are nan."""
    n_fam, n_tiers = len(tables.demand.family_ids), len(tables.demand.tier_ids)
    n_cand, periods = tables.candidates.pool.shape[0], tables.periods
    return SolveResult(
        status=status,
        objective_usd=math.nan,
        bound_usd=math.nan,
        gap=math.nan,
        solve_s=solve_s,
        build_s=build_s,
        combo=np.full(n_fam, -1, dtype=np.int64),
        replicas=np.zeros((n_cand, periods), dtype=np.int64),
        served_tokens_per_s=np.zeros((n_cand, periods)),
        unserved_tokens_per_s=np.zeros((n_fam, n_tiers, periods)),
        revenue_usd=0.0,
        cost_usd=0.0,
        penalty_usd=0.0,
        binding=(),
        message=message,
    )
