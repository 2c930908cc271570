"""Benchmark the planner's solver on synthetic instances; prints one line per (size, seed, method).

    /work/venv/bin/python bench/bench_planner.py                       # all sizes, seed 1
    /work/venv/bin/python bench/bench_planner.py --sizes frontier --seeds 1 2 3 --time-limit 15
    /work/venv/bin/python bench/bench_planner.py --sizes region --methods decompose highs scip
    /work/venv/bin/python bench/bench_planner.py --scenarios scenarios/*.toml   # real front half

Columns: generation and model build time, solve time, status, proven gap, objective (revenue -
cost - penalty, USD over the horizon), and the objective of two baselines on the same instance
(``planner.solve.baselines``): (a) greedy, (b) config search + reference price list;
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
    from fleet.catalog.load import load_catalog
    from planner.build.pipeline import Built, build
    from planner.run import load_scenario, solve_options

    catalog = load_catalog()
    print(
        f"{'scenario':24} {'hours':>5} {'pools':>5} {'cands':>5} {'combos':>6} {'build_s':>7} "
        f"{'solve_s':>7} {'status':9} {'gap':>8} {'objective':>12} {'obj(a)':>12} "
        f"{'obj(b)':>12} {'revenue':>12} {'rev(b)':>12} {'rev_up_b':>8} {'obj_up_b':>8}"
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
        a = evaluate(tables, ref, greedy(tables))
        b = evaluate(tables, ref, price_list(tables))
        rev_up = (r.revenue_usd - b.revenue_usd) / max(abs(b.revenue_usd), 1e-9)
        obj_up = (r.objective_usd - b.objective_usd) / max(abs(b.objective_usd), 1e-9)
        print(
            f"{path.stem:24} {tables.periods:>5} {len(tables.inventory.pool_ids):>5} "
            f"{tables.candidates.pool.shape[0]:>5} {tables.demand.combo_family.shape[0]:>6} "
            f"{build_s:>7.2f} {r.solve_s:>7.2f} {r.status.value:9} {r.gap:>8.4%} "
            f"{r.objective_usd:>12,.0f} {a.objective_usd:>12,.0f} {b.objective_usd:>12,.0f} "
            f"{r.revenue_usd:>12,.0f} {b.revenue_usd:>12,.0f} {rev_up:>8.1%} {obj_up:>8.1%}",
            flush=True,
        )


if __name__ == "__main__":
    main()
