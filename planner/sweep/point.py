"""One grid point: plan its scenario and summarize the plan; the task a sweep's workers run.

``solve_point`` takes the point's scenario as JSON bytes (cheap to ship to a process or a Ray
worker) and returns a ``PointSummary`` (money, prices, pool usage) and, when Monte Carlo samples
are asked, the ``FixedPlan`` they are evaluated against. Each worker process loads the catalog
and its arrays once. The point's time limit is the solver's; a point whose build or assembly runs
past it plus ``grace_s`` is stopped by an interval timer (where the task runs on a main thread,
as in a process pool or a Ray worker) and reported as ``timeout``.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
import time
from collections.abc import Iterator

from msgspec import Struct

from fleet.catalog.load import Catalog, load_catalog
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays, build_arrays
from planner.build.pipeline import Unplannable, build
from planner.plan.assemble import assemble_plan, infeasible_plan
from planner.plan.schema import Plan
from planner.run import solve_options
from planner.scenario.decode import check_catalog, decode_scenario
from planner.solve import solve
from planner.sweep.montecarlo import FixedPlan, fixed_plan

TIMEOUT = "timeout"
"""A point's status when it ran past its time limit plus the grace."""
ERROR = "error"
"""A point's status when its plan failed on its input (the message says why)."""


class PointPrice(Struct, frozen=True, kw_only=True):
    family: str
    tier: str
    variant: str
    multiplier: float
    usd_per_m_output_tokens: float


class PointPool(Struct, frozen=True, kw_only=True):
    pool: str
    systems_max: int
    """Most systems available in any period."""
    systems_used_peak: int
    utilization_mean: float
    """Mean over periods of systems used / available."""
    cost_usd: float


class PointSummary(Struct, frozen=True, kw_only=True):
    index: int
    status: str
    """optimal / feasible / infeasible / no_solution, or ``timeout`` / ``error``."""
    message: str
    gap: float
    objective_usd: float
    revenue_usd: float
    cost_usd: float
    penalty_usd: float
    margin_usd: float
    served_fraction: float
    """Served / demanded output tokens over the horizon, at the plan's prices."""
    solve_s: float
    build_s: float
    prices: tuple[PointPrice, ...] = ()
    pools: tuple[PointPool, ...] = ()


class _PointTimeout(Exception):
    pass


@functools.cache
def _catalog() -> tuple[Catalog, CatalogArrays]:
    catalog = load_catalog()
    return catalog, build_arrays(catalog)


@contextlib.contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Raise ``_PointTimeout`` after ``seconds`` (main thread only; elsewhere no timer)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum: int, frame: object) -> None:
        raise _PointTimeout

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def empty_summary(index: int, status: str, message: str, elapsed_s: float) -> PointSummary:
    return PointSummary(
        index=index,
        status=status,
        message=message,
        gap=1.0,
        objective_usd=0.0,
        revenue_usd=0.0,
        cost_usd=0.0,
        penalty_usd=0.0,
        margin_usd=0.0,
        served_fraction=0.0,
        solve_s=elapsed_s,
        build_s=0.0,
    )


def solve_point(
    index: int,
    scenario_json: bytes,
    time_limit_s: float,
    grace_s: float,
    want_fixed: bool,
) -> tuple[PointSummary, FixedPlan | None]:
    """Plan one point within ``time_limit_s`` (+ ``grace_s`` for building and assembling)."""
    start = time.perf_counter()
    try:
        with _alarm(time_limit_s + grace_s):
            scenario = decode_scenario(scenario_json, "json")
            catalog, arrays = _catalog()
            check_catalog(scenario, catalog)
            built = build(scenario, catalog, arrays)
            if isinstance(built, Unplannable):
                return _summary(index, infeasible_plan(built)), None
            result = solve(built.tables, solve_options(scenario, time_limit_s), None)
            plan = assemble_plan(built, result)
            fixed = None
            if want_fixed and result.replicas.size and plan.status.has_plan:
                fixed = fixed_plan(built.tables, result.combo, result.replicas, result.cost_usd)
            return _summary(index, plan), fixed
    except _PointTimeout:
        elapsed = time.perf_counter() - start
        message = f"stopped after {elapsed:.1f}s: time limit {time_limit_s:g}s + {grace_s:g}s"
        return empty_summary(index, TIMEOUT, message, elapsed), None
    except InputError as err:
        return empty_summary(index, ERROR, str(err), time.perf_counter() - start), None


def _summary(index: int, plan: Plan) -> PointSummary:
    asked = sum(f.demand_tokens_per_s for f in plan.flows)
    served = sum(f.served_tokens_per_s for f in plan.flows)
    pools = []
    for pool in dict.fromkeys(u.pool for u in plan.pool_usage):
        usage = [u for u in plan.pool_usage if u.pool == pool]
        pools.append(
            PointPool(
                pool=pool,
                systems_max=max(u.systems_available for u in usage),
                systems_used_peak=max(u.systems_used for u in usage),
                utilization_mean=sum(u.utilization for u in usage) / len(usage),
                cost_usd=sum(u.cost_usd for u in usage),
            )
        )
    return PointSummary(
        index=index,
        status=plan.status.value,
        message=plan.message,
        gap=plan.gap,
        objective_usd=plan.objective_usd,
        revenue_usd=plan.revenue_usd,
        cost_usd=plan.cost_usd,
        penalty_usd=plan.penalty_usd,
        margin_usd=plan.margin_usd,
        served_fraction=served / asked if asked > 0 else 0.0,
        solve_s=plan.solve_s,
        build_s=plan.build_s,
        prices=tuple(
            PointPrice(
                family=p.family,
                tier=p.tier,
                variant=p.variant,
                multiplier=p.multiplier,
                usd_per_m_output_tokens=p.usd_per_m_output_tokens,
            )
            for p in plan.prices
        ),
        pools=tuple(pools),
    )
