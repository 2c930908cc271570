"""Where a sweep's tasks run: a bounded pool of local processes, or a Ray cluster.

Both take a task function and a list of argument tuples and yield ``(i, result)`` as tasks
finish, in any order; the caller puts results back in order, so the numbers do not depend on
where or in which order tasks ran. Both stop at a deadline: tasks not finished by then are
cancelled (local worker processes killed, Ray tasks force-cancelled) and yielded as ``(i, None)``.

Serial: in the calling process, one task after another (the API runs each sweep in one worker
process of its own).

Local: ``concurrent.futures.ProcessPoolExecutor`` on a ``forkserver`` context (workers share
nothing mutable with the caller and each loads the catalog once), ``workers`` processes.

Ray (optional extra ``farebox[ray]``): with no address a local cluster is started for the sweep
and stopped after it, sized for a small machine (``num_cpus`` = workers, a 128 MB object store,
no dashboard); with an address (``auto`` or ``host:port``) the sweep joins that cluster and
leaves it running. Each task asks for one CPU and is never retried (a point that failed once
fails again).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from fleet.errors import InputError

RAY_OBJECT_STORE_BYTES = 128 * 1024 * 1024
"""Object store of a local Ray cluster: tasks ship small arrays, and a 2-core CI machine has little
memory to spare (Ray's default takes 30% of RAM)."""


class Backend(Protocol):
    name: str
    workers: int

    def run(
        self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]], deadline: float
    ) -> Iterator[tuple[int, Any]]: ...

    def close(self) -> None: ...


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)


class LocalBackend:
    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: cf.ProcessPoolExecutor | None = None

    def _executor(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("forkserver")
            )
        return self._pool

    def run(
        self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]], deadline: float
    ) -> Iterator[tuple[int, Any]]:
        pool = self._executor()
        futures = {pool.submit(fn, *a): i for i, a in enumerate(args)}
        pending = set(futures)
        try:
            while pending:
                done, pending = cf.wait(
                    pending,
                    timeout=max(0.0, deadline - time.monotonic()),
                    return_when=cf.FIRST_COMPLETED,
                )
                if not done:
                    break
                for future in done:
                    yield futures[future], future.result()
        except BaseException:  # the caller stopped (or a task raised): stop the workers too
            self._kill()
            raise
        if pending:
            self._kill()
            for future in pending:
                yield futures[future], None

    def _kill(self) -> None:
        # ProcessPoolExecutor cannot cancel a running task; its processes are killed instead,
        # and the next run starts a new pool.
        pool, self._pool = self._pool, None
        if pool is None:
            return
        processes = getattr(pool, "_processes", None) or {}
        for process in list(processes.values()):
            with contextlib.suppress(Exception):
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class SerialBackend:
    """Tasks one after another in this process: for a caller that is itself one bounded worker
    process (the API's sweep worker). A task cannot be interrupted here; the deadline stops the
    tasks not yet started, and each point's own timer (``planner.sweep.point``) stops a long one.
    """

    name = "serial"
    workers = 1

    def run(
        self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]], deadline: float
    ) -> Iterator[tuple[int, Any]]:
        for i, a in enumerate(args):
            yield i, (fn(*a) if time.monotonic() < deadline else None)

    def close(self) -> None:
        return None


class RayBackend:
    name = "ray"

    def __init__(self, address: str | None, workers: int) -> None:
        try:
            import ray
        except ImportError:
            raise InputError(
                "--ray: ray is not installed; install the extra: pip install 'farebox[ray]'"
            ) from None
        self._ray = ray
        self._started = not ray.is_initialized()
        if self._started:
            options: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if address is None:
                options.update(num_cpus=workers, object_store_memory=RAY_OBJECT_STORE_BYTES)
            try:
                ray.init(address=address, **options)
            except ConnectionError as err:
                raise InputError(f"--ray {address}: cannot reach a Ray cluster: {err}") from None
        self.workers = max(1, int(ray.cluster_resources().get("CPU", workers)))
        self._remote: dict[Callable[..., Any], Any] = {}

    def run(
        self, fn: Callable[..., Any], args: Sequence[tuple[Any, ...]], deadline: float
    ) -> Iterator[tuple[int, Any]]:
        ray = self._ray
        remote = self._remote.setdefault(fn, ray.remote(num_cpus=1, max_retries=0)(fn))
        refs = {remote.remote(*a): i for i, a in enumerate(args)}
        pending = list(refs)
        try:
            while pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                done, pending = ray.wait(pending, num_returns=1, timeout=left)
                for ref in done:
                    yield refs[ref], ray.get(ref)
        except BaseException:
            self._cancel(pending)
            raise
        if pending:
            self._cancel(pending)
            for ref in pending:
                yield refs[ref], None

    def _cancel(self, refs: list[Any]) -> None:
        for ref in refs:
            with contextlib.suppress(Exception):
                self._ray.cancel(ref, force=True)

    def close(self) -> None:
        if self._started:
            self._ray.shutdown()


def open_backend(ray: bool, address: str | None, workers: int) -> Backend:
    if ray:
        return RayBackend(address, workers)
    return LocalBackend(workers)
