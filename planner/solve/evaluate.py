"""Value an integer plan exactly.

A plan is a combo per family and integer replicas per candidate and period. Given those, the
served demand is determined: each product (family, tier) sells the single offer of its combo, and
only candidates of that offer's serving variant serve it. In a period, served = min(demand,
capacity); for a windowed tier (w > 1 periods) a block serves min(block demand, block capacity),
placed on the block's best-paying periods first. Revenue, cost and penalty follow the objective
of ``planner.solve``. This is the one place that computes a plan's value: the decomposition, the
monolithic MILP, the baselines and the benchmark all report through it. Rounding and repairing
plans is ``planner.solve.repair``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.solve.tables import SECONDS_PER_HOUR, PlanningTables

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Products:
    """Per product j = family * tiers + tier, under one choice of combos."""

    offer: IntArray
    """(products,): chosen offer, -1 when the family does not sell the tier."""
    demand_tokens_per_s: FloatArray
    """(products, periods)."""
    value_usd_per_token: FloatArray
    """(products, periods): price + unserved penalty (what one more served token is worth)."""
    useful: BoolArray
    """(cands,): the candidate serves its product's chosen offer."""
    product_of_cand: IntArray
    window: IntArray
    """(products,): window periods of the product's tier."""


@dataclass(frozen=True, slots=True)
class PlanValue:
    objective_usd: float
    revenue_usd: float
    cost_usd: float
    penalty_usd: float
    capacity_tokens_per_s: FloatArray
    """(products, periods)."""
    served_tokens_per_s: FloatArray
    """(products, periods)."""
    unserved_tokens_per_s: FloatArray
    """(products, periods); for windowed tiers the block's unserved, spread like its demand."""


def products(tables: PlanningTables, combo: IntArray) -> Products:
    d, cand = tables.demand, tables.candidates
    n_fam, n_tiers = len(d.family_ids), len(d.tier_ids)
    offer = d.combo_offer[combo].reshape(n_fam * n_tiers)
    demand = d.tokens_per_s[combo].reshape(n_fam * n_tiers, tables.periods).astype(float)
    price = np.where(
        (offer >= 0)[:, None], d.offers.usd_per_output_token[np.maximum(offer, 0)], 0.0
    )
    pen = np.tile(d.unserved_penalty_usd_per_output_token, n_fam)
    value = np.where((offer >= 0)[:, None], price + pen[:, None], 0.0)
    demand = np.where((offer >= 0)[:, None], demand, 0.0)
    j = cand.family * n_tiers + cand.tier
    chosen_variant = np.where(offer >= 0, d.offers.variant[np.maximum(offer, 0)], -1)
    useful = (offer[j] >= 0) & (chosen_variant[j] == cand.variant)
    window = np.tile(np.maximum(d.window_periods, 1), n_fam).astype(np.int64)
    return Products(offer, demand, value, useful, j.astype(np.int64), window)


def capacity(tables: PlanningTables, prods: Products, replicas: IntArray) -> FloatArray:
    """(products, periods) tokens/s of the useful candidates' replicas."""
    rate = tables.candidates.tokens_per_s_per_replica * replicas * prods.useful[:, None]
    out = np.zeros((prods.offer.shape[0], tables.periods))
    np.add.at(out, prods.product_of_cand, rate)
    return out


def serve(prods: Products, cap: FloatArray) -> FloatArray:
    """(products, periods): the optimal served tokens/s given capacity."""
    demand = prods.demand_tokens_per_s
    worth = prods.value_usd_per_token > 0
    served = np.where(worth, np.minimum(demand, cap), 0.0)
    periods = demand.shape[1]
    for j in np.flatnonzero(prods.window > 1):
        w = int(prods.window[j])
        served[j] = 0.0
        for start in range(0, periods, w):
            sl = slice(start, min(start + w, periods))
            left = float(demand[j, sl].sum())
            order = np.argsort(-prods.value_usd_per_token[j, sl], kind="stable")
            for i in order:
                if left <= 0 or prods.value_usd_per_token[j, start + i] <= 0:
                    break
                take = min(cap[j, start + i], left)
                served[j, start + i] = take
                left -= take
    return served


def block_sums(values: FloatArray, window: IntArray) -> FloatArray:
    """Each period's entry replaced by its block's sum (window 1: unchanged)."""
    out = values.copy()
    periods = values.shape[1]
    for j in np.flatnonzero(window > 1):
        w = int(window[j])
        for start in range(0, periods, w):
            sl = slice(start, min(start + w, periods))
            out[j, sl] = values[j, sl].sum()
    return out


def evaluate(tables: PlanningTables, combo: IntArray, replicas: IntArray) -> PlanValue:
    prods = products(tables, combo)
    cap = capacity(tables, prods, replicas)
    served = serve(prods, cap)
    unit = SECONDS_PER_HOUR * tables.period_hours
    d = tables.demand
    n_fam = len(d.family_ids)
    price_j = np.where(
        (prods.offer >= 0)[:, None], d.offers.usd_per_output_token[np.maximum(prods.offer, 0)], 0.0
    )
    revenue = float((price_j * served).sum() * unit)
    inv, cand = tables.inventory, tables.candidates
    cost = float(
        (inv.usd_per_system_hour[cand.pool] * cand.systems_per_replica * replicas.sum(axis=1)).sum()
        * tables.period_hours
    )
    demand = prods.demand_tokens_per_s
    missing_blk = block_sums(demand, prods.window) - block_sums(served, prods.window)
    share = np.divide(
        demand, block_sums(demand, prods.window), out=np.zeros_like(demand), where=demand > 0
    )
    unserved = np.maximum(missing_blk, 0.0) * share
    pen = np.tile(d.unserved_penalty_usd_per_output_token, n_fam)
    penalty = float((pen[:, None] * unserved).sum() * unit)
    return PlanValue(
        objective_usd=revenue - cost - penalty,
        revenue_usd=revenue,
        cost_usd=cost,
        penalty_usd=penalty,
        capacity_tokens_per_s=cap,
        served_tokens_per_s=served,
        unserved_tokens_per_s=unserved,
    )


def replica_upper(tables: PlanningTables) -> IntArray:
    """(cands, periods): min(max_replicas, floor(systems available / systems per replica))."""
    cand = tables.candidates
    avail = tables.inventory.systems_available[cand.pool]
    return np.minimum(cand.max_replicas[:, None], avail // cand.systems_per_replica[:, None])
