"""Wire types of the REST API (msgspec Structs) that are not already domain types.

The request body of ``POST /v1/plans`` is ``planner.scenario.schema.Scenario`` itself and a finished
plan is ``planner.plan.schema.Plan`` itself: one schema for the TOML file, the REST body and the
stored request. What is here wraps them: a plan's status, pages of plans, health.

Times on the wire are UTC datetimes (ISO 8601); durations carry their unit (``time_limit_s``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from msgspec import Struct

from api.store_records import FailureKind, PlanRecord, PlanStatus
from planner.plan.schema import Plan


class SolveProgress(Struct, frozen=True, kw_only=True):
    """The solver's latest progress report, while a plan runs."""

    elapsed_s: float
    objective: float | None
    """Best plan's objective so far, USD."""
    bound: float | None
    """Proven upper bound so far, USD."""
    message: str


class PlanInfo(Struct, frozen=True, kw_only=True):
    id: str
    name: str
    """The scenario's ``meta.name``."""
    status: PlanStatus
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    time_limit_s: float
    attempts: int
    """Times a worker started this plan (more than 1 after a server restart)."""
    failure_kind: FailureKind | None = None
    reason: str | None = None
    """Why the plan failed or was cancelled, naming the field when the input is at fault."""
    progress: SolveProgress | None = None
    href: str
    """This resource."""


class PlanResource(PlanInfo, frozen=True, kw_only=True):
    report_tables: tuple[str, ...] = ()
    """Tables at ``{href}/report/{table}.parquet`` once the plan is done."""
    plan: Plan | None = None
    """The plan, once done."""


class _PlanResourceRaw(PlanInfo, frozen=True, kw_only=True):
    """``PlanResource`` with the stored plan JSON spliced in as is (no decode/encode)."""

    report_tables: tuple[str, ...] = ()
    plan: msgspec.Raw | None = None


class PlanPage(Struct, frozen=True, kw_only=True):
    items: tuple[PlanInfo, ...]
    next_cursor: int | None
    """Pass as ``?cursor=`` for the next (older) page; null on the last page."""


class Health(Struct, frozen=True, kw_only=True):
    status: str
    """"ok" when the database answers."""
    workers: int
    running: int
    """Solves running in this server process."""
    queued: int
    """Plans waiting for a worker (all processes)."""
    queue_max: int


_PROGRESS = msgspec.json.Decoder(SolveProgress)
_ENCODER = msgspec.json.Encoder()


def _time(epoch_s: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch_s, UTC) if epoch_s is not None else None


def plan_href(plan_id: str) -> str:
    return f"/v1/plans/{plan_id}"


def plan_info(record: PlanRecord) -> PlanInfo:
    return PlanInfo(**_info_fields(record))


def _info_fields(record: PlanRecord) -> dict[str, Any]:
    progress = None
    if record.progress:
        try:
            progress = _PROGRESS.decode(record.progress)
        except msgspec.DecodeError:
            progress = None
    return {
        "id": record.id,
        "name": record.name,
        "status": record.status,
        "created_at": _time(record.created_at),
        "started_at": _time(record.started_at),
        "finished_at": _time(record.finished_at),
        "time_limit_s": record.time_limit_s,
        "attempts": record.attempts,
        "failure_kind": record.failure_kind,
        "reason": record.reason,
        "progress": progress,
        "href": plan_href(record.id),
    }


def encode_plan_resource(record: PlanRecord, report_tables: tuple[str, ...]) -> bytes:
    """JSON of ``PlanResource`` for ``record`` (read with ``with_plan=True``)."""
    raw = msgspec.Raw(record.plan) if record.plan is not None else None
    return _ENCODER.encode(
        _PlanResourceRaw(**_info_fields(record), report_tables=report_tables, plan=raw)
    )
