"""POST /v1/estimate and /v1/frontier against the real app and the real performance model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.settings import Settings

MODEL, ACC = "llama-3.1-8b", "h100-sxm"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(db_path=tmp_path_factory.mktemp("perf") / "plans.sqlite")
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_estimate_rows_follow_the_physics(client: TestClient[Any]) -> None:
    configs = [{"model": MODEL, "accelerator": ACC, "batch": b} for b in (1, 8, 64)]
    configs.append({"model": MODEL, "system": "hgx-h100-8", "tp": 3})
    r = client.post("/v1/estimate", json={"configs": configs})
    assert r.status_code == 200, r.text
    rows = r.json()["rows"]
    assert [row["batch"] for row in rows[:3]] == [1, 8, 64]
    assert all(row["fits"] and row["problem"] == "ok" for row in rows[:3])
    per_user = [row["tokens_per_s_per_user"] for row in rows[:3]]
    per_device = [row["tokens_per_s_per_device"] for row in rows[:3]]
    assert per_user[0] > per_user[1] > per_user[2]  # larger batch: slower per user
    assert per_device[0] < per_device[1] < per_device[2]  # ... and more per device
    bad = rows[3]
    assert not bad["fits"] and bad["problem"] == "bad_layout"
    assert "tp" in bad["explanation"] and bad["tokens_per_s_per_user"] is None


def test_frontier_is_pareto(client: TestClient[Any]) -> None:
    r = client.post("/v1/frontier", json={"model": MODEL, "accelerator": ACC, "isl": 2048})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["system"] == "hgx-h100-8" and body["rows"]
    users = [row["tokens_per_s_per_user"] for row in body["rows"]]
    devices = [row["tokens_per_s_per_device"] for row in body["rows"]]
    assert users == sorted(users, reverse=True)
    assert devices == sorted(devices)  # slower per user only when cheaper per device
    assert all(row["isl"] == 2048 and row["fits"] for row in body["rows"])


@pytest.mark.parametrize(
    ("path", "body", "status", "field"),
    [
        ("/v1/estimate", {"configs": []}, 400, "$.configs"),
        (
            "/v1/estimate",
            {"configs": [{"model": MODEL, "accelerator": ACC, "tp": -2}]},
            400,
            "$.configs[0].tp",
        ),
        (
            "/v1/estimate",
            {"configs": [{"model": MODEL, "accelerator": ACC, "colour": 1}]},
            400,
            "$.configs[0].colour",
        ),
        (
            "/v1/estimate",
            {"configs": [{"model": MODEL, "accelerator": ACC, "precision": "fp2"}]},
            400,
            "$.configs[0].precision",
        ),
        (
            "/v1/estimate",
            {"configs": [{"model": "gpt-9", "accelerator": ACC}]},
            422,
            "$.configs[0].model",
        ),
        (
            "/v1/estimate",
            {"configs": [{"model": MODEL, "accelerator": "tpu-v99"}]},
            422,
            "$.configs[0].accelerator",
        ),
        ("/v1/estimate", {"configs": [{"model": MODEL}]}, 422, "$.configs[0]"),
        ("/v1/frontier", {"model": MODEL, "system": "nope"}, 422, "$.system"),
        (
            "/v1/estimate",
            {"configs": [{"model": MODEL, "accelerator": ACC}], "engine": "tgi"},
            422,
            "$.engine",
        ),
        ("/v1/frontier", {"model": MODEL, "accelerator": ACC, "engine": "tgi"}, 422, "$.engine"),
        ("/v1/frontier", {"model": MODEL, "accelerator": ACC, "batches": [0]}, 400, "$.batches[0]"),
    ],
)
def test_bad_perf_requests_name_the_field(
    client: TestClient[Any], path: str, body: dict[str, Any], status: int, field: str
) -> None:
    r = client.post(path, json=body)
    assert r.status_code == status, r.text
    assert r.json()["field"] == field


def test_malformed_json_is_400(client: TestClient[Any], tmp_path: Path) -> None:
    r = client.post("/v1/estimate", content=b"{nope", headers={"content-type": "application/json"})
    assert r.status_code == 400


def test_an_engine_moves_the_estimate_and_says_what_is_not_measured(
    client: TestClient[Any],
) -> None:
    configs = [
        {"model": MODEL, "accelerator": ACC, "batch": 32, "precision": "bf16"},
        {"model": MODEL, "accelerator": "mi300x", "batch": 32},
    ]
    pooled = client.post("/v1/estimate", json={"configs": configs}).json()
    assert pooled["engine"] == "any" and pooled["engine_notes"] == []
    sglang = client.post("/v1/estimate", json={"configs": configs, "engine": "sglang"}).json()
    assert sglang["engine"] == "sglang"
    assert sglang["rows"][0]["tpot_ms"] != pooled["rows"][0]["tpot_ms"]  # measured on H100
    assert sglang["rows"][1]["tpot_ms"] == pooled["rows"][1]["tpot_ms"]  # not on MI300X
    assert any("no measurements on mi300x" in n for n in sglang["engine_notes"])
    front = client.post(
        "/v1/frontier", json={"model": MODEL, "accelerator": ACC, "engine": "trtllm"}
    ).json()
    assert front["engine"] == "trtllm" and front["rows"]


def test_frontier_disaggregated_rows_carry_their_units(client: TestClient[Any]) -> None:
    body = {"model": "deepseek-r1", "system": "gb200-nvl72", "isl": 1024, "osl": 1024}
    body["precisions"] = ["fp4"]
    plain = client.post("/v1/frontier", json=body)
    units = client.post("/v1/frontier", json={**body, "disaggregated": True})
    assert plain.status_code == 200 and units.status_code == 200, units.text
    assert plain.json()["layouts"] == []
    got = units.json()
    assert len(got["layouts"]) == len(got["rows"]) > 0
    assert all(label.startswith("disaggregated: ") for label in got["layouts"])
    # a unit holds its decode replicas and its prefill replicas: more devices than one replica
    assert all(r["devices_per_replica"] > r["tp"] * r["dp"] * r["pp"] for r in got["rows"])


def test_the_default_precision_is_the_accelerators_as_on_the_cli(client: TestClient[Any]) -> None:
    """No ``precision``: fp8 on Hopper, fp4 on Blackwell (``Accelerator.default_precision``), the
    same rule ``farebox estimate`` follows; a given precision is kept."""
    configs = [
        {"model": MODEL, "accelerator": "h100-sxm"},
        {"model": MODEL, "accelerator": "b200"},
        {"model": MODEL, "accelerator": "b200", "precision": "bf16"},
    ]
    r = client.post("/v1/estimate", json={"configs": configs})
    assert r.status_code == 200, r.text
    assert [row["precision"] for row in r.json()["rows"]] == ["fp8", "fp4", "bf16"]
