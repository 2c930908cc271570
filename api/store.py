"""Durable plans: every accepted request, its status and its result, in one SQLite file.

The file is the source of truth; nothing about a plan lives only in memory. An accepted request is
committed before the 202 is sent, so a crash (kill -9) loses nothing: on restart, plans that were
running go back to the queue and run again, finished ones are served from the file.

Life of a plan (``status``)::

    queued --claim--> running --result--> done
       |                 |  \\--error/timeout/crash--> failed
       \\--cancel--------+--cancel--> cancelled

Several job runners may share one file (granian can run the app in several processes): a runner
claims a queued plan with one atomic UPDATE and holds a *lease* on it, renewed while the solve
runs. A plan whose lease expired (its runner's process died) is queued again by any runner, at
most ``max_attempts`` times. Results are written only by the lease holder, and only while the
plan is still running, so a cancelled plan never turns into done.

One ``farebox serve`` serves a file at a time (``api.server_lock``); ``initialize`` and ``probe``
raise ``StoreError`` naming the file and whether it is corrupt or unwritable, which ``farebox
serve`` prints as one line and ``/health`` reports as 503.

SQLite runs in WAL mode (readers never wait for the writer) with ``synchronous=NORMAL``: a
committed transaction survives the death of the process (kill -9); only a power loss may drop the
last transactions before a checkpoint. Each thread gets its own connection.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from api.store_errors import StoreError, StoreFull, store_error
from api.store_records import (
    COLUMNS,
    FINISHED,
    SCHEMA,
    Claim,
    FailureKind,
    KeyedPlan,
    PlanRecord,
    PlanStatus,
    record_of_row,
)


class Store:
    """Plans in one SQLite file. Methods are blocking and short: call them off the event loop."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.clock = clock
        self._local = threading.local()

    def initialize(self) -> None:
        """Create the directory, the file and the tables; switch the file to WAL; then
        ``probe``. Raises StoreError naming the file when it cannot serve."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._conn()
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(self.path, "unwritable", f"SQLite refused WAL mode ({mode!r})")
            conn.executescript(SCHEMA)
        except (sqlite3.Error, OSError) as err:
            self.close()
            raise store_error(self.path, err) from None
        self.probe()

    def probe(self) -> None:
        """Check that the file still serves, on a fresh connection (a long-lived one keeps
        reading pages from its cache after the file changed under it): read the header, the
        schema and the status index, and commit one tiny write. Raises StoreError."""
        try:
            conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        except sqlite3.Error as err:
            raise store_error(self.path, err) from None
        try:
            conn.execute("PRAGMA synchronous=NORMAL")  # as serving does: no fsync per commit
            conn.execute("SELECT status, count(*) FROM plans GROUP BY status").fetchall()
            conn.execute(
                "INSERT OR REPLACE INTO health (id, checked_at) VALUES (1, ?)", (self.clock(),)
            )
        except sqlite3.Error as err:
            raise store_error(self.path, err) from None
        finally:
            conn.close()

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close when their thread ends)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- requests -------------------------------------------------------------------------

    def enqueue(
        self,
        plan_id: str,
        name: str,
        request: bytes,
        time_limit_s: float,
        queue_max: int,
        max_bytes: int | None = None,
    ) -> bool:
        """Commit a new queued plan; False (nothing written) when ``queue_max`` already wait;
        StoreFull (nothing written) when the file already uses ``max_bytes``."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not _insert_queued(
                conn, plan_id, name, request, time_limit_s, queue_max, self.clock(), max_bytes
            ):
                conn.execute("ROLLBACK")
                return False
            conn.execute("COMMIT")
            return True
        except BaseException:
            _rollback(conn)
            raise

    def get(self, plan_id: str, *, with_plan: bool = False) -> PlanRecord | None:
        columns = COLUMNS + (", plan" if with_plan else "")
        row = (
            self._conn().execute(f"SELECT {columns} FROM plans WHERE id = ?", (plan_id,)).fetchone()
        )
        return record_of_row(row) if row else None

    def get_with_reports(self, plan_id: str) -> tuple[PlanRecord, tuple[str, ...]] | None:
        """The plan (with its JSON when done) and its report table names: one read."""
        record = self.get(plan_id, with_plan=True)
        if record is None:
            return None
        names = tuple(self.report_names(plan_id)) if record.status == PlanStatus.DONE else ()
        return record, names

    def request(self, plan_id: str) -> bytes | None:
        row = self._conn().execute("SELECT request FROM plans WHERE id = ?", (plan_id,)).fetchone()
        return bytes(row[0]) if row else None

    def page(
        self, limit: int, before_seq: int | None = None, status: PlanStatus | None = None
    ) -> list[PlanRecord]:
        """Newest first; ``before_seq`` continues a previous page."""
        where: list[str] = ["1 = 1"]
        args: list[object] = []
        if before_seq is not None:
            where.append("seq < ?")
            args.append(before_seq)
        if status is not None:
            where.append("status = ?")
            args.append(str(status))
        rows = self._conn().execute(
            f"SELECT {COLUMNS} FROM plans WHERE {' AND '.join(where)} ORDER BY seq DESC LIMIT ?",
            (*args, limit),
        )
        return [record_of_row(row) for row in rows]

    def counts(self) -> dict[PlanStatus, int]:
        out = dict.fromkeys(PlanStatus, 0)
        for status, n in self._conn().execute("SELECT status, count(*) FROM plans GROUP BY status"):
            out[PlanStatus(status)] = n
        return out

    def cancel(self, plan_id: str) -> bool:
        """Mark a queued or running plan cancelled (its runner kills the solve)."""
        cur = self._conn().execute(
            "UPDATE plans SET status = ?, finished_at = ?, reason = ?, progress = NULL "
            "WHERE id = ? AND status IN (?, ?)",
            (
                PlanStatus.CANCELLED,
                self.clock(),
                "cancelled by request",
                plan_id,
                PlanStatus.QUEUED,
                PlanStatus.RUNNING,
            ),
        )
        return cur.rowcount == 1

    def delete(self, plan_id: str) -> bool:
        """Delete a finished plan and its report tables."""
        cur = self._conn().execute(
            "DELETE FROM plans WHERE id = ? AND status IN (?, ?, ?)", (plan_id, *FINISHED)
        )
        return cur.rowcount == 1

    def report(self, plan_id: str, table: str) -> bytes | None:
        row = (
            self._conn()
            .execute("SELECT parquet FROM reports WHERE plan_id = ? AND name = ?", (plan_id, table))
            .fetchone()
        )
        return bytes(row[0]) if row else None

    def report_names(self, plan_id: str) -> list[str]:
        rows = self._conn().execute(
            "SELECT name FROM reports WHERE plan_id = ? ORDER BY name", (plan_id,)
        )
        return [name for (name,) in rows]

    # -- idempotency keys (POST /v1/plans) ---------------------------------------------------
    # A key lives as long as its plan: deleting the plan frees the key (ON DELETE CASCADE).

    def keyed_plan(self, key: str) -> KeyedPlan | None:
        row = (
            self._conn()
            .execute("SELECT plan_id, fingerprint FROM idempotency_keys WHERE key = ?", (key,))
            .fetchone()
        )
        return KeyedPlan(plan_id=row[0], fingerprint=row[1]) if row else None

    def enqueue_keyed(
        self,
        key: str,
        fingerprint: str,
        plan_id: str,
        name: str,
        request: bytes,
        time_limit_s: float,
        queue_max: int,
        max_bytes: int | None = None,
    ) -> KeyedPlan | bool:
        """``enqueue`` and record ``key`` -> the plan in one transaction. When another request
        took the key first, nothing is written and its ``KeyedPlan`` is returned."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(
                "SELECT plan_id, fingerprint FROM idempotency_keys WHERE key = ?", (key,)
            ).fetchone()
            if row is not None:
                conn.execute("ROLLBACK")
                return KeyedPlan(plan_id=row[0], fingerprint=row[1])
            now = self.clock()
            if not _insert_queued(
                conn, plan_id, name, request, time_limit_s, queue_max, now, max_bytes
            ):
                conn.execute("ROLLBACK")
                return False
            conn.execute(
                "INSERT INTO idempotency_keys (key, fingerprint, plan_id, created_at) "
                "VALUES (?, ?, ?, ?)",
                (key, fingerprint, plan_id, now),
            )
            conn.execute("COMMIT")
            return True
        except BaseException:
            _rollback(conn)
            raise

    # -- job runners ------------------------------------------------------------------------

    def claim(self, owner: str, lease_s: float) -> Claim | None:
        """Atomically take the oldest queued plan and mark it running under ``owner``."""
        now = self.clock()
        row = (
            self._conn()
            .execute(
                "UPDATE plans SET status = ?, started_at = ?, attempts = attempts + 1, "
                "lease_owner = ?, lease_expires_at = ?, progress = NULL "
                "WHERE seq = (SELECT seq FROM plans WHERE status = ? ORDER BY seq LIMIT 1) "
                "AND status = ? RETURNING id, request, time_limit_s, attempts",
                (
                    PlanStatus.RUNNING,
                    now,
                    owner,
                    now + lease_s,
                    PlanStatus.QUEUED,
                    PlanStatus.QUEUED,
                ),
            )
            .fetchone()
        )
        if row is None:
            return None
        return Claim(id=row[0], request=bytes(row[1]), time_limit_s=row[2], attempts=row[3])

    def renew(self, owner: str, plan_ids: Iterable[str], lease_s: float) -> None:
        """Extend the lease on the plans this runner is still solving (only those: a plan whose
        outcome could not be recorded lets its lease expire and runs again)."""
        ids = list(plan_ids)
        if not ids:
            return
        marks = ", ".join("?" * len(ids))
        self._conn().execute(
            "UPDATE plans SET lease_expires_at = ? WHERE lease_owner = ? AND status = ? "
            f"AND id IN ({marks})",
            (self.clock() + lease_s, owner, PlanStatus.RUNNING, *ids),
        )

    def statuses(self, plan_ids: Iterable[str]) -> dict[str, PlanStatus]:
        """Current status of each id; an id missing from the answer was deleted."""
        ids = list(plan_ids)
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        rows = self._conn().execute(f"SELECT id, status FROM plans WHERE id IN ({marks})", ids)
        return {plan_id: PlanStatus(status) for plan_id, status in rows}

    def set_progress(self, plan_id: str, owner: str, progress: str) -> None:
        self._conn().execute(
            "UPDATE plans SET progress = ? WHERE id = ? AND lease_owner = ? AND status = ?",
            (progress, plan_id, owner, PlanStatus.RUNNING),
        )

    def finish_done(
        self, plan_id: str, owner: str, plan: bytes, reports: Mapping[str, bytes]
    ) -> bool:
        """Store the plan and its report tables; False when the plan is no longer ours."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            cur = conn.execute(
                "UPDATE plans SET status = ?, finished_at = ?, plan = ?, progress = NULL, "
                "lease_owner = NULL WHERE id = ? AND lease_owner = ? AND status = ?",
                (PlanStatus.DONE, self.clock(), plan, plan_id, owner, PlanStatus.RUNNING),
            )
            if cur.rowcount != 1:
                conn.execute("ROLLBACK")
                return False
            conn.executemany(
                "INSERT OR REPLACE INTO reports (plan_id, name, parquet) VALUES (?, ?, ?)",
                [(plan_id, name, data) for name, data in reports.items()],
            )
            conn.execute("COMMIT")
            return True
        except BaseException:
            _rollback(conn)
            raise

    def finish_failed(self, plan_id: str, owner: str, kind: FailureKind, reason: str) -> bool:
        cur = self._conn().execute(
            "UPDATE plans SET status = ?, finished_at = ?, failure_kind = ?, reason = ?, "
            "progress = NULL, lease_owner = NULL WHERE id = ? AND lease_owner = ? AND status = ?",
            (PlanStatus.FAILED, self.clock(), kind, reason, plan_id, owner, PlanStatus.RUNNING),
        )
        return cur.rowcount == 1

    def release(self, owner: str) -> int:
        """A runner stopping cleanly gives its running plans back (the attempt not counted)."""
        cur = self._conn().execute(
            "UPDATE plans SET status = ?, attempts = max(attempts - 1, 0), lease_owner = NULL, "
            "lease_expires_at = NULL, progress = NULL WHERE lease_owner = ? AND status = ?",
            (PlanStatus.QUEUED, owner, PlanStatus.RUNNING),
        )
        return cur.rowcount

    def requeue_expired(self, max_attempts: int) -> int:
        """Queue again the running plans whose runner stopped renewing its lease."""
        return self._requeue("lease_expires_at < ?", (self.clock(),), max_attempts)

    def requeue_running(self, max_attempts: int) -> int:
        """At server start, before any runner exists: every running plan was interrupted."""
        return self._requeue("1 = 1", (), max_attempts)

    def _requeue(self, condition: str, args: tuple[float, ...], max_attempts: int) -> int:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "UPDATE plans SET status = ?, finished_at = ?, failure_kind = ?, reason = ?, "
                "progress = NULL, lease_owner = NULL "
                f"WHERE status = ? AND attempts >= ? AND {condition}",
                (
                    PlanStatus.FAILED,
                    self.clock(),
                    FailureKind.CRASH,
                    f"interrupted by a server stop {max_attempts} times; not retried again",
                    PlanStatus.RUNNING,
                    max_attempts,
                    *args,
                ),
            )
            cur = conn.execute(
                "UPDATE plans SET status = ?, lease_owner = NULL, lease_expires_at = NULL, "
                f"progress = NULL WHERE status = ? AND {condition}",
                (PlanStatus.QUEUED, PlanStatus.RUNNING, *args),
            )
            conn.execute("COMMIT")
            return cur.rowcount
        except BaseException:
            _rollback(conn)
            raise


def _insert_queued(
    conn: sqlite3.Connection,
    plan_id: str,
    name: str,
    request: bytes,
    time_limit_s: float,
    queue_max: int,
    now: float,
    max_bytes: int | None = None,
) -> bool:
    """Inside an open transaction: insert a queued plan unless ``queue_max`` already wait (False)
    or the file already uses ``max_bytes`` (StoreFull)."""
    (waiting,) = conn.execute(
        "SELECT count(*) FROM plans WHERE status = ?", (PlanStatus.QUEUED,)
    ).fetchone()
    if waiting >= queue_max:
        return False
    if max_bytes is not None:
        used = used_bytes(conn)
        if used >= max_bytes:
            raise StoreFull(used, max_bytes)
    conn.execute(
        "INSERT INTO plans (id, name, status, created_at, time_limit_s, request) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (plan_id, name, PlanStatus.QUEUED, now, time_limit_s, request),
    )
    return True


def used_bytes(conn: sqlite3.Connection) -> int:
    """Bytes of the database file in use: its pages less the free ones (a deleted plan's pages
    are free and reused before the file grows)."""
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    (free,) = conn.execute("PRAGMA freelist_count").fetchone()
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    return int((pages - free) * size)


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back after an error, if SQLite has not already done so (on SQLITE_FULL, IOERR and
    some READONLY errors it has, and a second ROLLBACK would hide the real error)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
