"""The two ways to sell fast mode (scenarios/two-tricks.toml): the plan picks the fast tier's
serving variant by margin, and the choice flips with the distilled model's quality and with the
size of the SRAM (CS-3) pool.

The week-long scenario is cut to its first day (a Monday, the batch tier's 24 h window intact)
so each solve takes about a second; ``farebox plan scenarios/two-tricks.toml`` runs the week.
"""

from __future__ import annotations

import msgspec
import pytest

from fleet.catalog.load import Catalog
from fleet.perf import CatalogArrays
from planner.demand import hourly_requests_per_s
from planner.plan import Plan
from planner.run import load_scenario, plan_scenario
from planner.scenario import Scenario
from planner.solution import SolveStatus
from tests.planner.conftest import SCENARIOS

FLAGSHIP, DISTILLED = "llama-3.1-70b", "llama-3.1-8b"


@pytest.fixture(scope="module")
def one_day() -> Scenario:
    s = load_scenario(SCENARIOS / "two-tricks.toml")
    d = s.demand[0]
    day = tuple(float(x) for x in hourly_requests_per_s(d)[:24])
    demand = msgspec.structs.replace(d, requests_per_s=day, compact=None)
    pools = tuple(msgspec.structs.replace(p, outages=()) for p in s.fleet.pools)
    return msgspec.structs.replace(
        s, demand=(demand,), fleet=msgspec.structs.replace(s.fleet, pools=pools)
    )


def _with_quality(s: Scenario, quality: float) -> Scenario:
    family = s.families[0]
    variant = msgspec.structs.replace(family.variants[0], quality=quality)
    return msgspec.structs.replace(
        s, families=(msgspec.structs.replace(family, variants=(variant,)),)
    )


def _with_sram_pool(s: Scenario, count: int) -> Scenario:
    pools = tuple(
        msgspec.structs.replace(p, count=count) if p.system == "cs3" else p for p in s.fleet.pools
    )
    return msgspec.structs.replace(s, fleet=msgspec.structs.replace(s.fleet, pools=pools))


def _plan(s: Scenario, catalog: Catalog, arrays: CatalogArrays) -> Plan:
    plan = plan_scenario(s, catalog, arrays=arrays, time_limit_s=20)
    assert plan.status is SolveStatus.OPTIMAL, plan.message
    return plan


def _fast(plan: Plan) -> tuple[str, float, set[str]]:
    price = next(p for p in plan.prices if p.tier == "fast")
    pools = {a.pool for a in plan.assignments if a.tier == "fast"}
    return price.variant, price.multiplier, pools


def test_the_distilled_model_on_wafers_wins_at_its_quality(one_day, catalog, arrays) -> None:
    plan = _plan(one_day, catalog, arrays)
    variant, _, pools = _fast(plan)
    assert variant == DISTILLED
    assert pools == {"cs3-us-west"}
    fast = [a for a in plan.assignments if a.tier == "fast"]
    assert all(a.tokens_per_s_per_user >= 1000 and a.ttft_ms <= 400 for a in fast)
    # The other tiers only admit the flagship.
    assert {a.variant for a in plan.assignments if a.tier != "fast"} == {FLAGSHIP}


def test_a_weaker_distillate_hands_fast_back_to_the_flagship(one_day, catalog, arrays) -> None:
    plan = _plan(_with_quality(one_day, 12.0), catalog, arrays)
    variant, _, pools = _fast(plan)
    assert variant == FLAGSHIP
    assert "cs3-us-west" not in pools
    fast = [a for a in plan.assignments if a.tier == "fast"]
    assert fast and all(a.tokens_per_s_per_user >= 170 and a.ttft_ms <= 400 for a in fast)


def test_without_wafers_the_flagship_serves_fast(one_day, catalog, arrays) -> None:
    base = _plan(one_day, catalog, arrays)
    plan = _plan(_with_sram_pool(one_day, 0), catalog, arrays)
    assert _fast(plan)[0] == FLAGSHIP
    # Losing the cheaper trick cannot raise the margin.
    assert plan.objective_usd <= base.objective_usd + 1e-6


def test_plan_figures_add_up(one_day, catalog, arrays) -> None:
    plan = _plan(one_day, catalog, arrays)
    assert sum(f.revenue_usd for f in plan.flows) == pytest.approx(plan.revenue_usd, rel=1e-6)
    assert sum(a.cost_usd for a in plan.assignments) == pytest.approx(plan.cost_usd, rel=1e-6)
    assert sum(u.cost_usd for u in plan.pool_usage) == pytest.approx(plan.cost_usd, rel=1e-6)
    for u in plan.pool_usage:
        assert u.systems_used <= u.systems_available
    for f in plan.flows:
        if f.tier != "batch":  # the batch tier may be served anywhere in its window
            assert f.served_tokens_per_s <= f.demand_tokens_per_s * (1 + 1e-6) + 1e-6
    decoded = msgspec.json.decode(msgspec.json.encode(plan), type=Plan)
    assert decoded == plan
