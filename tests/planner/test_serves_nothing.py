"""A valid scenario whose best plan serves nothing is an answer, not a crash: zero revenue and
cost, and per tier the reason nothing is served (no demand; serving costs more than it earns)."""

from __future__ import annotations

import re
from typing import Any

from fleet.catalog.load import Catalog
from planner.plan.schema import Plan
from planner.run import decode_scenario, plan_scenario
from planner.solve.solution import SolveStatus


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


COSTS_MORE = re.compile(
    r"costs \$([\d.]+) per M output tokens at full load \(h100-us-east, .*\$([\d,.]+)/h\), "
    r"more than the highest price on the menu pays \(\$([\d.]+) per M output tokens at "
    r"multiplier ([\d.]+)\)"
)
DEMAND_TOO_SMALL = re.compile(
    r"costs \$([\d.]+) per M output tokens at full load \(h100-us-east, .*\$([\d,.]+)/h\); only "
    r"prices above that cover it \(up to \$([\d.]+) at multiplier ([\d.]+)\), and the demand "
    r"at those prices does not keep whole replicas busy enough to pay"
)


def _pool_priced(tiny_with, catalog: Catalog, usd_per_hour: float) -> dict[str, str]:
    def edit(doc: dict[str, Any]) -> None:
        doc["fleet"]["pools"][0]["usd_per_hour"] = usd_per_hour

    plan = _plan(tiny_with, catalog, edit)
    _nothing_served(plan)
    assert all(f.demand_tokens_per_s > 0 for f in plan.flows)
    why = {w.split(":")[0]: w for w in plan.warnings if "nothing served" in w}
    assert set(why) == {"llama-8b/standard", "llama-8b/fast"}
    return why


def test_pool_at_400_usd_per_hour_plans_nothing_and_says_why(tiny_with, catalog: Catalog) -> None:
    top = {"llama-8b/standard": 2.0, "llama-8b/fast": 4.0}  # the menus' highest multipliers
    for label, text in _pool_priced(tiny_with, catalog, 400.0).items():
        # Either no price pays for the cheapest configuration, or the demand left at the prices
        # that would is too small for whole replicas; the figures must agree with the sentence.
        if m := COSTS_MORE.search(text):
            assert float(m.group(1)) > float(m.group(3)), text
        else:
            m = DEMAND_TOO_SMALL.search(text)
            assert m is not None, text
            assert float(m.group(1)) <= float(m.group(3)), text
        assert float(m.group(2).replace(",", "")) == 400.0 and float(m.group(4)) == top[label], text


def test_pool_dearer_than_every_price_says_so(tiny_with, catalog: Catalog) -> None:
    for text in _pool_priced(tiny_with, catalog, 2000.0).values():
        m = COSTS_MORE.search(text)
        assert m is not None, text
        assert (
            float(m.group(1)) > float(m.group(3)) and float(m.group(2).replace(",", "")) == 2000.0
        )


def test_cheap_pool_serves_and_warns_of_nothing(tiny_with, catalog: Catalog) -> None:
    plan = _plan(tiny_with, catalog, None)
    assert plan.revenue_usd > 0
    assert not [w for w in plan.warnings if "nothing served" in w]
