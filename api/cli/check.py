"""``farebox check [PATHS...]``: solve scenario files and check their expectations (CI's gate).

Each path is a scenario file (``.toml``, or ``.json``) or a directory, whose ``*.toml`` and
``*.json`` files are checked in name order; the default is ``scenarios/``. Every scenario is
planned (``planner.run.plan_scenario``, the file's own time limit unless ``--time-limit``) and its
``[[expect]]`` entries measured (``planner.plan.expectations``). Progress goes to stderr, one line
per scenario plus the solver's progress every few seconds; the table of results goes to stdout:

    tiny  optimal  gap 0.01%  1.2 s
      PASS  status                                  == optimal          optimal
      FAIL  price_multiplier[family=x,tier=fast]    in [4, 8]           2  <- 2 is below the minimum

Exit status: 0 when every expectation holds; 1 when any fails or a scenario crashes; 2 when a
scenario file is malformed (its error names the field). ``--junit FILE`` writes one JUnit
``testsuite`` per scenario and one ``testcase`` per expectation, for CI dashboards.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from api.cli._output import output_file, write_error
from fleet.errors import InputError

if TYPE_CHECKING:
    from fleet.catalog.load import Catalog
    from fleet.perf.arrays import CatalogArrays
    from planner.plan.expectations import Outcome
    from planner.plan.schema import Plan
    from planner.solve.solution import Progress, ProgressCallback

DEFAULT_DIR = Path("scenarios")
PROGRESS_EVERY_S = 5.0


@dataclass(slots=True)
class ScenarioResult:
    path: Path
    name: str
    plan: Plan | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    error: str | None = None
    """Why the scenario could not be checked (malformed file, crash)."""
    input_error: bool = False
    wall_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.error is None and all(o.passed for o in self.outcomes)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="solve scenario files and check their expectations (exit 1 on any failure)",
        description=(
            "Solve each scenario and evaluate its [[expect]] entries. PATHS are scenario files "
            "or directories of them (default: scenarios/). Exit 0 = all hold, 1 = a failure, "
            "2 = a malformed scenario."
        ),
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATHS", help="files or folders")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML here")
    parser.add_argument(
        "--time-limit",
        type=float,
        metavar="S",
        help="solver time limit per scenario, seconds (default: each file's own)",
    )
    parser.add_argument("--catalog-dir", type=Path, help="catalog data files (default: packaged)")
    parser.add_argument(
        "--no-work-limit",
        action="store_true",
        help="plan scenarios over the server's default work limits (refused otherwise)",
    )
    parser.set_defaults(run=run)


def scenario_files(paths: list[Path]) -> list[Path]:
    """The files ``paths`` name, directories expanded to their scenario files in name order."""
    files: list[Path] = []
    for path in paths or [DEFAULT_DIR]:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in (".toml", ".json"))
            if not found:
                raise InputError(f"{path}: no .toml or .json scenario files in this folder")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(f"{path}: no such file or folder")
    return files


def check_file(
    path: Path,
    catalog: Catalog,
    arrays: CatalogArrays,
    *,
    time_limit_s: float | None = None,
    log: TextIO | None = None,
    work_limit: bool = True,
) -> ScenarioResult:
    """Plan one scenario file and evaluate its expectations; never raises for a bad file. With
    ``work_limit`` a scenario over the server's default work limits is refused unplanned
    (``api.cli.plan.check_work``), as ``farebox plan`` refuses it."""
    from api.cli.plan import check_work, out_of_memory
    from planner.plan.expectations import evaluate
    from planner.run import load_scenario, plan_scenario

    start = time.perf_counter()
    result = ScenarioResult(path=path, name=path.stem)
    work = None
    try:
        scenario = load_scenario(path)
        result.name = scenario.meta.name
        work = check_work(scenario, catalog, limited=work_limit)
        result.plan = plan_scenario(
            scenario,
            catalog,
            time_limit_s=time_limit_s,
            progress=_progress_printer(result.name, log) if log is not None else None,
            arrays=arrays,
        )
        result.outcomes = evaluate(result.plan, scenario.expect)
    except InputError as err:
        result.error, result.input_error = str(err), True
    except MemoryError:
        result.plan = None  # the frames holding the arrays are gone once we are here
        result.error = str(out_of_memory(result.name, work))
    except Exception:
        result.error = traceback.format_exc()
    result.wall_s = time.perf_counter() - start
    return result


def _progress_printer(name: str, log: TextIO) -> ProgressCallback:
    last = [-PROGRESS_EVERY_S]

    def report(p: Progress) -> None:
        if p.elapsed_s - last[0] < PROGRESS_EVERY_S:
            return
        last[0] = p.elapsed_s
        bound = "" if p.bound is None else f" bound {p.bound:,.0f}"
        objective = "" if p.objective is None else f" plan {p.objective:,.0f}"
        print(
            f"      {name}: {p.elapsed_s:5.1f} s{objective}{bound}  {p.message}",
            file=log,
            flush=True,
        )

    return report


def _summary(r: ScenarioResult) -> str:
    if r.plan is None:
        return f"{r.name}  ERROR  ({r.path})"
    p = r.plan
    gap = f"gap {p.gap:.2%}" if p.gap == p.gap else "gap -"
    return (
        f"{r.name}  {p.status.value}  {gap}  solve {p.solve_s:.1f} s  "
        f"(wall {r.wall_s:.1f} s)  margin ${p.margin_usd:,.0f}  ({r.path})"
    )


def format_results(results: list[ScenarioResult]) -> str:
    """The table ``farebox check`` prints: one block per scenario, one line per expectation."""
    from planner.plan.expectations import format_measured

    lines: list[str] = []
    rows = [o for r in results for o in r.outcomes]
    w_label = max([len(o.label) for o in rows] + [10])
    w_want = max([len(o.wanted) for o in rows] + [8])
    for r in results:
        lines.append(_summary(r))
        if r.error is not None:
            lines.extend(f"  ERROR {line}" for line in r.error.rstrip().splitlines())
        elif not r.outcomes:
            lines.append("  (no expectations)")
        for o in r.outcomes:
            verdict = "PASS" if o.passed else "FAIL"
            line = (
                f"  {verdict}  {o.label:<{w_label}}  {o.wanted:<{w_want}}  "
                f"{format_measured(o.measured)}"
            )
            if not o.passed:
                line += f"  <- {o.detail}" if o.detail else ""
                if o.expectation.note:
                    line += f"\n        why expected: {o.expectation.note}"
            lines.append(line)
        lines.append("")
    n = len(rows)
    failed = sum(not o.passed for o in rows)
    errors = sum(r.error is not None for r in results)
    lines.append(
        f"{len(results)} scenario(s), {n} expectation(s): {n - failed} passed, {failed} failed"
        + (f", {errors} scenario error(s)" if errors else "")
    )
    return "\n".join(lines)


def junit_xml(results: list[ScenarioResult]) -> bytes:
    """One testsuite per scenario, one testcase per expectation (an error case when it broke)."""
    from planner.plan.expectations import format_measured

    suites = ET.Element("testsuites", name="farebox check")
    for r in results:
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=r.name,
            tests=str(max(len(r.outcomes), 1 if r.error else 0)),
            failures=str(sum(not o.passed for o in r.outcomes)),
            errors=str(int(r.error is not None)),
            time=f"{r.wall_s:.3f}",
            file=str(r.path),
        )
        if r.error is not None:
            case = ET.SubElement(suite, "testcase", classname=r.name, name="plan")
            message = r.error.strip().splitlines()[-1] if r.error.strip() else "error"
            ET.SubElement(case, "error", message=message).text = r.error
        for o in r.outcomes:
            case = ET.SubElement(
                suite, "testcase", classname=r.name, name=f"{o.index}: {o.label} {o.wanted}"
            )
            measured = format_measured(o.measured)
            if not o.passed:
                failure = ET.SubElement(case, "failure", message=f"measured {measured}: {o.detail}")
                failure.text = (
                    f"expected {o.label} {o.wanted}\nmeasured {measured}\n{o.detail}\n"
                    + (f"why expected: {o.expectation.note}\n" if o.expectation.note else "")
                )
            else:
                ET.SubElement(case, "system-out").text = f"measured {measured}"
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True)


def run(args: argparse.Namespace) -> int:
    from fleet.catalog.load import load_catalog
    from fleet.perf.arrays import build_arrays
    from planner.scenario.schema import MAX_TIME_LIMIT_S

    if args.time_limit is not None and not 0 < args.time_limit <= MAX_TIME_LIMIT_S:
        raise InputError(f"--time-limit: must be > 0 and <= {MAX_TIME_LIMIT_S:g}")
    if args.junit is not None:
        try:  # CI passes paths like reports/junit.xml: the folder is created
            args.junit.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise write_error("--junit", args.junit, err) from None
        output_file(args.junit, "--junit")
    files = scenario_files(list(args.paths))
    catalog = load_catalog(args.catalog_dir)
    arrays = build_arrays(catalog)
    results: list[ScenarioResult] = []
    for i, path in enumerate(files, start=1):
        print(f"[{i}/{len(files)}] {path} ...", file=sys.stderr, flush=True)
        r = check_file(
            path,
            catalog,
            arrays,
            time_limit_s=args.time_limit,
            log=sys.stderr,
            work_limit=not args.no_work_limit,
        )
        verdict = "ok" if r.passed else ("ERROR" if r.error else "FAILED")
        status = r.plan.status.value if r.plan is not None else "-"
        print(
            f"[{i}/{len(files)}] {r.name}: {status}, {verdict} in {r.wall_s:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        results.append(r)
    print(format_results(results))
    if args.junit is not None:
        try:
            args.junit.write_bytes(junit_xml(results))
        except OSError as err:
            raise write_error("--junit", args.junit, err) from None
    if any(r.input_error for r in results):
        return 2
    return 0 if all(r.passed for r in results) else 1
