"""``farebox sweep SCENARIO --set PATH=VALUES ...``: plan a grid of what-if scenarios, and
optionally evaluate each plan against sampled demand error (Monte Carlo).

Each ``--set`` sweeps one field of the scenario (several form their Cartesian product):
``--set pools.h100-us-east.count=0..7`` (inclusive range), ``--set tiers.fast.max_ttft_ms=250,500``
(list), ``--set demand.llama-8b.choice.price_sensitivity=1..3:0.5`` (range with a step),
``--set tiers.fast.multipliers=[1.5,2],[2,3]`` (a list field: one bracketed list per value).
Paths name tables by field and list elements by id (docs/cli.md has the grammar).

``--samples N --demand-cv 0.2`` keeps each point's plan (replicas and prices) fixed and
evaluates it against N draws of demand = forecast x a lognormal multiplier of mean 1 (one per
family for the horizon, or per family and hour with ``--demand-error family-hour``), reporting
the p5/p50/p95 of margin and SLO-miss hours. Draws are seeded (``--seed``) and shared by all
points.

Points run in local worker processes (``--workers``), or on Ray with ``--ray`` (a local cluster
started for the sweep) or ``--ray ADDRESS`` (``auto`` or ``host:port`` of a running cluster; needs
``pip install 'farebox[ray]'``). Each point has the scenario's time limit (``--time-limit``).
``--out DIR`` writes the tables as Parquet and CSV and the charts as PNG. Progress bars go to
stderr when it is a terminal (``--quiet`` silences them). Exit 0 when some point has a plan, 1
when none has, 2 on bad input (one line naming the flag or path).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from api.cli._output import output_folder
from fleet.errors import InputError

if TYPE_CHECKING:
    from planner.sweep.run import SweepResult

DEFAULT_MAX_POINTS = 256
DEFAULT_MAX_EVALUATIONS = 1_000_000


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="what-if grid over scenario fields, with Monte Carlo over demand error",
        description=__doc__,
    )
    parser.add_argument("scenario", type=Path, help="scenario file (.toml, or .json)")
    parser.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="PATH=VALUES",
        help="sweep a field: a..b, a..b:step, a,b,c, [x,y],[z] (repeatable)",
    )
    parser.add_argument("--samples", type=int, default=0, help="Monte Carlo samples per point")
    parser.add_argument(
        "--demand-cv", type=float, default=0.2, help="forecast error: CV of the demand multiplier"
    )
    parser.add_argument(
        "--demand-error",
        choices=("family", "family-hour"),
        default="family",
        help="one multiplier per family for the horizon, or per family and hour",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the demand draws")
    parser.add_argument(
        "--time-limit", type=float, metavar="S", help="solver time limit per point (overrides file)"
    )
    parser.add_argument("--workers", type=int, help="local worker processes (default: CPUs)")
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        metavar="ADDRESS",
        help="run on Ray: a local cluster, or the one at ADDRESS (auto, host:port)",
    )
    parser.add_argument("--max-points", type=int, default=DEFAULT_MAX_POINTS, help="grid cap")
    parser.add_argument(
        "--max-evaluations",
        type=int,
        default=DEFAULT_MAX_EVALUATIONS,
        help="cap on grid points x samples",
    )
    parser.add_argument("--out", type=Path, help="write tables (Parquet, CSV) and charts here")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(run=run)


class _Bars:
    """rich progress bars on stderr, one per phase; nothing when stderr is no terminal."""

    def __init__(self, enabled: bool) -> None:
        self.progress: Any = None
        self.tasks: dict[str, Any] = {}
        if enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=sys.stderr),
            )

    def __enter__(self) -> _Bars:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def status(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text)

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self.progress is None:
            return
        if phase not in self.tasks:
            self.tasks[phase] = self.progress.add_task(phase, total=total)
        self.progress.update(self.tasks[phase], completed=done)


def _positive(value: int | None, flag: str) -> None:
    if value is not None and value < 1:
        raise InputError(f"{flag}: must be >= 1")


def run(args: argparse.Namespace) -> int:
    from planner.run import load_scenario
    from planner.sweep.backends import default_workers, open_backend
    from planner.sweep.grid import parse_specs
    from planner.sweep.run import CHUNK_SAMPLES, MonteCarlo, SweepLimits, prepare, run_sweep

    _positive(args.workers, "--workers")
    _positive(args.max_points, "--max-points")
    _positive(args.max_evaluations, "--max-evaluations")
    if args.out is not None:
        output_folder(args.out, "--out")
    limits = SweepLimits(max_points=args.max_points, max_evaluations=args.max_evaluations)
    specs = parse_specs(args.sets, max_points=limits.max_points)
    mc = MonteCarlo(
        samples=args.samples, demand_cv=args.demand_cv, scope=args.demand_error, seed=args.seed
    )
    scenario = load_scenario(args.scenario)
    points = prepare(scenario, specs, mc, limits, args.time_limit)
    tasks = max(len(points), len(points) * math.ceil(mc.samples / CHUNK_SAMPLES))
    workers = min(args.workers or default_workers(), tasks)
    show = not args.quiet and sys.stderr.isatty()
    with _Bars(show) as bars:
        if args.ray is not None:
            bars.status("starting Ray ..." if not args.ray else f"joining Ray at {args.ray} ...")
        backend = open_backend(args.ray is not None, args.ray or None, workers)
        try:
            result = run_sweep(
                scenario,
                points,
                specs,
                mc,
                backend,
                time_limit_s=args.time_limit,
                progress=bars,
            )
        finally:
            backend.close()
    print(summary(result, backend.workers))
    if args.out is not None:
        write_outputs(result, args.out)
    return 0 if any(o.summary.status in ("optimal", "feasible") for o in result.outcomes) else 1


def write_outputs(result: SweepResult, out: Path) -> None:
    from api.cli._output import write_error
    from planner.sweep.charts import write_charts
    from planner.sweep.frames import sweep_frames, write_frames

    frames = sweep_frames(result)
    try:
        files = write_frames(frames, out) + write_charts(result, frames, out)
    except OSError as err:
        raise write_error("--out", out, err) from None
    print(f"wrote {len(files)} files to {out}")


def _usd(value: float | None) -> str:
    if value is None:
        return "-"
    return f"-${-value:,.0f}" if value < 0 else f"${value:,.0f}"


def summary(result: SweepResult, workers: int) -> str:
    """The table ``farebox sweep`` prints: one row per point."""
    from planner.sweep.grid import format_value

    mc = result.monte_carlo
    headers = [s.path for s in result.specs] + ["status", "margin", "revenue", "cost", "served"]
    headers += ["prices", "pools peak/size"]
    if mc.samples:
        headers += ["margin p5", "p50", "p95", "miss h p50", "p95"]
    rows = []
    for o in result.outcomes:
        s = o.summary
        row = [format_value(v) for v in o.point.values]
        row += [s.status, _usd(s.margin_usd), _usd(s.revenue_usd), _usd(s.cost_usd)]
        row.append(f"{s.served_fraction:.1%}")
        row.append(" ".join(f"{p.family}/{p.tier}={p.multiplier:g}" for p in s.prices) or "-")
        row.append(
            " ".join(f"{p.pool}={p.systems_used_peak}/{p.systems_max}" for p in s.pools) or "-"
        )
        if mc.samples:
            margin = o.percentiles(0) or (None, None, None)
            miss = o.percentiles(1)
            row += [_usd(v) for v in margin]
            row += [f"{miss[1]:g}", f"{miss[2]:g}"] if miss else ["-", "-"]
        rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    left = [True] * len(result.specs) + [True, False, False, False, False, True, True]
    left += [False] * (len(headers) - len(left))
    lines = [
        "  ".join(
            c.ljust(w) if is_left else c.rjust(w)
            for c, w, is_left in zip(cells, widths, left, strict=True)
        ).rstrip()
        for cells in [headers, *rows]
    ]
    head = f"{result.scenario}: {len(result.outcomes)} points"
    if mc.samples:
        head += (
            f", {mc.samples} demand samples each (fixed plan; lognormal CV {mc.demand_cv:g} per "
            f"{mc.scope}, seed {mc.seed})"
        )
    tail = (
        f"{len(result.outcomes)} points on {result.backend} ({workers} workers) in "
        f"{result.wall_s:.1f}s"
    )
    return "\n".join([head, *lines, tail])
