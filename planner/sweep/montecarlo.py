"""Monte Carlo over demand forecast error: what a fixed plan earns when demand is off.

A capacity planner commits the fleet (replicas per pool and hour) and the price card before the
demand is known. This module keeps both fixed and asks what the plan earns, and how often it
misses its SLOs, when the realized demand differs from the forecast. It does not re-plan per
sample: re-planning would answer "what could I earn had I known the demand", which is not a
decision anyone can take in advance.

Error model: realized demand = forecast x M, with M lognormal, E[M] = 1 and coefficient of
variation ``demand_cv`` (sigma = sqrt(ln(1 + cv^2)), mu = -sigma^2 / 2), so the forecast stays
the mean and ``demand_cv`` is the relative standard deviation a forecaster quotes. Multiplicative
and positive (demand cannot go negative; a forecast is more often off by a factor than by a fixed
amount). ``scope`` says what one draw covers:

- ``family`` (default): one multiplier per model family for the whole horizon. Forecast error of a
  capacity plan is dominated by the level (a launch that takes off, growth misjudged) and is
  strongly correlated across the hours of a week; independent hourly errors of the same CV would
  average out over a day and understate the risk.
- ``family-hour``: an independent multiplier per family and planning period, for noise around a
  level that is right (the peak hours then exceed capacity more often).

Each sample draws from its own generator, seeded by (seed, sample index): the draws do not depend
on how samples are split into tasks, on which machine they run, or on the grid point, so every
point of a sweep faces the same demand scenarios (common random numbers) and differences between
points are the plans', not the noise's.

Served demand under a fixed plan follows ``planner.solve.evaluate``: per (family, tier) and
period, served = min(demand, capacity within the tier's SLO), windowed (batch) tiers by block.
A demanded token that the plan's capacity cannot serve within the tier's SLO is an SLO miss: a
real fleet would queue it past its TTFT percentile or its completion window rather than drop it.
``slo_miss_hours`` counts (family, tier, hour) cells with any such token; ``unserved_fraction``
is their share of the demanded output tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from planner.solve.evaluate import Products, block_sums, capacity, products, serve
from planner.solve.tables import SECONDS_PER_HOUR, FloatArray, IntArray, PlanningTables

Scope = Literal["family", "family-hour"]
SCOPES: tuple[Scope, ...] = ("family", "family-hour")
MAX_DEMAND_CV = 3.0
"""A forecast off by more than 3x its own size is no forecast."""
PERCENTILES = (5.0, 50.0, 95.0)
_MISS_TOLERANCE = 1e-9
"""Relative: unserved tokens below this fraction of a cell's demand are rounding, not a miss."""


@dataclass(frozen=True, slots=True)
class FixedPlan:
    """What evaluating a plan against other demand needs: small arrays per (family, tier)
    product j = family x tiers + tier and period, from the plan's tables and decisions."""

    demand_tokens_per_s: FloatArray
    """(products, periods): forecast output tokens/s at the plan's prices."""
    capacity_tokens_per_s: FloatArray
    """(products, periods): what the plan's replicas serve within each tier's SLO."""
    price_usd_per_token: FloatArray
    """(products, periods)."""
    value_usd_per_token: FloatArray
    """(products, periods): price + unserved penalty (what ``serve`` maximizes)."""
    penalty_usd_per_token: FloatArray
    """(products,)."""
    offer: IntArray
    window: IntArray
    product_family: IntArray
    """(products,): family index of each product."""
    families: int
    cost_usd: float
    period_hours: float


@dataclass(frozen=True, slots=True)
class SampleOutcome:
    margin_usd: float
    slo_miss_hours: float
    unserved_fraction: float


def fixed_plan(
    tables: PlanningTables, combo: IntArray, replicas: IntArray, cost_usd: float
) -> FixedPlan:
    prods = products(tables, combo)
    cap = capacity(tables, prods, replicas)
    d = tables.demand
    n_fam, n_tiers = len(d.family_ids), len(d.tier_ids)
    price = np.where(
        (prods.offer >= 0)[:, None], d.offers.usd_per_output_token[np.maximum(prods.offer, 0)], 0.0
    )
    return FixedPlan(
        demand_tokens_per_s=prods.demand_tokens_per_s,
        capacity_tokens_per_s=cap,
        price_usd_per_token=np.asarray(price, dtype=np.float64),
        value_usd_per_token=prods.value_usd_per_token,
        penalty_usd_per_token=np.tile(d.unserved_penalty_usd_per_output_token, n_fam),
        offer=prods.offer,
        window=prods.window,
        product_family=np.repeat(np.arange(n_fam), n_tiers),
        families=n_fam,
        cost_usd=cost_usd,
        period_hours=tables.period_hours,
    )


def sigma_of(cv: float) -> float:
    """The lognormal's sigma for a coefficient of variation ``cv``."""
    return math.sqrt(math.log1p(cv * cv))


def multipliers(
    plan: FixedPlan, sample: int, *, seed: int, demand_cv: float, scope: Scope
) -> FloatArray:
    """(families, periods) demand multipliers of one sample (mean 1, CV ``demand_cv``)."""
    rng = np.random.default_rng([seed, sample])
    periods = plan.demand_tokens_per_s.shape[1]
    sigma = sigma_of(demand_cv)
    z = rng.standard_normal((plan.families, 1 if scope == "family" else periods))
    m = np.exp(sigma * z - sigma * sigma / 2.0)
    return np.broadcast_to(m, (plan.families, periods))


def outcome(plan: FixedPlan, mult: FloatArray) -> SampleOutcome:
    """The fixed plan against demand = forecast x ``mult`` (families, periods)."""
    demand = plan.demand_tokens_per_s * mult[plan.product_family, :]
    empty = np.zeros(0, dtype=np.int64)
    prods = Products(
        offer=plan.offer,
        demand_tokens_per_s=demand,
        value_usd_per_token=plan.value_usd_per_token,
        useful=np.zeros(0, dtype=np.bool_),
        product_of_cand=empty,
        window=plan.window,
    )
    served = serve(prods, plan.capacity_tokens_per_s)
    unit = SECONDS_PER_HOUR * plan.period_hours
    revenue = float((plan.price_usd_per_token * served).sum() * unit)
    missing = block_sums(demand, plan.window) - block_sums(served, plan.window)
    total = block_sums(demand, plan.window)
    share = np.divide(demand, total, out=np.zeros_like(demand), where=total > 0)
    unserved = np.maximum(missing, 0.0) * share
    missed = (demand > 0) & (unserved > _MISS_TOLERANCE * demand)
    asked = float(demand.sum())
    return SampleOutcome(
        margin_usd=revenue - plan.cost_usd,
        slo_miss_hours=float(missed.sum()) * plan.period_hours,
        unserved_fraction=float(unserved.sum()) / asked if asked > 0 else 0.0,
    )


def run_samples(
    plan: FixedPlan, start: int, stop: int, *, seed: int, demand_cv: float, scope: Scope
) -> FloatArray:
    """(stop - start, 3): margin, SLO-miss hours and unserved fraction of samples
    ``start..stop-1`` (one task's share; the rows do not depend on how samples are split)."""
    out = np.empty((stop - start, 3))
    for i, sample in enumerate(range(start, stop)):
        r = outcome(plan, multipliers(plan, sample, seed=seed, demand_cv=demand_cv, scope=scope))
        out[i] = (r.margin_usd, r.slo_miss_hours, r.unserved_fraction)
    return out


def percentiles(values: FloatArray) -> tuple[float, ...]:
    """p5, p50, p95 (linear interpolation between order statistics)."""
    return tuple(float(v) for v in np.percentile(values, PERCENTILES))
