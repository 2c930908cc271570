"""The TTFT promise (planner.plan.promise): queues follow the scenario's routing, a queue's capacity
is the most load that keeps its wait within the slack, and every reported assignment meets its
SLO."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fleet.errors import InputError
from planner.build.pipeline import Built, build, routing_domains
from planner.build.queueing import wait_quantile_s
from planner.plan.promise import _Repair, max_load, queue_of, repair_members
from planner.plan.schema import meets_ttft_slo
from planner.run import plan_scenario, solve_options
from planner.scenario.decode import decode_scenario
from planner.solve import solve
from planner.solve.evaluate import products


def _two_regions(tiny_with, routing: str | None) -> Any:
    """tiny with its H100 pool split over two regions, one system each (its demand then needs both:
    with the scheduled-prefill model three systems of one region carried it all)."""

    def edit(doc: dict[str, Any]) -> None:
        pool = doc["fleet"]["pools"][0]
        pool["count"] = 1
        doc["fleet"]["pools"].append({**pool, "id": "h100-us-west", "region": "us-west"})
        if routing is not None:
            doc["fleet"]["routing"] = routing

    return decode_scenario(tiny_with(edit), "json")


def test_max_load_is_the_largest_load_within_the_slack() -> None:
    rng = np.random.default_rng(7)
    slots = rng.integers(1, 400, 50).astype(float)
    per_token = rng.uniform(1e-4, 1e-2, 50)
    holding = rng.uniform(1.0, 30.0, 50)
    slack = rng.uniform(0.05, 3.0, 50)
    q = np.full(50, 0.99)
    load = max_load(slots, per_token, holding, q, slack)
    assert np.all(load > 0) and np.all(load * per_token < slots)
    assert np.all(wait_quantile_s(slots, load * per_token, holding, q) <= slack)
    more = wait_quantile_s(slots, load * per_token * 1.001, holding, q)
    assert np.all(more > slack)
    assert max_load(slots[:1], per_token[:1], holding[:1], q[:1], np.zeros(1))[0] == 0.0


def test_routing_decides_which_replicas_share_a_queue(tiny_with, catalog, arrays) -> None:
    default = _two_regions(tiny_with, None)
    assert default.fleet.routing == "region"
    for routing, shared in (("region", False), ("global", True)):
        s = _two_regions(tiny_with, routing)
        built = build(s, catalog, arrays)
        assert isinstance(built, Built)
        assert routing_domains(s).tolist() == ([0, 1] if routing == "region" else [0, 0])
        cand = built.tables.candidates
        east = np.flatnonzero((cand.pool == 0) & (cand.tier == 0))[:1]
        west = np.flatnonzero((cand.pool == 1) & (cand.tier == 0))[:1]
        period = np.zeros(1, dtype=np.int64)
        same = queue_of(built, east, period)[0] == queue_of(built, west, period)[0]
        assert bool(same) is shared


@pytest.mark.parametrize("routing", ["region", "global"])
def test_every_reported_assignment_meets_its_slo(tiny_with, catalog, arrays, routing) -> None:
    s = _two_regions(tiny_with, routing)
    plan = plan_scenario(s, catalog, arrays=arrays, time_limit_s=20)
    slo = {t.id: t.max_ttft_ms for t in s.tiers}
    assert plan.assignments and {a.pool for a in plan.assignments} == {
        "h100-us-east",
        "h100-us-west",
    }
    for a in plan.assignments:
        assert a.ttft_slo_ms == slo[a.tier]
        assert meets_ttft_slo(a) and 0 <= a.ttft_ms <= slo[a.tier]
    assert not [w for w in plan.warnings if "TTFT above" in w]


def test_an_unknown_routing_is_a_field_error(tiny_with) -> None:
    with pytest.raises(InputError, match=r"\$\.fleet\.routing"):
        _two_regions(tiny_with, "planet")


def test_a_replica_the_promise_adds_keeps_the_reconfiguration_limit(
    tiny_with, catalog, arrays
) -> None:
    """With a reconfiguration limit, a replica the repair adds must keep its pool's churn
    (systems changing role between consecutive periods, constraint (6)) within the limit in its
    period and the next: with the budget used up it may only add where that lowers the churn."""

    def edit(doc: dict[str, Any]) -> None:
        doc.setdefault("options", {})["reconfiguration_limit"] = 0.5

    s = decode_scenario(tiny_with(edit), "json")
    built = build(s, catalog, arrays)
    assert isinstance(built, Built)
    result = solve(built.tables, solve_options(s))
    repair = _Repair(built, result)
    assert repair.churn_limit is not None
    assert np.all(repair.churn <= repair.churn_limit + 1e-9)  # as the solver left it
    c = np.asarray([int(np.argmax(result.replicas.sum(axis=1)))])  # the busiest candidate
    seen: set[bool] = set()
    for p in range(1, built.tables.periods):
        units = repair.replicas[c, p]
        repair.churn[:] = repair.churn_limit  # every pool's budget used up
        allowed = bool(repair.churn_allows(c, p, units)[0])
        x_prev = int(repair.replicas[c[0], p - 1])
        x_next = int(repair.replicas[c[0], p + 1]) if p + 1 < built.tables.periods else None
        lowers_p = units[0] < x_prev  # one more brings period p closer to p - 1
        lowers_next = x_next is None or units[0] < x_next  # ... and p + 1 closer to p
        assert allowed == (lowers_p and lowers_next)
        seen.add(allowed)
    assert False in seen
    # a dip: one more replica in period 1 brings it closer to both neighbours
    u = int(repair.replicas[c[0], 1])
    repair.replicas[c[0], 0] = repair.replicas[c[0], 2] = u + 2
    assert bool(repair.churn_allows(c, 1, repair.replicas[c, 1])[0])
    no_limit = _Repair(built, result)
    no_limit.churn_limit = None
    assert bool(no_limit.churn_allows(c, 1, repair.replicas[c, 1])[0])


def test_the_repair_may_grow_a_candidate_the_plan_left_idle(tiny_with, catalog, arrays) -> None:
    """A late queue's repair may add a replica of a layout the solver did not run in that
    period: ``repair_members`` offers every useful candidate of the product with a TTFT SLO, and
    when the ones the plan runs cannot grow, the greedy step grows one of the others instead of
    shedding (tiny's six systems in two regions: each product has a candidate per pool)."""

    def edit(doc: dict[str, Any]) -> None:
        pool = doc["fleet"]["pools"][0]
        pool["count"] = 3
        doc["fleet"]["pools"].append({**pool, "id": "h100-us-west", "region": "us-west"})

    s = decode_scenario(tiny_with(edit), "json")
    built = build(s, catalog, arrays)
    assert isinstance(built, Built)
    result = solve(built.tables, solve_options(s))
    t, det = built.tables, built.candidates
    prods = products(t, result.combo)
    has_slo = ~np.isnan(det.ttft_slo_s) & prods.useful
    found = None
    for c, p in zip(*np.nonzero(result.replicas > 0), strict=True):
        j = int(prods.product_of_cand[c])
        members = repair_members(np.asarray([c]), prods, has_slo, j)
        free = t.inventory.systems_available[t.candidates.pool[members], p] > 0
        idle = members[(result.replicas[members, p] == 0) & free]
        if has_slo[c] and idle.size:
            found = (int(p), members, idle)
            break
    assert found is not None
    p, members, idle = found
    assert np.all(prods.product_of_cand[members] == prods.product_of_cand[members[0]])
    assert np.all(has_slo[members])
    repair = _Repair(built, result)
    running = members[result.replicas[members, p] > 0]
    repair.upper[running, p] = result.replicas[running, p]  # the layouts it runs cannot grow
    queue = repair.queues(members)
    load = np.bincount(queue, result.served_tokens_per_s[members, p])
    assert load.sum() > 0
    room = 0.5 * load  # each queue carrying half its load within the slack: an excess to repair
    repair.product(members, queue, p, value_usd=1.0, price_usd=1.0, room=room)
    assert repair.added_units > 0
    assert int(repair.replicas[idle, p].sum()) == repair.added_units
