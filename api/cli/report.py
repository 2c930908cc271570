"""``farebox report PLAN_JSON_OR_SCENARIO --out DIR``: the weekly capacity report.

The input is either a plan as JSON (what ``farebox plan --json`` and the REST API return) or a
scenario file, which is planned first (with progress on stderr). The report is hive-partitioned
Parquet, one partition per week (``planner.report.write``; columns in docs/report.md), and PNG
charts beside it (``planner.report.charts``). The throughput-vs-interactivity chart needs the
scenario (which system each pool is, the token profile), so a report made from a plan JSON has it
only when ``--scenario`` names the scenario file the plan came from.

Weeks are dated from ``--start``, else the scenario's ``meta.start_date``, else
``planner.report.frames.DEFAULT_START`` (Monday 2026-01-05).
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from api.cli._output import output_folder, write_error
from fleet.errors import InputError

if TYPE_CHECKING:
    from fleet.catalog.load import Catalog
    from planner.plan.schema import Plan
    from planner.scenario.schema import Scenario
    from planner.solve.solution import Progress


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "report",
        help="write the weekly capacity report (Parquet + PNG charts) of a plan or scenario",
        description=(
            "Write assignments/, pools/, products/ and demand/ as hive-partitioned Parquet "
            "(week_start=YYYY-MM-DD folders) and PNG charts into --out. Data dictionary: "
            "docs/report.md."
        ),
    )
    parser.add_argument("input", type=Path, metavar="PLAN_JSON_OR_SCENARIO")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    parser.add_argument(
        "--scenario",
        type=Path,
        metavar="FILE",
        help="with a plan JSON: its scenario file (dates the weeks, enables the frontier chart)",
    )
    parser.add_argument(
        "--start", type=date.fromisoformat, metavar="YYYY-MM-DD", help="first day of the horizon"
    )
    parser.add_argument("--no-charts", action="store_true", help="Parquet only")
    parser.add_argument("--time-limit", type=float, metavar="S", help="solver time limit, seconds")
    parser.add_argument("--catalog-dir", type=Path, help="catalog data files (default: packaged)")
    parser.set_defaults(run=run)


def read_plan(path: Path) -> Plan | None:
    """The plan in ``path`` when it is a plan JSON; None when it is something else."""
    import msgspec

    from planner.plan.schema import Plan

    if path.suffix != ".json":
        return None
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror}") from None
    try:
        head = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except msgspec.DecodeError as err:
        raise InputError(f"{path}: not valid JSON: {err}") from None
    if "meta" in head:
        return None  # a scenario body
    try:
        return msgspec.json.decode(data, type=Plan)
    except msgspec.ValidationError as err:
        raise InputError(f"{path}: not a farebox plan: {err}") from None


def _progress(p: Progress) -> None:
    print(f"  {p.elapsed_s:6.1f} s  {p.message}", file=sys.stderr, flush=True)


def _plan_of(args: argparse.Namespace, catalog: Catalog) -> tuple[Plan, Scenario | None]:
    from planner.run import load_scenario, plan_scenario

    plan = read_plan(args.input)
    if plan is not None:
        scenario = load_scenario(args.scenario) if args.scenario is not None else None
        return plan, scenario
    scenario = load_scenario(args.input)
    print(f"planning {scenario.meta.name} ...", file=sys.stderr, flush=True)
    plan = plan_scenario(scenario, catalog, time_limit_s=args.time_limit, progress=_progress)
    return plan, scenario


def run(args: argparse.Namespace) -> int:
    from fleet.catalog.load import load_catalog
    from planner.report import report_frames, write_frames
    from planner.scenario.schema import MAX_TIME_LIMIT_S

    if args.time_limit is not None and not 0 < args.time_limit <= MAX_TIME_LIMIT_S:
        raise InputError(f"--time-limit: must be > 0 and <= {MAX_TIME_LIMIT_S:g}")
    output_folder(args.out, "--out")
    catalog = load_catalog(args.catalog_dir)
    plan, scenario = _plan_of(args, catalog)
    if not plan.status.has_plan:
        print(
            f"farebox report: no plan to report: {plan.status.value}: {plan.message}",
            file=sys.stderr,
        )
        for reason in plan.reasons:
            print(f"  - {reason}", file=sys.stderr)
        return 1
    start = args.start or (scenario.meta.start_date if scenario is not None else None)
    frames = report_frames(plan, start=start)
    try:
        written = write_frames(frames, args.out, start=start)
        if not args.no_charts:
            from planner.report.charts import write_charts
            from planner.report.operating import operating_curves

            curves = operating_curves(plan, scenario, catalog) if scenario is not None else None
            written += write_charts(plan, frames, args.out, curves=curves)
    except OSError as err:
        raise write_error("--out", Path(err.filename or args.out), err) from None
        if scenario is None:
            print("(no frontier chart: pass --scenario FILE to draw it)", file=sys.stderr)
    print(
        f"{plan.scenario}: {plan.status.value}, gap {plan.gap:.2%}, revenue "
        f"${plan.revenue_usd:,.0f}, cost ${plan.cost_usd:,.0f}, margin ${plan.margin_usd:,.0f}"
    )
    for name, frame in frames.items():
        print(f"  {name:<12} {frame.height:>8,} rows")
    for path in written:
        print(f"  {path}")
    return 0
