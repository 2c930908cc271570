"""How many rows a scenario's plan will hold, counted before it is planned.

A plan reports every pool in every period (``Plan.pool_usage``) and every (family, tier) in every
period (``Plan.flows``), whatever the demand: both are products of the scenario's lists, so a
72 KB scenario (128 pools, 16 families x 4 tiers, 1,344 hours) asks for a 31.7 MB plan, which the
API then stores, returns on every GET and holds in the viewer's cache. The schema's own caps
(512 pools, 64 families, 16 tiers, the server's horizon) allow 2.06M such rows at hourly periods.
``plan_rows`` counts them from the scenario's sizes; ``check_plan_rows`` refuses a scenario over
a server's limit, naming what to shrink. (Assignments and binding constraints come on top; they
are at most a few per pool and period in the plans measured, and the solve's work limits bound
the candidates they are drawn from.)
"""

from __future__ import annotations

from fleet.errors import InputError
from planner.scenario.derived import horizon_hours
from planner.scenario.schema import Scenario


def plan_periods(s: Scenario) -> int:
    """The plan's periods: the horizon's hours averaged into ``options.period_hours``."""
    return horizon_hours(s) // s.options.period_hours


def plan_rows(s: Scenario) -> int:
    """Rows of the plan's per-period tables: pools x periods + families x tiers x periods."""
    return plan_periods(s) * (len(s.fleet.pools) + len(s.families) * len(s.tiers))


def check_plan_rows(s: Scenario, max_rows: int) -> None:
    """InputError at ``$.fleet.pools`` when the plan would hold more than ``max_rows`` rows."""
    rows = plan_rows(s)
    if rows <= max_rows:
        return
    periods = plan_periods(s)
    raise InputError(
        f"$.fleet.pools: this scenario's plan would report {rows:,} pool and demand rows "
        f"({len(s.fleet.pools)} pools + {len(s.families)} families x {len(s.tiers)} tiers, each "
        f"in {periods:,} periods), over this server's limit of {max_rows:,}; plan fewer pools, "
        "families or tiers, a shorter horizon, or longer periods (options.period_hours)"
    )
