"""``farebox plan SCENARIO.toml``: solve a scenario, print a planner's summary, optionally save
the Plan as JSON.

Progress goes to stderr while solving (``--quiet`` silences it); the summary goes to stdout:
status and proven gap, money, the chosen price card, a compact assignment table for the peak and
the trough period, service per tier, pool usage, binding constraints, and the reasons when the
scenario cannot be served. Exit 0 with a plan, 1 when the scenario is infeasible or no plan was
found in time, 2 on a bad file (one line naming the field).

Before building, the scenario's work is counted and held to the server's default limits
(``planner.build.workload``; the ``FAREBOX_MAX_CONFIGURATIONS``, ``FAREBOX_MAX_SLO_CHECKS`` and
``FAREBOX_MAX_SCREEN_COMBINATIONS`` defaults of ``api.settings.Settings``), so a scenario the API
refuses in milliseconds is refused here too, exit 2, instead of taking the machine's memory.
``--no-work-limit`` plans it anyway; running out of memory is then one line and exit 2 as well.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from api.cli._output import output_file, write_error
from fleet.errors import InputError

if TYPE_CHECKING:
    from fleet.catalog.load import Catalog
    from planner.build.workload import Workload
    from planner.plan.schema import Assignment, Plan
    from planner.scenario.schema import Scenario
    from planner.solve.solution import Progress


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="solve a scenario: prices, replicas per pool and hour, revenue, cost, proven gap",
        description=__doc__,
    )
    parser.add_argument("scenario", type=Path, help="scenario file (.toml, or .json)")
    parser.add_argument("--json", type=Path, metavar="OUT", help="write the Plan as JSON here")
    parser.add_argument(
        "--time-limit", type=float, metavar="S", help="solver time limit, seconds (overrides file)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--no-work-limit",
        action="store_true",
        help="plan even a scenario over the server's default work limits (configurations, SLO "
        "checks, screening combinations)",
    )
    parser.set_defaults(run=run)


class _Ticker:
    """Progress lines on stderr, at most one per half second (and always the last)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.last = -1.0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if now - self.last < 0.5 and not p.message.startswith(("optimal", "feasible")):
            return
        self.last = now
        objective = "-" if p.objective is None else _usd(p.objective)
        bound = "-" if p.bound is None else _usd(p.bound)
        print(
            f"  {p.elapsed_s:7.1f}s  plan {objective:>14}  bound {bound:>14}  {p.message}",
            file=self.stream,
            flush=True,
        )


def run(args: argparse.Namespace) -> int:
    import msgspec

    from fleet.catalog.load import load_catalog
    from planner.run import load_scenario, plan_scenario
    from planner.scenario.schema import MAX_TIME_LIMIT_S

    if args.time_limit is not None and not 0 < args.time_limit <= MAX_TIME_LIMIT_S:
        raise InputError(f"--time-limit: must be > 0 and <= {MAX_TIME_LIMIT_S:g}")
    output_file(args.json, "--json")
    scenario = load_scenario(args.scenario)
    catalog = load_catalog()
    work = check_work(scenario, catalog, limited=not args.no_work_limit)
    if not args.quiet:
        print(f"planning {scenario.meta.name} ...", file=sys.stderr, flush=True)
    plan: Plan | None
    try:
        plan = plan_scenario(
            scenario,
            catalog,
            time_limit_s=args.time_limit,
            progress=None if args.quiet else _Ticker(sys.stderr),
        )
    except MemoryError:
        plan = None  # raised below, once the frames holding the arrays are gone
    if plan is None:
        raise out_of_memory(scenario.meta.name, work)
    if args.json is not None:
        try:
            args.json.write_bytes(msgspec.json.format(msgspec.json.encode(plan)))
        except OSError as err:
            raise write_error("--json", args.json, err) from None
    from planner.build.pipeline import build_inventory

    inventory = build_inventory(scenario, catalog)
    prices = dict(zip(inventory.pool_ids, inventory.usd_per_system_hour.tolist(), strict=True))
    print(summary(plan, scenario.meta.description, usd_per_system_hour=prices))
    return 0 if plan.status.has_plan else 1


def check_work(scenario: Scenario, catalog: Catalog, *, limited: bool = True) -> Workload:
    """The scenario's work (``planner.build.workload``, counted without doing any); with
    ``limited``, an InputError when it is over the server's default limits, naming the limit and
    ``--no-work-limit``."""
    from api.settings import Settings
    from planner.build.workload import check_workload, workload
    from planner.scenario.decode import check_catalog

    check_catalog(scenario, catalog)
    work = workload(scenario, catalog)
    if limited:
        defaults = Settings(db_path=Path())  # the server's defaults; nothing is opened
        try:
            check_workload(
                scenario,
                work,
                max_configurations=defaults.max_configurations,
                max_checks=defaults.max_slo_checks,
                max_screen_combinations=defaults.max_screen_combinations,
            )
        except InputError as err:
            raise InputError(
                f"{err} (the server's default work limits; --no-work-limit plans it anyway)"
            ) from None
    return work


def out_of_memory(name: str, work: Workload | None) -> InputError:
    """The one-line error for a scenario that ran out of memory while building or solving (its
    counted work named when known)."""
    counted = (
        f" ({work.configurations:,} configurations, {work.checks:,} SLO checks)" if work else ""
    )
    return InputError(
        f"out of memory while building or solving {name}{counted}; search fewer precisions, "
        "batch caps, speculative options or engines, or plan fewer pools"
    )


def _usd(value: float) -> str:
    return f"-${-value:,.2f}" if value < 0 else f"${value:,.2f}"


def _table(headers: list[str], rows: list[list[str]], text_columns: int = 4) -> list[str]:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells: list[str]) -> str:
        # Text columns (the first ``text_columns``) left-aligned, figures right-aligned.
        return "  " + "  ".join(
            c.ljust(w) if i < text_columns else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return [line(headers), *(line(r) for r in rows)]


def _period_label(plan: Plan, period: int) -> str:
    start = period * plan.period_hours
    day, hour = divmod(int(start), 24)
    return f"period {period} (day {day + 1}, {hour:02d}:00)"


def _assignment_rows(assignments: list[Assignment]) -> list[list[str]]:
    rows = []
    for a in sorted(assignments, key=lambda a: (a.family, a.tier, a.pool)):
        layout = f"tp{a.tp}" + "".join(
            f" {n}{v}" for n, v in (("pp", a.pp), ("dp", a.dp), ("ep", a.ep)) if v > 1
        )
        rows.append(
            [
                a.pool,
                f"{a.family}/{a.tier}",
                a.variant,
                f"{layout} {a.precision}"
                + (f" spec{a.spec_draft_tokens}" if a.spec_draft_tokens else "")
                + (f" {a.engine}" if a.engine != "any" else ""),
                str(a.batch_cap),
                str(a.replicas),
                str(a.systems),
                f"{a.utilization:.0%}",
                f"{a.tokens_per_s_per_user:.0f}",
                f"{a.ttft_ms:.0f}" if a.ttft_ms >= 0 else "-",
            ]
        )
    return rows


def summary(
    plan: Plan, description: str = "", *, usd_per_system_hour: dict[str, float] | None = None
) -> str:
    """The human summary of a plan (what ``farebox plan`` prints). With each pool's hourly price
    (``planner.build.pipeline.build_inventory``, the price the plan charges used systems), the
    pools table also shows what the idle system-hours cost at that price: not in the plan's cost
    (it pays for the systems it uses), but paid all the same when the fleet is owned or reserved."""
    from planner.solve.tables import SECONDS_PER_HOUR

    out = [f"{plan.scenario}" + (f" -- {description}" if description else "")]
    horizon = plan.periods * plan.period_hours
    out.append(
        f"status: {plan.status.value}  gap {plan.gap:.3%} (bound {_usd(plan.bound_usd)})  "
        f"solve {plan.solve_s:.2f}s  build {plan.build_s:.2f}s  horizon {horizon:g} h"
    )
    if plan.reasons:
        out.append("why the scenario cannot be served as asked:")
        out.extend(f"  - {r}" for r in plan.reasons)
    if not plan.status.has_plan:
        out.append(plan.message)
        out.extend(f"warning: {w}" for w in plan.warnings)
        return "\n".join(out)
    margin = f"{plan.margin_fraction:.1%}" if plan.revenue_usd > 0 else "-"
    out.append(
        f"revenue {_usd(plan.revenue_usd)}  cost {_usd(plan.cost_usd)}  "
        f"margin {_usd(plan.margin_usd)} ({margin})"
        + (f"  unserved penalty {_usd(plan.penalty_usd)}" if plan.penalty_usd else "")
    )
    out.append("")
    out.append("prices")
    out.extend(
        _table(
            ["family", "tier", "served by", "x", "ref x", "$/M in", "$/M out"],
            [
                [
                    p.family,
                    p.tier,
                    p.variant + ("@" + "+".join(p.precisions) if p.quality_loss > 0 else ""),
                    f"{p.multiplier:g}",
                    f"{p.reference_multiplier:g}",
                    f"{p.usd_per_m_input_tokens:.3f}",
                    f"{p.usd_per_m_output_tokens:.3f}",
                ]
                for p in plan.prices
            ],
        )
    )
    demand = [0.0] * plan.periods
    for f in plan.flows:
        demand[f.period] += f.demand_tokens_per_s
    peak = max(range(plan.periods), key=lambda t: demand[t])
    trough = min(range(plan.periods), key=lambda t: demand[t])
    headers = [
        "pool",
        "product",
        "model",
        "layout",
        "batch",
        "repl",
        "sys",
        "util",
        "tok/s/u",
        "ttft ms",
    ]
    for name, period in (("peak", peak), ("trough", trough)):
        out.append("")
        here = [a for a in plan.assignments if a.period == period]
        out.append(
            f"{name}: {_period_label(plan, period)}, demand {demand[period]:,.0f} output tokens/s"
        )
        out.extend(_table(headers, _assignment_rows(here)) if here else ["  (nothing served)"])
    out.append("")
    out.append("service over the horizon")
    rows = []
    keys = sorted({(f.family, f.tier) for f in plan.flows})
    for family, tier in keys:
        flows = [f for f in plan.flows if f.family == family and f.tier == tier]
        asked = sum(f.demand_tokens_per_s for f in flows)
        served = sum(f.served_tokens_per_s for f in flows)
        rows.append(
            [
                family,
                tier,
                f"{asked * SECONDS_PER_HOUR * plan.period_hours / 1e6:,.1f}",
                f"{served / asked:.1%}" if asked > 0 else "-",
                _usd(sum(f.revenue_usd for f in flows)),
            ]
        )
    out.extend(_table(["family", "tier", "M tokens", "served", "revenue"], rows))
    out.append("")
    out.append("pools")
    pool_rows = []
    idle_total = 0.0
    for pool in sorted({u.pool for u in plan.pool_usage}):
        usage = [u for u in plan.pool_usage if u.pool == pool]
        peak_used = max(u.systems_used for u in usage)
        mean = sum(u.utilization for u in usage) / len(usage)
        row = [
            pool,
            str(max(u.systems_available for u in usage)),
            str(peak_used),
            f"{mean:.0%}",
            _usd(sum(u.cost_usd for u in usage)),
        ]
        if usd_per_system_hour is not None:
            idle_hours = (
                sum(u.systems_available - u.systems_used for u in usage) * plan.period_hours
            )
            idle_total += idle_hours * usd_per_system_hour[pool]
            row.append(_usd(idle_hours * usd_per_system_hour[pool]))
        pool_rows.append(row)
    headers = ["pool", "systems", "peak used", "mean used", "cost"]
    if usd_per_system_hour is not None:
        headers.append("idle cost")
    out.extend(_table(headers, pool_rows))
    if usd_per_system_hour is not None:
        out.append(
            f"idle systems' cost at the pools' prices (not in the plan's cost): {_usd(idle_total)}"
        )
    valued = [b for b in plan.binding if abs(b.shadow_price_usd) > 1e-9]
    if valued:
        out.append("")
        out.append(f"binding constraints ({len(plan.binding)}; largest shadow prices of each kind)")
        for kind in sorted({b.kind for b in valued}):
            top = sorted(
                (b for b in valued if b.kind == kind), key=lambda b: -abs(b.shadow_price_usd)
            )[:3]
            out.extend(f"  {b.kind} {b.key}: {_usd(b.shadow_price_usd)} per {b.unit}" for b in top)
    out.extend(f"warning: {w}" for w in plan.warnings)
    return "\n".join(out)
