"""Value an integer plan exactly, and repair a rounded-down plan greedily by marginal profit.

A plan is a combo per family and integer replicas per candidate and period. Given those, the
served demand is determined: each product (family, tier) sells the single offer of its combo, and
only candidates of that offer's serving variant serve it. In a period, served = min(demand,
capacity); for a windowed tier (w > 1 periods) a block serves min(block demand, block capacity),
placed on the block's best-paying periods first. Revenue, cost and penalty follow the objective
of ``planner.solve``. This is the one place that computes a plan's value: the decomposition, the
monolithic MILP, the baselines and the benchmark all report through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.tables import PlanningTables

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

SECONDS_PER_HOUR = 3600.0


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


def moved_systems(tables: PlanningTables, replicas: IntArray) -> IntArray:
    """(pools, periods): sum over the pool's candidates of systems_per_replica x |change of
    replicas since the previous period| (0 in the first period)."""
    cand = tables.candidates
    out = np.zeros(tables.inventory.systems_available.shape, dtype=np.int64)
    if tables.periods > 1:
        step = np.abs(np.diff(replicas, axis=1)) * cand.systems_per_replica[:, None]
        np.add.at(out[:, 1:], cand.pool, step)
    return out


def reconfiguration_ok(tables: PlanningTables, replicas: IntArray, limit: float | None) -> bool:
    """Constraint (6): moved systems <= 2 x limit x systems available, every pool and period."""
    if limit is None:
        return True
    allowed = 2.0 * limit * tables.inventory.systems_available
    return bool((moved_systems(tables, replicas) <= allowed + 1e-9).all())


def repair(
    tables: PlanningTables,
    combo: IntArray,
    replicas: IntArray,
    *,
    reconfiguration_limit: float | None = None,
    max_rounds: int = 100_000,
) -> IntArray:
    """Make ``replicas`` feasible and greedily add replicas while one adds profit.

    Replicas of candidates that serve nothing under ``combo`` are dropped; a pool-period over its
    inventory sheds replicas (least profitable first is not needed: the rounded-down LP plan is
    within inventory). Then, in rounds, each period adds the replica of largest marginal profit
    (price x min(rate, unmet demand of the block) - cost); a windowed product adds at most one
    replica per block and round so that the computed gain stays a lower bound of the true one.
    With a reconfiguration limit an addition must keep (6) in both periods it touches, and a
    round adds only in periods of one parity (so additions of a round never touch the same
    period pair); whether the starting plan keeps (6) is the caller's to check.
    """
    cand, inv = tables.candidates, tables.inventory
    prods = products(tables, combo)
    x = np.where(prods.useful[:, None], np.maximum(replicas, 0), 0).astype(np.int64)
    upper = replica_upper(tables)
    x = np.minimum(x, upper)
    periods = tables.periods
    n_pools = len(inv.pool_ids)
    spr = cand.systems_per_replica
    used = np.zeros((n_pools, periods), dtype=np.int64)
    np.add.at(used, cand.pool, spr[:, None] * x)
    for p, t in zip(*np.nonzero(used > inv.systems_available), strict=True):
        for c in np.flatnonzero((cand.pool == p) & (x[:, t] > 0)):
            while used[p, t] > inv.systems_available[p, t] and x[c, t] > 0:
                x[c, t] -= 1
                used[p, t] -= spr[c]
    unit = SECONDS_PER_HOUR * tables.period_hours
    cost = inv.usd_per_system_hour[cand.pool] * spr * tables.period_hours
    rate = cand.tokens_per_s_per_replica
    j = prods.product_of_cand
    windowed = prods.window > 1
    block_of = np.arange(periods)[None, :] // prods.window[:, None]  # (products, periods)
    cols = np.arange(periods)
    demand_blk = block_sums(prods.demand_tokens_per_s, prods.window)
    stalled = 0
    for round_no in range(max_rounds):
        cap = capacity(tables, prods, x)
        remaining = np.maximum(demand_blk - block_sums(cap, prods.window), 0.0)
        gain = prods.value_usd_per_token[j] * unit * np.minimum(rate, remaining[j]) - cost[:, None]
        free = inv.systems_available - used
        feasible = prods.useful[:, None] & (x < upper) & (spr[:, None] <= free[cand.pool])
        if reconfiguration_limit is not None:
            feasible &= _reconfiguration_room(tables, x, reconfiguration_limit, round_no)
        gain = np.where(feasible, gain, -np.inf)
        best = np.argmax(gain, axis=0)
        best_gain = gain[best, cols]
        ok = best_gain > 1e-9
        if not ok.any():
            stalled += 1
            if reconfiguration_limit is None or stalled >= 2:
                break
            continue
        stalled = 0
        prod_t = j[best]
        win_t = ok & windowed[prod_t]
        if win_t.any():
            idx = np.flatnonzero(win_t)
            key = prod_t[idx] * (periods + 1) + block_of[prod_t[idx], idx]
            order = np.lexsort((-best_gain[idx], key))
            first = np.ones(order.shape[0], dtype=bool)
            first[1:] = key[order][1:] != key[order][:-1]
            ok[idx[order[~first]]] = False
        t_ok = np.flatnonzero(ok)
        c_ok = best[t_ok]
        x[c_ok, t_ok] += 1
        np.add.at(used, (cand.pool[c_ok], t_ok), spr[c_ok])
    return x


def _reconfiguration_room(
    tables: PlanningTables, x: IntArray, limit: float, round_no: int
) -> BoolArray:
    """(cands, periods): adding one replica keeps (6) at t and t+1; only periods t of this
    round's parity."""
    cand = tables.candidates
    periods = tables.periods
    allowed = 2.0 * limit * tables.inventory.systems_available + 1e-9
    moved = moved_systems(tables, x)
    spr = cand.systems_per_replica[:, None]
    prev = np.concatenate([x[:, :1], x[:, :-1]], axis=1)  # x[c, t-1] (t=0: itself, no move)
    delta_now = np.abs(x + 1 - prev) - np.abs(x - prev)
    delta_now[:, 0] = 0
    nxt = np.concatenate([x[:, 1:], x[:, -1:]], axis=1)
    delta_next = np.abs(nxt - x - 1) - np.abs(nxt - x)
    delta_next[:, -1] = 0
    moved_c = moved[cand.pool]
    allowed_c = allowed[cand.pool]
    ok_now = moved_c + spr * delta_now <= allowed_c
    moved_next = np.concatenate([moved_c[:, 1:], np.zeros((x.shape[0], 1))], axis=1)
    allowed_next = np.concatenate([allowed_c[:, 1:], np.full((x.shape[0], 1), np.inf)], axis=1)
    ok_next = moved_next + spr * delta_next <= allowed_next
    parity = (np.arange(periods) % 2 == round_no % 2)[None, :]
    return ok_now & ok_next & parity
