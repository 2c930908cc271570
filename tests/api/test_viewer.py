"""The plan viewer over the real app (TestClient): the page's figures hold the plan's numbers,
idle pools' cost, the PNG charts, the assets, and 404s for what does not exist. The page in a
real browser: tests/api/test_viewer_browser.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from api.app import create_app
from api.settings import Settings
from api.viewer.assets import ASSETS, asset_file
from api.viewer.figures import MAX_GRID_POINTS, _thin

REPO = Path(__file__).resolve().parents[2]
TOKEN = "viewer-test-token"


def tiny() -> dict[str, Any]:
    return msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes())


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(
        db_path=tmp_path_factory.mktemp("viewer") / "plans.sqlite", max_wait_s=90, poll_s=0.05
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def done(client: TestClient[Any]) -> dict[str, Any]:
    r = client.post("/v1/plans?wait=90", json=tiny())
    assert r.status_code == 201 and r.json()["status"] == "done", r.text
    return r.json()  # type: ignore[no-any-return]


def _figures(html: str) -> dict[str, Any]:
    found = re.search(r"<script type='application/json' id='figures'>(.*?)</script>", html, re.S)
    assert found, html[:2000]
    return json.loads(found[1])  # type: ignore[no-any-return]


def test_page_figures_carry_the_plans_numbers(
    client: TestClient[Any], done: dict[str, Any]
) -> None:
    plan = done["plan"]
    r = client.get(f"/plans/{done['id']}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "/assets/plotly.min.js" in r.text and "cdn" not in r.text.lower()
    figs = _figures(r.text)
    assert set(figs) == {"tiers", "utilization", "pools", "frontier-0"}
    # Revenue per hour by tier, stacked: back to the plan's revenue (4 significant digits).
    hours = plan["period_hours"]
    revenue = sum(
        sum(t["y"]) * hours for t in figs["tiers"]["data"] if t.get("stackgroup") == "revenue"
    )
    assert revenue == pytest.approx(plan["revenue_usd"], rel=1e-3)
    # The heatmap: one row per pool, one column per period, used / available.
    heat = figs["utilization"]["data"][0]
    assert len(heat["z"]) == len({u["pool"] for u in plan["pool_usage"]})
    assert len(heat["z"][0]) == plan["periods"]
    u = plan["pool_usage"][0]
    assert heat["z"][0][u["period"]] == pytest.approx(
        u["systems_used"] / u["systems_available"], abs=1e-4
    )
    # The frontier's chosen points are the plan's configurations, per tier.
    chosen = [t for t in figs["frontier-0"]["data"] if t["name"].startswith("chosen for ")]
    assert {t["name"].removeprefix("chosen for ") for t in chosen} == {
        a["tier"] for a in plan["assignments"]
    }


def test_idle_cost_is_the_idle_system_hours_at_the_pools_price(
    client: TestClient[Any], done: dict[str, Any]
) -> None:
    plan = done["plan"]
    hours = plan["period_hours"]
    used = sum(u["systems_used"] * hours for u in plan["pool_usage"])
    idle = sum((u["systems_available"] - u["systems_used"]) * hours for u in plan["pool_usage"])
    rate = plan["cost_usd"] / used  # what the planner charged per used system-hour
    assert idle > 0  # tiny leaves systems idle at night
    html = client.get(f"/plans/{done['id']}").text
    bars = {t["name"]: t for t in _figures(html)["pools"]["data"]}
    idle_bar = next(t for name, t in bars.items() if name.startswith("idle"))
    assert sum(idle_bar["x"]) == pytest.approx(idle, rel=1e-3)
    row = re.search(r"<table id='pool-table'>.*?</tr><tr>(.*?)</tr>", html, re.S)
    assert row, html
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row[1])
    assert cells[2] == f"${rate:,.2f}"
    card = re.search(r"id='idle-cost'><span>[^<]*</span><b>\$([\d,.]+)(k?)</b>", html)
    assert card, html
    shown = float(card[1].replace(",", "")) * (1e3 if card[2] else 1)
    assert shown == pytest.approx(idle * rate, rel=0.01)


@pytest.mark.parametrize("name", ["tiers", "utilization", "frontier"])
def test_charts_as_png(client: TestClient[Any], done: dict[str, Any], name: str) -> None:
    r = client.get(f"/v1/plans/{done['id']}/charts/{name}.png")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
    assert r.content.startswith(b"\x89PNG\r\n\x1a\n") and len(r.content) > 10_000


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/v1/plans/{id}/charts/tiers.svg", "file_name"),
        ("/v1/plans/{id}/charts/bogus.png", "file_name"),
        ("/v1/plans/no-such-plan/charts/tiers.png", "plan_id"),
        ("/assets/not-an-asset.js", "name"),
        ("/assets/..%2Fpyproject.toml", None),  # no route: never a file outside ASSETS
    ],
)
def test_what_does_not_exist_is_a_404(
    client: TestClient[Any], done: dict[str, Any], path: str, field: str | None
) -> None:
    r = client.get(path.format(id=done["id"]))
    assert r.status_code == 404, r.text
    assert r.json().get("field") == field


def test_unknown_plan_page_is_a_404_page(client: TestClient[Any]) -> None:
    r = client.get("/plans/no-such-plan")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("text/html")
    assert "No plan no-such-plan" in r.text


def test_unfinished_plan_page_shows_its_status(client: TestClient[Any]) -> None:
    body = tiny()
    body["meta"]["name"] = "cancel-me"
    plan_id = client.post("/v1/plans", json=body).json()["id"]
    r = client.delete(f"/v1/plans/{plan_id}")
    page = client.get(f"/plans/{plan_id}")
    if r.status_code == 200:  # cancelled while queued or running
        assert page.status_code == 200
        assert "<b id='plan-status'>cancelled</b>" in page.text
        assert "id='figures'" not in page.text
        png = client.get(f"/v1/plans/{plan_id}/charts/tiers.png")
        assert png.status_code == 404 and "cancelled" in png.json()["detail"]
    else:  # it was done already, and DELETE deleted it
        assert r.status_code == 204
        assert page.status_code == 404


def test_assets_are_the_installed_wheels_files(client: TestClient[Any]) -> None:
    for name in ASSETS:
        r = client.get(f"/assets/{name}")
        assert r.status_code == 200
        assert r.content == asset_file(name).read_bytes()
    swagger = client.get("/schema").text
    assert "/assets/swagger-ui-bundle.js" in swagger and "cdn" not in swagger.lower()


def test_with_a_token_the_viewer_needs_it_and_assets_stay_open(tmp_path: Path) -> None:
    settings = Settings(db_path=tmp_path / "plans.sqlite", api_token=TOKEN)
    with TestClient(create_app(settings)) as locked:
        assert locked.get("/plans/anything").status_code == 401
        auth = {"authorization": f"Bearer {TOKEN}"}
        assert locked.get("/plans/anything", headers=auth).status_code == 404
        assert locked.get("/assets/plotly.min.js").status_code == 200


def test_large_grids_are_thinned_evenly() -> None:
    assert _thin(10).tolist() == list(range(10))
    keep = _thin(50_000)
    assert len(keep) == MAX_GRID_POINTS and keep[0] == 0 and keep[-1] == 49_999
    assert (keep[1:] > keep[:-1]).all()


def test_a_plan_naming_ids_the_catalog_lacks_still_has_a_page(
    client: TestClient[Any], done: dict[str, Any]
) -> None:
    """A plan solved under an older catalog: the page says what it cannot draw instead of a 500."""
    from api.store_records import PlanStatus
    from api.viewer.view import build_view
    from fleet.catalog.load import load_catalog
    from fleet.perf.arrays import build_arrays

    catalog = load_catalog()
    arrays = build_arrays(catalog)
    request = client.get(f"/v1/plans/{done['id']}/scenario").content
    moved = request.replace(b'"hgx-h100-8"', b'"hgx-h100-8-retired"')
    record = _Record(done, PlanStatus.DONE)
    view = build_view(record, moved, catalog, arrays)  # type: ignore[arg-type]
    assert view.plan is not None and view.curves == () and view.pools == ()
    assert "hgx-h100-8-retired" in view.notes[0]


class _Record:
    """The fields of ``api.store_records.PlanRecord`` that ``build_view`` reads."""

    def __init__(self, done: dict[str, Any], status: Any) -> None:
        self.id = done["id"]
        self.status = status
        self.plan = msgspec.json.encode(done["plan"])
