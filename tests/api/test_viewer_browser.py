"""The plan viewer and the OpenAPI UI in a real headless Chromium (Debian's ``chromium``, driven by
Playwright with its executable path: no browser download), against a real ``farebox serve``.

The test starts the server, has it solve scenarios/tiny.toml (POST /v1/plans, a worker solves
it), loads ``/plans/{id}`` and checks that every chart was drawn by Plotly with data in it
(trace elements in the SVG, points on the frontier, the heatmap image), that the summary and the
price card are there, that an unknown id is a 404 page, and that Swagger UI renders the API at
``/schema`` from the app's own assets. Any console error, page error, failed request or 4xx/5xx
answer of a sub-resource fails it. Screenshots: build/viewer/plan-tiny.png, build/viewer/schema.png.

Chromium is a test dependency only (.ci/run installs it); without it the test is skipped on a
developer's machine and fails in CI (``CI`` set).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from tests.api.test_durability import _server

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("FAREBOX_CHROMIUM", "/usr/bin/chromium"))
SHOTS = REPO / "build" / "viewer"

if not CHROMIUM.exists():
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM}: missing; .ci/run installs Debian's chromium package")
    pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import ConsoleMessage, Page, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(server url, id of a done plan of scenarios/tiny.toml)."""
    tmp = tmp_path_factory.mktemp("viewer")
    with _server(tmp / "plans.sqlite", tmp / "server.log") as (_, url):
        body = msgspec.toml.decode((REPO / "scenarios" / "tiny.toml").read_bytes())
        r = httpx.post(f"{url}/v1/plans?wait=90", json=body, timeout=120)
        assert r.status_code == 201, r.text
        assert r.json()["status"] == "done", r.text
        yield url, r.json()["id"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield b
        b.close()


class Problems:
    """Everything a page reports going wrong: console errors, page errors, failed requests and
    error answers."""

    def __init__(self, page: Page) -> None:
        self.items: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda err: self.items.append(f"page error: {err}"))
        page.on(
            "requestfailed",
            lambda req: self.items.append(f"request failed: {req.url} {req.failure}"),
        )
        page.on(
            "response",
            lambda res: self.items.append(f"{res.status} {res.url}") if res.status >= 400 else None,
        )

    def _console(self, msg: ConsoleMessage) -> None:
        if msg.type == "error":
            self.items.append(f"console error: {msg.text} at {msg.location}")


def _chart_stats(page: Page, elem_id: str) -> dict[str, int]:
    return page.evaluate(
        """(id) => {
            const el = document.getElementById(id);
            return {
                plotly: el.classList.contains('js-plotly-plot') ? 1 : 0,
                traces: (el.data || []).length,
                values: (el.data || []).reduce((n, t) =>
                    n + (t.z || t.y || t.x || []).flat().filter(v => v !== null).length, 0),
                svg_traces: el.querySelectorAll('.cartesianlayer .trace').length,
                points: el.querySelectorAll('.scatterlayer .point').length,
                heatmap_images: el.querySelectorAll('.hm image').length,
                bars: el.querySelectorAll('.barlayer .point').length,
            };
        }""",
        elem_id,
    )


def test_plan_page_draws_every_chart_without_console_errors(
    served: tuple[str, str], browser: Any
) -> None:
    url, plan_id = served
    plan = httpx.get(f"{url}/v1/plans/{plan_id}", timeout=10).json()["plan"]
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    problems = Problems(page)
    response = page.goto(f"{url}/plans/{plan_id}", wait_until="load")
    assert response is not None and response.status == 200
    page.wait_for_function("document.body.dataset.charts !== undefined", timeout=30_000)

    ids = page.evaluate("Object.keys(JSON.parse(document.getElementById('figures').textContent))")
    assert {"tiers", "utilization", "pools", "frontier-0"} <= set(ids), ids
    assert int(page.evaluate("document.body.dataset.charts")) == len(ids)
    for elem_id in ids:
        stats = _chart_stats(page, elem_id)
        assert stats["plotly"] == 1 and stats["traces"] > 0 and stats["values"] > 0, (
            elem_id,
            stats,
        )
    tiers = {p["tier"] for p in plan["prices"]}
    stats = _chart_stats(page, "tiers")
    assert stats["svg_traces"] >= 2 * len(tiers) + 1, stats  # revenue + served per tier, demand
    stats = _chart_stats(page, "utilization")
    assert stats["heatmap_images"] == 1, stats
    stats = _chart_stats(page, "frontier-0")
    chosen = page.evaluate(
        "document.getElementById('frontier-0').data.filter(t => t.name.startsWith('chosen'))"
        ".reduce((n, t) => n + t.x.length, 0)"
    )
    assert chosen >= 1 and stats["points"] > chosen, stats  # the grid and the chosen points
    stats = _chart_stats(page, "pools")
    assert stats["bars"] >= 1, stats

    assert page.inner_text("#plan-status") == "done"
    assert page.inner_text("#gap b").endswith("%")
    assert page.inner_text("#margin b").startswith("$")
    assert page.locator("#price-card tr").count() == 1 + len(plan["prices"])
    pools = {u["pool"] for u in plan["pool_usage"]}
    assert page.locator("#pool-table tr").count() == 1 + len(pools)

    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "plan-tiny.png"), full_page=True)
    for name in ("tiers", "utilization", "frontier"):  # the PNG links answer PNGs
        r = httpx.get(f"{url}/v1/plans/{plan_id}/charts/{name}.png", timeout=60)
        assert r.status_code == 200 and r.content.startswith(b"\x89PNG"), (name, r.status_code)
    page.close()
    assert problems.items == [], "\n".join(problems.items)


def test_unknown_plan_is_a_404_page(served: tuple[str, str], browser: Any) -> None:
    url, _ = served
    page = browser.new_page()
    response = page.goto(f"{url}/plans/no-such-plan")
    assert response is not None and response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "No plan no-such-plan" in page.inner_text("h1")
    page.close()


def test_openapi_ui_renders_from_local_assets(served: tuple[str, str], browser: Any) -> None:
    url, _ = served
    page = browser.new_page(viewport={"width": 1360, "height": 900})
    problems = Problems(page)
    external: list[str] = []
    page.on("request", lambda req: None if req.url.startswith(url) else external.append(req.url))
    page.goto(f"{url}/schema", wait_until="load")
    page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
    assert "farebox" in page.inner_text(".swagger-ui .info .title")
    operations = page.locator(".opblock").count()
    spec = json.loads(httpx.get(f"{url}/schema/openapi.json", timeout=10).text)
    expected = sum(len(ops) for ops in spec["paths"].values())
    assert operations == expected, (operations, expected)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "schema.png"))
    page.close()
    assert external == [], external  # nothing from a CDN
    assert problems.items == [], "\n".join(problems.items)
