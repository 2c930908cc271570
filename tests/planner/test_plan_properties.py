"""Monotonicity of the whole pipeline (scenario -> performance model -> candidates -> solve):
more inventory never lowers the optimum and a tighter SLO never raises it.

The choice model's speed weight is set to 0 so that demand stays the same when a tier's speed
floor moves (with a positive weight a faster promise attracts buyers, and a tighter floor may
rightly earn more). Solver gaps are respected: for optima v(A) <= v(B) it suffices that the plan
found for A is worth at most the bound proven for B.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fleet.catalog.load import Catalog
from fleet.perf import CatalogArrays
from planner.plan.schema import Plan
from planner.run import decode_scenario, plan_scenario
from planner.solve.solution import SolveStatus

TOL_USD = 1e-6


def _plan(
    tiny_with: Callable[..., bytes],
    catalog: Catalog,
    arrays: CatalogArrays,
    edit: Callable[[dict[str, Any]], None],
) -> Plan:
    def both(doc: dict[str, Any]) -> None:
        doc["options"]["gap_target"] = 1e-7
        doc["demand"][0]["choice"]["speed_weight"] = 0.0
        edit(doc)

    plan = plan_scenario(decode_scenario(tiny_with(both), "json"), catalog, arrays=arrays)
    assert plan.status is SolveStatus.OPTIMAL, plan.message
    return plan


def _tier(doc: dict[str, Any], tier_id: str) -> dict[str, Any]:
    return next(t for t in doc["tiers"] if t["id"] == tier_id)


def _nothing(doc: dict[str, Any]) -> None:
    del doc


@pytest.mark.parametrize(
    "tighten",
    [
        lambda doc: _tier(doc, "fast").update(min_tokens_per_s_per_user=200),
        # 95 ms: under every fast candidate's TTFT floor (the fastest 98.7 ms, the serving
        # stack's per-request cost of 67.5 ms pooled included): fast goes unserved
        lambda doc: _tier(doc, "fast").update(max_ttft_ms=95),
        lambda doc: _tier(doc, "standard").update(min_tokens_per_s_per_user=60, max_ttft_ms=800),
    ],
    ids=["fast-speed-floor", "fast-ttft", "standard-both"],
)
def test_a_tighter_slo_never_raises_the_optimum(
    tiny_with: Callable[..., bytes],
    catalog: Catalog,
    arrays: CatalogArrays,
    tighten: Callable[[dict[str, Any]], None],
) -> None:
    loose = _plan(tiny_with, catalog, arrays, _nothing)
    tight = _plan(tiny_with, catalog, arrays, tighten)
    assert tight.objective_usd <= loose.bound_usd + TOL_USD
    assert tight.objective_usd < loose.objective_usd  # these SLOs bind in tiny: not vacuous


@pytest.mark.parametrize("count", [3, 4, 9])
def test_more_inventory_never_lowers_the_optimum(
    tiny_with: Callable[..., bytes], catalog: Catalog, arrays: CatalogArrays, count: int
) -> None:
    def resize(n: int) -> Callable[[dict[str, Any]], None]:
        return lambda doc: doc["fleet"]["pools"][0].update(count=n)

    fewer = _plan(tiny_with, catalog, arrays, resize(count))
    more = _plan(tiny_with, catalog, arrays, resize(count + 1))
    assert fewer.objective_usd <= more.bound_usd + TOL_USD
