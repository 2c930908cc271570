"""planner.report: frames, Parquet partitions read back by polars and DuckDB, totals, charts."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pytest

from fleet.catalog.load import Catalog
from fleet.perf import CatalogArrays
from planner.plan.schema import Assignment, Flow, Plan, PoolUsage, TierPrice
from planner.report import SCHEMAS, read_report, report_frames, write_report
from planner.report.charts import write_charts
from planner.report.operating import operating_curves
from planner.run import load_scenario, plan_scenario
from planner.solve.solution import SolveStatus
from tests.planner.conftest import SCENARIOS

PERIOD_HOURS = 2.0
PERIODS = 168  # two weeks of 2-hour periods


def _two_week_plan() -> Plan:
    """One pool, one family, one tier: period t serves 100 + t tokens/s of a demand of 120 + t,
    at $1e-6 per token, on 2 systems costing $10 per system-hour."""
    secs = PERIOD_HOURS * 3600
    assignments, flows, usage = [], [], []
    for t in range(PERIODS):
        served, demand = 100.0 + t, 120.0 + t
        assignments.append(
            Assignment(
                period=t,
                pool="h100-east",
                family="fam",
                tier="standard",
                variant="m",
                tp=2,
                pp=1,
                dp=1,
                ep=1,
                precision="fp8",
                kv_precision="fp8",
                batch_cap=64,
                spec_draft_tokens=0,
                replicas=4,
                systems=2,
                served_tokens_per_s=served,
                capacity_tokens_per_s=served * 1.2,
                utilization=0.7,
                tokens_per_s_per_user=40.0,
                ttft_ms=800.0,
                cost_usd=2 * 10.0 * PERIOD_HOURS,
            )
        )
        flows.append(
            Flow(
                family="fam",
                tier="standard",
                period=t,
                demand_tokens_per_s=demand,
                served_tokens_per_s=served,
                unserved_tokens_per_s=demand - served,
                demand_requests_per_s=demand / 400,
                revenue_usd=served * secs * 1e-6,
            )
        )
        usage.append(
            PoolUsage(
                pool="h100-east",
                period=t,
                systems_available=4,
                systems_used=2,
                utilization=0.5,
                cost_usd=2 * 10.0 * PERIOD_HOURS,
            )
        )
    revenue = sum(f.revenue_usd for f in flows)
    cost = sum(u.cost_usd for u in usage)
    return Plan(
        scenario="two-weeks",
        status=SolveStatus.OPTIMAL,
        message="",
        objective_usd=revenue - cost,
        revenue_usd=revenue,
        cost_usd=cost,
        penalty_usd=0.0,
        margin_usd=revenue - cost,
        bound_usd=revenue - cost,
        gap=0.0,
        solve_s=0.0,
        build_s=0.0,
        period_hours=PERIOD_HOURS,
        periods=PERIODS,
        prices=(
            TierPrice(
                family="fam",
                tier="standard",
                variant="m",
                multiplier=1.0,
                usd_per_m_input_tokens=0.5,
                usd_per_m_output_tokens=1.0,
                reference_multiplier=1.0,
            ),
        ),
        assignments=tuple(assignments),
        flows=tuple(flows),
        pool_usage=tuple(usage),
    )


def test_frames_have_their_schemas_and_the_plans_totals() -> None:
    plan = _two_week_plan()
    frames = report_frames(plan, start=date(2026, 3, 2))
    for name, frame in frames.items():
        assert frame.schema == SCHEMAS[name], name
    a, pools, products = frames["assignments"], frames["pools"], frames["products"]
    secs = PERIOD_HOURS * 3600
    demand = sum(f.demand_tokens_per_s for f in plan.flows) * secs
    served = sum(f.served_tokens_per_s for f in plan.flows) * secs
    assert a["revenue_usd"].sum() == pytest.approx(plan.revenue_usd, rel=1e-9)
    assert a["cost_usd"].sum() == pytest.approx(plan.cost_usd, rel=1e-9)
    assert a["served_output_tokens"].sum() == pytest.approx(served, rel=1e-9)
    assert a["demand_output_tokens"].sum() == pytest.approx(demand, rel=1e-9)
    assert a["unserved_output_tokens"].sum() == pytest.approx(demand - served, rel=1e-9)
    # one unserved row per period (pool null), one serving row per period
    assert a.filter(pl.col("pool").is_null()).height == PERIODS
    assert a.filter(pl.col("pool").is_not_null())["devices"].unique().to_list() == [8]
    assert pools["cost_usd"].sum() == pytest.approx(plan.cost_usd)
    assert pools["revenue_usd"].sum() == pytest.approx(plan.revenue_usd)
    # 12 periods of 2 h per day, 4 available and 2 used every period
    assert pools.height == 14
    assert pools["available_system_hours"].to_list() == [96.0] * 14
    assert pools["utilization"].to_list() == [0.5] * 14
    assert pools["mean_idle_systems"].to_list() == [2.0] * 14
    assert products.height == 2
    assert products["week_start"].to_list() == [date(2026, 3, 2), date(2026, 3, 9)]
    assert products["revenue_usd"].sum() == pytest.approx(plan.revenue_usd)
    assert products["slo_attainment"].to_list() == pytest.approx(
        [sum(100 + t for t in r) / sum(120 + t for t in r) for r in (range(84), range(84, 168))]
    )


def test_parquet_partitions_read_back_by_polars_and_duckdb(tmp_path: Path) -> None:
    plan = _two_week_plan()
    files = write_report(plan, tmp_path, start=date(2026, 3, 2))
    assert len(files) == 2 * len(SCHEMAS)
    assert (tmp_path / "assignments" / "week_start=2026-03-09" / "assignments.parquet").is_file()
    back = read_report(tmp_path)
    frames = report_frames(plan, start=date(2026, 3, 2))
    for name, frame in frames.items():
        assert back[name].schema == SCHEMAS[name]
        assert back[name].sort(back[name].columns).equals(frame.sort(frame.columns)), name
    con = duckdb.connect()
    glob = str(tmp_path / "assignments" / "*" / "*.parquet")
    weeks, revenue, cost = con.execute(
        f"select count(distinct week_start), sum(revenue_usd), sum(cost_usd) "
        f"from read_parquet('{glob}', hive_partitioning = true)"
    ).fetchone()
    assert weeks == 2
    assert revenue == pytest.approx(plan.revenue_usd)
    assert cost == pytest.approx(plan.cost_usd)
    kind = con.execute(
        f"select typeof(week_start) from read_parquet('{glob}', hive_partitioning = true) limit 1"
    ).fetchone()[0]
    assert kind == "DATE"


def test_rewriting_a_report_leaves_no_stale_weeks(tmp_path: Path) -> None:
    plan = _two_week_plan()
    write_report(plan, tmp_path, start=date(2026, 3, 2))
    write_report(plan, tmp_path, start=date(2026, 4, 6))
    weeks = sorted(p.name for p in (tmp_path / "pools").iterdir() if any(p.iterdir()))
    assert weeks == ["week_start=2026-04-06", "week_start=2026-04-13"]


def test_infeasible_plan_gives_empty_frames_with_schemas(tmp_path: Path) -> None:
    plan = Plan(
        scenario="x",
        status=SolveStatus.INFEASIBLE,
        message="",
        objective_usd=0,
        revenue_usd=0,
        cost_usd=0,
        penalty_usd=0,
        margin_usd=0,
        bound_usd=0,
        gap=0,
        solve_s=0,
        build_s=0,
        period_hours=1,
        periods=24,
        reasons=("no",),
    )
    write_report(plan, tmp_path)
    back = read_report(tmp_path)
    assert all(back[n].height == 0 and back[n].schema == s for n, s in SCHEMAS.items())


def test_solved_scenario_report_matches_its_plan(
    tmp_path: Path, catalog: Catalog, arrays: CatalogArrays
) -> None:
    scenario = load_scenario(SCENARIOS / "tiny.toml")
    plan = plan_scenario(scenario, catalog, arrays=arrays)
    assert plan.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)
    write_report(plan, tmp_path)
    back = read_report(tmp_path)
    a = back["assignments"]
    assert a["revenue_usd"].sum() == pytest.approx(plan.revenue_usd, rel=1e-9)
    assert a["cost_usd"].sum() == pytest.approx(plan.cost_usd, rel=1e-9)
    assert back["products"]["revenue_usd"].sum() == pytest.approx(plan.revenue_usd, rel=1e-9)
    assert back["pools"]["cost_usd"].sum() == pytest.approx(plan.cost_usd, rel=1e-9)
    secs = plan.period_hours * 3600
    assert a["served_output_tokens"].sum() == pytest.approx(
        sum(f.served_tokens_per_s for f in plan.flows) * secs, rel=1e-9
    )
    assert a["unserved_output_tokens"].sum() == pytest.approx(
        sum(f.unserved_tokens_per_s for f in plan.flows) * secs, rel=1e-9, abs=1e-6
    )
    curves = operating_curves(plan, scenario, catalog, arrays=arrays)
    assert curves and all(c.points for c in curves)
    for c in curves:
        for p in c.points:  # a chosen point is never above the frontier
            at = np.interp(p.tokens_per_s_per_user, c.frontier_user, c.frontier_device)
            assert p.tokens_per_s_per_device <= at * (1 + 1e-9)
    pngs = write_charts(plan, report_frames(plan), tmp_path, curves=curves)
    assert [p.name for p in pngs] == ["utilization.png", "tiers.png", "frontier.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
