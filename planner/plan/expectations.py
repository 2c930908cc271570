"""Evaluate a scenario's expectations against its plan: what ``farebox check`` gates CI on.

Each ``Expectation`` (``planner.scenario.schema``) names a metric, optional selectors and a test.
The metric is measured on the ``Plan`` alone, so a plan read back from JSON checks the same way:

- ``revenue_usd``: sum of the flows' revenue (selectors family, tier); no selector = the plan's.
- ``cost_usd``: running cost; by pool from the pool usage, by family/tier from the assignments;
  no selector = the plan's.
- ``margin_usd`` / ``margin_fraction``: revenue - cost (of the family's assignments when a
  family is given), and that over revenue (0 when nothing is earned).
- ``gap``: the proven relative optimality gap. ``status``: the solve status string.
- ``tier_served``: true when the (family, tier) - and variant, if given - serves any token.
- ``price_multiplier``: the multiplier chosen for (family, tier); no value when the tier is not
  sold.
- ``pool_utilization``: systems used / systems available, over all periods (a ratio of sums, so an
  outage's hours weigh by what was available).
- ``served_fraction``: served / demanded output tokens (selectors family, tier).
- ``variant_share``: the variant's share of served output tokens (within family / tier if given).
- ``reason``: true when any of the plan's infeasibility reasons contains the phrase
  (case-insensitive); the measured value shown is the closest reason.

Bounds are inclusive with a relative tolerance of 1e-9 (a range written from a printed value must
not fail on the last bit). A metric that has no value (a plan that is infeasible has no revenue to
range-check; a tier that is not sold has no multiplier) fails with the reason in ``detail``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from planner.plan.schema import Plan
from planner.scenario.schema import Expectation, Scenario

Measured = float | str | bool | None

_REL_TOL = 1e-9


@dataclass(frozen=True, slots=True)
class Outcome:
    """One expectation, what was measured, and whether it held."""

    index: int
    """Position in the scenario's ``expect`` list."""
    expectation: Expectation
    measured: Measured
    passed: bool
    detail: str = ""
    """Why there is no value, or what failed, in words; empty when it passed."""

    @property
    def label(self) -> str:
        return label(self.expectation)

    @property
    def wanted(self) -> str:
        return wanted(self.expectation)


def label(e: Expectation) -> str:
    """``price_multiplier[family=llama-8b,tier=fast]``."""
    sel = [
        f"{name}={value}"
        for name, value in (
            ("family", e.family),
            ("tier", e.tier),
            ("pool", e.pool),
            ("variant", e.variant),
        )
        if value is not None
    ]
    return f"{e.metric}[{','.join(sel)}]" if sel else e.metric


def wanted(e: Expectation) -> str:
    """The test in words: ``in [4, 8]``, ``>= 0``, ``== optimal``, ``contains 'floor'``."""
    if e.contains is not None:
        return f"contains {e.contains!r}"
    if e.equals is not None:
        return f"== {str(e.equals).lower() if isinstance(e.equals, bool) else e.equals}"
    if e.min is not None and e.max is not None:
        return f"in [{_bound(e.min)}, {_bound(e.max)}]"
    if e.min is not None:
        return f">= {_bound(e.min)}"
    assert e.max is not None
    return f"<= {_bound(e.max)}"


def _bound(value: float) -> str:
    """A bound as written in a file: 0.75, 1.25, 18,000, 320,000,000."""
    return f"{value:,.0f}" if abs(value) >= 1e4 and value == int(value) else f"{value:g}"


def format_measured(value: Measured) -> str:
    """A measured value as a table shows it: 4 significant digits, big money with separators."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if len(value) <= 70 else value[:67] + "..."
    if abs(value) >= 1e3:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def evaluate(plan: Plan, expectations: Iterable[Expectation]) -> list[Outcome]:
    """Measure every expectation on ``plan``; the list keeps the expectations' order."""
    return [_evaluate_one(plan, i, e) for i, e in enumerate(expectations)]


def evaluate_scenario(plan: Plan, scenario: Scenario) -> list[Outcome]:
    return evaluate(plan, scenario.expect)


def _evaluate_one(plan: Plan, index: int, e: Expectation) -> Outcome:
    if e.metric == "status":
        status = str(plan.status.value)
        ok = status == e.equals
        return Outcome(index, e, status, ok, "" if ok else f"plan is {status}: {plan.message}")
    if e.metric == "reason":
        return _reason(plan, index, e)
    if not plan.status.has_plan:
        return Outcome(index, e, None, False, f"no plan to measure: status {plan.status.value}")
    value, why = _measure(plan, e)
    if e.metric == "tier_served":
        ok = value == e.equals
        return Outcome(index, e, value, ok, "" if ok else f"tier_served is {value}")
    if value is None:
        return Outcome(index, e, None, False, why)
    assert isinstance(value, float)
    low_ok = e.min is None or value >= e.min - _REL_TOL * max(1.0, abs(e.min))
    high_ok = e.max is None or value <= e.max + _REL_TOL * max(1.0, abs(e.max))
    if low_ok and high_ok:
        return Outcome(index, e, value, True)
    side = "below the minimum" if not low_ok else "above the maximum"
    return Outcome(index, e, value, False, f"{format_measured(value)} is {side}")


def _reason(plan: Plan, index: int, e: Expectation) -> Outcome:
    assert e.contains is not None
    phrase = e.contains.lower()
    for reason in plan.reasons:
        if phrase in reason.lower():
            return Outcome(index, e, reason, True)
    if not plan.reasons:
        return Outcome(index, e, None, False, f"the plan gives no reason (status {plan.status})")
    return Outcome(
        index, e, plan.reasons[0], False, f"none of {len(plan.reasons)} reason(s) has the phrase"
    )


def _measure(plan: Plan, e: Expectation) -> tuple[float | bool | None, str]:
    """The metric's value, or None and why it has none."""
    m = e.metric
    if m == "gap":
        return plan.gap, ""
    if m == "revenue_usd":
        if e.family is None and e.tier is None:
            return plan.revenue_usd, ""
        return _revenue(plan, e.family, e.tier), ""
    if m == "cost_usd":
        return _cost(plan, e), ""
    if m in ("margin_usd", "margin_fraction"):
        if e.family is None:
            revenue, cost = plan.revenue_usd, plan.cost_usd
        else:
            revenue, cost = _revenue(plan, e.family, None), _assignment_cost(plan, e.family, None)
        margin = revenue - cost
        if m == "margin_usd":
            return margin, ""
        if revenue <= 0:
            return None, "no revenue: margin fraction undefined"
        return margin / revenue, ""
    if m == "tier_served":
        served = sum(
            a.served_tokens_per_s
            for a in plan.assignments
            if a.family == e.family
            and a.tier == e.tier
            and (e.variant is None or a.variant == e.variant)
        )
        return served > 0.0, ""
    if m == "price_multiplier":
        for price in plan.prices:
            if price.family == e.family and price.tier == e.tier:
                return price.multiplier, ""
        return None, f"family {e.family!r} does not sell tier {e.tier!r} in this plan"
    if m == "pool_utilization":
        usage = [u for u in plan.pool_usage if u.pool == e.pool]
        available = sum(u.systems_available for u in usage)
        if available == 0:
            return None, f"pool {e.pool!r} has no systems available in any period"
        return sum(u.systems_used for u in usage) / available, ""
    if m == "served_fraction":
        flows = [f for f in plan.flows if _match(f.family, e.family) and _match(f.tier, e.tier)]
        demand = sum(f.demand_tokens_per_s for f in flows)
        if demand <= 0:
            return None, "no demand for this selection"
        return sum(f.served_tokens_per_s for f in flows) / demand, ""
    if m == "variant_share":
        rows = [
            a for a in plan.assignments if _match(a.family, e.family) and _match(a.tier, e.tier)
        ]
        total = sum(a.served_tokens_per_s for a in rows)
        if total <= 0:
            return None, "nothing served for this selection"
        mine = sum(a.served_tokens_per_s for a in rows if a.variant == e.variant)
        return mine / total, ""
    raise AssertionError(f"unhandled metric {m!r}")  # the Metric literal is exhaustive


def _match(value: str, selector: str | None) -> bool:
    return selector is None or value == selector


def _revenue(plan: Plan, family: str | None, tier: str | None) -> float:
    return sum(
        f.revenue_usd for f in plan.flows if _match(f.family, family) and _match(f.tier, tier)
    )


def _assignment_cost(plan: Plan, family: str | None, tier: str | None) -> float:
    return sum(
        a.cost_usd for a in plan.assignments if _match(a.family, family) and _match(a.tier, tier)
    )


def _cost(plan: Plan, e: Expectation) -> float:
    if e.family is None and e.tier is None:
        if e.pool is None:
            return plan.cost_usd
        return sum(u.cost_usd for u in plan.pool_usage if u.pool == e.pool)
    return sum(
        a.cost_usd
        for a in plan.assignments
        if _match(a.family, e.family) and _match(a.tier, e.tier) and _match(a.pool, e.pool)
    )


def all_passed(outcomes: Iterable[Outcome]) -> bool:
    return all(o.passed for o in outcomes)
