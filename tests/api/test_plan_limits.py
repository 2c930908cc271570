"""Bounded output per plan request: a plan's per-period rows are counted and refused over
``max_plan_rows`` before anything is stored; the store refuses new plans with 507 while it holds
``max_store_bytes`` and never evicts what it holds; the viewer's cache is bounded by plan rows;
a scenario's description is bounded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.settings import MIB, Settings
from api.store import Store, used_bytes
from api.store_errors import StoreFull
from api.store_records import PlanStatus
from api.viewer.view import ViewCache
from planner.build.plan_rows import plan_rows
from planner.scenario.decode import decode_scenario

REPO = Path(__file__).resolve().parents[2]


def tiny() -> dict[str, Any]:
    return msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes())


def _post(client: TestClient[Any], body: dict[str, Any], query: str = "") -> Any:
    return client.post(
        f"/v1/plans{query}",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient[Any]]:
    settings = Settings(db_path=tmp_path / "plans.sqlite", poll_s=0.05, max_plan_rows=1000)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_the_count_is_the_plans_rows(client: TestClient[Any]) -> None:
    body = tiny()
    body["options"]["time_limit_s"] = 10
    body["demand"][0]["requests_per_s"] = [0.0] * 24  # the rows are there whatever the demand
    r = _post(client, body, "?wait=60")
    assert r.status_code == 201, r.text
    plan = r.json()["plan"]
    scenario = decode_scenario(json.dumps(body).encode(), "json")
    assert plan_rows(scenario) == len(plan["pool_usage"]) + len(plan["flows"]) > 0


def test_a_plan_over_the_row_limit_is_refused_before_it_is_stored(
    client: TestClient[Any],
) -> None:
    body = tiny()
    pool = body["fleet"]["pools"][0]
    # 24 hours x (pools + families x tiers): 41 pools reach 24 x (41 + 1 x 2) = 1,032 > 1,000
    body["fleet"]["pools"] = [{**pool, "id": f"p{i}"} for i in range(41)]
    r = _post(client, body)
    assert r.status_code == 422, r.text
    err = r.json()
    assert err["field"] == "$.fleet.pools"
    assert "1,032 pool and demand rows" in err["detail"] and "limit of 1,000" in err["detail"]
    assert client.get("/v1/plans").json()["items"] == []
    body["fleet"]["pools"] = body["fleet"]["pools"][:40]  # 24 x 42 = 1,008: still over
    assert _post(client, body).status_code == 422
    body["fleet"]["pools"] = body["fleet"]["pools"][:39]  # 24 x 41 = 984
    assert _post(client, body).status_code == 202


def test_a_full_store_refuses_new_plans_and_keeps_what_it_holds(tmp_path: Path) -> None:
    db = tmp_path / "plans.sqlite"
    store = Store(db)
    store.initialize()
    # a 1.5 MiB stored request fills a store limited to 1 MiB
    big = b'{"pad":"' + b"x" * (3 * MIB // 2) + b'"}'
    assert store.enqueue("old", "kept", big, 10.0, queue_max=4)
    assert store.cancel("old")
    store.close()
    settings = Settings(db_path=db, poll_s=0.05, max_store_bytes=MIB)
    with TestClient(create_app(settings)) as client:
        r = _post(client, tiny())
        assert r.status_code == 507, r.text
        err = r.json()
        assert err["error"] == "store_full" and "FAREBOX_MAX_STORE_BYTES" in err["detail"]
        assert "delete plans" in err["detail"]
        listed = client.get("/v1/plans").json()["items"]
        assert [p["id"] for p in listed] == ["old"]  # nothing evicted, nothing added
        assert client.get("/v1/plans/old/scenario").status_code == 200
        # deleting frees the pages the next plan reuses
        assert client.delete("/v1/plans/old").status_code == 204
        assert _post(client, tiny()).status_code == 202


def test_the_store_check_is_atomic_with_the_insert(tmp_path: Path) -> None:
    store = Store(tmp_path / "plans.sqlite")
    store.initialize()
    used = used_bytes(store._conn())
    with pytest.raises(StoreFull) as raised:
        store.enqueue("a", "n", b"{}", 10.0, queue_max=4, max_bytes=used)
    assert raised.value.used_bytes == used
    assert store.counts()[PlanStatus.QUEUED] == 0
    assert store.enqueue("a", "n", b"{}", 10.0, queue_max=4, max_bytes=used + 1)
    with pytest.raises(StoreFull):
        store.enqueue_keyed("k", "f", "b", "n", b"{}", 10.0, queue_max=4, max_bytes=1)
    assert store.keyed_plan("k") is None


def _view(plan_id: str, rows: int) -> Any:
    record = SimpleNamespace(id=plan_id, status=PlanStatus.DONE)
    return SimpleNamespace(record=record, rows=rows)


def test_the_viewer_cache_is_bounded_by_plan_rows() -> None:
    cache = ViewCache(size=8, max_rows=1000)
    for name in "abc":
        cache.put(_view(name, 400))
    # a + b + c = 1,200 rows: the oldest goes
    assert cache.get("a") is None and cache.get("b") is not None and cache.get("c") is not None
    cache.put(_view("huge", 5000))  # over the bound alone: kept, everything older goes
    assert cache.get("huge") is not None
    assert cache.get("b") is None and cache.get("c") is None
    small = ViewCache(size=2, max_rows=10**9)
    for name in "xyz":
        small.put(_view(name, 1))
    assert small.get("x") is None and small.get("z") is not None


def test_a_description_is_bounded(client: TestClient[Any]) -> None:
    body = tiny()
    body["meta"]["description"] = "x" * 8001
    r = _post(client, body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "$.meta.description"
