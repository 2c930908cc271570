"""Plan -> polars frames of the weekly capacity report, each with an explicit schema.

Four frames, the figures a capacity planner pivots on (data dictionary: docs/report.md):

- ``assignments``: one row per (period, pool, family, tier, variant, layout): what serves what,
  plus one row per (period, family, tier) with no pool for the demand left unserved;
- ``pools``: one row per (day, pool): system-hours available / used / idle, cost, revenue;
- ``products``: one row per (week, family, tier): the price chosen, demand, served, revenue, SLO
  attainment;
- ``demand``: one row per (period, family, tier): the hourly flows behind ``products``.

Time: period t covers hours [t x period_hours, (t + 1) x period_hours) of the horizon, which starts
at ``start`` (00:00 of that date; default ``DEFAULT_START``, a Monday). Weeks are blocks of 168
hours from the start, so ``week_start`` = start + 7 days x week index; that column is the hive
partition key of the files ``planner.report.write`` writes. Token counts are totals over the row's
period (rate x seconds), money is USD over the period.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, timedelta

import polars as pl

from planner.plan.schema import Plan, meets_ttft_slo
from planner.solve.tables import SECONDS_PER_HOUR

DEFAULT_START = date(2026, 1, 5)
"""Start of the horizon when neither the scenario nor the caller gives one: a Monday, so that
day 0 of a weekly demand profile reads as Monday. Fixed (not "today"): reports are reproducible."""

HOURS_PER_WEEK = 168

ASSIGNMENTS_SCHEMA = pl.Schema(
    {
        "week_start": pl.Date(),
        "period": pl.Int32(),
        "period_start": pl.Datetime("us"),
        "hour_of_week": pl.Int16(),
        "period_hours": pl.Float64(),
        "pool": pl.String(),
        "family": pl.String(),
        "tier": pl.String(),
        "variant": pl.String(),
        "layout": pl.String(),
        "tp": pl.Int16(),
        "pp": pl.Int16(),
        "dp": pl.Int16(),
        "ep": pl.Int16(),
        "precision": pl.String(),
        "kv_precision": pl.String(),
        "batch_cap": pl.Int32(),
        "spec_draft_tokens": pl.Int16(),
        "engine": pl.String(),
        "replicas": pl.Int64(),
        "systems": pl.Int64(),
        "devices": pl.Int64(),
        "tokens_per_s_per_user": pl.Float64(),
        "ttft_ms": pl.Float64(),
        "utilization": pl.Float64(),
        "capacity_output_tokens": pl.Float64(),
        "demand_output_tokens": pl.Float64(),
        "served_output_tokens": pl.Float64(),
        "unserved_output_tokens": pl.Float64(),
        "revenue_usd": pl.Float64(),
        "cost_usd": pl.Float64(),
    }
)

POOLS_SCHEMA = pl.Schema(
    {
        "week_start": pl.Date(),
        "date": pl.Date(),
        "day_of_week": pl.Int8(),
        "pool": pl.String(),
        "hours": pl.Float64(),
        "min_systems_available": pl.Int64(),
        "peak_systems_used": pl.Int64(),
        "available_system_hours": pl.Float64(),
        "used_system_hours": pl.Float64(),
        "idle_system_hours": pl.Float64(),
        "mean_idle_systems": pl.Float64(),
        "utilization": pl.Float64(),
        "served_output_tokens": pl.Float64(),
        "revenue_usd": pl.Float64(),
        "cost_usd": pl.Float64(),
        "margin_usd": pl.Float64(),
    }
)

PRODUCTS_SCHEMA = pl.Schema(
    {
        "week_start": pl.Date(),
        "family": pl.String(),
        "tier": pl.String(),
        "variant": pl.String(),
        "price_multiplier": pl.Float64(),
        "reference_multiplier": pl.Float64(),
        "usd_per_m_input_tokens": pl.Float64(),
        "usd_per_m_output_tokens": pl.Float64(),
        "demand_requests": pl.Float64(),
        "demand_output_tokens": pl.Float64(),
        "served_output_tokens": pl.Float64(),
        "unserved_output_tokens": pl.Float64(),
        "peak_demand_output_tokens_per_s": pl.Float64(),
        "slo_attainment": pl.Float64(),
        "min_tokens_per_s_per_user": pl.Float64(),
        "max_ttft_ms": pl.Float64(),
        "revenue_usd": pl.Float64(),
        "cost_usd": pl.Float64(),
        "margin_usd": pl.Float64(),
    }
)

DEMAND_SCHEMA = pl.Schema(
    {
        "week_start": pl.Date(),
        "period": pl.Int32(),
        "period_start": pl.Datetime("us"),
        "hour_of_week": pl.Int16(),
        "family": pl.String(),
        "tier": pl.String(),
        "price_multiplier": pl.Float64(),
        "demand_requests": pl.Float64(),
        "demand_output_tokens": pl.Float64(),
        "served_output_tokens": pl.Float64(),
        "unserved_output_tokens": pl.Float64(),
        "revenue_usd": pl.Float64(),
    }
)

SCHEMAS: dict[str, pl.Schema] = {
    "assignments": ASSIGNMENTS_SCHEMA,
    "pools": POOLS_SCHEMA,
    "products": PRODUCTS_SCHEMA,
    "demand": DEMAND_SCHEMA,
}
"""Frame name -> schema; the names are the report's dataset (folder) names."""


class _Clock:
    """Period index -> calendar figures."""

    def __init__(self, plan: Plan, start: date) -> None:
        self.start = datetime(start.year, start.month, start.day)
        self.period_hours = float(plan.period_hours)
        self.seconds = self.period_hours * SECONDS_PER_HOUR

    def hour(self, period: int) -> float:
        return period * self.period_hours

    def week_start(self, period: int) -> date:
        week = int(self.hour(period) // HOURS_PER_WEEK)
        return (self.start + timedelta(days=7 * week)).date()

    def period_start(self, period: int) -> datetime:
        return self.start + timedelta(hours=self.hour(period))

    def hour_of_week(self, period: int) -> int:
        return int(self.hour(period) % HOURS_PER_WEEK)


def report_frames(plan: Plan, *, start: date | None = None) -> dict[str, pl.DataFrame]:
    """The report's frames (``SCHEMAS`` order), built from ``plan`` alone.

    ``start`` is the horizon's first day (default ``DEFAULT_START``). A plan without a solution
    (infeasible, no solution) gives frames with their schemas and no rows.
    """
    clock = _Clock(plan, start or DEFAULT_START)
    assignments = _assignments(plan, clock)
    return {
        "assignments": assignments,
        "pools": _pools(plan, clock, assignments),
        "products": _products(plan, clock, assignments),
        "demand": _demand(plan, clock),
    }


def _usd_per_output_token(plan: Plan) -> dict[tuple[str, str, int], float]:
    """Revenue per served output token of each (family, tier, period) with service."""
    return {
        (f.family, f.tier, f.period): f.revenue_usd / (f.served_tokens_per_s * _secs(plan))
        for f in plan.flows
        if f.served_tokens_per_s > 0
    }


def _secs(plan: Plan) -> float:
    return float(plan.period_hours) * SECONDS_PER_HOUR


def _assignments(plan: Plan, clock: _Clock) -> pl.DataFrame:
    rate = _usd_per_output_token(plan)
    cols: dict[str, list[object]] = {name: [] for name in ASSIGNMENTS_SCHEMA}

    def time(period: int) -> None:
        cols["week_start"].append(clock.week_start(period))
        cols["period"].append(period)
        cols["period_start"].append(clock.period_start(period))
        cols["hour_of_week"].append(clock.hour_of_week(period))
        cols["period_hours"].append(clock.period_hours)

    for a in plan.assignments:
        served = a.served_tokens_per_s * clock.seconds
        time(a.period)
        row: dict[str, object] = {
            "pool": a.pool,
            "family": a.family,
            "tier": a.tier,
            "variant": a.variant,
            "layout": f"tp{a.tp}-pp{a.pp}-dp{a.dp}-ep{a.ep}",
            "tp": a.tp,
            "pp": a.pp,
            "dp": a.dp,
            "ep": a.ep,
            "precision": a.precision,
            "kv_precision": a.kv_precision,
            "batch_cap": a.batch_cap,
            "spec_draft_tokens": a.spec_draft_tokens,
            "engine": a.engine,
            "replicas": a.replicas,
            "systems": a.systems,
            "devices": a.replicas * a.tp * a.pp * a.dp,
            "tokens_per_s_per_user": a.tokens_per_s_per_user,
            "ttft_ms": a.ttft_ms,
            "utilization": a.utilization,
            "capacity_output_tokens": a.capacity_tokens_per_s * clock.seconds,
            "demand_output_tokens": served,
            "served_output_tokens": served,
            "unserved_output_tokens": 0.0,
            "revenue_usd": served * rate.get((a.family, a.tier, a.period), 0.0),
            "cost_usd": a.cost_usd,
        }
        for name, value in row.items():
            cols[name].append(value)
    for f in plan.flows:
        if f.unserved_tokens_per_s <= 0:
            continue
        unserved = f.unserved_tokens_per_s * clock.seconds
        time(f.period)
        row = dict.fromkeys(ASSIGNMENTS_SCHEMA.names()[5:])
        row.update(
            family=f.family,
            tier=f.tier,
            replicas=0,
            systems=0,
            devices=0,
            capacity_output_tokens=0.0,
            demand_output_tokens=unserved,
            served_output_tokens=0.0,
            unserved_output_tokens=unserved,
            revenue_usd=0.0,
            cost_usd=0.0,
        )
        for name, value in row.items():
            cols[name].append(value)
    frame = pl.DataFrame(cols, schema=ASSIGNMENTS_SCHEMA)
    return frame.sort(["period", "family", "tier", "pool"], nulls_last=True)


def _frame_of(
    items: Sequence[object], columns: dict[str, tuple[str, type[pl.DataType]]]
) -> pl.DataFrame:
    """A frame of plan records: column name -> (record attribute, dtype)."""
    return pl.DataFrame(
        {name: [getattr(i, attr) for i in items] for name, (attr, _) in columns.items()},
        schema={name: dtype for name, (_, dtype) in columns.items()},
    )


def _pools(plan: Plan, clock: _Clock, assignments: pl.DataFrame) -> pl.DataFrame:
    usage = _frame_of(
        plan.pool_usage,
        {
            "period": ("period", pl.Int32),
            "pool": ("pool", pl.String),
            "systems_available": ("systems_available", pl.Int64),
            "systems_used": ("systems_used", pl.Int64),
            "cost_usd": ("cost_usd", pl.Float64),
        },
    )
    served = (
        assignments.filter(pl.col("pool").is_not_null())
        .group_by("period", "pool")
        .agg(pl.col("served_output_tokens").sum(), pl.col("revenue_usd").sum())
    )
    hours = clock.period_hours
    day_of = [int(clock.hour(p) // 24) for p in range(plan.periods)]
    days = pl.DataFrame(
        {
            "period": list(range(plan.periods)),
            "day": day_of,
            "week_start": [clock.week_start(p) for p in range(plan.periods)],
            "date": [(clock.start + timedelta(days=d)).date() for d in day_of],
            "day_of_week": [d % 7 for d in day_of],
        },
        schema={
            "period": pl.Int32,
            "day": pl.Int32,
            "week_start": pl.Date,
            "date": pl.Date,
            "day_of_week": pl.Int8,
        },
    )
    joined = usage.join(days, on="period", how="left").join(
        served, on=["period", "pool"], how="left"
    )
    out = (
        joined.group_by("week_start", "date", "day_of_week", "pool")
        .agg(
            (pl.len() * hours).cast(pl.Float64).alias("hours"),
            pl.col("systems_available").min().alias("min_systems_available"),
            pl.col("systems_used").max().alias("peak_systems_used"),
            (pl.col("systems_available").sum() * hours)
            .cast(pl.Float64)
            .alias("available_system_hours"),
            (pl.col("systems_used").sum() * hours).cast(pl.Float64).alias("used_system_hours"),
            pl.col("served_output_tokens").fill_null(0.0).sum(),
            pl.col("revenue_usd").fill_null(0.0).sum(),
            pl.col("cost_usd").sum(),
        )
        .with_columns(
            (pl.col("available_system_hours") - pl.col("used_system_hours")).alias(
                "idle_system_hours"
            ),
        )
        .with_columns(
            (pl.col("idle_system_hours") / pl.col("hours")).alias("mean_idle_systems"),
            pl.when(pl.col("available_system_hours") > 0)
            .then(pl.col("used_system_hours") / pl.col("available_system_hours"))
            .otherwise(0.0)
            .alias("utilization"),
            (pl.col("revenue_usd") - pl.col("cost_usd")).alias("margin_usd"),
        )
    )
    return out.select([pl.col(n).cast(t) for n, t in POOLS_SCHEMA.items()]).sort("date", "pool")


def _demand(plan: Plan, clock: _Clock) -> pl.DataFrame:
    multiplier = {(p.family, p.tier): p.multiplier for p in plan.prices}
    s = clock.seconds
    flows = plan.flows
    return pl.DataFrame(
        {
            "week_start": [clock.week_start(f.period) for f in flows],
            "period": [f.period for f in flows],
            "period_start": [clock.period_start(f.period) for f in flows],
            "hour_of_week": [clock.hour_of_week(f.period) for f in flows],
            "family": [f.family for f in flows],
            "tier": [f.tier for f in flows],
            "price_multiplier": [multiplier.get((f.family, f.tier)) for f in flows],
            "demand_requests": [f.demand_requests_per_s * s for f in flows],
            "demand_output_tokens": [f.demand_tokens_per_s * s for f in flows],
            "served_output_tokens": [f.served_tokens_per_s * s for f in flows],
            "unserved_output_tokens": [f.unserved_tokens_per_s * s for f in flows],
            "revenue_usd": [f.revenue_usd for f in flows],
        },
        schema=DEMAND_SCHEMA,
    ).sort("period", "family", "tier")


def _products(plan: Plan, clock: _Clock, assignments: pl.DataFrame) -> pl.DataFrame:
    demand = _demand(plan, clock)
    weekly = demand.group_by("week_start", "family", "tier").agg(
        pl.col("demand_requests").sum(),
        pl.col("demand_output_tokens").sum(),
        pl.col("served_output_tokens").sum(),
        pl.col("unserved_output_tokens").sum(),
        (pl.col("demand_output_tokens").max() / clock.seconds).alias(
            "peak_demand_output_tokens_per_s"
        ),
        pl.col("revenue_usd").sum(),
    )
    serving = (
        assignments.filter(pl.col("pool").is_not_null())
        .group_by("week_start", "family", "tier")
        .agg(
            pl.col("tokens_per_s_per_user").min().alias("min_tokens_per_s_per_user"),
            pl.col("ttft_ms").max().alias("max_ttft_ms"),
            pl.col("cost_usd").sum(),
        )
    )
    # Tokens served by assignments whose reported TTFT misses the tier's SLO: the same test as
    # the plan's warnings (``planner.plan.schema.meets_ttft_slo``).
    late = (
        pl.DataFrame(
            {
                "week_start": [clock.week_start(a.period) for a in plan.assignments],
                "family": [a.family for a in plan.assignments],
                "tier": [a.tier for a in plan.assignments],
                "late_output_tokens": [
                    0.0 if meets_ttft_slo(a) else a.served_tokens_per_s * clock.seconds
                    for a in plan.assignments
                ],
            },
            schema={
                "week_start": pl.Date,
                "family": pl.String,
                "tier": pl.String,
                "late_output_tokens": pl.Float64,
            },
        )
        .group_by("week_start", "family", "tier")
        .agg(pl.col("late_output_tokens").sum())
    )
    prices = _frame_of(
        plan.prices,
        {
            "family": ("family", pl.String),
            "tier": ("tier", pl.String),
            "variant": ("variant", pl.String),
            "price_multiplier": ("multiplier", pl.Float64),
            "reference_multiplier": ("reference_multiplier", pl.Float64),
            "usd_per_m_input_tokens": ("usd_per_m_input_tokens", pl.Float64),
            "usd_per_m_output_tokens": ("usd_per_m_output_tokens", pl.Float64),
        },
    )
    out = (
        weekly.join(prices, on=["family", "tier"], how="left")
        .join(serving, on=["week_start", "family", "tier"], how="left")
        .join(late, on=["week_start", "family", "tier"], how="left")
        .with_columns(
            pl.col("cost_usd").fill_null(0.0),
            pl.when(pl.col("demand_output_tokens") > 0)
            .then(
                (pl.col("served_output_tokens") - pl.col("late_output_tokens").fill_null(0.0))
                / pl.col("demand_output_tokens")
            )
            .otherwise(None)
            .alias("slo_attainment"),
        )
        .with_columns((pl.col("revenue_usd") - pl.col("cost_usd")).alias("margin_usd"))
    )
    return out.select([pl.col(n).cast(t) for n, t in PRODUCTS_SCHEMA.items()]).sort(
        "week_start", "family", "tier"
    )
