"""The job runner: solves in worker processes, cancellation and time limits kill the process,
outcomes land in the store. Worker targets here stand in for the planner (api.worker.solve is
exercised end to end in test_app.py)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from api.jobs import JobRunner
from api.settings import Settings
from api.store import Store
from api.store_records import FailureKind, PlanRecord, PlanStatus
from api.worker import DoneMessage, FailedMessage, ProgressMessage, send


def echo(conn: Connection, request: bytes, time_limit_s: float, catalog_dir: str | None) -> None:
    send(conn, DoneMessage(request, {"flows": b"PAR1" + request}))


def sleep_forever(
    conn: Connection, request: bytes, time_limit_s: float, catalog_dir: str | None
) -> None:
    send(
        conn, ProgressMessage('{"elapsed_s": 0.1, "objective": 1.0, "bound": 2.0, "message": "x"}')
    )
    time.sleep(600)


def input_error(
    conn: Connection, request: bytes, time_limit_s: float, catalog_dir: str | None
) -> None:
    send(conn, FailedMessage(FailureKind.INPUT, "$.tiers[1].min_tokens_per_s_per_user: unmet"))


def crash(conn: Connection, request: bytes, time_limit_s: float, catalog_dir: str | None) -> None:
    os._exit(3)


def _settings(tmp_path: Path) -> Settings:
    return Settings(db_path=tmp_path / "plans.sqlite", poll_s=0.05, lease_s=5, kill_grace_s=0.3)


def _run(
    tmp_path: Path,
    target: Callable[..., None],
    scenario: Callable[[JobRunner, Store], object],
) -> object:
    async def main() -> object:
        settings = _settings(tmp_path)
        store = Store(settings.db_path)
        store.initialize()
        runner = JobRunner(store, settings, target=target)
        await runner.start()
        try:
            return await scenario(runner, store)  # type: ignore[misc]
        finally:
            await runner.stop()

    return asyncio.run(main())


async def _until(store: Store, plan_id: str, status: PlanStatus, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = store.get(plan_id)
        if record is not None and record.status == status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"plan {plan_id} never became {status}: {store.get(plan_id)}")


async def _launched(runner: JobRunner, plan_id: str, timeout_s: float = 20) -> int:
    """The pid of the process solving ``plan_id`` (claimed in the store just before)."""
    deadline = time.monotonic() + timeout_s
    while plan_id not in runner._jobs or runner._jobs[plan_id].process.pid is None:
        assert time.monotonic() < deadline, f"plan {plan_id} never launched"
        await asyncio.sleep(0.02)
    return runner._jobs[plan_id].process.pid  # type: ignore[return-value]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is dead too
        return f.read().split()[2] != "Z"


def test_solve_result_and_report_are_stored(tmp_path: Path) -> None:
    async def scenario(runner: JobRunner, store: Store) -> PlanRecord | None:
        store.enqueue("p1", "n", b'{"a":1}', 10.0, queue_max=4)
        runner.wake()
        return await runner.wait("p1", 20)

    record = _run(tmp_path, echo, scenario)
    assert isinstance(record, PlanRecord) and record.status == PlanStatus.DONE
    store = Store(tmp_path / "plans.sqlite")
    assert store.get("p1", with_plan=True).plan == b'{"a":1}'  # type: ignore[union-attr]
    assert store.report("p1", "flows") == b'PAR1{"a":1}'


def test_cancel_kills_the_running_process(tmp_path: Path) -> None:
    async def scenario(runner: JobRunner, store: Store) -> None:
        store.enqueue("p1", "n", b"{}", 60.0, queue_max=4)
        runner.wake()
        await _until(store, "p1", PlanStatus.RUNNING)
        pid = await _launched(runner, "p1")
        assert _alive(pid)
        deadline = time.monotonic() + 10
        while store.get("p1").progress is None:  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "progress never relayed"
            await asyncio.sleep(0.02)
        assert store.cancel("p1")
        deadline = time.monotonic() + 10
        while _alive(pid) or runner.running:
            assert time.monotonic() < deadline, "cancelled solve still running"
            await asyncio.sleep(0.02)
        record = store.get("p1")
        assert record is not None and record.status == PlanStatus.CANCELLED

    _run(tmp_path, sleep_forever, scenario)


def test_time_limit_plus_grace_kills_and_fails(tmp_path: Path) -> None:
    async def scenario(runner: JobRunner, store: Store) -> PlanRecord | None:
        store.enqueue("p1", "n", b"{}", 0.2, queue_max=4)
        runner.wake()
        return await runner.wait("p1", 20)

    record = _run(tmp_path, sleep_forever, scenario)
    assert isinstance(record, PlanRecord) and record.status == PlanStatus.FAILED
    assert record.failure_kind == FailureKind.TIMEOUT
    assert "time limit of 0.2 s" in (record.reason or "")


def test_input_failure_and_crash_are_recorded(tmp_path: Path) -> None:
    async def scenario(runner: JobRunner, store: Store) -> PlanRecord | None:
        store.enqueue("p1", "n", b"{}", 10.0, queue_max=4)
        runner.wake()
        return await runner.wait("p1", 20)

    failed = _run(tmp_path / "a", input_error, scenario)
    assert isinstance(failed, PlanRecord) and failed.failure_kind == FailureKind.INPUT
    assert failed.reason == "$.tiers[1].min_tokens_per_s_per_user: unmet"
    crashed = _run(tmp_path / "b", crash, scenario)
    assert isinstance(crashed, PlanRecord) and crashed.failure_kind == FailureKind.CRASH
    assert "exit code 3" in (crashed.reason or "")


def test_stop_gives_running_plans_back_to_the_queue(tmp_path: Path) -> None:
    pids: list[int] = []

    async def scenario(runner: JobRunner, store: Store) -> None:
        store.enqueue("p1", "n", b"{}", 60.0, queue_max=4)
        runner.wake()
        await _until(store, "p1", PlanStatus.RUNNING)
        pids.append(await _launched(runner, "p1"))

    _run(tmp_path, sleep_forever, scenario)
    record = Store(tmp_path / "plans.sqlite").get("p1")
    assert record is not None and record.status == PlanStatus.QUEUED and record.attempts == 0
    deadline = time.monotonic() + 5
    while _alive(pids[0]):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_workers_bound_concurrent_solves(tmp_path: Path) -> None:
    async def scenario(runner: JobRunner, store: Store) -> list[PlanStatus]:
        for i in range(3):
            store.enqueue(f"p{i}", "n", b"{}", 60.0, queue_max=4)
        runner.wake()
        await _until(store, "p0", PlanStatus.RUNNING)
        await asyncio.sleep(0.3)
        return [store.get(f"p{i}").status for i in range(3)]  # type: ignore[union-attr]

    statuses = _run(tmp_path, sleep_forever, scenario)
    assert statuses == [PlanStatus.RUNNING, PlanStatus.QUEUED, PlanStatus.QUEUED]
