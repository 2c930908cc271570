"""The weekly capacity report: Plan -> polars frames -> hive-partitioned Parquet, plus charts.

``report_frames(plan)`` and ``write_report(plan, out_dir)`` are what the CLI (``farebox report``)
and the REST API call; ``read_report(out_dir)`` reads the files back with their schemas. The data
dictionary is docs/report.md. Charts (``planner.report.charts``) import matplotlib, so they are
imported only by whoever draws them.
"""

from planner.report.frames import DEFAULT_START, SCHEMAS, report_frames
from planner.report.write import read_report, write_frames, write_report

__all__ = [
    "DEFAULT_START",
    "SCHEMAS",
    "read_report",
    "report_frames",
    "write_frames",
    "write_report",
]
