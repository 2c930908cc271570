"""What runs inside a solver worker process: decode the stored request, plan it, send back.

``api.jobs`` starts one process per plan (from a forkserver that has already imported the
planner, so a start costs milliseconds) and talks to it over a pipe. The child sends
``WorkerMessage``s (a msgspec tagged union, msgpack on the pipe): ``ProgressMessage`` at most
every PROGRESS_EVERY_S seconds, then one ``DoneMessage`` or ``FailedMessage``, and exits. It
never touches the database: results are written by the runner that holds the plan's lease, so a
killed or orphaned child can never write a stale result. On Linux the child
asks the kernel to kill it when its parent (the forkserver) dies, so a kill -9 of the server
leaves no solver burning a core.

Bounds: ``limited`` caps the child's address space (RLIMIT_AS, ``FAREBOX_SOLVER_MEMORY_MB``)
before the target runs, so a scenario that needs more fails with a reason instead of taking the
machine's memory. The plan's time limit covers decoding and building the tables as well as the
solve: a timer (SIGALRM) stops a build that runs past it, and the solver gets what is left.
"""

from __future__ import annotations

import ctypes
import dataclasses
import io
import os
import resource
import signal
import sys
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import msgspec
import numpy as np

from api.store_records import FailureKind
from fleet.catalog.load import load_catalog
from fleet.errors import InputError
from planner.plan.schema import Plan
from planner.report.frames import report_frames
from planner.run import decode_scenario, plan_scenario
from planner.solve import solve as planner_solve
from planner.solve.solution import Progress, ProgressCallback, SolveOptions, SolveResult
from planner.solve.tables import PlanningTables


class ProgressMessage(msgspec.Struct, frozen=True, tag="progress"):
    """How far the solve is: a ``planner.solve.solution.Progress`` as JSON text, stored as it is."""

    progress_json: str


class DoneMessage(msgspec.Struct, frozen=True, tag="done"):
    """The plan (JSON) and its report tables (Parquet files, by table name)."""

    plan_json: bytes
    tables: dict[str, bytes]


class FailedMessage(msgspec.Struct, frozen=True, tag="failed"):
    """No plan: why, and whose fault (``FailureKind``)."""

    kind: FailureKind
    reason: str


WorkerMessage = ProgressMessage | DoneMessage | FailedMessage
_MESSAGE_ENCODER = msgspec.msgpack.Encoder()
_MESSAGE_DECODER = msgspec.msgpack.Decoder(WorkerMessage)


def send(conn: Connection, message: WorkerMessage) -> None:
    """Send one message to the other end of the pipe."""
    conn.send_bytes(_MESSAGE_ENCODER.encode(message))


def receive(conn: Connection) -> WorkerMessage:
    """The next message from the pipe (EOFError once the other end is closed)."""
    return _MESSAGE_DECODER.decode(conn.recv_bytes())


PROGRESS_EVERY_S = 0.5
MIB = 1024 * 1024
PRELOAD = ("api.worker", "planner.solve")
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


class OutOfTime(BaseException):
    """The plan's time limit passed before the solve started (a BaseException, so that no
    ``except Exception`` on the way swallows it)."""


def _out_of_time(signum: int, frame: object) -> None:
    raise OutOfTime


def limited(
    target: Callable[[Connection, bytes, float, str | None], None],
    memory_bytes: int,
    conn: Connection,
    request: bytes,
    time_limit_s: float,
    catalog_dir: str | None,
) -> None:
    """Run ``target`` (``solve``) in this process with its address space capped at
    ``memory_bytes``: the entry point ``api.jobs`` starts."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:  # never above what the server itself may have
        memory_bytes = min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    target(conn, request, time_limit_s, catalog_dir)


def solve(conn: Connection, request: bytes, time_limit_s: float, catalog_dir: str | None) -> None:
    """Entry point of the worker process: one plan, then exit."""
    die_with_parent()
    started = time.monotonic()
    try:
        outcome: DoneMessage | FailedMessage = _solve(conn, request, time_limit_s, catalog_dir)
    except BrokenPipeError:  # the runner is gone (stopping): nobody to tell
        return
    except OutOfTime:
        outcome = FailedMessage(
            FailureKind.TIMEOUT,
            f"the plan's time limit of {time_limit_s:g} s ran out after "
            f"{time.monotonic() - started:.1f} s, while building the planning tables, before "
            "the solve could start; give a longer time limit or plan a smaller scenario",
        )
    except MemoryError:
        outcome = FailedMessage(FailureKind.INPUT, _memory_reason())
    except InputError as err:
        outcome = FailedMessage(FailureKind.INPUT, str(err))
    except Exception as err:  # a bug: report it on the plan instead of dying silently
        last = traceback.extract_tb(err.__traceback__)[-1]
        outcome = FailedMessage(
            FailureKind.ERROR,
            f"internal error: {type(err).__name__}: {err} "
            f"({Path(last.filename).name}:{last.lineno})",
        )
    try:
        send(conn, outcome)
    except BrokenPipeError:
        return
    finally:
        conn.close()


def _memory_reason() -> str:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    cap = "its memory limit" if soft == resource.RLIM_INFINITY else f"{soft // MIB} MiB"
    return (
        f"$: planning this scenario needs more memory than a solve may use on this server "
        f"({cap}, FAREBOX_SOLVER_MEMORY_MB); search fewer precisions, batch caps or speculative "
        "options, or plan fewer pools, variants or hours"
    )


def _solve(
    conn: Connection, request: bytes, time_limit_s: float, catalog_dir: str | None
) -> DoneMessage:
    deadline = time.monotonic() + time_limit_s
    signal.signal(signal.SIGALRM, _out_of_time)
    signal.setitimer(signal.ITIMER_REAL, time_limit_s)
    try:
        return _plan(conn, request, deadline, catalog_dir)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _plan(
    conn: Connection, request: bytes, deadline: float, catalog_dir: str | None
) -> DoneMessage:
    scenario = decode_scenario(request, format="json")
    catalog = load_catalog(Path(catalog_dir) if catalog_dir else None)
    last_sent = 0.0

    def progress(update: Progress) -> None:
        nonlocal last_sent
        now = time.monotonic()
        if now - last_sent >= PROGRESS_EVERY_S:
            last_sent = now
            send(conn, ProgressMessage(_ENCODER.encode(update).decode()))

    def solve_in_time_left(
        tables: PlanningTables, options: SolveOptions, report: ProgressCallback | None
    ) -> SolveResult:
        signal.setitimer(signal.ITIMER_REAL, 0)  # the build is done: the solver keeps its limit
        left = deadline - time.monotonic()
        if left <= 0:
            raise OutOfTime
        return planner_solve(tables, dataclasses.replace(options, time_limit_s=left), report)

    plan = plan_scenario(scenario, catalog, progress=progress, solver=solve_in_time_left)
    return DoneMessage(_ENCODER.encode(plan), report_tables(plan))


def _numpy_scalar(value: object) -> object:
    """numpy scalars that reach the wire (float64 objectives, int64 counts) as Python numbers."""
    if isinstance(value, np.generic):
        return value.item()
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


_ENCODER = msgspec.json.Encoder(enc_hook=_numpy_scalar)


def report_tables(plan: Plan) -> dict[str, bytes]:
    """The plan's report frames (``planner.report.frames``) as Parquet files, by table name.

    One file per table for the whole horizon; ``week_start`` stays a column (the CLI's report
    writes it as hive partitions instead)."""
    out: dict[str, bytes] = {}
    for name, frame in report_frames(plan).items():
        buffer = io.BytesIO()
        frame.write_parquet(buffer, compression="zstd", statistics=True)
        out[name] = buffer.getvalue()
    return out
