"""Issue 8 item 1, in the solver processes: each runs under an address-space limit, and a plan's
time limit covers building its tables as well as the solve. The requests here are put straight
into the store (as a stored request from before these limits would be), bypassing the HTTP
checks, to show that the worker bounds itself."""

from __future__ import annotations

import asyncio
import resource
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import msgspec

from api import worker
from api.jobs import JobRunner
from api.settings import Settings
from api.store import Store
from api.store_records import FailureKind, PlanRecord, PlanStatus
from planner.scenario.decode import load_scenario

REPO = Path(__file__).resolve().parents[2]


def report_memory_limit(
    conn: Connection, request: bytes, time_limit_s: float, catalog_dir: str | None
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    worker.send(conn, worker.DoneMessage(f"{soft} {hard}".encode(), {}))


def _solve_one(
    tmp_path: Path, request: bytes, time_limit_s: float, settings: Settings, **kwargs: Any
) -> PlanRecord:
    async def main() -> PlanRecord:
        store = Store(settings.db_path)
        store.initialize()
        runner = JobRunner(store, settings, **kwargs)
        await runner.start()
        try:
            assert store.enqueue("p1", "n", request, time_limit_s, queue_max=4)
            runner.wake()
            record = await runner.wait("p1", 120)
            assert record is not None
            return record
        finally:
            await runner.stop()

    return asyncio.run(main())


def _settings(tmp_path: Path, **kwargs: Any) -> Settings:
    return Settings(db_path=tmp_path / "plans.sqlite", poll_s=0.05, lease_s=5, **kwargs)


def _flw() -> dict[str, Any]:
    return msgspec.to_builtins(load_scenario(REPO / "scenarios" / "frontier-lab-week.toml"))


def test_solver_process_runs_under_the_memory_limit(tmp_path: Path) -> None:
    settings = _settings(tmp_path, solver_memory_mb=3000)
    record = _solve_one(tmp_path, b"{}", 10.0, settings, target=report_memory_limit)
    assert record.status == PlanStatus.DONE
    plan = Store(settings.db_path).get("p1", with_plan=True).plan  # type: ignore[union-attr]
    assert plan == f"{3000 * 2**20} {3000 * 2**20}".encode()


def test_a_plan_over_the_memory_limit_fails_instead_of_taking_the_machine(tmp_path: Path) -> None:
    """The issue's plan repro, every search list at its bound, reaching a worker: on the
    catalog's widest grid (qwen3-30b-a3b on the groqrack, 857 layouts x 4 x 64 x 16 = 3.5
    million configurations, ~3.5 GB) it stops at its 1.5 GiB cap."""
    body = msgspec.to_builtins(load_scenario(REPO / "scenarios" / "tiny.toml"))
    body["fleet"]["pools"][0]["system"] = "groqrack"
    body["families"][0]["flagship"] = "qwen3-30b-a3b"
    body["options"]["search"] = {
        "precisions": ["bf16", "fp8", "fp4", "int8"],
        "batch_caps": list(range(1, 65)),
        "speculative": [
            {"draft_tokens": 1 + k % 8, "acceptance": 0.5 + 0.02 * k} for k in range(16)
        ],
    }
    settings = _settings(tmp_path, solver_memory_mb=1536, kill_grace_s=60)
    record = _solve_one(tmp_path, msgspec.json.encode(body), 100.0, settings)
    assert record.status == PlanStatus.FAILED, record
    assert record.failure_kind in (FailureKind.INPUT, FailureKind.CRASH), record
    assert "FAREBOX_SOLVER_MEMORY_MB" in (record.reason or ""), record.reason
    assert "1536 MiB" in (record.reason or ""), record.reason
    assert record.started_at is not None and record.finished_at is not None
    assert record.finished_at - record.started_at < 60


def test_the_time_limit_covers_building_the_tables(tmp_path: Path) -> None:
    """The frontier-lab week takes ~6-13 s to build its tables; with a 1.5 s limit its worker
    stops itself at the limit (the runner's kill, 60 s later, never comes into play)."""
    settings = _settings(tmp_path, kill_grace_s=60)
    record = _solve_one(tmp_path, msgspec.json.encode(_flw()), 1.5, settings)
    assert record.status == PlanStatus.FAILED, record
    assert record.failure_kind == FailureKind.TIMEOUT
    assert "while building the planning tables" in (record.reason or ""), record.reason
    assert record.started_at is not None and record.finished_at is not None
    took = record.finished_at - record.started_at
    assert took < 1.5 + 1.5, f"the plan ended {took:.1f} s after it started"


def test_the_solver_gets_the_time_the_build_left(tmp_path: Path) -> None:
    """A small plan builds in a fraction of its limit and solves in what is left."""
    captured: list[float] = []

    def fake_solve(tables: object, options: Any, report: object) -> object:
        captured.append(options.time_limit_s)
        raise RuntimeError("stop here")

    original = worker.planner_solve
    worker.planner_solve = fake_solve  # type: ignore[assignment]
    try:
        request = msgspec.json.encode(load_scenario(REPO / "scenarios" / "tiny.toml"))
        reader, writer = __import__("multiprocessing").Pipe(duplex=False)
        worker.solve(writer, request, 7.0, None)
        outcome = worker.receive(reader)
    finally:
        worker.planner_solve = original
    assert isinstance(outcome, worker.FailedMessage) and "stop here" in outcome.reason
    assert len(captured) == 1 and 0 < captured[0] < 7.0
