"""Build time of the planning tables at week scale (a frontier lab's week: 20+ pools, 10+
serving variants, 3 tiers, 168 hours). Prints sizes and seconds; run from the repo root:

    python bench/build_scale.py [--weeks N] [--solve [--time-limit S]]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fleet.catalog.load import load_catalog
from fleet.perf import build_arrays
from planner.build.pipeline import Built, build
from planner.scenario.schema import (
    ChoiceModel,
    CompactDemand,
    Family,
    FamilyDemand,
    Fleet,
    Options,
    Pool,
    Scenario,
    ScenarioMeta,
    Tier,
    Variant,
)

SYSTEMS = ("hgx-h100-8", "hgx-h200-8", "hgx-b200-8", "gb200-nvl72", "mi300x-8", "cs3")
REGIONS = ("us-east", "us-west", "eu-west", "ap-south")
FAMILIES = (  # (flagship, distilled variant or None, base USD/M in, out)
    ("llama-3.1-70b", "llama-3.1-8b", 0.6, 0.8),
    ("llama-3.1-405b", "llama-3.1-70b", 2.5, 3.0),
    ("qwen3-235b-a22b", "qwen3-30b-a3b", 0.5, 1.5),
    ("deepseek-r1", "qwen3-32b", 0.55, 2.2),
    ("gpt-oss-120b", "gpt-oss-20b", 0.15, 0.6),
    ("glm-5", None, 1.0, 3.2),
)


def scenario(weeks: int) -> Scenario:
    rng = np.random.default_rng(0)
    pools = tuple(
        Pool(
            id=f"{system}-{region}",
            region=region,
            system=system,
            count=int(
                rng.integers(2, 8) if system in ("gb200-nvl72", "cs3") else rng.integers(100, 1500)
            ),
        )
        for system in SYSTEMS
        for region in REGIONS
    )
    families = tuple(
        Family(
            id=flagship.replace(".", "-"),
            flagship=flagship,
            variants=() if distilled is None else (Variant(model=distilled),),
            usd_per_m_input_tokens=usd_in,
            usd_per_m_output_tokens=usd_out,
        )
        for flagship, distilled, usd_in, usd_out in FAMILIES
    )
    tiers = (
        Tier(
            id="batch",
            completion_window_hours=24,
            multipliers=(0.5,),
            reference_multiplier=0.5,
            variants=("flagship",),
        ),
        Tier(
            id="standard",
            min_tokens_per_s_per_user=30,
            max_ttft_ms=2000,
            multipliers=(0.8, 1.0, 1.25),
            reference_multiplier=1.0,
            variants=("flagship",),
        ),
        Tier(
            id="fast",
            min_tokens_per_s_per_user=150,
            max_ttft_ms=500,
            multipliers=(2.0, 3.0, 4.0, 5.0, 6.0, 8.0),
            reference_multiplier=4.0,
        ),
    )
    daily = tuple(float(0.6 + 0.5 * np.sin((h - 6) / 24 * 2 * np.pi)) for h in range(24))
    demand = tuple(
        FamilyDemand(
            family=f.id,
            compact=CompactDemand(
                level_requests_per_s=float(rng.uniform(200, 2000)), daily_profile=daily, weeks=weeks
            ),
            mean_input_tokens=2000,
            mean_output_tokens=500,
            prefix_cache_hit_rate=0.3,
            choice=ChoiceModel(
                reference_shares={"batch": 0.1, "standard": 0.5, "fast": 0.1, "outside": 0.3},
                price_sensitivity=1.5,
                speed_weight=0.3,
                quality_weight=0.1,
            ),
        )
        for f in families
    )
    return Scenario(
        meta=ScenarioMeta(name=f"bench-{weeks}w"),
        options=Options(allow_unserved_tiers=True),
        fleet=Fleet(pools=pools),
        families=families,
        tiers=tiers,
        demand=demand,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--weeks", type=int, default=1)
    parser.add_argument("--solve", action="store_true")
    parser.add_argument(
        "--time-limit", type=float, default=120.0, help="solve time limit, seconds (--solve)"
    )
    args = parser.parse_args()
    catalog = load_catalog()
    t0 = time.perf_counter()
    arrays = build_arrays(catalog)
    t1 = time.perf_counter()
    s = scenario(args.weeks)
    built = build(s, catalog, arrays)
    t2 = time.perf_counter()
    assert isinstance(built, Built), built.reasons
    t = built.tables
    d = t.demand
    print(
        f"pools {len(s.fleet.pools)}, systems {sum(p.count for p in s.fleet.pools):,}, "
        f"families {len(s.families)}, variants {len(d.variant_ids)}, tiers {len(s.tiers)}, "
        f"periods {t.periods}"
    )
    print(
        f"offers {d.offers.family.shape[0]}, price cards {d.combo_family.shape[0]}, "
        f"candidates {t.candidates.pool.shape[0]}"
    )
    print(f"catalog arrays {t1 - t0:.2f}s, build {t2 - t1:.2f}s")
    for w in built.warnings:
        print("warning:", w)
    if args.solve:
        from planner.plan.assemble import assemble_plan
        from planner.run import solve_options
        from planner.solve import solve

        result = solve(
            t,
            solve_options(s, args.time_limit),
            lambda p: print(f"   {p.elapsed_s:7.2f}s {p.message}", flush=True),
        )
        plan = assemble_plan(built, result)
        print(
            f"solve: {plan.status.value}, gap {plan.gap:.4%}, {plan.solve_s:.1f}s, "
            f"margin ${plan.margin_usd:,.0f}"
        )
        print("  ", result.message)


if __name__ == "__main__":
    main()
