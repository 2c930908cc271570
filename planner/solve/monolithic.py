"""The whole model as one MILP through MathOpt (HiGHS, SCIP or CP-SAT): a method and a cross-check.

Combo binaries z, integer replicas and served columns in one model (constraints (1)-(6)), built
from the same arrays as the decomposition (``Structure.joint``). The solver's best solution is
re-valued by ``planner.solve.evaluate`` (same objective, exact served split) and its dual bound is
the reported bound. Measured at week scale (24 pools, 168 hours, 60 s, OR-Tools 9.15 on 2 cores):
HiGHS often ends at its root heuristics (no branch-and-bound node), SCIP reaches a few percent,
CP-SAT far less; it is exact and fine on small instances.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from planner.solve.decompose import heaviest, replicas_from
from planner.solve.formulation import SERVED
from planner.solve.incumbent import Incumbent, trivial_bound
from planner.solve.linear import Engine, Outcome, solve_program
from planner.solve.model import Structure, build_structure
from planner.solve.repair import reconfiguration_ok, repair
from planner.solve.solution import SolveOptions

ENGINES = {"highs": Engine.HIGHS, "scip": Engine.SCIP, "cpsat": Engine.CPSAT}


def monolithic(st: Structure, options: SolveOptions, inc: Incumbent, deadline: float) -> str:
    engine = ENGINES[options.method]
    inc.tighten(trivial_bound(st.tables), "demand at best prices")
    lp = st.joint(integer=True, names=True)
    slack = 0.0
    if engine is Engine.CPSAT:
        # CP-SAT solves integer programs only: served tokens/s become integers (units of 1
        # token/s). Flooring every served column of a plan keeps it feasible, so the continuous
        # optimum exceeds the integer one by less than the sum of their positive objective
        # coefficients; that sum is added to CP-SAT's bound to keep it valid.
        st = build_structure(st.tables, options.reconfiguration_limit, token_scale=1.0)
        lp = st.joint(integer=True, names=True)
        lp = replace(lp, col_integer=np.ones_like(lp.col_integer))
        slack = float(np.maximum(st.objective[st.col_kind == SERVED], 0.0).sum())
    res = solve_program(
        lp,
        engine,
        deadline - time.perf_counter(),
        relative_gap=options.stop_gap,
        threads=options.threads,
    )
    if res.outcome is Outcome.INFEASIBLE:
        return f"{options.method} reports the model infeasible"
    if res.values is not None:
        combo = heaviest(st, res.values[st.n_cols :])
        x = replicas_from(st, res.values, round_down=False)
        limit = options.reconfiguration_limit
        if reconfiguration_ok(st.tables, x, limit):
            x = repair(st.tables, combo, x, reconfiguration_limit=limit)
        inc.offer(combo, x, None, f"{options.method} MILP")
    if math.isfinite(res.bound):
        inc.tighten(res.bound + slack, f"{options.method} MILP")
    return f"{options.method}: {res.outcome.value}" + (f" ({res.detail})" if res.detail else "")
