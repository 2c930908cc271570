"""Services the controllers call: plans (validate, enqueue, wait, read, cancel) and health.

Everything blocking (decoding a large body, SQLite) runs in a worker thread; solves run in worker
processes (``api.jobs``). Controllers get these objects by dependency injection.
"""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
import msgspec
from litestar.exceptions import HTTPException
from litestar.status_codes import HTTP_409_CONFLICT

from api.compute import Compute
from api.errors import NotFound, ParameterError, QueueFull
from api.jobs import JobRunner
from api.settings import Settings
from api.store import Store
from api.store_errors import store_error
from api.store_records import KeyedPlan, PlanRecord, PlanStatus
from fleet.catalog.load import Catalog
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays
from planner.build.pipeline import build_inventory, screen
from planner.build.plan_rows import check_plan_rows
from planner.build.workload import check_workload, workload
from planner.scenario.decode import Format, check_catalog, decode_scenario
from planner.scenario.derived import horizon_hours
from planner.scenario.schema import Scenario

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()


async def _off_loop(fn: Callable[..., T], *args: Any) -> T:
    """Short blocking I/O (SQLite) off the event loop; CPU work goes through ``Compute``."""
    return await anyio.to_thread.run_sync(fn, *args)


MAX_KEY_LENGTH = 255
TOML = "application/toml"


def scenario_format(content_type: str | None) -> Format:
    """A scenario body is TOML when sent as ``application/toml`` (the file's own format), JSON
    otherwise (``application/json``, or no type)."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    return "toml" if media_type == TOML else "json"


class IdempotencyConflict(HTTPException):
    status_code = HTTP_409_CONFLICT


def check_idempotency_key(key: str | None) -> str | None:
    """An ``Idempotency-Key`` header: 1-255 printable ASCII characters."""
    if key is None:
        return None
    if not 0 < len(key) <= MAX_KEY_LENGTH or not all(" " < c <= "~" for c in key):
        raise ParameterError(
            "Idempotency-Key",
            f"must be 1-{MAX_KEY_LENGTH} printable ASCII characters without spaces (e.g. a UUID)",
        )
    return key


def request_fingerprint(body: bytes, time_limit_s: float | None) -> str:
    """What an idempotent replay must repeat: the body's bytes and the time limit asked."""
    digest = hashlib.sha256(body)
    digest.update(f"\n{time_limit_s!r}".encode())
    return digest.hexdigest()


class PlanService:
    def __init__(
        self,
        store: Store,
        runner: JobRunner,
        catalog: Catalog,
        arrays: CatalogArrays,
        settings: Settings,
        compute: Compute,
    ) -> None:
        self.compute = compute
        self.store = store
        self.runner = runner
        self.catalog = catalog
        self.arrays = arrays
        self.settings = settings

    def validate(self, body: bytes, format: Format = "json") -> Scenario:
        """Everything that can be checked without solving: schema, references, catalog ids,
        the server's horizon cap, the work the search asks for (``planner.build.workload``: grids,
        SLO checks and the screen's offer x pool x engine turns, counted before any is done), and
        that every sold tier has a configuration meeting its SLOs
        (``planner.build.pipeline.screen``: the performance model and SLO filter, no demand or
        queueing). Raises InputError naming the field."""
        scenario = decode_scenario(body, format)
        check_catalog(scenario, self.catalog)
        hours = horizon_hours(scenario)
        if hours > self.settings.max_horizon_hours:
            raise InputError(
                f"$.demand[0]: horizon of {hours} hours exceeds this server's limit of "
                f"{self.settings.max_horizon_hours} hours"
            )
        check_plan_rows(scenario, self.settings.max_plan_rows)
        check_workload(
            scenario,
            workload(scenario, self.catalog),
            max_configurations=self.settings.max_configurations,
            max_checks=self.settings.max_slo_checks,
            max_screen_combinations=self.settings.max_screen_combinations,
        )
        if not scenario.options.allow_unserved_tiers:
            pool_max = build_inventory(scenario, self.catalog).systems_available.max(axis=1)
            reasons = screen(scenario, self.catalog, self.arrays, pool_max).reasons
            if reasons:
                raise InputError(f"{reasons[0].path}: {reasons[0].text}")
        return scenario

    def time_limit(self, scenario: Scenario, requested_s: float | None) -> float:
        limit = self.settings.max_time_limit_s
        if requested_s is not None:
            if requested_s > limit:
                raise ParameterError("time_limit_s", f"must be <= {limit:g} on this server")
            return requested_s
        if scenario.options.time_limit_s > limit:
            raise InputError(
                f"$.options.time_limit_s: {scenario.options.time_limit_s:g} s exceeds this "
                f"server's limit of {limit:g} s (or pass ?time_limit_s=)"
            )
        return scenario.options.time_limit_s

    async def check_queue(self) -> None:
        """QueueFull (503) when ``queue_max`` plans wait: called before a body is decoded, so
        an overloaded server refuses in milliseconds whatever the body asks for. (``enqueue``
        checks again atomically.)"""
        if (await self.counts())[PlanStatus.QUEUED] >= self.settings.queue_max:
            raise QueueFull(self.settings.queue_max, self.settings.retry_after_s)

    async def submit(
        self,
        body: bytes,
        time_limit_s: float | None,
        key: str | None = None,
        format: Format = "json",
    ) -> tuple[PlanRecord, bool]:
        """Validate, then commit the request as a queued plan (durable before we answer). A
        ``format="toml"`` body is decoded as TOML; the request is stored as JSON either way.

        With an idempotency ``key`` already used by the same request (same body bytes and
        ``time_limit_s``), the plan it created is returned instead and nothing is validated or
        queued: the second item of the answer is True for such a replay. The same key with
        another request is an IdempotencyConflict (409)."""
        fingerprint = request_fingerprint(body, time_limit_s)
        if key is not None:
            keyed = await _off_loop(self.store.keyed_plan, key)
            if keyed is not None:
                return await self._replay(keyed, fingerprint), True
        await self.check_queue()
        scenario = await self.compute.run(self.validate, body, format)
        limit = self.time_limit(scenario, time_limit_s)
        plan_id = uuid.uuid4().hex
        request = _ENCODER.encode(scenario)
        name, queue_max = scenario.meta.name, self.settings.queue_max
        max_bytes = self.settings.max_store_bytes
        accepted: KeyedPlan | bool
        if key is None:
            accepted = await _off_loop(
                self.store.enqueue, plan_id, name, request, limit, queue_max, max_bytes
            )
        else:
            accepted = await _off_loop(
                self.store.enqueue_keyed,
                key,
                fingerprint,
                plan_id,
                name,
                request,
                limit,
                queue_max,
                max_bytes,
            )
            if isinstance(accepted, KeyedPlan):  # a concurrent request took the key first
                return await self._replay(accepted, fingerprint), True
        if not accepted:
            raise QueueFull(self.settings.queue_max, self.settings.retry_after_s)
        self.runner.wake()
        return await self.get(plan_id), False

    async def _replay(self, keyed: KeyedPlan, fingerprint: str) -> PlanRecord:
        if not hmac.compare_digest(keyed.fingerprint, fingerprint):
            raise IdempotencyConflict(
                detail=f"Idempotency-Key: already used by another request (plan "
                f"{keyed.plan_id}); use a new key for a different scenario or time limit"
            )
        return await self.get(keyed.plan_id)

    def check_wait(self, wait_s: float | None) -> None:
        if wait_s is not None and wait_s > self.settings.max_wait_s:
            raise ParameterError("wait", f"must be <= {self.settings.max_wait_s:g} s")

    async def wait(self, plan_id: str, wait_s: float) -> PlanRecord:
        self.check_wait(wait_s)
        record = await self.runner.wait(plan_id, wait_s)
        if record is None:
            raise NotFound(f"plan {plan_id!r} was deleted while waiting", field="id")
        return record

    async def get(self, plan_id: str, *, with_plan: bool = False) -> PlanRecord:
        record = await _off_loop(lambda: self.store.get(plan_id, with_plan=with_plan))
        if record is None:
            raise NotFound(f"no plan {plan_id!r}", field="plan_id")
        return record

    async def get_with_reports(self, plan_id: str) -> tuple[PlanRecord, tuple[str, ...]]:
        found = await _off_loop(self.store.get_with_reports, plan_id)
        if found is None:
            raise NotFound(f"no plan {plan_id!r}", field="plan_id")
        return found

    async def request(self, plan_id: str) -> bytes:
        request = await _off_loop(self.store.request, plan_id)
        if request is None:
            raise NotFound(f"no plan {plan_id!r}", field="plan_id")
        return request

    async def report_tables(self, record: PlanRecord) -> tuple[str, ...]:
        if record.status != PlanStatus.DONE:
            return ()
        return tuple(await _off_loop(self.store.report_names, record.id))

    async def report(self, plan_id: str, table: str) -> bytes:
        data = await _off_loop(self.store.report, plan_id, table)
        if data is not None:
            return data
        record = await self.get(plan_id)
        if record.status != PlanStatus.DONE:
            raise NotFound(
                f"plan {plan_id!r} is {record.status}; its report exists once it is done",
                field="plan_id",
            )
        known = await self.report_tables(record)
        raise NotFound(
            f"plan {plan_id!r} has no report table {table!r}; tables: {', '.join(known)}",
            field="table",
        )

    async def page(
        self, limit: int, cursor: int | None, status: PlanStatus | None
    ) -> tuple[list[PlanRecord], int | None]:
        records = await _off_loop(self.store.page, limit + 1, cursor, status)
        more = len(records) > limit
        records = records[:limit]
        return records, (records[-1].seq if more else None)

    async def cancel_or_delete(self, plan_id: str) -> PlanRecord | None:
        """Cancel a queued or running plan (returns it); delete a finished one (None)."""
        if await _off_loop(self.store.cancel, plan_id):
            self.runner.wake()
            return await self.get(plan_id)
        if await _off_loop(self.store.delete, plan_id):
            return None
        raise NotFound(f"no plan {plan_id!r}", field="plan_id")

    async def counts(self) -> dict[PlanStatus, int]:
        return await _off_loop(self.store.counts)

    async def check_store(self) -> dict[PlanStatus, int]:
        """``Store.probe`` (raises StoreError), then the plan counts."""

        def check() -> dict[PlanStatus, int]:
            self.store.probe()
            try:
                return self.store.counts()
            except sqlite3.Error as err:
                raise store_error(self.store.path, err) from None

        return await _off_loop(check)
