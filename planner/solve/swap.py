"""Local search on an integer plan: swap one replica for another of the same pool and period.

Rounding the hour LP down and adding replicas greedily (``planner.solve.repair``) leaves full
pools with a few idle systems too few for the replica that would pay most. A swap drops one
replica and adds one of another candidate of the same pool that the freed systems let in:

    net = gain of the added replica (price x min(rate, unmet demand) - cost, unmet demand
          counting what the drop un-serves when both serve the same product)
        - loss of the dropped one (price x tokens it no longer serves - cost saved).

Each round makes the best swap of every period (the three cheapest drops of each pool are
tried), refills greedily, and is kept only if the plan's exact value (``evaluate``) rose -- so
the search never makes a plan worse, whatever the approximation in a windowed tier's gains.
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from planner.solve.evaluate import (
    block_sums,
    capacity,
    evaluate,
    products,
    replica_upper,
)
from planner.solve.repair import repair
from planner.solve.tables import SECONDS_PER_HOUR, PlanningTables

IntArray = npt.NDArray[np.int64]

DROPS_TRIED = 3


def improve_by_swaps(
    tables: PlanningTables,
    combo: IntArray,
    replicas: IntArray,
    deadline: float,
    *,
    max_rounds: int = 50,
) -> IntArray:
    cand, inv = tables.candidates, tables.inventory
    prods = products(tables, combo)
    upper = replica_upper(tables)
    spr = cand.systems_per_replica
    rate = cand.tokens_per_s_per_replica
    unit = SECONDS_PER_HOUR * tables.period_hours
    cost = inv.usd_per_system_hour[cand.pool] * spr * tables.period_hours
    j = prods.product_of_cand
    value = prods.value_usd_per_token[j] * unit  # (cands, periods) USD per token/s served
    demand_blk = block_sums(prods.demand_tokens_per_s, prods.window)
    pools = [np.flatnonzero((cand.pool == p) & prods.useful) for p in range(len(inv.pool_ids))]
    periods = tables.periods
    cols = np.arange(periods)
    x = replicas.copy()
    best = evaluate(tables, combo, x).objective_usd
    for _ in range(max_rounds):
        if time.perf_counter() > deadline:
            break
        cap_blk = block_sums(capacity(tables, prods, x), prods.window)
        served = np.minimum(demand_blk, cap_blk)
        remaining = np.maximum(demand_blk - cap_blk, 0.0)
        unserved_by_drop = served[j] - np.minimum(demand_blk[j], cap_blk[j] - rate)
        loss = np.where(x > 0, value * unserved_by_drop - cost[:, None], np.inf)
        used = np.zeros(inv.systems_available.shape, dtype=np.int64)
        np.add.at(used, cand.pool, spr[:, None] * x)
        free = inv.systems_available - used
        best_net = np.zeros(periods)
        best_drop = np.full(periods, -1)
        best_add = np.full(periods, -1)
        for p, cs in enumerate(pools):
            if cs.size < 2:
                continue
            order = np.argsort(loss[cs], axis=0)[:DROPS_TRIED]
            for k in range(order.shape[0]):
                drop = cs[order[k]]  # (periods,)
                drop_loss = loss[drop, cols]
                freed = free[p] + spr[drop]
                extra = np.where(
                    j[cs][:, None] == j[drop][None, :], unserved_by_drop[drop, cols], 0.0
                )
                gain = value[cs] * np.minimum(rate[cs], remaining[j[cs]] + extra) - cost[cs, None]
                can = (
                    (spr[cs][:, None] <= freed[None, :])
                    & (cs[:, None] != drop[None, :])
                    & (x[cs] < upper[cs])
                )
                gain = np.where(can, gain, -np.inf)
                add_i = np.argmax(gain, axis=0)
                net = gain[add_i, cols] - drop_loss
                better = np.isfinite(net) & (net > best_net + 1e-9)
                best_net = np.where(better, net, best_net)
                best_drop = np.where(better, drop, best_drop)
                best_add = np.where(better, cs[add_i], best_add)
        ts = np.flatnonzero(best_drop >= 0)
        if ts.size == 0:
            break
        trial = x.copy()
        trial[best_drop[ts], ts] -= 1
        trial[best_add[ts], ts] += 1
        trial = repair(tables, combo, trial)
        value_now = evaluate(tables, combo, trial).objective_usd
        if value_now <= best + 1e-9 * max(1.0, abs(best)):
            break
        x, best = trial, value_now
    return x
