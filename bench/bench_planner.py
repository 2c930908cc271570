"""Benchmark the planner's solver on synthetic instances; prints one line per (size, seed, method).

    /work/venv/bin/python bench/bench_planner.py                       # all sizes, seed 1
    /work/venv/bin/python bench/bench_planner.py --sizes frontier --seeds 1 2 3 --time-limit 15
    /work/venv/bin/python bench/bench_planner.py --sizes region --methods decompose highs scip
    /work/venv/bin/python bench/bench_planner.py --scenarios scenarios/*.toml   # real front half
    # the reconfiguration limit at scale (docs/solver.md, "Known limits"):
    /work/venv/bin/python bench/bench_planner.py --sizes multi_region frontier \
        --reconfiguration-limit 0.1 --time-limit 60 --verbose

Columns: generation and model build time, solve time, status, proven gap, objective (revenue -
cost - penalty, USD over the horizon), and the objective of baselines on the same instance
(``planner.solve.baselines``): (a) greedy, (b) config search + reference price list; with
``--scenarios`` also (p) the provider's plan at list prices and (s) the same with a coordinate
search over price cards (``planner.solve.provider``);
"up_a/b" is the plan's objective over baseline (a) / (b), "rup_a/b" the same for revenue.
Instances are ``bench.synthetic`` (invented shapes, not sourced figures). With ``--scenarios``
the instances are checked-in scenario files built by the front half (``planner.build.pipeline``:
catalog, performance model, MNL demand), solved with each file's own options.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.synthetic import SIZES, accelerators, synthetic_tables
from planner.solve import solve
from planner.solve.baselines import greedy, price_list
from planner.solve.evaluate import evaluate
from planner.solve.solution import SolveOptions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1])
    parser.add_argument("--methods", nargs="+", default=["decompose"])
    parser.add_argument("--time-limit", type=float, default=15.0)
    parser.add_argument("--gap", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--peak-ratio", type=float, default=3.0)
    parser.add_argument("--reconfiguration-limit", type=float, default=None)
    parser.add_argument("--verbose", action="store_true", help="print progress reports")
    parser.add_argument("--scenarios", nargs="+", type=Path, help="scenario files instead")
    args = parser.parse_args()
    if args.scenarios:
        run_scenarios(args.scenarios, args.verbose)
        return
    print(
        f"{'size':13} {'seed':>4} {'method':9} {'acc':>7} {'pools':>5} {'cands':>5} "
        f"{'gen_s':>6} {'build_s':>7} {'solve_s':>7} {'status':9} {'gap':>8} "
        f"{'objective':>14} {'obj(a)':>14} {'obj(b)':>14} {'up_a':>6} {'up_b':>6} "
        f"{'revenue':>14} {'rev(a)':>14} {'rev(b)':>14} {'rup_a':>6} {'rup_b':>6}"
    )
    for size in args.sizes:
        for seed in args.seeds:
            t0 = time.perf_counter()
            tables = synthetic_tables(size, seed, peak_ratio=args.peak_ratio)
            gen_s = time.perf_counter() - t0
            ref = tables.demand.reference_combo
            plan_a = evaluate(tables, ref, greedy(tables))
            plan_b = evaluate(tables, ref, price_list(tables))
            base_a, base_b = plan_a.objective_usd, plan_b.objective_usd
            rev_a, rev_b = plan_a.revenue_usd, plan_b.revenue_usd
            for method in args.methods:
                options = SolveOptions(
                    time_limit_s=args.time_limit,
                    gap_target=args.gap,
                    method=method,
                    threads=args.threads,
                    reconfiguration_limit=args.reconfiguration_limit,
                )
                progress = (
                    (lambda p: print(f"    {p.elapsed_s:7.2f}s {p.message}"))
                    if args.verbose
                    else None
                )
                r = solve(tables, options, progress)
                up_a = (r.objective_usd - base_a) / abs(base_a) if base_a else float("nan")
                up_b = (r.objective_usd - base_b) / abs(base_b) if base_b else float("nan")
                rup_a = (r.revenue_usd - rev_a) / abs(rev_a) if rev_a else float("nan")
                rup_b = (r.revenue_usd - rev_b) / abs(rev_b) if rev_b else float("nan")
                print(
                    f"{size:13} {seed:>4} {method:9} {accelerators(tables):>7} "
                    f"{len(tables.inventory.pool_ids):>5} {tables.candidates.pool.shape[0]:>5} "
                    f"{gen_s:>6.2f} {r.build_s:>7.3f} {r.solve_s:>7.2f} {r.status.value:9} "
                    f"{r.gap:>8.4%} {r.objective_usd:>14,.0f} {base_a:>14,.0f} "
                    f"{base_b:>14,.0f} {up_a:>6.0%} {up_b:>6.0%} {r.revenue_usd:>14,.0f} "
                    f"{rev_a:>14,.0f} {rev_b:>14,.0f} {rup_a:>6.0%} {rup_b:>6.0%}",
                    flush=True,
                )


def run_scenarios(paths: list[Path], verbose: bool) -> None:
    """Per scenario: the plan against the provider's plan at list prices (p) and with its price
    cards searched (s); "closed" is the share of the plan's uplift over (p) that price search
    alone recovers."""
    from fleet.catalog.load import load_catalog
    from planner.build.pipeline import Built, build
    from planner.run import load_scenario, solve_options
    from planner.solve.provider import price_search, provider_fill

    catalog = load_catalog()
    print(
        f"{'scenario':24} {'hours':>5} {'cands':>5} {'combos':>6} {'build_s':>7} "
        f"{'solve_s':>7} {'status':9} {'gap':>8} {'objective':>13} {'obj(a)':>13} "
        f"{'obj(b)':>13} {'obj(p)':>13} {'obj(s)':>13} {'up_p':>7} {'up_s':>7} {'closed':>6} "
        f"{'search_s':>8}"
    )
    for path in paths:
        scenario = load_scenario(path)
        t0 = time.perf_counter()
        built = build(scenario, catalog)
        build_s = time.perf_counter() - t0
        if not isinstance(built, Built):
            print(f"{path.stem:24} not solved: the front half reports it infeasible")
            continue
        tables = built.tables
        progress = (lambda p: print(f"    {p.elapsed_s:7.2f}s {p.message}")) if verbose else None
        r = solve(tables, solve_options(scenario), progress)
        ref = tables.demand.reference_combo
        a = evaluate(tables, ref, greedy(tables)).objective_usd
        b = evaluate(tables, ref, price_list(tables)).objective_usd
        p = evaluate(tables, ref, provider_fill(tables)).objective_usd
        t1 = time.perf_counter()
        s = price_search(tables).value.objective_usd
        search_s = time.perf_counter() - t1
        gain = r.objective_usd - p
        closed = (s - p) / gain if gain > 1e-9 * max(1.0, abs(p)) else float("nan")
        print(
            f"{path.stem:24} {tables.periods:>5} {tables.candidates.pool.shape[0]:>5} "
            f"{tables.demand.combo_family.shape[0]:>6} {build_s:>7.2f} {r.solve_s:>7.2f} "
            f"{r.status.value:9} {r.gap:>8.4%} {r.objective_usd:>13,.0f} {a:>13,.0f} "
            f"{b:>13,.0f} {p:>13,.0f} {s:>13,.0f} {_up(r.objective_usd, p):>7} "
            f"{_up(r.objective_usd, s):>7} {closed:>6.0%} {search_s:>8.2f}",
            flush=True,
        )


def _up(plan: float, base: float) -> str:
    """The plan's uplift over a baseline, as a percentage of the baseline's absolute value."""
    if abs(base) < 1e-9:
        return "n/a" if abs(plan) < 1e-9 else "inf"
    return f"{(plan - base) / abs(base):.1%}"


if __name__ == "__main__":
    main()
