"""What the plan store holds: a plan's status and record, the tables' schema, and the rows the
worker claims. ``api.store.Store`` reads and writes them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class PlanStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED = (PlanStatus.DONE, PlanStatus.FAILED, PlanStatus.CANCELLED)

SEQ_MAX = 2**63 - 1
"""Largest ``seq`` (SQLite's INTEGER is a signed 64-bit number): the bound of a page cursor."""


class FailureKind(StrEnum):
    INPUT = "input"
    """The scenario cannot be planned as asked (the reason names the field)."""
    TIMEOUT = "timeout"
    """The solve ran past its time limit plus the grace and was killed."""
    CRASH = "crash"
    """The worker process died, or the plan was interrupted too often by server restarts."""
    ERROR = "error"
    """A bug in farebox: the reason carries the exception."""


SCHEMA = """
CREATE TABLE IF NOT EXISTS plans (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    time_limit_s REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    failure_kind TEXT,
    reason TEXT,
    progress TEXT,
    lease_owner TEXT,
    lease_expires_at REAL,
    request BLOB NOT NULL,
    plan BLOB
);
CREATE INDEX IF NOT EXISTS plans_status ON plans (status, seq);
CREATE TABLE IF NOT EXISTS health (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    checked_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS reports (
    plan_id TEXT NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    parquet BLOB NOT NULL,
    PRIMARY KEY (plan_id, name)
);
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    plan_id TEXT NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
    created_at REAL NOT NULL
);
"""

COLUMNS = (
    "seq, id, name, status, created_at, started_at, finished_at, time_limit_s, attempts, "
    "failure_kind, reason, progress"
)


@dataclass(frozen=True, slots=True)
class PlanRecord:
    seq: int
    id: str
    name: str
    status: PlanStatus
    created_at: float
    started_at: float | None
    finished_at: float | None
    time_limit_s: float
    attempts: int
    failure_kind: FailureKind | None
    reason: str | None
    progress: str | None
    """Latest solver progress line (JSON text), while running."""
    plan: bytes | None = None
    """The Plan as JSON, when done and asked for."""


@dataclass(frozen=True, slots=True)
class KeyedPlan:
    """The plan an ``Idempotency-Key`` created, and the fingerprint of the request that did."""

    plan_id: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Claim:
    id: str
    request: bytes
    time_limit_s: float
    attempts: int


def record_of_row(row: tuple[Any, ...]) -> PlanRecord:
    """A row of ``COLUMNS`` (SQLite gives untyped values; the table's schema fixes them)."""
    plan = row[12] if len(row) > 12 else None
    return PlanRecord(
        seq=row[0],
        id=row[1],
        name=row[2],
        status=PlanStatus(row[3]),
        created_at=row[4],
        started_at=row[5],
        finished_at=row[6],
        time_limit_s=row[7],
        attempts=row[8],
        failure_kind=FailureKind(row[9]) if row[9] else None,
        reason=row[10],
        progress=row[11],
        plan=bytes(plan) if plan is not None else None,
    )
