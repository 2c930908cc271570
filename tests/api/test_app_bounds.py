"""The API face of issue-8 inputs: numbers out of the schema's bounds are 422 naming the field,
and a valid scenario that serves nothing is a done plan with zero revenue and the reasons."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.settings import Settings

REPO = Path(__file__).resolve().parents[2]


def tiny() -> dict[str, Any]:
    return msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes())


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(db_path=tmp_path_factory.mktemp("api") / "plans.sqlite", poll_s=0.05)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def _post(client: TestClient[Any], content: bytes, query: str = "") -> Any:
    return client.post(
        f"/v1/plans{query}", content=content, headers={"content-type": "application/json"}
    )


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (
            json.dumps(tiny()).replace('"requests_per_s": [140', '"requests_per_s": [1e308'),
            "$.demand[0].requests_per_s[0]",
            "must be <= 10000000",
        ),
        (
            json.dumps(tiny()).replace('"count": 6', '"count": 9223372036854775808'),
            "$.fleet.pools[0].count",
            "must be <= 1000000",
        ),
        (
            json.dumps(tiny()).replace('"count": 6', '"count": 6, "usd_per_hour": 1e400'),
            "$.fleet.pools[0].usd_per_hour",
            "out of range",
        ),
    ],
    ids=["requests_per_s=1e308", "count=2^63", "usd_per_hour=1e400"],
)
def test_out_of_range_number_is_422_naming_the_field(
    client: TestClient[Any], body: str, field: str, words: str
) -> None:
    assert body != json.dumps(tiny())
    r = _post(client, body.encode())
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and words in r.json()["detail"], r.json()


@pytest.mark.parametrize("change", ["zero demand", "pool at 400 USD/h"])
def test_plan_that_serves_nothing_is_done_not_failed(client: TestClient[Any], change: str) -> None:
    body = tiny()
    body["options"]["time_limit_s"] = 10
    if change == "zero demand":
        body["demand"][0]["requests_per_s"] = [0.0] * 24
    else:
        body["fleet"]["pools"][0]["usd_per_hour"] = 400.0
    r = _post(client, json.dumps(body).encode(), "?wait=60")
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["status"] == "done", created
    plan = created["plan"]
    assert plan["status"] == "optimal" and plan["revenue_usd"] == 0.0 and plan["assignments"] == []
    nothing = [w for w in plan["warnings"] if "nothing served" in w]
    assert len(nothing) == 2, plan["warnings"]
