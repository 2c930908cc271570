"""A valid scenario whose best plan serves nothing is an answer, not a crash: zero revenue and
cost, and per tier the reason nothing is served (no demand; serving costs more than it earns)."""

from __future__ import annotations

import re
from typing import Any

from fleet.catalog.load import Catalog
from planner.plan import Plan
from planner.run import decode_scenario, plan_scenario
from planner.solution import SolveStatus


def _plan(tiny_with, catalog: Catalog, edit) -> Plan:
    return plan_scenario(decode_scenario(tiny_with(edit), "json"), catalog, time_limit_s=10)


def _nothing_served(plan: Plan) -> None:
    assert plan.status is SolveStatus.OPTIMAL
    assert plan.revenue_usd == 0.0 and plan.cost_usd == 0.0 and plan.margin_usd == 0.0
    assert plan.assignments == ()
    assert all(u.systems_used == 0 for u in plan.pool_usage)
    assert {(f.family, f.tier) for f in plan.flows} == {
        ("llama-8b", "standard"),
        ("llama-8b", "fast"),
    }


def test_zero_demand_plans_nothing_and_says_why(tiny_with, catalog: Catalog) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["demand"][0]["requests_per_s"] = [0.0] * 24

    plan = _plan(tiny_with, catalog, edit)
    _nothing_served(plan)
    assert all(f.demand_tokens_per_s == 0 for f in plan.flows)
    assert sorted(w for w in plan.warnings if "nothing served" in w) == [
        "llama-8b/fast: nothing served: no demand in any period",
        "llama-8b/standard: nothing served: no demand in any period",
    ]


def test_pool_priced_over_every_price_plans_nothing_and_says_why(
    tiny_with, catalog: Catalog
) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["fleet"]["pools"][0]["usd_per_hour"] = 400.0

    plan = _plan(tiny_with, catalog, edit)
    _nothing_served(plan)
    assert all(f.demand_tokens_per_s > 0 for f in plan.flows)
    why = {w.split(":")[0]: w for w in plan.warnings if "nothing served" in w}
    assert set(why) == {"llama-8b/standard", "llama-8b/fast"}
    # fast: the top multiplier would cover the cost, but not the demand that is left at it.
    assert "up to $" in why["llama-8b/fast"] and "multiplier 4" in why["llama-8b/fast"]


def test_pool_priced_over_the_whole_menu_says_so(tiny_with, catalog: Catalog) -> None:
    """At 2,000 USD/h not even standard's top multiplier (2) pays for the cheapest configuration."""

    def edit(doc: dict[str, Any]) -> None:
        doc["fleet"]["pools"][0]["usd_per_hour"] = 2000.0

    plan = _plan(tiny_with, catalog, edit)
    _nothing_served(plan)
    why = {w.split(":")[0]: w for w in plan.warnings if "nothing served" in w}
    m = re.search(
        r"costs \$([\d.]+) per M output tokens at full load \(h100-us-east, .*\$2,?000\.00/h\), "
        r"more than the highest price on the menu pays \(\$([\d.]+) per M output tokens at "
        r"multiplier 2\)",
        why["llama-8b/standard"],
    )
    assert m is not None, why["llama-8b/standard"]
    assert float(m.group(1)) > float(m.group(2))


def test_cheap_pool_serves_and_warns_of_nothing(tiny_with, catalog: Catalog) -> None:
    plan = _plan(tiny_with, catalog, None)
    assert plan.revenue_usd > 0
    assert not [w for w in plan.warnings if "nothing served" in w]
