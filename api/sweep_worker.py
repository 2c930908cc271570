"""What runs inside a sweep's worker process: decode the request, run the sweep, send back.

``api.sweeps`` starts one process per sweep from the forkserver the plan runner uses (the
planner already imported) and reads one message from the pipe::

    ("progress", phase, done, total)            as points and samples finish
    ("done", result_json, {file_name: bytes})   tables as Parquet, charts as PNG
    ("failed", reason)

The points run one after another in this process (``planner.sweep.backends.SerialBackend``),
each under its own time limit; the address space is capped like a solve's
(``run_limited``), and the parent kills the process at the sweep's deadline.
"""

from __future__ import annotations

import io
import re
import resource
import tempfile
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from api.worker import die_with_parent
from fleet.errors import InputError

if TYPE_CHECKING:
    from planner.scenario.schema import Scenario
    from planner.sweep.grid import Point, Spec
    from planner.sweep.run import MonteCarlo

_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]*)`$")
_AT = re.compile(r"^(?P<what>.*?) - at `(?P<path>\$[^`]*)`$", re.DOTALL)


class SweepRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /v1/sweeps``: a scenario and what to sweep (the CLI's flags, as fields)."""

    scenario: msgspec.Raw
    """A scenario, the same schema as ``POST /v1/plans``."""
    set: tuple[str, ...] = ()
    """``PATH=VALUES`` per swept field, the grammar of ``farebox sweep --set``."""
    samples: int = 0
    """Monte Carlo samples per point (0 = none)."""
    demand_cv: float = 0.2
    demand_error: str = "family"
    """"family" (one multiplier per family for the horizon) or "family-hour"."""
    seed: int = 0
    time_limit_s: float | None = None
    """Solver time limit per point; default: the scenario's."""


def run_limited(
    memory_bytes: int, conn: Connection, request: bytes, max_points: int, max_evaluations: int
) -> None:
    """``run`` with the address space capped at ``memory_bytes`` (as a solve's is)."""
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        memory_bytes = min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    run(conn, request, max_points, max_evaluations)


def run(conn: Connection, request: bytes, max_points: int, max_evaluations: int) -> None:
    """Entry point of the worker process: one sweep, then exit."""
    die_with_parent()
    try:
        outcome: tuple[object, ...] = _run(conn, request, max_points, max_evaluations)
    except BrokenPipeError:
        return
    except InputError as err:
        outcome = ("failed", str(err))
    except MemoryError:
        outcome = ("failed", "$: this sweep needs more memory than a worker may use")
    except Exception as err:  # a bug: report it on the sweep instead of dying silently
        last = traceback.extract_tb(err.__traceback__)[-1]
        outcome = (
            "failed",
            f"internal error: {type(err).__name__}: {err} ({Path(last.filename).name}:"
            f"{last.lineno})",
        )
    try:
        conn.send(outcome)
    except BrokenPipeError:
        return
    finally:
        conn.close()


def _run(
    conn: Connection, request: bytes, max_points: int, max_evaluations: int
) -> tuple[str, bytes, dict[str, bytes]]:
    from planner.sweep.backends import SerialBackend
    from planner.sweep.charts import write_charts
    from planner.sweep.frames import sweep_frames
    from planner.sweep.run import run_sweep

    scenario, specs, mc, points, time_limit_s = prepare_request(
        request, max_points=max_points, max_evaluations=max_evaluations
    )

    def progress(phase: str, done: int, total: int) -> None:
        conn.send(("progress", phase, done, total))

    result = run_sweep(
        scenario, points, specs, mc, SerialBackend(), time_limit_s=time_limit_s, progress=progress
    )
    frames = sweep_frames(result)
    files: dict[str, bytes] = {}
    for name, frame in frames.items():
        buffer = io.BytesIO()
        frame.write_parquet(buffer, compression="zstd", statistics=True)
        files[f"{name}.parquet"] = buffer.getvalue()
    with tempfile.TemporaryDirectory(prefix="farebox-sweep-") as tmp:
        for path in write_charts(result, frames, Path(tmp)):
            files[path.name] = path.read_bytes()
    body = {
        "scenario": result.scenario,
        "wall_s": result.wall_s,
        "points": frames["points"].to_dicts(),
        "prices": frames["prices"].to_dicts(),
        "pools": frames["pools"].to_dicts(),
        "files": sorted(files),
    }
    return ("done", msgspec.json.encode(body), files)


_FLAGS = (
    ("--set ", "$.set: "),
    ("--samples:", "$.samples:"),
    ("--demand-cv:", "$.demand_cv:"),
    ("--demand-error:", "$.demand_error:"),
    ("--seed:", "$.seed:"),
    ("--time-limit:", "$.time_limit_s:"),
)


def api_error(err: InputError) -> InputError:
    """A sweep error in the request body's words: ``--samples: ...`` -> ``$.samples: ...``."""
    text = str(err)
    for flag, field in _FLAGS:
        if text.startswith(flag):
            return InputError(field + text[len(flag) :])
    return err


class Prepared(NamedTuple):
    scenario: Scenario
    specs: tuple[Spec, ...]
    monte_carlo: MonteCarlo
    points: tuple[Point, ...]
    time_limit_s: float | None


def prepare_request(request: bytes, *, max_points: int, max_evaluations: int) -> Prepared:
    """Decode and check a sweep request whole (the scenario, every point, the Monte Carlo
    settings): (scenario, specs, monte carlo, points, time limit). Errors name the field."""
    from planner.scenario.decode import decode_scenario
    from planner.sweep.grid import parse_specs
    from planner.sweep.run import MonteCarlo, SweepLimits, prepare

    try:
        req = msgspec.json.decode(request, type=SweepRequest)
    except msgspec.ValidationError as err:
        m = _AT.match(str(err))
        what, path = (m.group("what"), m.group("path")) if m else (str(err), "$")
        if u := _UNKNOWN.match(what):
            raise InputError(f"{path}.{u.group('field')}: unknown field") from None
        raise InputError(f"{path}: {what[0].lower()}{what[1:]}") from None
    except msgspec.DecodeError as err:
        raise InputError(f"$: not valid JSON: {err}") from None
    try:
        scenario = decode_scenario(bytes(req.scenario), "json")
    except InputError as err:
        text = str(err)
        raise InputError("$.scenario" + text[1:] if text.startswith("$") else text) from None
    limits = SweepLimits(max_points=max_points, max_evaluations=max_evaluations)
    mc = MonteCarlo(
        samples=req.samples,
        demand_cv=req.demand_cv,
        scope=req.demand_error,  # type: ignore[arg-type]  # checked by prepare
        seed=req.seed,
    )
    try:
        specs = parse_specs(req.set, max_points=max_points)
        points = prepare(scenario, specs, mc, limits, req.time_limit_s)
    except InputError as err:
        raise api_error(err) from None
    return Prepared(scenario, specs, mc, points, req.time_limit_s)
