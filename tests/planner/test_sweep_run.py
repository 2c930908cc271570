"""Running sweeps: the Monte Carlo error model, the fixed-plan evaluation, time limits, and the
same 32-point sweep giving the same numbers in local processes and on a local Ray cluster."""

from __future__ import annotations

import importlib.util
import itertools
import time
from pathlib import Path

import msgspec
import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from fleet.catalog.load import load_catalog
from fleet.perf.arrays import build_arrays
from planner.build.pipeline import build
from planner.run import load_scenario, solve_options
from planner.scenario.schema import Scenario, Speculative
from planner.solve import solve
from planner.sweep.backends import LocalBackend, RayBackend
from planner.sweep.frames import sweep_frames
from planner.sweep.grid import parse_specs
from planner.sweep.montecarlo import FixedPlan, fixed_plan, multipliers, outcome, run_samples
from planner.sweep.point import TIMEOUT, solve_point
from planner.sweep.run import MonteCarlo, SweepLimits, SweepResult, prepare, run_sweep

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
GRID = ["pools.h100-us-east.count=0..7", "tiers.fast.multipliers=[1.5,2],[2,3],[2,4],[1.5,2,3,4]"]


def small() -> Scenario:
    """tiny.toml cut to its six busiest hours and a narrow search: a point plans in ~0.1 s."""
    s = load_scenario(SCENARIOS / "tiny.toml")
    rates = s.demand[0].requests_per_s
    assert rates is not None
    demand = msgspec.structs.replace(s.demand[0], requests_per_s=rates[9:15])
    search = msgspec.structs.replace(
        s.options.search,
        precisions=("fp8",),
        batch_caps=(8, 32, 128),
        speculative=(Speculative(draft_tokens=0),),
    )
    options = msgspec.structs.replace(s.options, search=search, time_limit_s=20.0)
    return msgspec.structs.replace(s, demand=(demand,), options=options, expect=())


@pytest.fixture(scope="module")
def solved() -> tuple[FixedPlan, float, float]:
    """The small scenario's fixed plan, and its margin and revenue as the solver valued them."""
    s = small()
    catalog = load_catalog()
    built = build(s, catalog, build_arrays(catalog))
    assert built.tables is not None
    result = solve(built.tables, solve_options(s), None)
    plan = fixed_plan(built.tables, result.combo, result.replicas, result.cost_usd)
    return plan, result.revenue_usd - result.cost_usd, result.revenue_usd


def test_multipliers_have_mean_one_and_the_asked_cv(solved: tuple[FixedPlan, float, float]) -> None:
    plan = solved[0]
    draws = np.array(
        [multipliers(plan, k, seed=7, demand_cv=0.3, scope="family")[0, 0] for k in range(20_000)]
    )
    assert abs(draws.mean() - 1.0) < 0.01
    assert abs(draws.std() / draws.mean() - 0.3) < 0.01
    assert (draws > 0).all()
    one = multipliers(plan, 3, seed=7, demand_cv=0.3, scope="family")
    assert np.all(one == one[:, :1])  # one draw per family for the horizon
    hourly = multipliers(plan, 3, seed=7, demand_cv=0.3, scope="family-hour")
    assert len(np.unique(hourly)) == hourly.size  # one per family and hour
    again = multipliers(plan, 3, seed=7, demand_cv=0.3, scope="family-hour")
    assert np.array_equal(hourly, again)
    other = multipliers(plan, 3, seed=8, demand_cv=0.3, scope="family-hour")
    assert not np.array_equal(hourly, other)


def test_forecast_demand_gives_the_solvers_value(solved: tuple[FixedPlan, float, float]) -> None:
    plan, margin, revenue = solved
    ones = np.ones((plan.families, plan.demand_tokens_per_s.shape[1]))
    at_forecast = outcome(plan, ones)
    assert at_forecast.margin_usd == pytest.approx(margin, rel=1e-9)
    assert revenue > 0
    # less demand: fewer misses and no more revenue; more demand: more of it unserved
    low, high = outcome(plan, ones * 0.5), outcome(plan, ones * 3.0)
    assert low.slo_miss_hours <= at_forecast.slo_miss_hours <= high.slo_miss_hours
    assert low.margin_usd < at_forecast.margin_usd
    assert high.unserved_fraction > at_forecast.unserved_fraction
    assert high.slo_miss_hours > 0


def test_samples_do_not_depend_on_how_they_are_split(
    solved: tuple[FixedPlan, float, float],
) -> None:
    plan = solved[0]
    whole = run_samples(plan, 0, 10, seed=1, demand_cv=0.2, scope="family-hour")
    parts = np.concatenate(
        [
            run_samples(plan, 0, 4, seed=1, demand_cv=0.2, scope="family-hour"),
            run_samples(plan, 4, 10, seed=1, demand_cv=0.2, scope="family-hour"),
        ]
    )
    assert np.array_equal(whole, parts)
    assert len(np.unique(whole[:, 0])) == 10


def test_a_point_past_its_time_limit_is_stopped() -> None:
    body = msgspec.json.encode(small())
    summary, fixed = solve_point(0, body, 0.01, 0.0, True)
    assert summary.status == TIMEOUT
    assert "time limit" in summary.message
    assert fixed is None


def _sleep_and_return(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_local_backend_stops_at_its_deadline() -> None:
    backend = LocalBackend(2)
    try:
        # start the pool first (its forkserver imports this module: seconds on a loaded machine)
        assert dict(backend.run(_sleep_and_return, [(0.0,)], time.monotonic() + 60.0)) == {0: 0.0}
        start = time.monotonic()
        got = dict(backend.run(_sleep_and_return, [(0.0,), (120.0,)], time.monotonic() + 3.0))
        assert got == {0: 0.0, 1: None}
        assert time.monotonic() - start < 30.0
        # the killed pool is replaced: the backend still runs work
        assert dict(backend.run(_sleep_and_return, [(0.0,)], time.monotonic() + 60.0)) == {0: 0.0}
    finally:
        backend.close()


def _sweep(backend: LocalBackend | RayBackend, samples: int) -> SweepResult:
    s = small()
    specs = parse_specs(GRID, max_points=64)
    mc = MonteCarlo(samples=samples, demand_cv=0.2, seed=3)
    points = prepare(s, specs, mc, SweepLimits(max_points=64))
    assert len(points) == 32
    try:
        return run_sweep(s, points, specs, mc, backend)
    finally:
        backend.close()


def _numbers(result: SweepResult) -> dict[str, pl.DataFrame]:
    frames = sweep_frames(result)
    frames["points"] = frames["points"].drop("solve_s")  # wall-clock, not a result
    return frames


@pytest.fixture(scope="module")
def local_sweep() -> SweepResult:
    return _sweep(LocalBackend(2), samples=300)


def test_local_sweep_of_32_points(local_sweep: SweepResult) -> None:
    points = _numbers(local_sweep)["points"]
    assert points.height == 32
    status = dict(zip(points["pools.h100-us-east.count"], points["status"], strict=False))
    assert status["0"] == "infeasible"  # no systems: the sold tiers cannot be served
    planned = points.filter(pl.col("status") == "optimal")
    assert planned.height == 28
    # more systems never earn less: the planner may leave them idle
    for menu in GRID[1].split("=", 1)[1].split("],"):
        key = menu if menu.endswith("]") else menu + "]"
        margins = planned.filter(pl.col("tiers.fast.multipliers") == key)["margin_usd"]
        assert all(b >= a - 1e-6 for a, b in itertools.pairwise(margins))
    # the p5..p95 band brackets the p50, and demand error costs a fixed plan money on average
    assert (planned["margin_usd_p5"] <= planned["margin_usd_p50"]).all()
    assert (planned["margin_usd_p50"] <= planned["margin_usd_p95"]).all()
    assert (planned["margin_usd_p50"] <= planned["margin_usd"] + 1e-6).all()
    samples = _numbers(local_sweep)["samples"]
    assert samples.height == 28 * 300


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed")
def test_ray_sweep_gives_the_same_numbers(local_sweep: SweepResult) -> None:
    on_ray = _sweep(RayBackend(None, 2), samples=300)
    assert on_ray.backend == "ray"
    expected, got = _numbers(local_sweep), _numbers(on_ray)
    assert expected.keys() == got.keys()
    for name in expected:
        assert_frame_equal(got[name], expected[name], check_exact=True)
