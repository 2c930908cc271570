"""What the plan viewer shows of one plan, computed once: the plan, its scenario, the report's
frames, the frontier curves and each pool's hourly price.

A done plan never changes, so its ``View`` is kept in a small in-memory cache (``VIEWS``, the
``CACHE_SIZE`` most recent, fewer when together they hold more than ``CACHE_ROWS`` plan rows)
and a page reload or a PNG costs a lookup. Building one evaluates the
performance model's search grid for the plan's busiest (model, system) pairs
(``planner.report.operating``): CPU work, run through the app's ``Compute`` pool.

Idle cost: the planner charges a pool for the systems it uses (``PoolUsage.cost_usd``); the
systems left idle are shown at the same hourly price, ``planner.build.pipeline.build_inventory``'s
``usd_per_system_hour`` (the pool's own price, else the system's, else devices x the
accelerator's list price in the catalog), i.e. what they cost when the fleet is owned or reserved
rather than rented by the hour.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date

import msgspec
import polars as pl

from api.store_records import PlanRecord, PlanStatus
from fleet.catalog.load import Catalog
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays
from planner.build.pipeline import build_inventory
from planner.plan.schema import Plan
from planner.report import DEFAULT_START, report_frames
from planner.report.operating import Curve, operating_curves
from planner.scenario.decode import decode_scenario
from planner.scenario.schema import Scenario

CACHE_SIZE = 8
CACHE_ROWS = 600_000
"""Plan rows (assignments, flows, pool usage) the cached views may hold together: twice the
API's default ``max_plan_rows``. A view of a 258k-row plan measured +148 MB, so eight such views
would have held ~1.2 GB; the most recent view is kept whatever its size."""


@dataclass(frozen=True, slots=True)
class PoolMoney:
    pool: str
    system: str
    usd_per_system_hour: float
    available_system_hours: float
    used_system_hours: float
    idle_system_hours: float
    cost_usd: float
    """What the plan pays for the used systems (as in the plan's cost)."""
    idle_cost_usd: float
    """The idle system-hours at the same hourly price (not in the plan's cost)."""
    revenue_usd: float


@dataclass(frozen=True, slots=True)
class View:
    record: PlanRecord
    scenario: Scenario
    start: date
    plan: Plan | None
    """None until the plan is done."""
    frames: dict[str, pl.DataFrame]
    """``planner.report.report_frames`` of the plan; empty without one."""
    curves: tuple[Curve, ...]
    pools: tuple[PoolMoney, ...]
    notes: tuple[str, ...] = ()
    """What the viewer could not show and why (e.g. a catalog id the plan used is gone)."""
    png: dict[str, bytes] = field(default_factory=dict)
    """The report's PNG charts by name, drawn on first request (``api.viewer.controller``)."""

    @property
    def rows(self) -> int:
        """The plan's table rows, what the view's memory grows with."""
        if self.plan is None:
            return 0
        return len(self.plan.assignments) + len(self.plan.flows) + len(self.plan.pool_usage)

    @property
    def charted(self) -> bool:
        """The plan has assignments, so there is something to chart."""
        return self.plan is not None and bool(self.plan.assignments)


def build_view(record: PlanRecord, request: bytes, catalog: Catalog, arrays: CatalogArrays) -> View:
    """The view of ``record`` (read with its plan) and its stored scenario ``request``."""
    scenario = decode_scenario(request, "json")
    start = scenario.meta.start_date or DEFAULT_START
    plan = (
        msgspec.json.decode(record.plan, type=Plan)
        if record.status == PlanStatus.DONE and record.plan is not None
        else None
    )
    if plan is None:
        return View(record, scenario, start, None, {}, (), ())
    frames = report_frames(plan, start=start)
    notes: list[str] = []
    curves: tuple[Curve, ...] = ()
    pools: tuple[PoolMoney, ...] = ()
    try:  # a plan solved with an older catalog may name ids this server's catalog lacks
        if plan.assignments:
            curves = tuple(operating_curves(plan, scenario, catalog, arrays=arrays))
        pools = _pool_money(scenario, catalog, frames)
    except (KeyError, InputError) as err:
        notes.append(f"frontier and pool prices not shown: the catalog lacks {err}")
    return View(record, scenario, start, plan, frames, curves, pools, tuple(notes))


def _pool_money(
    scenario: Scenario, catalog: Catalog, frames: dict[str, pl.DataFrame]
) -> tuple[PoolMoney, ...]:
    price = build_inventory(scenario, catalog).usd_per_system_hour
    by_pool = (
        frames["pools"]
        .group_by("pool", maintain_order=True)
        .agg(
            pl.col("available_system_hours").sum(),
            pl.col("used_system_hours").sum(),
            pl.col("idle_system_hours").sum(),
            pl.col("cost_usd").sum(),
            pl.col("revenue_usd").sum(),
        )
    )
    rows = {r["pool"]: r for r in by_pool.iter_rows(named=True)}
    out = []
    for i, pool in enumerate(scenario.fleet.pools):
        r = rows.get(pool.id)
        idle = float(r["idle_system_hours"]) if r else 0.0
        out.append(
            PoolMoney(
                pool=pool.id,
                system=pool.system,
                usd_per_system_hour=float(price[i]),
                available_system_hours=float(r["available_system_hours"]) if r else 0.0,
                used_system_hours=float(r["used_system_hours"]) if r else 0.0,
                idle_system_hours=idle,
                cost_usd=float(r["cost_usd"]) if r else 0.0,
                idle_cost_usd=idle * float(price[i]),
                revenue_usd=float(r["revenue_usd"]) if r else 0.0,
            )
        )
    return tuple(out)


class ViewCache:
    """The views of the ``size`` most recently shown done plans, by plan id, fewer while they
    hold more than ``max_rows`` plan rows together (the most recent one always stays)."""

    def __init__(self, size: int = CACHE_SIZE, max_rows: int = CACHE_ROWS) -> None:
        self._size = size
        self._max_rows = max_rows
        self._views: OrderedDict[str, View] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, plan_id: str) -> View | None:
        with self._lock:
            view = self._views.get(plan_id)
            if view is not None:
                self._views.move_to_end(plan_id)
            return view

    def put(self, view: View) -> None:
        if view.record.status != PlanStatus.DONE:
            return  # it changes until it is done
        with self._lock:
            self._views[view.record.id] = view
            self._views.move_to_end(view.record.id)
            while len(self._views) > self._size or (
                len(self._views) > 1 and sum(v.rows for v in self._views.values()) > self._max_rows
            ):
                self._views.popitem(last=False)

    def drop(self, plan_id: str) -> None:
        with self._lock:
            self._views.pop(plan_id, None)
