"""The planner's one entry point: scenario + catalog -> Plan.

The CLI (``farebox plan``), ``farebox check``, the report and the REST API all call
``plan_scenario``. It builds the tables (``planner.build.pipeline``); a scenario that cannot be
served as asked (a sold tier no configuration can serve, with ``allow_unserved_tiers`` false) comes
back as an infeasible Plan with the reasons, without solving. Otherwise the solver
(``planner.solve``) runs with the scenario's options, and ``planner.plan.assemble`` names the
result.

``load_scenario`` and ``decode_scenario`` (from ``planner.scenario.decode``) parse scenarios.
"""

from __future__ import annotations

from collections.abc import Callable

from fleet.catalog.load import Catalog
from fleet.perf.arrays import CatalogArrays
from planner.build.pipeline import Unplannable, build
from planner.plan.assemble import assemble_plan, infeasible_plan
from planner.plan.schema import Plan
from planner.scenario.decode import decode_scenario, load_scenario
from planner.scenario.schema import Scenario
from planner.solve import solve
from planner.solve.solution import ProgressCallback, SolveOptions, SolveResult
from planner.solve.tables import PlanningTables

Solver = Callable[[PlanningTables, SolveOptions, ProgressCallback | None], SolveResult]

REPAIR_RESERVE = 0.75
"""Share of the scenario's gap target the search keeps for the TTFT promise's repair after it
(replicas added or tokens shed at the planned load, ``planner.plan.promise``): the search aims at
a quarter of the target, so that a repair costing up to the other three quarters still leaves an
optimal plan. On hardware-generations under load the repair cost ~0.035% of a 0.1% target
(aiming at the target ended two runs at 0.104% and 0.110%, "feasible"; at half, four at
0.089-0.090%); since the Hopper re-fit with the MoE layers' call time it costs ~0.06%: at half
the search stopped at 0.045% and the repair left 0.107% ("feasible"), at a quarter it stops at
0.033% and leaves 0.092% (17.4 s of the scenario's then 30 s; under load the time-bounded
integer polish is cut short there, docs/solver.md, so its limit is 60 s)."""

__all__ = [
    "REPAIR_RESERVE",
    "Solver",
    "decode_scenario",
    "load_scenario",
    "plan_scenario",
    "solve_options",
]


def solve_options(scenario: Scenario, time_limit_s: float | None = None) -> SolveOptions:
    """The scenario's solver options; ``time_limit_s`` overrides the file's."""
    o = scenario.options
    return SolveOptions(
        time_limit_s=o.time_limit_s if time_limit_s is None else time_limit_s,
        gap_target=o.gap_target,
        repair_reserve=REPAIR_RESERVE,
        method=o.method,
        reconfiguration_limit=o.reconfiguration_limit,
    )


def plan_scenario(
    scenario: Scenario,
    catalog: Catalog,
    *,
    time_limit_s: float | None = None,
    progress: ProgressCallback | None = None,
    arrays: CatalogArrays | None = None,
    solver: Solver | None = None,
) -> Plan:
    """Plan ``scenario`` on ``catalog``. ``arrays`` (``fleet.perf.build_arrays(catalog)``) may be
    passed to reuse them across calls; ``solver`` defaults to ``planner.solve.solve``."""
    built = build(scenario, catalog, arrays)
    if isinstance(built, Unplannable):
        return infeasible_plan(built)
    run = solve if solver is None else solver
    result = run(built.tables, solve_options(scenario, time_limit_s), progress)
    return assemble_plan(built, result)
