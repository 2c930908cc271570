"""Which accelerator serves which tier: plan a scenario and split each tier's served output tokens
by the accelerator of the pools that serve it, with the cost per served token on each.

    python bench/tier_mix.py [SCENARIO.toml] [--time-limit S] [--markdown]

For a capacity planner's "why": the share of each (family, tier)'s output tokens per accelerator,
the USD per million output tokens those assignments cost to run (systems' cost / tokens served),
and each accelerator's share of its system-hours used over the horizon.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from fleet.catalog import load_catalog
from planner.run import plan_scenario
from planner.scenario.decode import load_scenario

DEFAULT = Path(__file__).resolve().parents[1] / "scenarios" / "frontier-lab-week.toml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", type=Path, nargs="?", default=DEFAULT)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    catalog = load_catalog()
    scenario = load_scenario(args.scenario)
    plan = plan_scenario(scenario, catalog, time_limit_s=args.time_limit)
    accelerator = {p.id: catalog.system(p.system).accelerator for p in scenario.fleet.pools}
    tokens: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    cost: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for a in plan.assignments:
        key = (a.family, a.tier)
        tokens[key][accelerator[a.pool]] += a.served_tokens_per_s * 3600.0
        cost[key][accelerator[a.pool]] += a.cost_usd
    print(
        f"{plan.scenario}: {plan.status.value}, gap {plan.gap:.3%}, margin "
        f"${plan.revenue_usd - plan.cost_usd:,.0f}"
    )
    sep = " | " if args.markdown else "  "
    header = ["family", "tier", "accelerator", "share of tokens", "USD per M output tokens"]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
    else:
        print(sep.join(f"{h:>14s}" for h in header))
    for key in sorted(tokens):
        total = sum(tokens[key].values())
        for acc, t in sorted(tokens[key].items(), key=lambda kv: -kv[1]):
            row = [key[0], key[1], acc, f"{t / total:.1%}", f"{cost[key][acc] / t * 1e6:.3f}"]
            line = sep.join(row) if args.markdown else sep.join(f"{c:>14s}" for c in row)
            print(f"| {line} |" if args.markdown else line)
    used: dict[str, float] = defaultdict(float)
    offered: dict[str, float] = defaultdict(float)
    for u in plan.pool_usage:
        used[accelerator[u.pool]] += u.systems_used
        offered[accelerator[u.pool]] += u.systems_available
    print("\nsystem-hours used by accelerator")
    for acc in sorted(offered):
        print(f"  {acc:10s} {used[acc] / max(offered[acc], 1e-9):6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
