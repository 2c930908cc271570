"""planner.plan.expectations: every metric measured on a hand-built plan whose figures are known."""

from __future__ import annotations

import pytest

from planner.plan.expectations import evaluate, format_measured, label, wanted
from planner.plan.schema import Assignment, Flow, Plan, PoolUsage, TierPrice
from planner.scenario.schema import Expectation
from planner.solve.solution import SolveStatus


def _assignment(period: int, pool: str, tier: str, variant: str, served: float, cost: float):
    return Assignment(
        period=period,
        pool=pool,
        family="fam",
        tier=tier,
        variant=variant,
        tp=1,
        pp=1,
        dp=1,
        ep=1,
        precision="fp8",
        kv_precision="fp8",
        batch_cap=8,
        spec_draft_tokens=0,
        replicas=1,
        systems=1,
        served_tokens_per_s=served,
        capacity_tokens_per_s=2 * served,
        utilization=0.5,
        tokens_per_s_per_user=50.0,
        ttft_ms=300.0,
        cost_usd=cost,
    )


def _plan(status: SolveStatus = SolveStatus.OPTIMAL, **kw: object) -> Plan:
    """Two periods; standard served by the flagship on pool a, fast by a distilled model on b.

    revenue 100 + 60 = 160 (standard 100, fast 60); cost 30 + 10 = 40; margin 120.
    """
    base: dict[str, object] = dict(
        scenario="hand",
        status=status,
        message="done",
        objective_usd=120.0,
        revenue_usd=160.0,
        cost_usd=40.0,
        penalty_usd=0.0,
        margin_usd=120.0,
        bound_usd=120.1,
        gap=0.0008,
        solve_s=0.1,
        build_s=0.1,
        period_hours=1.0,
        periods=2,
        prices=(
            TierPrice(
                family="fam",
                tier="standard",
                variant="big",
                multiplier=1.0,
                usd_per_m_input_tokens=1,
                usd_per_m_output_tokens=2,
                reference_multiplier=1.0,
            ),
            TierPrice(
                family="fam",
                tier="fast",
                variant="small",
                multiplier=6.0,
                usd_per_m_input_tokens=6,
                usd_per_m_output_tokens=12,
                reference_multiplier=4.0,
            ),
        ),
        assignments=(
            _assignment(0, "a", "standard", "big", 300.0, 15.0),
            _assignment(1, "a", "standard", "big", 100.0, 15.0),
            _assignment(0, "b", "fast", "small", 50.0, 5.0),
            _assignment(1, "b", "fast", "big", 50.0, 5.0),
        ),
        flows=(
            Flow(
                family="fam",
                tier="standard",
                period=0,
                demand_tokens_per_s=400.0,
                served_tokens_per_s=300.0,
                unserved_tokens_per_s=100.0,
                demand_requests_per_s=1.0,
                revenue_usd=75.0,
            ),
            Flow(
                family="fam",
                tier="standard",
                period=1,
                demand_tokens_per_s=100.0,
                served_tokens_per_s=100.0,
                unserved_tokens_per_s=0.0,
                demand_requests_per_s=0.25,
                revenue_usd=25.0,
            ),
            Flow(
                family="fam",
                tier="fast",
                period=0,
                demand_tokens_per_s=50.0,
                served_tokens_per_s=50.0,
                unserved_tokens_per_s=0.0,
                demand_requests_per_s=0.1,
                revenue_usd=30.0,
            ),
            Flow(
                family="fam",
                tier="fast",
                period=1,
                demand_tokens_per_s=50.0,
                served_tokens_per_s=50.0,
                unserved_tokens_per_s=0.0,
                demand_requests_per_s=0.1,
                revenue_usd=30.0,
            ),
        ),
        pool_usage=(
            PoolUsage(
                pool="a",
                period=0,
                systems_available=4,
                systems_used=3,
                utilization=0.75,
                cost_usd=15.0,
            ),
            PoolUsage(
                pool="a",
                period=1,
                systems_available=0,
                systems_used=0,
                utilization=0.0,
                cost_usd=15.0,
            ),
            PoolUsage(
                pool="b",
                period=0,
                systems_available=2,
                systems_used=1,
                utilization=0.5,
                cost_usd=5.0,
            ),
            PoolUsage(
                pool="b",
                period=1,
                systems_available=2,
                systems_used=1,
                utilization=0.5,
                cost_usd=5.0,
            ),
        ),
        reasons=(),
    )
    base.update(kw)
    return Plan(**base)  # type: ignore[arg-type]


def _one(plan: Plan, **kw: object):
    (outcome,) = evaluate(plan, [Expectation(**kw)])  # type: ignore[arg-type]
    return outcome


@pytest.mark.parametrize(
    ("kw", "value"),
    [
        ({"metric": "revenue_usd"}, 160.0),
        ({"metric": "revenue_usd", "tier": "fast"}, 60.0),
        ({"metric": "cost_usd"}, 40.0),
        ({"metric": "cost_usd", "pool": "b"}, 10.0),
        ({"metric": "cost_usd", "tier": "standard"}, 30.0),
        ({"metric": "margin_usd"}, 120.0),
        ({"metric": "margin_fraction"}, 0.75),
        ({"metric": "margin_usd", "family": "fam"}, 120.0),
        ({"metric": "gap"}, 0.0008),
        ({"metric": "price_multiplier", "family": "fam", "tier": "fast"}, 6.0),
        # pool a: 3 used of 4 available; the outage hour (0 available) does not dilute it
        ({"metric": "pool_utilization", "pool": "a"}, 0.75),
        ({"metric": "served_fraction"}, 500.0 / 600.0),
        ({"metric": "served_fraction", "tier": "standard"}, 0.8),
        ({"metric": "variant_share", "variant": "small", "tier": "fast"}, 0.5),
        ({"metric": "variant_share", "variant": "small"}, 50.0 / 500.0),
    ],
)
def test_numeric_metrics_measure_the_plan(kw: dict[str, object], value: float) -> None:
    inside = _one(_plan(), **kw, min=value * 0.999 - 1e-12, max=value * 1.001 + 1e-12)
    assert inside.passed, inside.detail
    assert inside.measured == pytest.approx(value)
    above = _one(_plan(), **kw, min=value * 1.01 + 1e-6)
    assert not above.passed
    assert "below the minimum" in above.detail


def test_bounds_are_inclusive_to_the_printed_value() -> None:
    assert _one(_plan(), metric="revenue_usd", min=160.0, max=160.0).passed
    assert not _one(_plan(), metric="revenue_usd", max=159.99).passed


def test_status_tier_served_and_reason() -> None:
    plan = _plan()
    assert _one(plan, metric="status", equals="optimal").passed
    failed = _one(plan, metric="status", equals="infeasible")
    assert not failed.passed and failed.measured == "optimal"
    assert _one(plan, metric="tier_served", family="fam", tier="fast", equals=True).passed
    assert _one(
        plan, metric="tier_served", family="fam", tier="standard", variant="small", equals=False
    ).passed
    assert not _one(plan, metric="tier_served", family="fam", tier="fast", equals=False).passed


def test_infeasible_plan_fails_numeric_metrics_and_matches_reasons() -> None:
    plan = _plan(
        SolveStatus.INFEASIBLE,
        assignments=(),
        flows=(),
        pool_usage=(),
        prices=(),
        reasons=(
            "no candidate of llama-3.1-70b on any pool reaches the fast tier's 900 tokens/s "
            "per user (best: 310 tokens/s on b200-us, tp=8 fp4 batch 1)",
        ),
    )
    revenue = _one(plan, metric="revenue_usd", min=0)
    assert not revenue.passed and revenue.measured is None
    assert "infeasible" in revenue.detail
    hit = _one(plan, metric="reason", contains="Reaches the FAST tier")
    assert hit.passed and "900 tokens/s" in str(hit.measured)
    miss = _one(plan, metric="reason", contains="memory")
    assert not miss.passed and "none of 1 reason" in miss.detail


def test_unsold_tier_has_no_multiplier() -> None:
    plan = _plan(prices=_plan().prices[:1])
    outcome = _one(plan, metric="price_multiplier", family="fam", tier="fast", min=1)
    assert not outcome.passed and outcome.measured is None
    assert "does not sell" in outcome.detail


def test_labels_and_wanted_read_like_the_file() -> None:
    e = Expectation(metric="price_multiplier", family="fam", tier="fast", min=4, max=8)
    assert label(e) == "price_multiplier[family=fam,tier=fast]"
    assert wanted(e) == "in [4, 8]"
    assert wanted(Expectation(metric="gap", max=0.01)) == "<= 0.01"
    assert wanted(Expectation(metric="tier_served", family="f", tier="t", equals=True)) == "== true"
    assert format_measured(1234567.8) == "1,234,568"
    assert format_measured(0.123456) == "0.1235"
