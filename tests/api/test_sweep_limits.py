"""``POST /v1/sweeps`` refuses what the grid's shape decides before it builds any point (points,
points x request bytes, time limits, worst-case duration), builds and checks the points one at a
time on the bounded compute threads, and answers overflowing ``set`` values with a 422."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

import planner.sweep.grid as grid
from api.app import create_app
from api.compute import Compute
from api.settings import MIB, Settings
from fleet.errors import InputError
from tests.api.test_app_sweeps import scenario_doc

COUNT = "pools.h100-us-east.count"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient[Any]]:
    settings = Settings(
        db_path=tmp_path_factory.mktemp("api") / "plans.sqlite",
        poll_s=0.05,
        sweep_queue_max=32,
        sweep_max_points=8,
        sweep_max_evaluations=1000,
        sweep_max_s=600,
        sweep_max_expanded_bytes=8 * (len(json.dumps({"scenario": scenario_doc()})) + 100),
        max_time_limit_s=60,
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The scenario of every grid point built while answering, in order."""
    scenarios: list[Any] = []
    real: Callable[..., Any] = grid._build

    def counting(*args: Any) -> Any:
        scenarios.append(real(*args))
        return scenarios[-1]

    monkeypatch.setattr(grid, "_build", counting)
    return scenarios


def _post(client: TestClient[Any], body: dict[str, Any]) -> Any:
    return client.post(
        "/v1/sweeps",
        content=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )


def _refused(r: Any, field: str, *words: str) -> None:
    assert r.status_code == 422, r.text
    error = r.json()
    assert error["error"] == "invalid_input"
    assert error["field"] == field
    assert error["detail"].startswith(f"{field}: ")
    for word in words:
        assert word in error["detail"], error["detail"]


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        # points x request bytes: 8 points of a body over an eighth of the limit
        (
            {"set": [f"{COUNT}=0..7"], "meta_description": "x" * 200},
            "$.set",
            ("8 points x", "bytes once expanded, over this server's limit of", "fewer points"),
        ),
        # worst case: 8 x (20 + 60 s) = 640 s > 600 s
        ({"set": [f"{COUNT}=0..7"]}, "$.set", ("8 points at their time limits", "600 s")),
        # a swept time limit over the server's
        (
            {"set": ["options.time_limit_s=10,1000"]},
            "$.set",
            ("options.time_limit_s=1000: must be <= 60 on this server",),
        ),
        # a swept time limit makes the worst case: 6 x (55 + 60 s) = 690 s > 600 s
        (
            {"set": ["options.time_limit_s=55", f"{COUNT}=1..6"]},
            "$.set",
            ("6 points at their time limits", "may take 690 s"),
        ),
        ({"set": [f"{COUNT}=1..2"], "time_limit_s": 600}, "$.time_limit_s", ("must be <= 60",)),
        ({"set": [f"{COUNT}=0..8"]}, "$.set", ("more than 8 values",)),
        ({"set": [f"{COUNT}=1..2"], "samples": 600}, "$.samples", ("over the limit of 1,000",)),
    ],
)
def test_limits_of_the_grid_shape_refuse_before_any_point_is_built(
    client: TestClient[Any],
    built: list[Any],
    edit: dict[str, Any],
    field: str,
    words: tuple[str, ...],
) -> None:
    doc = scenario_doc()
    if description := edit.pop("meta_description", None):
        doc["meta"]["description"] = description
    r = _post(client, {"scenario": doc, **edit})
    _refused(r, field, *words)
    assert built == []  # decided from the shape: no point was built


def test_a_swept_time_limit_counts_in_the_worst_case(
    client: TestClient[Any], built: list[Any]
) -> None:
    r = _post(
        client,
        {"scenario": scenario_doc(), "set": ["options.time_limit_s=50,55", f"{COUNT}=1,2"]},
    )
    assert r.status_code == 202, r.text  # 2 x (50 + 60) + 2 x (55 + 60) = 450 s
    assert r.json()["deadline_s"] == pytest.approx(2 * 50 + 2 * 55 + 5 * 60)
    r = _post(
        client,
        {
            "scenario": scenario_doc(),
            "set": ["options.time_limit_s=50,55", f"{COUNT}=1,2,3"],
        },
    )
    # 3 x (50 + 60) + 3 x (55 + 60) = 675 s
    _refused(r, "$.set", "6 points at their time limits", "over this server's limit of 600 s")
    assert len(built) == 4  # the accepted sweep's points only


def test_points_are_built_checked_and_dropped_one_at_a_time(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing but the test holds a point's scenario once the next one is built, and a bad
    point stops the checking there."""
    built: list[Any] = []
    references: list[int] = []
    real: Callable[..., Any] = grid._build

    def watching(*args: Any) -> Any:
        if built:
            references.append(sys.getrefcount(built[-1]) - 1)  # ``built``'s, and any other
        built.append(real(*args))
        return built[-1]

    monkeypatch.setattr(grid, "_build", watching)
    r = _post(client, {"scenario": scenario_doc(), "set": [f"{COUNT}=1..4"]})
    assert r.status_code == 202, r.text
    assert len(built) == 4
    assert references == [1, 1, 1]  # only ``built`` held the previous point
    built.clear()
    r = _post(client, {"scenario": scenario_doc(), "set": [f"{COUNT}=1,-1,2,3"]})
    _refused(r, "$.set", f"{COUNT}=-1", "must be >= 0")
    assert len(built) == 1  # point 0 built; point 1 failed in its decoder, 2 and 3 never made


def test_validation_runs_on_the_bounded_compute_threads(
    client: TestClient[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    real = Compute.run

    async def recording(self: Compute, fn: Callable[..., Any], *args: Any) -> Any:
        ran.append(fn.__name__)
        return await real(self, fn, *args)

    monkeypatch.setattr(Compute, "run", recording)
    r = _post(client, {"scenario": scenario_doc(), "set": [f"{COUNT}=1..2"]})
    assert r.status_code == 202, r.text
    assert ran == ["_validate"]


HUGE = "9" * 400


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("tiers.fast.max_ttft_ms=1..1e400:1", "'1e400' is beyond the range of a number"),
        (f"tiers.fast.max_ttft_ms=1..{HUGE}", "more than 8 values"),
        ("tiers.fast.max_ttft_ms=1..2:1e-320", "more than 8 values"),
        ("tiers.fast.max_ttft_ms=1..2:1e400", "'1e400' is beyond the range of a number"),
        (f"tiers.fast.max_ttft_ms=1..{HUGE}:0.5", "is beyond the range of a number"),
        ("tiers.fast.max_ttft_ms=-1e308..1e308:1e300", "more than 8 values"),
        ("tiers.fast.max_ttft_ms=1e400", "'1e400' is beyond the range of a number"),
        ("tiers.fast.multipliers=[2,1e400]", "'1e400' is beyond the range of a number"),
        (f"{COUNT}={HUGE}", f"{COUNT}={HUGE}"),
    ],
)
def test_overflowing_values_are_422_naming_the_set_entry(
    client: TestClient[Any], spec: str, words: str
) -> None:
    r = _post(client, {"scenario": scenario_doc(), "set": [spec]})
    _refused(r, "$.set", spec.partition("=")[0], words)


def test_the_expanded_bytes_limit_is_a_setting(tmp_path: Path) -> None:
    env = {"FAREBOX_SWEEP_MAX_EXPANDED_BYTES": "2048"}
    assert Settings.from_env(env).sweep_max_expanded_bytes == 2048
    assert Settings.from_env({}).sweep_max_expanded_bytes == 128 * MIB
    with pytest.raises(InputError, match="FAREBOX_SWEEP_MAX_EXPANDED_BYTES: must be >= 1024"):
        Settings.from_env({"FAREBOX_SWEEP_MAX_EXPANDED_BYTES": "10"})
