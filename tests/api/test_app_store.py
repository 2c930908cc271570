"""The SQLite plan store: queue bound, claims, leases, results only from the lease holder."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.store import Store
from api.store_records import FailureKind, PlanStatus


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(tmp_path: Path) -> tuple[Store, Clock]:
    clock = Clock()
    s = Store(tmp_path / "sub" / "plans.sqlite", clock=clock)
    s.initialize()
    return s, clock


def test_wal_mode_and_queue_bound(store: tuple[Store, Clock]) -> None:
    s, _ = store
    mode = s._conn().execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert s.enqueue("a", "n", b"{}", 10.0, queue_max=2)
    assert s.enqueue("b", "n", b"{}", 10.0, queue_max=2)
    assert not s.enqueue("c", "n", b"{}", 10.0, queue_max=2)
    assert s.get("c") is None
    assert s.counts()[PlanStatus.QUEUED] == 2


def test_claim_oldest_first_and_only_once(store: tuple[Store, Clock]) -> None:
    s, _ = store
    s.enqueue("a", "n", b'{"x":1}', 5.0, queue_max=9)
    s.enqueue("b", "n", b"{}", 5.0, queue_max=9)
    first = s.claim("r1", lease_s=10)
    second = s.claim("r2", lease_s=10)
    assert first is not None and second is not None
    assert (first.id, first.request, first.attempts) == ("a", b'{"x":1}', 1)
    assert second.id == "b"
    assert s.claim("r3", lease_s=10) is None


def test_result_written_only_by_lease_holder_while_running(store: tuple[Store, Clock]) -> None:
    s, _ = store
    s.enqueue("a", "n", b"{}", 5.0, queue_max=9)
    s.claim("r1", lease_s=10)
    assert not s.finish_done("a", "someone-else", b'{"p":1}', {})
    assert s.cancel("a")
    assert not s.finish_done("a", "r1", b'{"p":1}', {"t": b"PAR1"})
    record = s.get("a", with_plan=True)
    assert record is not None
    assert record.status == PlanStatus.CANCELLED and record.plan is None
    assert s.report_names("a") == []


def test_done_plan_with_reports_then_delete(store: tuple[Store, Clock]) -> None:
    s, _ = store
    s.enqueue("a", "n", b"{}", 5.0, queue_max=9)
    s.claim("r1", lease_s=10)
    assert s.finish_done("a", "r1", b'{"p":1}', {"flows": b"PAR1x", "assignments": b"PAR1y"})
    record = s.get("a", with_plan=True)
    assert record is not None and record.status == PlanStatus.DONE
    assert record.plan == b'{"p":1}'
    assert s.report_names("a") == ["assignments", "flows"]
    assert s.report("a", "flows") == b"PAR1x"
    assert not s.cancel("a")
    assert s.delete("a")
    assert s.get("a") is None and s.report("a", "flows") is None


def test_expired_lease_requeues_until_max_attempts(store: tuple[Store, Clock]) -> None:
    s, clock = store
    s.enqueue("a", "n", b"{}", 5.0, queue_max=9)
    for attempt in (1, 2):
        claim = s.claim(f"r{attempt}", lease_s=10)
        assert claim is not None and claim.attempts == attempt
        clock.now += 5
        assert s.requeue_expired(max_attempts=3) == 0  # lease still valid
        clock.now += 6
        assert s.requeue_expired(max_attempts=3) == 1
        assert s.get("a").status == PlanStatus.QUEUED  # type: ignore[union-attr]
    s.claim("r3", lease_s=10)
    clock.now += 11
    s.requeue_expired(max_attempts=3)
    record = s.get("a")
    assert record is not None and record.status == PlanStatus.FAILED
    assert record.failure_kind == FailureKind.CRASH and "3 times" in (record.reason or "")


def test_renew_only_named_plans(store: tuple[Store, Clock]) -> None:
    s, clock = store
    s.enqueue("a", "n", b"{}", 5.0, queue_max=9)
    s.enqueue("b", "n", b"{}", 5.0, queue_max=9)
    s.claim("r1", lease_s=10)
    s.claim("r1", lease_s=10)
    clock.now += 8
    s.renew("r1", ["a"], lease_s=10)  # "b" is no longer followed by r1
    clock.now += 8
    assert s.requeue_expired(max_attempts=3) == 1
    assert s.get("a").status == PlanStatus.RUNNING  # type: ignore[union-attr]
    assert s.get("b").status == PlanStatus.QUEUED  # type: ignore[union-attr]


def test_renew_keeps_lease_and_release_gives_back(store: tuple[Store, Clock]) -> None:
    s, clock = store
    s.enqueue("a", "n", b"{}", 5.0, queue_max=9)
    s.claim("r1", lease_s=10)
    clock.now += 8
    s.renew("r1", ["a"], lease_s=10)
    clock.now += 8
    assert s.requeue_expired(max_attempts=3) == 0
    assert s.release("r1") == 1
    record = s.get("a")
    assert record is not None and record.status == PlanStatus.QUEUED and record.attempts == 0


def test_page_newest_first_with_cursor_and_filter(store: tuple[Store, Clock]) -> None:
    s, _ = store
    for name in "abcde":
        s.enqueue(name, name, b"{}", 5.0, queue_max=99)
    s.claim("r", lease_s=10)  # "a" runs
    first = s.page(2)
    assert [r.id for r in first] == ["e", "d"]
    assert [r.id for r in s.page(2, before_seq=first[-1].seq)] == ["c", "b"]
    assert [r.id for r in s.page(10, status=PlanStatus.RUNNING)] == ["a"]
