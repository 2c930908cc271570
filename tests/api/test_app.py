"""The REST API against the real app (TestClient on create_app(test settings)): health, catalog,
OpenAPI, and every kind of bad input answered with a 4xx naming the field, never a 500."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import polars as pl
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.settings import Settings
from fleet.catalog.load import load_catalog

REPO = Path(__file__).resolve().parents[2]


def tiny() -> dict[str, Any]:
    """scenarios/tiny.toml as the JSON body a client would send."""
    return msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes())


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(
        db_path=tmp_path_factory.mktemp("api") / "plans.sqlite",
        max_body_bytes=256 * 1024,
        max_wait_s=60,
        poll_s=0.05,
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _post(client: TestClient[Any], body: dict[str, Any] | bytes, query: str = "") -> Any:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(
        f"/v1/plans{query}", content=content, headers={"content-type": "application/json"}
    )


def test_health(client: TestClient[Any]) -> None:
    r = client.get("/health")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ok" and body["workers"] == 1 and body["queue_max"] == 16


@pytest.mark.parametrize("kind", ["accelerators", "systems", "models"])
def test_catalog_lists_every_entry(client: TestClient[Any], kind: str) -> None:
    r = client.get(f"/v1/catalog/{kind}")
    assert r.status_code == 200
    expected = list(getattr(load_catalog(), kind))
    assert [entry["id"] for entry in r.json()] == expected
    assert all(entry["sources"] for entry in r.json())


def test_catalog_lists_the_engines_with_sources(client: TestClient[Any]) -> None:
    r = client.get("/v1/catalog/engines")
    assert r.status_code == 200
    assert [entry["id"] for entry in r.json()] == list(load_catalog().engines)
    assert all(f["sources"] for entry in r.json() for f in entry["factors"])


def test_openapi_schema_documents_the_scenario_body(client: TestClient[Any]) -> None:
    spec = client.get("/schema/openapi.json").json()
    post = spec["paths"]["/v1/plans"]["post"]
    assert post["operationId"] == "createPlan"
    ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.rsplit("/", 1)[-1] in spec["components"]["schemas"]
    operation_ids = {op["operationId"] for path in spec["paths"].values() for op in path.values()}
    assert {
        "getPlan",
        "listPlans",
        "cancelOrDeletePlan",
        "getPlanReportTable",
        "listAccelerators",
        "listSystems",
        "listModels",
        "health",
    } <= operation_ids
    assert client.get("/schema").status_code == 200  # the interactive UI


def _with(path: list[str | int], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(tiny())
    node: Any = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return body


BAD_BODIES = [
    # (what, body, field, words in the detail)
    ("malformed JSON", b'{"meta": {"name": "x"', "$", "not valid json"),
    ("not an object", b"[1, 2]", "$", "expected `object`"),
    ("empty body", b"", "$", "not valid json"),
    ("unknown top-level field", _with(["bogus"], 1), "$.bogus", "unknown field"),
    (
        "unknown nested field",
        _with(["fleet", "pools", 0, "colour"], "red"),
        "$.fleet.pools[0].colour",
        "unknown field",
    ),
    (
        "wrong type",
        _with(["fleet", "pools", 0, "count"], "six"),
        "$.fleet.pools[0].count",
        "expected `int`",
    ),
    (
        "number as string",
        _with(["fleet", "pools", 0, "count"], "6"),
        "$.fleet.pools[0].count",
        "expected `int`",
    ),
    ("negative count", _with(["fleet", "pools", 0, "count"], -1), "$.fleet.pools[0].count", ">= 0"),
    (
        "negative demand",
        _with(["demand", 0, "mean_output_tokens"], -5),
        "$.demand[0].mean_output_tokens",
        "> 0",
    ),
    (
        "unknown system id",
        _with(["fleet", "pools", 0, "system"], "hgx-z900-8"),
        "$.fleet.pools[0].system",
        "unknown system 'hgx-z900-8'",
    ),
    (
        "unknown model id",
        _with(["families", 0, "flagship"], "llama-9-9000b"),
        "$.families[0].flagship",
        "unknown model 'llama-9-9000b'",
    ),
    (
        "unknown engine id",
        _with(["options", "search"], {"engines": ["trtllm", "tgi"]}),
        "$.options.search.engines[1]",
        "unknown engine 'tgi'",
    ),
    (
        "missing field",
        {k: v for k, v in tiny().items() if k != "fleet"},
        "$.fleet",
        "required field missing",
    ),
    (
        "too-long horizon",
        _with(["demand", 0, "requests_per_s"], [1.0] * 1345),
        "$.demand[0]",
        "horizon of 1345 hours",
    ),
    (
        "reference multiplier off the menu",
        _with(["tiers", 0, "reference_multiplier"], 7.0),
        "$.tiers[0].reference_multiplier",
        "not on the menu",
    ),
]


@pytest.mark.parametrize(
    ("what", "body", "field", "words"), BAD_BODIES, ids=[b[0] for b in BAD_BODIES]
)
def test_bad_scenario_is_422_naming_the_field(
    client: TestClient[Any], what: str, body: dict[str, Any] | bytes, field: str, words: str
) -> None:
    before = client.get("/v1/plans?limit=200").json()["items"]
    r = _post(client, body)
    assert r.status_code == 422, (what, r.text)
    error = r.json()
    assert error["error"] == "invalid_input"
    assert error["field"] == field, error
    assert words in error["detail"].lower() or words in error["detail"], error
    assert client.get("/v1/plans?limit=200").json()["items"] == before  # nothing queued


def test_oversized_body_is_413(client: TestClient[Any]) -> None:
    body = _with(["meta", "description"], "x" * 300_000)
    r = _post(client, body)
    assert r.status_code == 413
    assert r.json()["error"] == "too_large" and "262144 bytes" in r.json()["detail"]


def test_server_horizon_cap(tmp_path: Path) -> None:
    settings = Settings(db_path=tmp_path / "p.sqlite", max_horizon_hours=12)
    with TestClient(create_app(settings)) as c:
        r = _post(c, tiny())
    assert r.status_code == 422
    assert r.json()["field"] == "$.demand[0]" and "limit of 12 hours" in r.json()["detail"]


@pytest.mark.parametrize(
    ("query", "status", "field"),
    [
        ("?wait=soon", 400, "wait"),
        ("?wait=-1", 400, "wait"),
        ("?wait=61", 422, "wait"),
        ("?time_limit_s=0", 400, "time_limit_s"),
        ("?time_limit_s=100000", 422, "time_limit_s"),
    ],
)
def test_bad_query_parameters_name_the_parameter(
    client: TestClient[Any], query: str, status: int, field: str
) -> None:
    r = _post(client, _with(["options", "time_limit_s"], 5), query)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field


def test_scenario_time_limit_over_server_limit(tmp_path: Path) -> None:
    settings = Settings(db_path=tmp_path / "p.sqlite", max_time_limit_s=5)
    with TestClient(create_app(settings)) as c:
        r = _post(c, tiny())
    assert r.status_code == 422 and r.json()["field"] == "$.options.time_limit_s"


def test_unknown_plan_and_route_are_404(client: TestClient[Any]) -> None:
    for path in ("/v1/plans/nope", "/v1/plans/nope/report/flows.parquet", "/v1/nothing"):
        r = client.get(path)
        assert r.status_code == 404, path
        assert r.json()["error"] == "not_found"
    assert client.delete("/v1/plans/nope").status_code == 404


def test_list_paging_rejects_bad_limit(client: TestClient[Any]) -> None:
    r = client.get("/v1/plans?limit=0")
    assert r.status_code == 400 and r.json()["field"] == "limit"
    r = client.get("/v1/plans?status=sleeping")
    assert r.status_code == 400 and r.json()["field"] == "status"


@pytest.mark.parametrize(
    ("tier", "change", "field", "words"),
    [
        (
            1,
            {"min_tokens_per_s_per_user": 50_000},
            "$.tiers[1].min_tokens_per_s_per_user",
            "50000 tokens/s per user",
        ),
        (1, {"max_ttft_ms": 0.5}, "$.tiers[1].max_ttft_ms", "time to first token"),
    ],
)
def test_slo_no_configuration_meets_is_422(
    client: TestClient[Any], tier: int, change: dict[str, float], field: str, words: str
) -> None:
    body = tiny()
    body["tiers"][tier].update(change)
    r = _post(client, body)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert words in r.json()["detail"] and "fast tier" in r.json()["detail"]


def test_plan_lifecycle_wait_get_list_report_delete(client: TestClient[Any]) -> None:
    r = _post(client, tiny(), "?wait=60")
    assert r.status_code == 201, r.text
    created = r.json()
    plan_id = created["id"]
    assert r.headers["location"] == f"/v1/plans/{plan_id}"
    assert created["status"] == "done" and created["plan"]["scenario"] == "tiny"
    assert created["attempts"] == 1 and created["finished_at"] >= created["started_at"]

    got = client.get(f"/v1/plans/{plan_id}").json()
    assert got == created
    assert client.get(f"/v1/plans/{plan_id}/scenario").json()["meta"]["name"] == "tiny"
    listed = client.get("/v1/plans?status=done").json()["items"]
    assert plan_id in [item["id"] for item in listed]
    assert "plan" not in listed[0]  # pages carry statuses, not plans

    assert set(created["report_tables"]) == {"assignments", "pools", "products", "demand"}
    for table in created["report_tables"]:
        r = client.get(f"/v1/plans/{plan_id}/report/{table}.parquet")
        assert r.status_code == 200 and r.headers["content-type"].startswith(
            "application/vnd.apache.parquet"
        )
        frame = pl.read_parquet(io.BytesIO(r.content))
        assert "week_start" in frame.columns
    r = client.get(f"/v1/plans/{plan_id}/report/nope.parquet")
    assert r.status_code == 404 and r.json()["field"] == "table"
    assert client.get(f"/v1/plans/{plan_id}/report/pools.csv").status_code == 404

    assert client.delete(f"/v1/plans/{plan_id}").status_code == 204
    assert client.get(f"/v1/plans/{plan_id}").status_code == 404


def test_accept_then_cancel(client: TestClient[Any]) -> None:
    r = _post(client, tiny())
    assert r.status_code == 202
    assert r.headers["location"] == r.json()["href"]
    plan_id = r.json()["id"]
    r = client.delete(f"/v1/plans/{plan_id}")
    if r.status_code == 200:  # cancelled while queued or running
        assert r.json()["status"] == "cancelled" and r.json()["reason"] == "cancelled by request"
        assert client.get(f"/v1/plans/{plan_id}").json()["status"] == "cancelled"
        assert client.delete(f"/v1/plans/{plan_id}").status_code == 204  # now deletes
    else:  # it had already finished: deleted
        assert r.status_code == 204
    assert client.get(f"/v1/plans/{plan_id}").status_code == 404


def test_full_queue_is_503_with_retry_after(tmp_path: Path) -> None:
    """queue_max = 0: every plan would wait beyond the bound (the bound itself is tested on the
    store, the overload of a real server in bench/bench_api.py)."""
    settings = Settings(db_path=tmp_path / "p.sqlite", queue_max=0, retry_after_s=7)
    with TestClient(create_app(settings)) as c:
        r = _post(c, tiny())
        assert r.status_code == 503
        assert r.headers["retry-after"] == "7"
        assert r.json()["error"] == "queue_full"
        assert c.get("/v1/plans").json()["items"] == []
