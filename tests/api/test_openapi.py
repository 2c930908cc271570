"""The OpenAPI document describes what the decoders accept (msgspec's own schemas of the wire
types, every reference resolving), and OPTIONS lists every method of a path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from api.app import WIRE_TYPES, create_app
from api.settings import Settings


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(db_path=tmp_path_factory.mktemp("openapi") / "plans.sqlite")
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def document(client: TestClient[Any]) -> dict[str, Any]:
    r = client.get("/schema/openapi.json")
    assert r.status_code == 200
    return r.json()  # type: ignore[no-any-return]


def test_components_are_msgspecs_schemas(document: dict[str, Any]) -> None:
    _, expected = msgspec.json.schema_components(
        WIRE_TYPES, ref_template="#/components/schemas/{name}"
    )
    schemas = document["components"]["schemas"]
    for name, schema in expected.items():
        assert schemas[name] == json.loads(json.dumps(schema)), name
    # the shape Litestar used to publish: items that accept anything
    items = schemas["EstimateRequest"]["properties"]["configs"]["items"]
    assert items == {"$ref": "#/components/schemas/ConfigSpec"}
    assert "model" in schemas["ConfigSpec"]["required"]
    batches = schemas["FrontierRequest"]["properties"]["batches"]["items"]
    assert batches["exclusiveMinimum"] == 0


def test_every_reference_resolves(document: dict[str, Any]) -> None:
    refs: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.add(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    assert refs
    names = set(document["components"]["schemas"])
    assert {ref.removeprefix("#/components/schemas/") for ref in refs} <= names


def test_every_operation_documents_its_errors(document: dict[str, Any]) -> None:
    paths = document["paths"]
    for path in ("/v1/plans/{plan_id}", "/v1/plans/{plan_id}/scenario"):
        assert "404" in paths[path]["get"]["responses"], path
    assert "404" in paths["/v1/plans/{plan_id}"]["delete"]["responses"]
    for path in ("/v1/estimate", "/v1/frontier"):
        assert {"400", "422"} <= set(paths[path]["post"]["responses"]), path
    assert "503" in paths["/health"]["get"]["responses"]
    cursor = next(p for p in paths["/v1/plans"]["get"]["parameters"] if p["name"] == "cursor")
    assert cursor["schema"]["minimum"] == 1 and cursor["schema"]["maximum"] == 2**63 - 1


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/v1/plans", "GET, OPTIONS, POST"),
        ("/v1/plans/abc", "DELETE, GET, OPTIONS"),
        ("/v1/estimate", "OPTIONS, POST"),
        ("/health", "GET, OPTIONS"),
    ],
)
def test_options_lists_every_method(client: TestClient[Any], path: str, allow: str) -> None:
    r = client.options(path)
    assert r.status_code == 204
    assert r.headers["allow"] == allow


def test_swagger_ui_still_renders(client: TestClient[Any]) -> None:
    r = client.get("/schema")
    assert r.status_code == 200 and "ConfigSpec" in r.text
