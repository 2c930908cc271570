"""A bounded thread pool for CPU work done while answering a request (validating a scenario's
SLOs, estimates, frontiers): it keeps the event loop free, and its bound keeps a burst of such
requests from taking every core from the solver processes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter

T = TypeVar("T")


class Compute:
    def __init__(self, threads: int) -> None:
        self._limiter = CapacityLimiter(threads)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._limiter)
