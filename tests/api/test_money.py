"""$/M output tokens in ``estimate`` and ``frontier`` (REST and CLI), at the system's hourly price
in the catalog (``fleet.perf.cost``)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.cli import main
from api.settings import Settings
from fleet.catalog import load_catalog

NODE = "hgx-h100-8"


def node_usd_per_hour() -> float:
    catalog = load_catalog()
    system = catalog.system(NODE)
    return system.usd_per_hour or (
        system.devices_per_system * catalog.accelerators[system.accelerator].usd_per_hour
    )


def per_m(usd_per_hour: float, tokens_per_s: float) -> float:
    return usd_per_hour / (tokens_per_s * 3600) * 1e6


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(db_path=tmp_path_factory.mktemp("money") / "plans.sqlite")
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_estimate_rows_carry_the_token_price(client: TestClient[Any]) -> None:
    configs = [
        {"model": "llama-3.1-8b", "system": NODE, "tp": tp, "batch": 64} for tp in (1, 2, 8)
    ] + [{"model": "llama-3.1-70b", "system": NODE, "tp": 1, "precision": "bf16"}]
    r = client.post("/v1/estimate", json={"configs": configs})
    assert r.status_code == 200, r.text
    rows = r.json()["rows"]
    node = node_usd_per_hour()
    for row, share in zip(rows[:3], (1 / 8, 1 / 4, 1.0), strict=True):
        assert row["usd_per_hour_per_replica"] == pytest.approx(node * share)
        assert row["usd_per_m_output_tokens"] == pytest.approx(
            per_m(node * share, row["tokens_per_s_per_replica"])
        )
    assert rows[3]["fits"] is False and rows[3]["usd_per_m_output_tokens"] is None


def test_frontier_rows_carry_the_token_price(client: TestClient[Any]) -> None:
    r = client.post("/v1/frontier", json={"model": "llama-3.1-8b", "system": NODE})
    assert r.status_code == 200, r.text
    rows = r.json()["rows"]
    assert rows
    for row in rows:
        # per device: a replica of d devices pays d/8 of the node (or whole nodes)
        usd_per_device_hour = row["usd_per_hour_per_replica"] / row["devices_per_replica"]
        assert usd_per_device_hour == pytest.approx(node_usd_per_hour() / 8)
        assert row["usd_per_m_output_tokens"] == pytest.approx(
            per_m(usd_per_device_hour, row["tokens_per_s_per_device"])
        )
    # Cheapest tokens at the throughput end of the frontier, dearest at the fast end.
    prices = [row["usd_per_m_output_tokens"] for row in rows]
    assert prices[0] == max(prices) and prices[-1] == min(prices)


def test_cli_estimate_and_frontier_show_the_token_price(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["estimate", "--model", "llama-3.1-8b", "--system", NODE, "--batch", "64"]
    assert main([*argv, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["usd_per_hour_per_replica"] == pytest.approx(node_usd_per_hour() / 8)
    assert row["usd_per_m_output_tokens"] == pytest.approx(
        per_m(row["usd_per_hour_per_replica"], row["tokens_per_s_per_replica"]), rel=1e-3
    )
    assert main(argv) == 0
    assert f"${row['usd_per_m_output_tokens']:.4f} per M output tokens" in capsys.readouterr().out

    out = tmp_path / "front.csv"
    assert main(["frontier", "--model", "llama-3.1-8b", "--system", NODE, "--csv", str(out)]) == 0
    assert "$/M out" in capsys.readouterr().out
    front = list(csv.DictReader(out.open()))
    assert front and all(float(r["usd_per_m_output_tokens"]) > 0 for r in front)
    for r in front:
        device_hour = node_usd_per_hour() / 8
        assert float(r["usd_per_m_output_tokens"]) == pytest.approx(
            per_m(device_hour, float(r["tokens_per_s_per_device"])), rel=1e-3
        )


def test_cli_estimate_csv_has_the_token_price(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text(
        "model,system,tp,batch,precision\n"
        f"llama-3.1-8b,{NODE},1,64,fp8\n"
        f"llama-3.1-70b,{NODE},1,1,bf16\n"
    )
    out = tmp_path / "out.csv"
    assert main(["estimate", "--from-csv", str(src), "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert float(rows[0]["usd_per_hour_per_replica"]) == pytest.approx(node_usd_per_hour() / 8)
    assert float(rows[0]["usd_per_m_output_tokens"]) > 0
    assert rows[1]["fits"] == "false" and rows[1]["usd_per_m_output_tokens"] == ""


def test_cli_plan_shows_idle_pools_cost(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "plan.json"
    assert main(["plan", str(repo / "scenarios" / "tiny.toml"), "--quiet", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    plan = json.loads(out.read_text())
    idle_hours = sum(
        (u["systems_available"] - u["systems_used"]) * plan["period_hours"]
        for u in plan["pool_usage"]
    )
    assert idle_hours > 0
    idle_usd = idle_hours * node_usd_per_hour()  # tiny's one pool sets no price of its own
    assert "idle cost" in text
    assert f"(not in the plan's cost): ${idle_usd:,.2f}" in text
