"""One server per store (issue 8, item 4), with real ``farebox serve`` processes: a second server
on the same database file or the same port is refused with one line and exit status 2 and leaves
the first server's running plan alone; a corrupt or unwritable database file is refused naming
it; and ``/health`` of a running app reports a store that became corrupt or unwritable (503).

Waits are bounded; servers listen on free loopback ports only."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.settings import Settings
from tests.api.test_durability import REPO, SERVE, _free_port, _server, _tiny


def _serve(db: Path, port: int) -> subprocess.CompletedProcess[str]:
    """A second ``farebox serve`` that is expected to refuse (killed after 60 s if it starts)."""
    return subprocess.run(
        [sys.executable, "-c", SERVE, "serve", "--port", str(port), "--db", str(db)],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _refused(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit status 2 and exactly one line on stderr containing ``words``."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("farebox serve: error: "), lines
    assert all(w in lines[0] for w in words), (words, lines[0])
    return lines[0]


def _leases(db: Path) -> list[tuple[str, str, int, str | None]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, status, attempts, lease_owner FROM plans ORDER BY seq")
        return list(rows)


def _week() -> bytes:
    """The frontier-lab week: its solve takes long enough (~15 s) to still run while a second
    server tries to start."""
    return msgspec.json.encode(
        msgspec.toml.decode((REPO / "scenarios" / "frontier-lab-week.toml").read_bytes())
    )


@contextmanager
def _running_plan(url: str, db: Path) -> Iterator[str]:
    r = httpx.post(f"{url}/v1/plans", content=_week(), timeout=60)
    assert r.status_code == 202, r.text
    plan_id = r.json()["id"]
    try:
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/v1/plans/{plan_id}", timeout=10).json()["status"] != "running":
            assert time.monotonic() < deadline, "the plan never started"
            time.sleep(0.05)
        yield plan_id
    finally:
        httpx.delete(f"{url}/v1/plans/{plan_id}", timeout=10)  # stop the solve


def test_second_server_on_the_same_db_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "plans.sqlite"
    with _server(db, tmp_path / "server.log") as (_, url), _running_plan(url, db) as plan_id:
        before = _leases(db)
        assert [row[1] for row in before] == ["running"] and before[0][3]
        line = _refused(_serve(db, _free_port()), str(db), "already served by", "pid ")
        assert url in line  # names the server that holds it
        assert _leases(db) == before  # not requeued, same owner, same attempt
        plan = httpx.get(f"{url}/v1/plans/{plan_id}", timeout=10).json()
        assert plan["status"] == "running" and plan["attempts"] == 1
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200


def test_second_server_on_the_same_port_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "plans.sqlite"
    with _server(db, tmp_path / "server.log") as (_, url), _running_plan(url, db):
        before = _leases(db)
        port = int(url.rsplit(":", 1)[1])
        other = tmp_path / "other.sqlite"
        _refused(_serve(other, port), f"127.0.0.1:{port}", "already in use")
        assert not other.exists()  # refused before opening its own store
        assert _leases(db) == before
        assert httpx.get(f"{url}/health", timeout=10).json()["status"] == "ok"


def test_corrupt_db_is_refused_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "plans.sqlite"
    garbage = bytes(range(256)) * 16
    db.write_bytes(garbage)
    _refused(_serve(db, _free_port()), str(db), "store corrupt", "not a database")
    assert db.read_bytes() == garbage  # left as it was


@pytest.mark.parametrize("where", ["under a file", "a directory"])
def test_unusable_db_path_is_refused_naming_it(tmp_path: Path, where: str) -> None:
    if where == "under a file":
        (tmp_path / "file").write_text("not a directory")
        db = tmp_path / "file" / "plans.sqlite"
        _refused(_serve(db, _free_port()), str(db), "cannot create its directory", "in the way")
    else:
        db = tmp_path / "plans.sqlite"
        db.mkdir()
        _refused(_serve(db, _free_port()), str(db), "store unwritable", "unable to open")


def test_read_only_db_is_refused_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "plans.sqlite"
    sqlite3.connect(db).close()
    with _read_only([db]):
        _refused(_serve(db, _free_port()), str(db), "store unwritable", "readonly")


@contextmanager
def _read_only(paths: Sequence[Path]) -> Iterator[None]:
    """Files nobody may write, root included (``chattr +i``; root ignores permission bits)."""
    names = [str(p) for p in paths]
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", *names], capture_output=True, check=False)
        if made.returncode != 0:
            pytest.skip(f"chattr +i is not available here: {made.stderr.decode().strip()}")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", *names], check=True)
    else:
        for p in paths:
            p.chmod(0o444)
        try:
            yield
        finally:
            for p in paths:
                p.chmod(0o644)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[tuple[TestClient[Any], Path]]:
    db = tmp_path / "plans.sqlite"
    with TestClient(create_app(Settings(db_path=db, poll_s=0.05))) as client:
        yield client, db


def test_health_reports_a_store_that_became_unwritable(app: tuple[TestClient[Any], Path]) -> None:
    client, db = app
    assert client.get("/health").json()["status"] == "ok"
    # the -shm file stays writable: SQLite maps it, and writing a mapped immutable file is SIGBUS
    with _read_only([db, db.with_name(db.name + "-wal")]):
        r = client.get("/health")
        assert r.status_code == 503, r.text
        assert r.json()["status"].startswith(f"store unwritable: {db}: "), r.text
        r = client.post("/v1/plans", content=_tiny())  # a request that writes: 503 too
        assert r.status_code == 503, r.text
        assert r.json()["error"] == "store" and str(db) in r.json()["detail"], r.text
    assert client.get("/health").status_code == 200


def test_health_reports_a_store_that_became_corrupt(app: tuple[TestClient[Any], Path]) -> None:
    client, db = app
    assert client.get("/health").status_code == 200
    with sqlite3.connect(db) as conn:  # move every page into the main file, then damage it
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.write_bytes(bytes(range(256)) * (db.stat().st_size // 256))
    r = client.get("/health")
    assert r.status_code == 503, r.text
    assert r.json()["status"].startswith(f"store corrupt: {db}: "), r.text
