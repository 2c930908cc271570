"""``POST /v1/plans`` counts the SLO screen's offer x pool x engine turns before screening and
refuses a scenario over ``FAREBOX_MAX_SCREEN_COMBINATIONS``: the audit's 512-pool scenario, with
nothing to evaluate, once held a compute thread for 47 s before its 422."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

import api.services
from api.app import create_app
from api.settings import Settings
from fleet.catalog.load import Catalog
from planner.build.workload import workload
from tests.planner.test_screen_work import big

REPO = Path(__file__).resolve().parents[2]


def _forbidden(*_: object, **__: object) -> None:
    raise AssertionError("screening started before the request was refused")


def _post(client: TestClient[Any], body: bytes) -> Any:
    return client.post("/v1/plans", content=body, headers={"content-type": "application/json"})


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(db_path=tmp_path_factory.mktemp("screen") / "plans.sqlite", poll_s=0.05)
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.mark.parametrize("allow_unserved", [False, True])
def test_too_many_screen_combinations_are_refused_before_screening(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch, allow_unserved: bool
) -> None:
    """0 configurations and 0 SLO checks, but 2,048 offers x 16 pools x 4 engines = 131,072
    turns; with ``allow_unserved_tiers`` the worker would screen them all while building."""
    monkeypatch.setattr(api.services, "screen", _forbidden)
    doc = msgspec.json.decode(msgspec.json.encode(big(16)))
    doc["options"]["allow_unserved_tiers"] = allow_unserved
    r = _post(client, msgspec.json.encode(doc))
    assert r.status_code == 422, r.text
    error = r.json()
    assert error["field"] == "$.options.search"
    assert "would screen 131,072 combinations of offer x pool x engine" in error["detail"]
    assert "over the limit of 100,000" in error["detail"]
    assert client.get("/v1/plans").json()["items"] == []  # nothing queued


def test_the_limit_is_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings.from_env(
        {"FAREBOX_DB": str(tmp_path / "p.sqlite"), "FAREBOX_MAX_SCREEN_COMBINATIONS": "1"}
    )
    assert settings.max_screen_combinations == 1
    assert Settings(db_path=tmp_path).max_screen_combinations == 100_000
    monkeypatch.setattr(api.services, "screen", _forbidden)
    with TestClient(create_app(settings)) as client:
        tiny = msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes())
        r = _post(client, msgspec.json.encode(tiny))
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "$.options.search"
    assert "would screen 2 combinations" in r.json()["detail"]
    assert "over the limit of 1;" in r.json()["detail"]


def test_checked_in_scenarios_screen_far_below_the_limit(catalog: Catalog) -> None:
    """The most, the frontier-lab week's 24 offers x 24 pools x 1 engine = 576: 174x under."""
    from planner.scenario.decode import load_scenario

    counts = {
        p.stem: workload(load_scenario(p), catalog).screen_combinations
        for p in sorted((REPO / "scenarios").glob("*.toml"))
    }
    assert max(counts.values()) == counts["frontier-lab-week"] == 576
    assert max(counts.values()) * 100 < Settings(db_path=REPO).max_screen_combinations
