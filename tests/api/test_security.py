"""Issue 8 item 7: an optional bearer token, no cross-site "simple" POSTs, and an Idempotency-Key
on POST /v1/plans that survives a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.settings import Settings
from api.store import Store
from api.store_records import KeyedPlan

REPO = Path(__file__).resolve().parents[2]
TOKEN = "s3cret-token-for-tests"
JSON = {"content-type": "application/json"}


def tiny(name: str = "tiny") -> bytes:
    body = msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes())
    body["meta"]["name"] = name
    return msgspec.json.encode(body)


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    db = tmp_path_factory.mktemp("auth") / "plans.sqlite"
    with TestClient(create_app(Settings(db_path=db, api_token=TOKEN, poll_s=0.05))) as client:
        yield client


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/catalog/models"),
        ("GET", "/v1/plans"),
        ("GET", "/v1/plans/nope"),
        ("POST", "/v1/plans"),
        ("POST", "/v1/estimate"),
        ("DELETE", "/v1/plans/nope"),
    ],
)
def test_every_v1_route_needs_the_token(locked: TestClient[Any], method: str, path: str) -> None:
    for headers in (
        {},
        {"authorization": "Bearer wrong-token"},
        {"authorization": f"Basic {TOKEN}"},
        {"authorization": f"Bearer {TOKEN}x"},
    ):
        r = locked.request(method, path, headers={**JSON, **headers}, content=b"{}")
        assert r.status_code == 401, (headers, r.text)
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert r.json()["error"] == "unauthorized"


def test_the_token_opens_v1_and_health_and_schema_stay_open(locked: TestClient[Any]) -> None:
    auth = {"authorization": f"Bearer {TOKEN}"}
    assert locked.get("/v1/catalog/models", headers=auth).status_code == 200
    r = locked.post("/v1/plans?wait=30", content=tiny(), headers={**JSON, **auth})
    assert r.status_code == 201, r.text
    assert locked.get("/health").status_code == 200
    spec = locked.get("/schema/openapi.json")
    assert spec.status_code == 200
    assert spec.json()["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert spec.json()["security"] == [{"bearer": []}]
    post = spec.json()["paths"]["/v1/plans"]["post"]
    ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert ref.rsplit("/", 1)[-1] in spec.json()["components"]["schemas"]


def test_without_a_token_setting_the_api_is_open(tmp_path: Path) -> None:
    with TestClient(create_app(Settings(db_path=tmp_path / "p.sqlite"))) as client:
        assert client.get("/v1/catalog/models").status_code == 200


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ],
)
@pytest.mark.parametrize("path", ["/v1/plans", "/v1/estimate", "/v1/frontier"])
def test_cross_site_simple_posts_are_refused(tmp_path: Path, content_type: str, path: str) -> None:
    """A page on another site can POST these content types without a CORS preflight; the
    API takes JSON only, so they are refused before the body is read and nothing is queued."""
    with TestClient(create_app(Settings(db_path=tmp_path / "p.sqlite"))) as client:
        headers = {"content-type": content_type, "origin": "https://evil.example"}
        r = client.post(path, content=tiny(), headers=headers)
        assert r.status_code == 415, r.text
        assert r.json()["error"] == "unsupported_media_type"
        assert "application/json" in r.json()["detail"]
        assert client.get("/v1/plans").json()["items"] == []


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "plans.sqlite"


def _app(db: Path, **kwargs: Any) -> TestClient[Any]:
    return TestClient(create_app(Settings(db_path=db, poll_s=0.05, **kwargs)))


def test_idempotency_key_returns_the_same_plan(db: Path) -> None:
    key = {"idempotency-key": "0b7c6a52-2f43-4c39-9a51-4d2b0f7f9e11"}
    with _app(db) as client:
        first = client.post("/v1/plans", content=tiny(), headers={**JSON, **key})
        assert first.status_code == 202, first.text
        again = client.post("/v1/plans", content=tiny(), headers={**JSON, **key})
        assert again.status_code == 200, again.text
        assert again.json()["id"] == first.json()["id"]
        assert again.headers["idempotent-replayed"] == "true"
        assert again.headers["location"] == first.headers["location"]
        other = client.post("/v1/plans", content=tiny("other"), headers={**JSON, **key})
        assert other.status_code == 409, other.text
        assert other.json()["error"] == "conflict"
        assert "Idempotency-Key" in other.json()["detail"]
        slower = client.post("/v1/plans?time_limit_s=5", content=tiny(), headers={**JSON, **key})
        assert slower.status_code == 409, slower.text
        unkeyed = client.post("/v1/plans", content=tiny(), headers=JSON)
        assert unkeyed.status_code == 202 and unkeyed.json()["id"] != first.json()["id"]
        assert len(client.get("/v1/plans").json()["items"]) == 2


def test_idempotency_keys_survive_a_restart_and_a_full_queue(db: Path) -> None:
    key = {"idempotency-key": "nightly-2026-11-23"}
    with _app(db) as client:
        first = client.post("/v1/plans?wait=30", content=tiny(), headers={**JSON, **key})
        assert first.status_code == 201, first.text
    with _app(db, queue_max=0) as client:  # a new server on the same file, queue "full"
        again = client.post("/v1/plans", content=tiny(), headers={**JSON, **key})
        assert again.status_code == 200, again.text
        assert again.json()["id"] == first.json()["id"]
        assert again.json()["status"] == "done"
        fresh = client.post(
            "/v1/plans", content=tiny(), headers={**JSON, "idempotency-key": "another"}
        )
        assert fresh.status_code == 503, fresh.text
        # deleting the plan frees its key
        plan_id = first.json()["id"]
        assert client.delete(f"/v1/plans/{plan_id}").status_code == 204
    with _app(db) as client:
        reused = client.post("/v1/plans", content=tiny(), headers={**JSON, **key})
        assert reused.status_code == 202 and reused.json()["id"] != plan_id


@pytest.mark.parametrize("bad", [b"", b"has space", b"x" * 256, "caf\u00e9".encode("latin-1")])
def test_a_malformed_idempotency_key_names_the_header(db: Path, bad: bytes) -> None:
    with _app(db) as client:
        headers = {**JSON, "idempotency-key": bad}
        r = client.post("/v1/plans", content=tiny(), headers=headers)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "Idempotency-Key"


def test_a_key_taken_between_lookup_and_insert_creates_no_second_plan(db: Path) -> None:
    """Two requests with one key racing past the lookup: the transaction that records the key
    with the plan lets only the first in; the second gets the first's plan back."""
    store = Store(db)
    store.initialize()
    assert store.enqueue_keyed("k", "f1", "p1", "n", b"{}", 10.0, queue_max=4) is True
    second = store.enqueue_keyed("k", "f1", "p2", "n", b"{}", 10.0, queue_max=4)
    assert second == KeyedPlan(plan_id="p1", fingerprint="f1")
    assert store.get("p2") is None
    assert store.keyed_plan("k") == KeyedPlan(plan_id="p1", fingerprint="f1")
    assert store.enqueue_keyed("k2", "f", "p3", "n", b"{}", 10.0, queue_max=1) is False
    assert store.keyed_plan("k2") is None  # a refused plan leaves no key behind
