"""Revenue-maximizing fleet plan: prices per family, replicas per candidate and period.

Data (``planner.tables.PlanningTables``): pools p with systems_available[p,t] and a cost per
system-hour; offers o = (family f, tier k, serving variant, price multiplier) with revenue
usd_per_output_token[o,t]; combos m of a family (one offer per tier) with demanded tokens/s
D[m,k,t] (MNL, so tiers substitute); candidates c (pool, family, tier, variant) with
systems_per_replica[c], tokens_per_s_per_replica[c,t] and max_replicas[c]; periods t of
``period_hours`` hours; window_periods[k] (w > 1: demand of each block of w periods may be served
anywhere in the block); an unserved penalty per tier.

Variables (named by domain key in dumps, e.g. ``replicas[pool=h200-us-east,cand=17,period=5]``):
    z[f,m]  in {0,1}  combo m is family f's price card for the whole horizon
    x[c,t]  integer   replicas of candidate c in period t
    s[o,t]  >= 0      output tokens/s of offer o served in period t
    d[c,t]  >= 0      replicas of c changed between t-1 and t (only with a reconfiguration limit)

Constraints:
    (1) one combo per family:  sum_m z[f,m] = 1.
    (2) served <= demand of the chosen combo, split by the tier's OWN offer (exact, and the LP
        stays small: split by combo instead, the week-scale root LP did not solve in 60 s in our
        measurements): for each offer o of tier k and block b of w_k periods,
        sum_{t in b} s[o,t] <= sum_{m: combo_offer[m,k]=o} z[f,m] * sum_{t in b} D[m,k,t].
    (3) capacity per (family, tier, variant) and period: sum_{o of fkv} s[o,t]
        <= sum_{c of fkv} tokens_per_s_per_replica[c,t] * x[c,t]; a candidate serves only
        offers of its own variant. (Summing the key's offers is exact -- only one is chosen --
        and keeps the LP from counting the same replicas for two blended prices.)
    (4) inventory per pool and period: sum_{c in p} systems_per_replica[c] * x[c,t]
        <= systems_available[p,t].
    (5) x[c,t] <= min(max_replicas[c], floor(systems_available[p,t] / systems_per_replica[c]))
        (valid for the integer model, tightens its relaxation).
    (6) optional reconfiguration limit r: d[c,t] >= |x[c,t] - x[c,t-1]| and
        sum_{c in p} systems_per_replica[c] * d[c,t] <= 2 r systems_available[p,t] (each system
        that changes role leaves one candidate and joins another).
Objective (USD over the horizon, maximized):
    sum_{o,t} (usd_per_output_token[o,t] + penalty_k) * s[o,t] * 3600 * period_hours
    - sum_{c,t} usd_per_system_hour[p] * systems_per_replica[c] * x[c,t] * period_hours
    - sum_{f,m} z[f,m] * sum_{k,t} penalty_k * D[m,k,t] * 3600 * period_hours,
i.e. revenue - running cost - penalty on the chosen combo's unserved demand.

Methods (``SolveOptions.method``): "decompose" (default; ``planner.solve.decompose``: root LP,
Benders over the price binaries with per-period-group cuts from hour-LP duals, integer repair)
or "highs" / "scip" / "cpsat" (``planner.solve.monolithic``: the MILP above through MathOpt).
Either way the plan is valued by ``planner.solve.evaluate`` and the bound is proven: status
OPTIMAL when (bound - objective) / max(|bound|, 1) <= gap_target, FEASIBLE (with that gap) when
time ran out first, NO_SOLUTION when a MILP found no plan in time, INFEASIBLE when the tables
allow no plan (a family without any price combination).
"""

from __future__ import annotations

import math
import time

import numpy as np

from planner.solution import ProgressCallback, SolveOptions, SolveResult, SolveStatus
from planner.solve.checks import check_tables, unservable
from planner.solve.decompose import decompose
from planner.solve.incumbent import Incumbent
from planner.solve.model import build_structure
from planner.solve.monolithic import ENGINES, monolithic
from planner.solve.result import assemble
from planner.tables import PlanningTables

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
    return assemble(st, inc, status, message, build_s, solve_s)


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
