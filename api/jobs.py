"""The job runner: solves run in worker processes, never on the event loop.

One ``JobRunner`` lives in each app process, started and stopped by the app's lifespan (so it
exists inside granian's worker, not at import time). Its dispatcher task, every ``poll_s`` or
when woken by a new request:

1. looks up the plans it is running; one that was cancelled (or deleted) has its process killed;
2. kills a solve that ran past its time limit plus ``kill_grace_s`` and fails the plan (timeout);
3. renews its lease on the plans it runs and queues again plans whose runner died (expired lease);
4. claims queued plans (oldest first) while fewer than ``workers`` solves run.

Each solve is one process started from a ``forkserver`` that imported the planner once (a start
costs milliseconds and the process shares nothing mutable with the server), its address space
capped at ``solver_memory_mb`` (``worker.limited``). Cancellation kills
that process (SIGKILL): a solve holds no resource that needs cleaning up, and its result is
written only by this runner, only while the plan is still running. The queue is the ``queued``
rows of the database; its bound is checked when a request is accepted (``Store.enqueue``).

On a clean stop the plans this runner was solving are released back to the queue; on a crash
their lease expires (or ``farebox serve`` requeues them at start) and they run again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter

from api import worker
from api.settings import Settings
from api.store import Store
from api.store_records import Claim, FailureKind, PlanRecord, PlanStatus

log = logging.getLogger("farebox.jobs")
T = TypeVar("T")


@dataclass(slots=True)
class _Job:
    claim: Claim
    process: BaseProcess
    deadline: float
    """``time.monotonic()`` after which the process is killed."""
    stop_reason: str | None = None
    """Why this runner killed the process: "cancelled", "timeout" or "shutdown"."""
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class JobRunner:
    def __init__(
        self, store: Store, settings: Settings, *, target: Callable[..., None] = worker.solve
    ) -> None:
        """``target(conn, request, time_limit_s, catalog_dir)`` runs in the worker process and
        sends its outcome on ``conn`` (``api.worker.solve``; tests substitute their own)."""
        self.store = store
        self.settings = settings
        self._target = target
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(list(worker.PRELOAD))
        self._jobs: dict[str, _Job] = {}
        self._wake = asyncio.Event()
        self._finished = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._limiter = CapacityLimiter(settings.workers + 4)
        self._next_lease_s = 0.0
        self._stopping = False

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the forkserver (imports the planner once) and the dispatcher task."""
        from multiprocessing import forkserver

        await self._call(forkserver.ensure_running)
        await self._call(self.store.requeue_expired, self.settings.max_attempts)
        self._dispatcher = asyncio.create_task(self._dispatch(), name="farebox-dispatcher")

    async def stop(self) -> None:
        """Stop dispatching, kill running solves and give their plans back to the queue.

        The dispatcher is asked to stop between ticks rather than cancelled, so a process it is
        starting is registered (and then killed) instead of escaping as an orphan."""
        self._stopping = True
        self._wake.set()
        if self._dispatcher is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._dispatcher), timeout=10)
            except TimeoutError:
                self._dispatcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._dispatcher
        jobs = list(self._jobs.values())
        for job in jobs:
            self._kill(job, "shutdown")
        tasks = [job.task for job in jobs if job.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        try:
            await self._call(self.store.release, self.owner)
        except sqlite3.Error as err:  # a broken store: their leases expire instead
            log.error("could not give running plans back to the queue: %s", err)

    def wake(self) -> None:
        """A plan was queued: look for work now rather than at the next poll."""
        self._wake.set()

    @property
    def running(self) -> int:
        return len(self._jobs)

    async def wait(self, plan_id: str, timeout_s: float) -> PlanRecord | None:
        """The plan once finished, or its current state after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            record = await self._call(self.store.get, plan_id)
            left = deadline - time.monotonic()
            if (
                record is None
                or record.status
                in (
                    PlanStatus.DONE,
                    PlanStatus.FAILED,
                    PlanStatus.CANCELLED,
                )
                or left <= 0
            ):
                return record
            # woken when a local solve ends; polled for solves of other processes
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._finished.wait(), min(left, self.settings.poll_s))

    # -- dispatcher ---------------------------------------------------------------------------

    async def _dispatch(self) -> None:
        while not self._stopping:
            try:
                await self._tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep serving; the next tick retries
                log.exception("job dispatcher tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.poll_s)
            self._wake.clear()

    async def _tick(self) -> None:
        settings = self.settings
        if self._jobs:
            statuses = await self._call(self.store.statuses, list(self._jobs))
            now = time.monotonic()
            for plan_id, job in list(self._jobs.items()):
                if statuses.get(plan_id) != PlanStatus.RUNNING:
                    self._kill(job, "cancelled")
                elif now > job.deadline:
                    self._kill(job, "timeout")
        if time.monotonic() >= self._next_lease_s:
            self._next_lease_s = time.monotonic() + settings.lease_s / 3
            await self._call(self.store.renew, self.owner, list(self._jobs), settings.lease_s)
            requeued = await self._call(self.store.requeue_expired, settings.max_attempts)
            if requeued:
                log.warning("queued again %d plan(s) whose runner stopped", requeued)
        while len(self._jobs) < settings.workers and not self._stopping:
            claim = await self._call(self.store.claim, self.owner, settings.lease_s)
            if claim is None:
                break
            await self._launch(claim)

    async def _launch(self, claim: Claim) -> None:
        receiver, sender = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=worker.limited,
            args=(
                self._target,
                self.settings.solver_memory_mb * worker.MIB,
                sender,
                claim.request,
                claim.time_limit_s,
                str(self.settings.catalog_dir) if self.settings.catalog_dir else None,
            ),
            name=f"farebox-solve-{claim.id}",
            daemon=True,
        )
        await self._call(process.start)
        sender.close()
        deadline = time.monotonic() + claim.time_limit_s + self.settings.kill_grace_s
        job = _Job(claim=claim, process=process, deadline=deadline)
        self._jobs[claim.id] = job
        job.task = asyncio.create_task(self._follow(job, receiver), name=f"solve-{claim.id}")
        log.info("solving plan %s in process %s", claim.id, process.pid)

    def _kill(self, job: _Job, reason: str) -> None:
        if job.stop_reason is None:
            job.stop_reason = reason
            log.info("stopping plan %s: %s", job.claim.id, reason)
        if job.process.is_alive():
            job.process.kill()

    async def _follow(self, job: _Job, receiver: Connection) -> None:
        """Relay the child's messages until it ends, then record the outcome."""
        plan_id = job.claim.id
        result: worker.DoneMessage | worker.FailedMessage | None = None
        try:
            while result is None:
                try:
                    message = await self._call(worker.receive, receiver)
                except (EOFError, OSError):
                    break
                if isinstance(message, worker.ProgressMessage):
                    await self._call(
                        self.store.set_progress, plan_id, self.owner, message.progress_json
                    )
                else:
                    result = message
            await self._call(job.process.join, 5.0)
            if job.process.is_alive():
                job.process.kill()
            await self._record(job, result)
        except Exception:
            log.exception("recording the outcome of plan %s failed", plan_id)
        finally:
            receiver.close()
            self._jobs.pop(plan_id, None)
            self._finished.set()
            self._finished.clear()
            self._wake.set()

    async def _record(
        self, job: _Job, result: worker.DoneMessage | worker.FailedMessage | None
    ) -> None:
        plan_id, owner = job.claim.id, self.owner
        if job.stop_reason in ("cancelled", "shutdown"):
            return
        if job.stop_reason == "timeout":
            reason = (
                f"the solve ran past its time limit of {job.claim.time_limit_s:g} s plus "
                f"{self.settings.kill_grace_s:g} s grace and was stopped"
            )
            await self._call(self.store.finish_failed, plan_id, owner, FailureKind.TIMEOUT, reason)
        elif result is None:
            reason = (
                f"the solver process died (exit code {job.process.exitcode}); a solve that "
                f"needs more than its {self.settings.solver_memory_mb} MiB of memory "
                "(FAREBOX_SOLVER_MEMORY_MB) may end this way"
            )
            await self._call(self.store.finish_failed, plan_id, owner, FailureKind.CRASH, reason)
        elif isinstance(result, worker.DoneMessage):
            await self._call(
                self.store.finish_done, plan_id, owner, result.plan_json, result.tables
            )
        else:
            await self._call(self.store.finish_failed, plan_id, owner, result.kind, result.reason)
