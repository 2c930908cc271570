"""What sizing the TTFT headroom at the lowest-demand price card costs: plan a scenario, then plan
it again with each tier's menu narrowed to the chosen multiplier and the reference one, and compare
margins.

    python bench/menu_sizing.py SCENARIO.toml [...] [--time-limit S]

A candidate's capacity is computed once, at the lowest demand any card gives its tier, so that it
holds whichever card the solver picks (docs/known-gaps.md). With the menu narrowed to {chosen,
reference}, the capacity is sized at the lower of those two cards' demands: exact for the chosen
card when it loads the tier less than the reference one (a higher multiplier), still
conservative otherwise. A higher margin there is what the full menu's conservative capacities
cost the plan its solver calls optimal. Scenarios whose families chose different multipliers for
one tier are skipped (menus are per tier, not per family).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec

from fleet.catalog import load_catalog
from fleet.perf.arrays import build_arrays
from planner.plan.schema import Plan
from planner.run import plan_scenario
from planner.scenario.decode import load_scenario
from planner.scenario.schema import Scenario


def narrowed(scenario: Scenario, plan: Plan) -> Scenario | None:
    """``scenario`` with each sold tier's menu cut to {chosen, reference}; None when families
    chose different multipliers for one tier."""
    chosen: dict[str, set[float]] = {}
    for price in plan.prices:
        chosen.setdefault(price.tier, set()).add(price.multiplier)
    if any(len(m) > 1 for m in chosen.values()):
        return None
    tiers = tuple(
        msgspec.structs.replace(
            t, multipliers=tuple(sorted(chosen[t.id] | {t.reference_multiplier}))
        )
        if t.id in chosen
        else t
        for t in scenario.tiers
    )
    return msgspec.structs.replace(scenario, tiers=tiers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", type=Path, nargs="+")
    parser.add_argument("--time-limit", type=float, default=None)
    args = parser.parse_args()
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    print(f"{'scenario':24} {'full menu':>14} {'status':9} {'narrowed':>14} {'status':9} change")
    for path in args.scenarios:
        scenario = load_scenario(path)
        full = plan_scenario(scenario, catalog, time_limit_s=args.time_limit, arrays=arrays)
        narrow = narrowed(scenario, full)
        name = scenario.meta.name
        if narrow is None:
            print(f"{name:24} skipped: families chose different multipliers for one tier")
            continue
        cut = plan_scenario(narrow, catalog, time_limit_s=args.time_limit, arrays=arrays)
        m_full = full.revenue_usd - full.cost_usd
        m_cut = cut.revenue_usd - cut.cost_usd
        change = (m_cut - m_full) / max(abs(m_full), 1.0)
        print(
            f"{name:24} {m_full:14,.0f} {full.status.value:9} {m_cut:14,.0f} "
            f"{cut.status.value:9} {change:+.2%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
