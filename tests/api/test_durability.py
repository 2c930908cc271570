"""An accepted plan is never lost: a real ``farebox serve`` is killed with SIGKILL (its whole
process group: granian's main and worker processes, the forkserver and the running solve, as a
container kill or a machine crash would) and restarted on the same SQLite file. Plans that were
queued or running at the kill run again; a plan finished before it is served unchanged.

Waits are bounded; the server listens on a free loopback port only."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec

from api.store import Store
from api.store_records import PlanStatus

REPO = Path(__file__).resolve().parents[2]
SERVE = "import sys; from api.cli import main; sys.exit(main())"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _server(db: Path, log: Path) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                SERVE,
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--db",
                str(db),
                "--workers",
                "1",
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"server exited: {log.read_text()[-2000:]}"
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"server never healthy: {log.read_text()[-2000:]}"
            time.sleep(0.1)
        yield proc, url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _kill9(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _tiny() -> bytes:
    return json.dumps(msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes())).encode()


def _get(url: str, plan_id: str) -> dict[str, Any]:
    r = httpx.get(f"{url}/v1/plans/{plan_id}", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_kill9_and_restart_lose_no_plan(tmp_path: Path) -> None:
    db, log = tmp_path / "plans.sqlite", tmp_path / "server.log"
    with _server(db, log) as (proc, url):
        r = httpx.post(f"{url}/v1/plans?wait=60", content=_tiny(), timeout=90)
        assert r.status_code == 201, r.text
        finished = r.json()
        assert finished["status"] == "done"
        pending = []
        for _ in range(3):
            r = httpx.post(f"{url}/v1/plans", content=_tiny(), timeout=30)
            assert r.status_code == 202, r.text
            pending.append(r.json()["id"])
        deadline = time.monotonic() + 30
        while _get(url, pending[0])["status"] == "queued":
            assert time.monotonic() < deadline, "the first plan never started"
            time.sleep(0.02)
        _kill9(proc)

    at_kill = Store(db).statuses(pending)
    assert len(at_kill) == 3  # every accepted request was committed
    assert any(s in (PlanStatus.QUEUED, PlanStatus.RUNNING) for s in at_kill.values()), at_kill

    with _server(db, log) as (_, url):
        assert _get(url, finished["id"]) == finished  # served as stored, plan included
        deadline = time.monotonic() + 90
        for plan_id in pending:
            while (plan := _get(url, plan_id))["status"] in ("queued", "running"):
                assert time.monotonic() < deadline, f"plan {plan_id} never finished after restart"
                time.sleep(0.1)
            assert plan["status"] == "done", plan
            assert plan["plan"]["scenario"] == "tiny"
            if at_kill[plan_id] == PlanStatus.RUNNING:
                assert plan["attempts"] == 2  # interrupted once, run again
        assert "interrupted plan(s) queued again" in log.read_text() or all(
            s == PlanStatus.QUEUED for s in at_kill.values()
        )


def test_workers_do_not_outlive_a_killed_main_process(tmp_path: Path) -> None:
    """kill -9 of granian's main process alone: its worker (and the worker's forkserver) notice
    and exit instead of serving on unsupervised."""
    with _server(tmp_path / "plans.sqlite", tmp_path / "server.log") as (proc, url):
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 20
        while _group_alive(proc.pid):
            assert time.monotonic() < deadline, "granian worker kept running"
            time.sleep(0.2)
        try:
            httpx.get(f"{url}/health", timeout=1)
            raise AssertionError("still answering after its main process was killed")
        except httpx.TransportError:
            pass


def _group_alive(pgid: int) -> bool:
    """Any live (non-zombie) process left in the process group."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
