"""Write the report's frames as hive-partitioned Parquet and read them back.

Layout under ``out_dir`` (one folder per frame, one partition per week of the horizon)::

    assignments/week_start=2026-01-05/assignments.parquet
    pools/week_start=2026-01-05/pools.parquet
    products/week_start=2026-01-05/products.parquet
    demand/week_start=2026-01-05/demand.parquet

``week_start`` lives in the folder name (hive style), not in the files, so every reader restores it
from the path: polars ``pl.scan_parquet(dir, hive_partitioning=True)``, DuckDB
``read_parquet('dir/*/*.parquet', hive_partitioning = true)``, pandas/pyarrow datasets.
``read_report`` reads them back with the frames' schemas (the partition column as a Date).
A frame without rows (an infeasible plan) is written as one file in ``week_start=<start>`` so the
schema is still there to read.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import polars as pl

from planner.plan.schema import Plan
from planner.report.frames import DEFAULT_START, SCHEMAS, report_frames

PARTITION = "week_start"


def write_frames(
    frames: dict[str, pl.DataFrame], out_dir: Path, *, start: date | None = None
) -> list[Path]:
    """Write each frame under ``out_dir/<name>/week_start=<date>/<name>.parquet``.

    Existing partition files of these frames are replaced, so rewriting a report into the same
    folder leaves no stale weeks behind. Returns the files written, in frame order.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, frame in frames.items():
        root = out_dir / name
        for old in root.glob(f"{PARTITION}=*/{name}.parquet"):
            old.unlink()
        weeks = frame.get_column(PARTITION).unique().sort().to_list()
        for week in weeks or [start or DEFAULT_START]:
            part = frame.filter(pl.col(PARTITION) == week).drop(PARTITION)
            folder = root / f"{PARTITION}={week.isoformat()}"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{name}.parquet"
            part.write_parquet(path, compression="zstd", statistics=True)
            written.append(path)
    return written


def write_report(plan: Plan, out_dir: Path, *, start: date | None = None) -> list[Path]:
    """``report_frames(plan)`` written as Parquet under ``out_dir``; the files written."""
    return write_frames(report_frames(plan, start=start), Path(out_dir), start=start)


def read_report(out_dir: Path) -> dict[str, pl.DataFrame]:
    """The frames as written under ``out_dir``, with their schemas and column order."""
    out: dict[str, pl.DataFrame] = {}
    for name, schema in SCHEMAS.items():
        root = Path(out_dir) / name
        if not root.is_dir():
            continue
        frame = pl.scan_parquet(
            root / "**" / "*.parquet",
            hive_partitioning=True,
            hive_schema={PARTITION: pl.Date},
        ).collect()
        out[name] = frame.select(schema.names())
    return out
