"""``POST /v1/plans`` with the scenario TOML file as the body (``Content-Type: application/toml``):
the same decoder, checks and errors as a JSON body; the request is stored as JSON."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.settings import Settings

REPO = Path(__file__).resolve().parents[2]
TINY = (REPO / "scenarios" / "tiny.toml").read_bytes()
TOML = {"content-type": "application/toml"}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(
        db_path=tmp_path_factory.mktemp("toml") / "plans.sqlite", max_wait_s=60, poll_s=0.05
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_a_toml_body_plans_like_its_json(client: TestClient[Any]) -> None:
    r = client.post("/v1/plans?wait=60", content=TINY, headers=TOML)
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "done"
    stored = client.get(f"/v1/plans/{r.json()['id']}/scenario")
    assert stored.headers["content-type"].startswith("application/json")
    assert stored.json()["meta"]["name"] == msgspec.toml.decode(TINY)["meta"]["name"]
    as_json = client.post("/v1/plans?wait=60", json=msgspec.toml.decode(TINY))
    assert as_json.status_code == 201, as_json.text
    assert as_json.json()["plan"]["objective_usd"] == pytest.approx(
        r.json()["plan"]["objective_usd"], rel=1e-9
    )


def test_a_toml_date_is_a_date(client: TestClient[Any]) -> None:
    body = TINY.replace(b'name = "tiny"', b'name = "tiny"\nstart_date = 2026-03-02')
    r = client.post("/v1/plans", content=body, headers={"content-type": "application/toml"})
    assert r.status_code == 202, r.text
    assert client.get(f"/v1/plans/{r.json()['id']}/scenario").json()["meta"]["start_date"] == (
        "2026-03-02"
    )


@pytest.mark.parametrize(
    ("what", "body", "field", "words"),
    [
        ("syntax error", TINY.replace(b"[meta]", b"[meta"), "$", "not valid toml: expected"),
        ("not UTF-8", b'[meta]\nname = "\xff"\n', "$", "invalid utf-8"),
        ("empty", b"", "$.meta", "required field missing"),
        (
            "wrong type",
            TINY.replace(b"count = 6", b'count = "six"'),
            "$.fleet.pools[0].count",
            "expected `int`",
        ),
        (
            "unknown field",
            TINY.replace(b"[options]", b"[options]\ncolour = 1"),
            "$.options.colour",
            "unknown field",
        ),
        (
            "bad date",
            TINY.replace(b'name = "tiny"', b'name = "tiny"\nstart_date = "monday"'),
            "$.meta.start_date",
            "date",
        ),
    ],
)
def test_bad_toml_is_a_422_naming_the_problem(
    client: TestClient[Any], what: str, body: bytes, field: str, words: str
) -> None:
    r = client.post("/v1/plans", content=body, headers=TOML)
    assert r.status_code == 422, (what, r.text)
    error = r.json()
    assert error["field"] == field, (what, error)
    assert words in error["detail"].lower(), (what, error)
