"""Issue 8 item 1: bounded work per request. Each repro of the issue is refused before any of the
work it asks for starts (the work functions are replaced by ones that fail the test if called),
so nothing here can reproduce the 20 GB blowup."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

import api.controllers.perf
import api.services
from api.app import create_app
from api.perf_wire import MAX_FRONTIER_CONFIGS
from api.services import PlanService
from api.settings import Settings

REPO = Path(__file__).resolve().parents[2]
# the catalog's widest grid: 857 layouts with all four precisions
WIDE = {"model": "qwen3-30b-a3b", "system": "groqrack"}
SPEC16 = [{"draft_tokens": 1 + k % 8, "acceptance": 0.5 + 0.02 * k} for k in range(16)]


def scenario(name: str) -> dict[str, Any]:
    return msgspec.toml.decode((REPO / "scenarios" / f"{name}.toml").read_bytes())


def _forbidden(*_: object, **__: object) -> None:
    raise AssertionError("the work started before the request was refused")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(db_path=tmp_path_factory.mktemp("bounds") / "plans.sqlite", poll_s=0.05)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _post(client: TestClient[Any], path: str, body: dict[str, Any]) -> Any:
    content = msgspec.json.encode(body)
    return client.post(path, content=content, headers={"content-type": "application/json"})


def test_frontier_with_400_precisions_is_refused_by_the_schema(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's repro: a 4 KB frontier body with 400 precisions (x 64 batches x 16 options)."""
    monkeypatch.setattr(api.controllers.perf, "frontier", _forbidden)
    body = {**WIDE, "precisions": ["fp8", "fp4"] * 200, "batches": list(range(1, 65))}
    body["speculative"] = SPEC16
    assert 3_000 < len(json.dumps(body)) < 5_000
    started = time.perf_counter()
    r = _post(client, "/v1/frontier", body)
    assert time.perf_counter() - started < 2.0
    assert r.status_code == 400, r.text
    assert r.json()["field"] == "$.precisions"
    assert "length <= 8" in r.json()["detail"]


def test_frontier_over_the_work_limit_is_refused_before_evaluating(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every list within its bound, but the product is 857 x 4 x 64 x 16 = 3.5 million rows."""
    monkeypatch.setattr(api.controllers.perf, "frontier", _forbidden)
    body = {**WIDE, "precisions": ["bf16", "fp8", "fp4", "int8"], "batches": list(range(1, 65))}
    body["speculative"] = SPEC16
    started = time.perf_counter()
    r = _post(client, "/v1/frontier", body)
    assert time.perf_counter() - started < 2.0
    assert r.status_code == 422, r.text
    error = r.json()
    assert error["field"] == "$.batches"
    assert "3,510,272 configurations" in error["detail"]
    assert f"limit of {MAX_FRONTIER_CONFIGS:,}" in error["detail"]


def test_frontier_repeats_are_evaluated_once(client: TestClient[Any]) -> None:
    plain = {"model": "llama-3.1-8b", "accelerator": "h100-sxm", "batches": [1, 8, 64]}
    repeated = {**plain, "precisions": ["fp8", "fp8", "fp4", "fp8"], "batches": [1, 8, 64] * 20}
    repeated["speculative"] = [{"draft_tokens": 0, "acceptance": a / 10} for a in range(10)]
    a = _post(client, "/v1/frontier", {**plain, "precisions": ["fp8", "fp4"]})
    b = _post(client, "/v1/frontier", repeated)
    assert a.status_code == b.status_code == 200, b.text
    assert a.json() == b.json()


def test_plan_search_lists_are_bounded(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api.services, "screen", _forbidden)
    for field, values in (
        ("precisions", ["fp8"] * 400),
        ("batch_caps", list(range(1, 66))),
        ("speculative", [{"draft_tokens": 1, "acceptance": 0.5}] * 17),
    ):
        body = scenario("tiny")
        body["options"]["search"] = {field: values}
        r = _post(client, "/v1/plans", body)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == f"$.options.search.{field}", r.text


def test_plan_search_over_the_work_limit_is_refused_before_screening(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's repro: every search list at its bound on the frontier-lab week would evaluate
    ~40 million configurations (~13 GB) while validating, in the HTTP process."""
    monkeypatch.setattr(api.services, "screen", _forbidden)
    body = scenario("frontier-lab-week")
    body["options"]["search"] = {
        "precisions": ["bf16", "fp8", "fp4", "int8"],
        "batch_caps": list(range(1, 65)),
        "speculative": SPEC16,
    }
    started = time.perf_counter()
    r = _post(client, "/v1/plans", body)
    elapsed = time.perf_counter() - started
    assert r.status_code == 422, r.text
    error = r.json()
    assert error["field"] == "$.options.search"
    assert "over the limit of 2,000,000" in error["detail"]
    assert elapsed < 5.0, f"refusal took {elapsed:.1f} s"
    assert client.get("/v1/plans").json()["items"] == []  # nothing queued


def test_plan_with_too_many_pools_is_refused(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api.services, "screen", _forbidden)
    body = scenario("tiny")
    pool = body["fleet"]["pools"][0]
    body["fleet"]["pools"] = [{**pool, "id": f"p{i}"} for i in range(513)]
    r = _post(client, "/v1/plans", body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "$.fleet.pools"


def test_a_full_queue_refuses_before_reading_the_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queue full: 503 + Retry-After in milliseconds, whatever the body would cost to check."""
    monkeypatch.setattr(PlanService, "validate", _forbidden)
    body = scenario("frontier-lab-week")  # ~0.5-2 s of screening if it were validated
    settings = Settings(db_path=tmp_path / "plans.sqlite", queue_max=0, retry_after_s=7)
    with TestClient(create_app(settings)) as client:
        started = time.perf_counter()
        r = _post(client, "/v1/plans", body)
        elapsed = time.perf_counter() - started
    assert r.status_code == 503, r.text
    assert r.headers["retry-after"] == "7"
    assert r.json()["error"] == "queue_full"
    assert elapsed < 0.5, f"refusal took {elapsed:.2f} s"
