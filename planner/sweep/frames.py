"""A sweep's results as polars frames, written as Parquet and CSV.

- ``points``: one row per grid point: ``point``, one column per swept path (the value as the
  grammar writes it), status, gap, money (USD over the horizon; null without a plan), served
  fraction, solve time;
  with Monte Carlo samples also the p5/p50/p95 of margin, SLO-miss hours and unserved fraction
  and their values at the forecast demand (``*_forecast``).
- ``prices``: one row per (point, family, tier): the chosen variant and multiplier, $/M output.
- ``pools``: one row per (point, pool): most systems available, peak used, mean utilization,
  running cost.
- ``samples`` (with Monte Carlo): one row per (point, sample): margin, SLO-miss hours, unserved
  fraction, so any other statistic can be computed from the files.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from planner.sweep.grid import format_value
from planner.sweep.montecarlo import PERCENTILES
from planner.sweep.run import SweepResult

PLANNED = ("optimal", "feasible")
"""Statuses of a point with a plan; the money of any other point is null."""
SAMPLE_COLUMNS = ("margin_usd", "slo_miss_hours", "unserved_fraction")


def _p(q: float) -> str:
    return f"p{q:g}"


def points_frame(result: SweepResult) -> pl.DataFrame:
    rows = []
    for o in result.outcomes:
        s = o.summary
        row: dict[str, object] = {"point": o.point.index}
        for spec, value in zip(result.specs, o.point.values, strict=True):
            row[spec.path] = format_value(value)
        planned = s.status in PLANNED
        row.update(
            status=s.status,
            gap=s.gap,
            margin_usd=s.margin_usd if planned else None,
            margin_fraction=(s.margin_usd / s.revenue_usd if s.revenue_usd > 0 else 0.0)
            if planned
            else None,
            revenue_usd=s.revenue_usd if planned else None,
            cost_usd=s.cost_usd if planned else None,
            penalty_usd=s.penalty_usd if planned else None,
            served_fraction=s.served_fraction if planned else None,
            solve_s=s.solve_s,
        )
        if result.monte_carlo.samples:
            for c, name in enumerate(SAMPLE_COLUMNS):
                qs = o.percentiles(c)
                for q, v in zip(PERCENTILES, qs or (None,) * len(PERCENTILES), strict=True):
                    row[f"{name}_{_p(q)}"] = v
                row[f"{name}_forecast"] = (
                    None if o.forecast is None else float(getattr(o.forecast, name))
                )
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None)


def prices_frame(result: SweepResult) -> pl.DataFrame:
    rows = [
        {
            "point": o.point.index,
            "family": p.family,
            "tier": p.tier,
            "variant": p.variant,
            "multiplier": p.multiplier,
            "usd_per_m_output_tokens": p.usd_per_m_output_tokens,
        }
        for o in result.outcomes
        for p in o.summary.prices
    ]
    schema = {
        "point": pl.Int64,
        "family": pl.String,
        "tier": pl.String,
        "variant": pl.String,
        "multiplier": pl.Float64,
        "usd_per_m_output_tokens": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def pools_frame(result: SweepResult) -> pl.DataFrame:
    rows = [
        {
            "point": o.point.index,
            "pool": p.pool,
            "systems_max": p.systems_max,
            "systems_used_peak": p.systems_used_peak,
            "utilization_mean": p.utilization_mean,
            "cost_usd": p.cost_usd,
        }
        for o in result.outcomes
        for p in o.summary.pools
    ]
    schema = {
        "point": pl.Int64,
        "pool": pl.String,
        "systems_max": pl.Int64,
        "systems_used_peak": pl.Int64,
        "utilization_mean": pl.Float64,
        "cost_usd": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def samples_frame(result: SweepResult) -> pl.DataFrame:
    frames = [
        pl.DataFrame(
            {
                "point": [o.point.index] * len(o.samples),
                "sample": list(range(len(o.samples))),
                **{name: o.samples[:, c] for c, name in enumerate(SAMPLE_COLUMNS)},
            },
            schema={
                "point": pl.Int64,
                "sample": pl.Int64,
                **dict.fromkeys(SAMPLE_COLUMNS, pl.Float64),
            },
        )
        for o in result.outcomes
        if o.samples is not None
    ]
    if not frames:
        return pl.DataFrame(
            schema={
                "point": pl.Int64,
                "sample": pl.Int64,
                **dict.fromkeys(SAMPLE_COLUMNS, pl.Float64),
            }
        )
    return pl.concat(frames)


def sweep_frames(result: SweepResult) -> dict[str, pl.DataFrame]:
    frames = {
        "points": points_frame(result),
        "prices": prices_frame(result),
        "pools": pools_frame(result),
    }
    if result.monte_carlo.samples:
        frames["samples"] = samples_frame(result)
    return frames


def write_frames(frames: dict[str, pl.DataFrame], out_dir: Path) -> list[Path]:
    """Each frame as ``NAME.parquet`` (zstd) and ``NAME.csv`` under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in frames.items():
        parquet = out_dir / f"{name}.parquet"
        frame.write_parquet(parquet, compression="zstd", statistics=True)
        csv = out_dir / f"{name}.csv"
        frame.write_csv(csv)
        written += [parquet, csv]
    return written
