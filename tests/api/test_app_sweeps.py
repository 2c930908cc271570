"""``/v1/sweeps`` against the real app: a sweep runs in a worker process and its numbers match
the CLI's; bad requests are 422 naming the field; the queue and the limits are enforced."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.settings import Settings
from planner.sweep.backends import LocalBackend
from planner.sweep.frames import sweep_frames
from planner.sweep.grid import parse_specs
from planner.sweep.run import MonteCarlo, SweepLimits, prepare, run_sweep
from tests.planner.test_sweep_run import small

REPO = Path(__file__).resolve().parents[2]
SETS = ["pools.h100-us-east.count=1..2", "tiers.fast.max_ttft_ms=300,500"]


def scenario_doc() -> dict[str, Any]:
    return msgspec.json.decode(msgspec.json.encode(small()))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(
        db_path=tmp_path_factory.mktemp("api") / "plans.sqlite",
        max_wait_s=120,
        poll_s=0.05,
        sweep_max_points=8,
        sweep_max_evaluations=1000,
        sweep_max_s=2000,
        max_time_limit_s=60,
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _post(client: TestClient[Any], body: dict[str, Any], query: str = "") -> Any:
    return client.post(
        f"/v1/sweeps{query}",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )


def test_sweep_runs_and_matches_the_cli_numbers(client: TestClient[Any]) -> None:
    body = {"scenario": scenario_doc(), "set": SETS, "samples": 30, "seed": 5}
    r = _post(client, body, "?wait=110")
    assert r.status_code == 201, r.text
    sweep = r.json()
    assert r.headers["location"] == f"/v1/sweeps/{sweep['id']}"
    assert sweep["status"] == "done", sweep
    assert sweep["points"] == 4 and sweep["samples"] == 30
    result = sweep["result"]
    assert {"margin.png", "points.parquet", "samples.parquet"} <= set(result["files"])
    # the same sweep run directly (local processes) gives the same numbers
    s = small()
    specs = parse_specs(SETS, max_points=8)
    mc = MonteCarlo(samples=30, seed=5)
    points = prepare(s, specs, mc, SweepLimits(max_points=8))
    expected = sweep_frames(run_sweep(s, points, specs, mc, LocalBackend(2)))
    got = pl.DataFrame(result["points"]).drop("solve_s")
    assert got.equals(expected["points"].drop("solve_s").select(got.columns))
    parquet = client.get(f"/v1/sweeps/{sweep['id']}/files/samples.parquet")
    assert parquet.status_code == 200
    assert parquet.headers["content-type"] == "application/vnd.apache.parquet"
    samples = pl.read_parquet(parquet.content)
    assert samples.equals(expected["samples"])
    png = client.get(f"/v1/sweeps/{sweep['id']}/files/margin.png")
    assert png.headers["content-type"] == "image/png"
    assert png.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.get(f"/v1/sweeps/{sweep['id']}/files/nope.csv").status_code == 404
    # a finished sweep is forgotten on DELETE
    assert client.delete(f"/v1/sweeps/{sweep['id']}").status_code == 204
    assert client.get(f"/v1/sweeps/{sweep['id']}").status_code == 404


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        ({"set": ["pools.nope.count=1"]}, "$.set", "pools.nope.count: $.fleet.pools has no"),
        ({"set": ["pools.h100-us-east.count=0..20"]}, "$.set", "more than 8 values"),
        ({"samples": 300, "set": SETS}, "$.samples", "over the limit of 1,000"),
        ({"demand_cv": -1}, "$.demand_cv", "must be > 0"),
        ({"demand_error": "hour"}, "$.demand_error", "family, family-hour"),
        ({"time_limit_s": 600}, "$.time_limit_s", "must be <= 60 on this server"),
        ({"samples": "many"}, "$.samples", "expected `int`, got `str`"),
        ({"extra": 1}, "$.extra", "unknown field"),
        ({"scenario": {"meta": {"name": "x"}}}, "$.scenario.fleet", "required field missing"),
    ],
)
def test_bad_sweep_is_422_naming_the_field(
    client: TestClient[Any], edit: dict[str, Any], field: str, words: str
) -> None:
    body = {"scenario": scenario_doc(), **edit}
    r = _post(client, body)
    assert r.status_code == 422, r.text
    error = r.json()
    assert error["detail"].startswith(field), error
    assert words in error["detail"]


def test_sweep_duration_is_capped(tmp_path: Path) -> None:
    settings = Settings(db_path=tmp_path / "p.sqlite", sweep_max_points=64, sweep_max_s=300)
    with TestClient(create_app(settings)) as c:
        body = {"scenario": scenario_doc(), "set": ["pools.h100-us-east.count=0..7"]}
        r = c.post(
            "/v1/sweeps", content=json.dumps(body), headers={"content-type": "application/json"}
        )
        assert r.status_code == 422
        assert "8 points at their time limits" in r.json()["detail"]
        assert "over this server's limit of 300 s" in r.json()["detail"]


def test_unknown_sweep_is_404(client: TestClient[Any]) -> None:
    r = client.get("/v1/sweeps/nope")
    assert r.status_code == 404
    assert "no sweep" in r.json()["detail"]


def test_queue_full_is_503_and_a_running_sweep_can_be_cancelled(tmp_path: Path) -> None:
    settings = Settings(
        db_path=tmp_path / "p.sqlite", poll_s=0.05, sweep_queue_max=1, sweep_workers=1
    )
    tiny = msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes())
    body = json.dumps({"scenario": tiny, "set": ["pools.h100-us-east.count=1..8"]})
    headers = {"content-type": "application/json"}
    with TestClient(create_app(settings)) as c:
        first = c.post("/v1/sweeps", content=body, headers=headers).json()
        deadline = time.monotonic() + 30
        while c.get(f"/v1/sweeps/{first['id']}").json()["status"] == "queued":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        second = c.post("/v1/sweeps", content=body, headers=headers)
        assert second.status_code == 202  # waits in the queue (1 place)
        third = c.post("/v1/sweeps", content=body, headers=headers)
        assert third.status_code == 503
        assert "the sweep queue is full (1 waiting)" in third.json()["detail"]
        assert third.headers["retry-after"]
        for sweep_id in (first["id"], second.json()["id"]):
            r = c.delete(f"/v1/sweeps/{sweep_id}")
            assert r.status_code == 200
            assert r.json()["status"] == "cancelled"
        r = c.get(f"/v1/sweeps/{first['id']}")
        assert r.json()["status"] == "cancelled"
        assert r.json()["reason"] == "cancelled while running"
