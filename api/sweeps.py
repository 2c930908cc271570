"""Sweeps over HTTP: a bounded queue of sweeps, each run in a worker process of its own.

``SweepService.submit`` checks the whole request on the bounded ``api.compute.Compute`` threads
(never on the event loop) before anything is queued, so a bad request is a 422 naming the field
and nothing runs. First what the grid's shape tells, before any point is built: the scenario,
the specs and their paths, the point count, the Monte Carlo settings, points x request bytes
against ``sweep_max_expanded_bytes``, each point's time limit and the sweep's worst-case
duration against ``sweep_max_s``. Then every point is built, checked (catalog, horizon, the
server's workload limits) and dropped, one at a time, so validating holds about one point
however large the grid; the worker builds the points again from the request it is handed.
A good one waits in a queue of at most ``sweep_queue_max`` sweeps (one more is a 503);
``sweep_workers`` dispatcher tasks each run one sweep at a time in a process from the plan
runner's forkserver (``api.sweep_worker``), with the address space of a solve and killed at the
sweep's deadline: every point's time limit plus the grace, one after another.

Sweeps live in this process's memory, not in the database: a sweep is a batch of what-if
questions whose answer is minutes away and cheap to ask again, so a restart forgets them (the
plans API keeps plans durably). The ``sweeps_kept`` most recent finished sweeps are kept with
their tables and charts; older ones are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import multiprocessing
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import msgspec

from api import sweep_worker
from api.compute import Compute
from api.errors import NotFound, QueueFull
from api.settings import Settings
from api.worker import MIB
from fleet.catalog.load import Catalog
from fleet.errors import InputError

if TYPE_CHECKING:
    from planner.scenario.schema import Scenario
    from planner.sweep.grid import Spec, Value

TIME_LIMIT_FIELD = "$.options.time_limit_s"
"""The scenario's field a spec sweeps to vary each point's time limit."""


class SweepStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = (SweepStatus.DONE, SweepStatus.FAILED, SweepStatus.CANCELLED)


class SweepProgress(msgspec.Struct, frozen=True, kw_only=True):
    phase: str
    """"points" or "samples"."""
    done: int
    total: int


class SweepResource(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    id: str
    status: SweepStatus
    href: str
    points: int
    """Grid points (each one plan)."""
    samples: int
    deadline_s: float
    """Wall time after which the sweep is stopped (each point's limit plus a grace)."""
    progress: SweepProgress | None = None
    reason: str | None = None
    """Why it failed or was cancelled."""
    result: msgspec.Raw | None = None
    """When done: ``points``, ``prices`` and ``pools`` as row objects (the Parquet tables'
    columns), ``files`` (tables as Parquet, charts as PNG, at ``href/files/{name}``) and
    ``wall_s``."""


@dataclass(slots=True)
class _Sweep:
    id: str
    request: bytes
    points: int
    samples: int
    deadline_s: float
    status: SweepStatus = SweepStatus.QUEUED
    progress: SweepProgress | None = None
    reason: str | None = None
    result: bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)


def sweep_href(sweep_id: str) -> str:
    return f"/v1/sweeps/{sweep_id}"


class SweepService:
    def __init__(self, settings: Settings, catalog: Catalog) -> None:
        self.settings = settings
        self.catalog = catalog
        self._sweeps: OrderedDict[str, _Sweep] = OrderedDict()
        self._queue: asyncio.Queue[_Sweep] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._context = multiprocessing.get_context("forkserver")

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._queue = asyncio.Queue(maxsize=self.settings.sweep_queue_max)
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"farebox-sweeps-{i}")
            for i in range(self.settings.sweep_workers)
        ]

    async def stop(self) -> None:
        """Cancel the dispatcher tasks: a running sweep's process is killed (``_run``'s finally)
        and the sweep marked cancelled."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- requests -----------------------------------------------------------------------------

    def check_queue(self) -> None:
        if self._queue is None or self._queue.full():
            raise QueueFull(self.settings.sweep_queue_max, self.settings.retry_after_s, "sweep")

    async def submit(self, body: bytes, compute: Compute) -> SweepResource:
        """Check ``body`` on ``compute``'s bounded threads (the ones plans are checked on), then
        queue it."""
        self.check_queue()
        points, samples, deadline_s = await compute.run(self._validate, body)
        sweep = _Sweep(uuid.uuid4().hex[:16], body, points, samples, deadline_s)
        assert self._queue is not None
        try:
            self._queue.put_nowait(sweep)
        except asyncio.QueueFull:
            raise QueueFull(
                self.settings.sweep_queue_max, self.settings.retry_after_s, "sweep"
            ) from None
        self._sweeps[sweep.id] = sweep
        self._forget_old()
        return self.resource(sweep.id)

    def _validate(self, body: bytes) -> tuple[int, int, float]:
        """Everything ``prepare_request`` checks, plus the server's limits (a Compute thread):
        (points, samples, deadline). The limits the grid's shape decides are checked before any
        point is built; then each point is built, checked and dropped (``iter_points``)."""
        from planner.build.workload import check_workload, workload
        from planner.scenario.decode import check_catalog
        from planner.scenario.derived import horizon_hours
        from planner.scenario.schema import MAX_TIME_LIMIT_S
        from planner.sweep.grid import count_points, iter_points, parse_specs, spec_fields
        from planner.sweep.run import (
            GRACE_S,
            MonteCarlo,
            SweepLimits,
            check_monte_carlo,
            point_time_limit_s,
        )

        s = self.settings
        req, scenario = self._decode(body)
        mc = MonteCarlo(
            samples=req.samples,
            demand_cv=req.demand_cv,
            scope=req.demand_error,  # type: ignore[arg-type]  # checked by check_monte_carlo
            seed=req.seed,
        )
        limits = SweepLimits(max_points=s.sweep_max_points, max_evaluations=s.sweep_max_evaluations)
        try:
            if req.time_limit_s is not None and not 0 < req.time_limit_s <= MAX_TIME_LIMIT_S:
                raise InputError(f"--time-limit: must be > 0 and <= {MAX_TIME_LIMIT_S:g}")
            specs = parse_specs(req.set, max_points=s.sweep_max_points)
            count = count_points(specs, max_points=s.sweep_max_points)
            check_monte_carlo(mc, count, limits)
            fields = spec_fields(scenario, specs)
        except InputError as err:
            raise sweep_worker.api_error(err) from None
        # -- from the grid's shape, before any point is built
        expanded = count * len(body)
        if expanded > s.sweep_max_expanded_bytes:
            raise InputError(
                f"$.set: {count:,} points x {len(body):,} bytes of request = {expanded:,} bytes "
                f"once expanded, over this server's limit of {s.sweep_max_expanded_bytes:,} "
                "bytes per sweep; sweep fewer points or a smaller scenario"
            )
        shape_limits = _time_limits(scenario, specs, fields, req.time_limit_s)
        for values, limit in shape_limits:
            self._check_time_limit(limit, specs, fields, values, req.time_limit_s)
        self._check_duration(count, sum(limit + GRACE_S for _, limit in shape_limits))
        # -- each point built, checked and dropped: one point held at a time
        total = 0.0
        try:
            for point in iter_points(scenario, specs, max_points=s.sweep_max_points):
                where = f"$.set (point {point.index})" if specs else "$.scenario"
                try:
                    check_catalog(point.scenario, self.catalog)
                    if horizon_hours(point.scenario) > s.max_horizon_hours:
                        raise InputError(
                            f"$.demand: horizon over the server's limit of {s.max_horizon_hours} h"
                        )
                    check_workload(
                        point.scenario,
                        workload(point.scenario, self.catalog),
                        max_configurations=s.max_configurations,
                        max_checks=s.max_slo_checks,
                        max_screen_combinations=s.max_screen_combinations,
                    )
                except InputError as err:
                    raise InputError(f"{where}: {err}") from None
                limit = point_time_limit_s(point, req.time_limit_s)
                self._check_time_limit(limit, specs, fields, point.values, req.time_limit_s)
                total += limit + GRACE_S
                del point  # before the next one is built
        except InputError as err:  # a point that fails its decoder: ``--set PATH=VALUE: ...``
            raise sweep_worker.api_error(err) from None
        self._check_duration(count, total)  # as built: the same sum the shape gave
        return count, mc.samples, total + GRACE_S

    def _decode(self, body: bytes) -> tuple[sweep_worker.SweepRequest, Scenario]:
        """The request and its base scenario. On an error ``prepare_request`` words it by field:
        it decodes the same two things first, so it raises before it builds any point."""
        from planner.scenario.decode import decode_scenario

        try:
            req = msgspec.json.decode(body, type=sweep_worker.SweepRequest)
            return req, decode_scenario(bytes(req.scenario), "json")
        except (msgspec.DecodeError, InputError):
            sweep_worker.prepare_request(body, max_points=1, max_evaluations=0)
            raise  # not reached: prepare_request raised the same error, worded

    def _check_time_limit(
        self,
        limit_s: float,
        specs: tuple[Spec, ...],
        fields: tuple[str, ...],
        values: tuple[Value, ...],
        time_limit_s: float | None,
    ) -> None:
        """A point's time limit within the server's ``max_time_limit_s``, naming where it came
        from: the request's ``time_limit_s``, the spec that sweeps it, or the scenario."""
        from planner.sweep.grid import format_value

        most = self.settings.max_time_limit_s
        if limit_s <= most:
            return
        if time_limit_s is not None:
            where = "$.time_limit_s"
        elif TIME_LIMIT_FIELD in fields:
            k = fields.index(TIME_LIMIT_FIELD)
            where = f"$.set: {specs[k].path}={format_value(values[k])}"
        else:
            where = "$.scenario.options.time_limit_s"
        raise InputError(f"{where}: must be <= {most:g} on this server")

    def _check_duration(self, points: int, total_s: float) -> None:
        from planner.sweep.run import GRACE_S

        if total_s > self.settings.sweep_max_s:
            raise InputError(
                f"$.set: {points} points at their time limits (+{GRACE_S:g} s "
                f"each) may take {total_s:,.0f} s, over this server's limit of "
                f"{self.settings.sweep_max_s:,.0f} s per sweep; sweep fewer points or give a "
                "shorter time_limit_s"
            )

    def _forget_old(self) -> None:
        finished = [k for k, v in self._sweeps.items() if v.status in FINISHED]
        for key in finished[: max(0, len(finished) - self.settings.sweeps_kept)]:
            del self._sweeps[key]

    def _get(self, sweep_id: str) -> _Sweep:
        sweep = self._sweeps.get(sweep_id)
        if sweep is None:
            raise NotFound(f"no sweep {sweep_id!r} (sweeps are kept in memory)", field="id")
        return sweep

    def resource(self, sweep_id: str) -> SweepResource:
        sweep = self._get(sweep_id)
        return SweepResource(
            id=sweep.id,
            status=sweep.status,
            href=sweep_href(sweep.id),
            points=sweep.points,
            samples=sweep.samples,
            deadline_s=sweep.deadline_s,
            progress=sweep.progress,
            reason=sweep.reason,
            result=None if sweep.result is None else msgspec.Raw(sweep.result),
        )

    def file(self, sweep_id: str, name: str) -> bytes:
        sweep = self._get(sweep_id)
        if sweep.status != SweepStatus.DONE:
            raise NotFound(f"sweep {sweep_id!r} is {sweep.status.value}, not done", field="id")
        if name not in sweep.files:
            known = ", ".join(sorted(sweep.files))
            raise NotFound(f"sweep {sweep_id!r} has no file {name!r} ({known})", field="name")
        return sweep.files[name]

    async def wait(self, sweep_id: str, timeout_s: float) -> SweepResource:
        sweep = self._get(sweep_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sweep.finished.wait(), timeout_s)
        return self.resource(sweep_id)

    def cancel(self, sweep_id: str) -> SweepResource | None:
        """Cancel a queued or running sweep (its resource); forget a finished one (None)."""
        sweep = self._get(sweep_id)
        if sweep.status in FINISHED:
            del self._sweeps[sweep_id]
            return None
        sweep.cancel.set()  # a running sweep's process is killed at the runner's next poll
        where = "queued" if sweep.status == SweepStatus.QUEUED else "running"
        self._finish(sweep, SweepStatus.CANCELLED, f"cancelled while {where}")
        return self.resource(sweep_id)

    # -- running ------------------------------------------------------------------------------

    def _finish(self, sweep: _Sweep, status: SweepStatus, reason: str | None = None) -> None:
        sweep.status = status
        sweep.reason = reason
        sweep.finished.set()
        self._forget_old()

    async def _worker(self) -> None:
        assert self._queue is not None
        while True:
            sweep = await self._queue.get()
            if sweep.status != SweepStatus.QUEUED:  # cancelled while waiting
                continue
            sweep.status = SweepStatus.RUNNING
            try:
                await self._run(sweep)
            except asyncio.CancelledError:
                self._finish(sweep, SweepStatus.CANCELLED, "the server stopped")
                raise
            except Exception as err:  # keep serving; report it on the sweep
                self._finish(sweep, SweepStatus.FAILED, f"internal error: {err}")

    async def _run(self, sweep: _Sweep) -> None:
        s = self.settings
        parent, child = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=sweep_worker.run_limited,
            args=(
                s.solver_memory_mb * MIB,
                child,
                sweep.request,
                s.sweep_max_points,
                s.sweep_max_evaluations,
            ),
            daemon=True,
        )
        await anyio.to_thread.run_sync(process.start)
        child.close()
        deadline = time.monotonic() + sweep.deadline_s
        outcome: tuple[Any, ...] | None = None
        try:
            while outcome is None:
                if sweep.cancel.is_set():  # already marked cancelled
                    return
                if time.monotonic() > deadline:
                    self._finish(
                        sweep,
                        SweepStatus.FAILED,
                        f"stopped at the sweep's deadline of {sweep.deadline_s:,.0f} s",
                    )
                    return
                if not await anyio.to_thread.run_sync(parent.poll, s.poll_s):
                    if not process.is_alive() and not parent.poll():
                        self._finish(sweep, SweepStatus.FAILED, _died(process.exitcode))
                        return
                    continue
                try:
                    message = await anyio.to_thread.run_sync(parent.recv)
                except EOFError:
                    await anyio.to_thread.run_sync(process.join, 5)
                    self._finish(sweep, SweepStatus.FAILED, _died(process.exitcode))
                    return
                if message[0] == "progress":
                    _, phase, done, total = message
                    sweep.progress = SweepProgress(phase=phase, done=done, total=total)
                else:
                    outcome = message
            if sweep.cancel.is_set():
                return
            if outcome[0] == "done":
                sweep.result, sweep.files = outcome[1], outcome[2]
                self._finish(sweep, SweepStatus.DONE)
            else:
                self._finish(sweep, SweepStatus.FAILED, str(outcome[1]))
        finally:
            if process.is_alive():
                process.kill()
            parent.close()
            await anyio.to_thread.run_sync(process.join, 5)


def _time_limits(
    scenario: Scenario,
    specs: tuple[Spec, ...],
    fields: tuple[str, ...],
    time_limit_s: float | None,
) -> list[tuple[tuple[Value, ...], float]]:
    """Each grid point's (values, time limit), read from the grid's shape without building it:
    the request's ``time_limit_s``, else the value of a spec that sweeps the scenario's
    ``options.time_limit_s``, else the scenario's. A swept value that is not a number counts
    as 0 here; its point is refused when it is built."""
    k = fields.index(TIME_LIMIT_FIELD) if TIME_LIMIT_FIELD in fields else None
    out: list[tuple[tuple[Value, ...], float]] = []
    for values in itertools.product(*(spec.values for spec in specs)):
        if time_limit_s is not None:
            limit = time_limit_s
        elif k is None:
            limit = scenario.options.time_limit_s
        else:
            limit = _number(values[k])
        out.append((values, limit))
    return out


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    try:
        return float(value)
    except OverflowError:  # an integer beyond a float: over any limit
        return math.inf


def _died(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"the sweep's worker process was killed (signal {-exitcode})"
    return f"the sweep's worker process exited ({exitcode}) without an answer"
