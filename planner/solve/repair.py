"""Integer plans from fractional ones: rounding, reconfiguration, greedy repair by marginal profit.

- ``repair``: drop replicas that serve nothing, then add replicas greedily while one adds profit;
- ``moved_systems`` / ``reconfiguration_ok``: constraint (6) on an integer plan;
- ``round_within_reconfiguration``: round an LP plan down period by period, pulling each period
  toward the previous one until (6) holds (plain rounding down can move more systems than the
  continuous plan did).
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from planner.solve.evaluate import (
    block_sums,
    capacity,
    products,
    replica_upper,
)
from planner.solve.tables import SECONDS_PER_HOUR, PlanningTables

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


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
    deadline: float | None = None,
) -> IntArray:
    """Make ``replicas`` feasible and greedily add replicas while one adds profit.

    Replicas of candidates that serve nothing under ``combo`` are dropped; a pool-period over its
    inventory (a MIP's plan read with rounding) sheds the replicas earning least per system
    first. Then, in rounds, each period adds the replica of largest marginal profit
    (price x min(rate, unmet demand of the block) - cost); a windowed product adds at most one
    replica per block and round so that the computed gain stays a lower bound of the true one.
    With a reconfiguration limit an addition must keep (6) in both periods it touches, and a
    round adds only in periods of one parity (so additions of a round never touch the same
    period pair); whether the starting plan keeps (6) is the caller's to check. Stops adding
    at ``deadline`` (``time.perf_counter()``), the plan feasible as it stands.
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
    unit = SECONDS_PER_HOUR * tables.period_hours
    cost = inv.usd_per_system_hour[cand.pool] * spr * tables.period_hours
    rate = cand.tokens_per_s_per_replica
    over = np.nonzero(used > inv.systems_available)
    if over[0].size:
        # Shed the replicas earning least per system at full use first.
        per_system = (
            prods.value_usd_per_token[prods.product_of_cand] * rate * unit - cost[:, None]
        ) / spr[:, None]
        for p, t in zip(*over, strict=True):
            cs = np.flatnonzero((cand.pool == p) & (x[:, t] > 0))
            for c in cs[np.argsort(per_system[cs, t], kind="stable")]:
                while used[p, t] > inv.systems_available[p, t] and x[c, t] > 0:
                    x[c, t] -= 1
                    used[p, t] -= spr[c]
    j = prods.product_of_cand
    windowed = prods.window > 1
    block_of = np.arange(periods)[None, :] // prods.window[:, None]  # (products, periods)
    cols = np.arange(periods)
    demand_blk = block_sums(prods.demand_tokens_per_s, prods.window)
    stalled = 0
    for round_no in range(max_rounds):
        if deadline is not None and time.perf_counter() > deadline:
            break
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


def round_within_reconfiguration(
    tables: PlanningTables, replicas: FloatArray, limit: float, *, sticky: bool = False
) -> IntArray | None:
    """Round ``replicas`` (cands, periods) down, then per period and pool undo increases and
    then decreases against the previous period, one replica at a time, until the pool's moved
    systems fit (6). A backward pass first caps each pool's use where the pool shrinks faster
    than (6) lets replicas leave (use_t <= use_{t+1} + allowed_{t+1} / 2, half the allowance
    kept for arrivals). None when a period
    still cannot be fitted.

    ``sticky``: from the second period on, each candidate takes the integer of [floor, ceil] of
    its LP value nearest to its previous period's (an LP move within the same unit interval then
    costs no integer move, and an LP growth is rounded up when the previous level is above the
    floor), then the pool is brought back within its inventory and reach (rounded-up replicas
    dropped first) before the moves are fitted."""
    cand, inv = tables.candidates, tables.inventory
    upper = replica_upper(tables)
    x = np.maximum(np.minimum(np.floor(replicas + 1e-6), upper), 0).astype(np.int64)
    spr = cand.systems_per_replica
    allowed = 2.0 * limit * inv.systems_available + 1e-9
    pools = [np.flatnonzero(cand.pool == p) for p in range(len(inv.pool_ids))]
    avail = inv.systems_available.astype(float)
    reach = avail.copy()
    for t in range(tables.periods - 2, -1, -1):
        reach[:, t] = np.minimum(reach[:, t], reach[:, t + 1] + allowed[:, t + 1] / 2.0)
    for p, cs in enumerate(pools):
        for t in np.flatnonzero((spr[cs, None] * x[cs]).sum(axis=0) > reach[p]).tolist():
            used = int((spr[cs] * x[cs, t]).sum())
            for i in np.argsort(-spr[cs]):
                while used > reach[p, t] and x[cs[i], t] > 0:
                    x[cs[i], t] -= 1
                    used -= int(spr[cs[i]])
    frac = np.maximum(np.minimum(replicas, upper), 0.0)
    for t in range(1, tables.periods):
        for p, cs in enumerate(pools):
            if cs.size == 0:
                continue
            prev = x[cs, t - 1]
            y = x[cs, t].copy()
            if sticky:
                y = _sticky(frac[cs, t], prev, y, spr[cs], min(reach[p, t], avail[p, t]))
            moved = int((spr[cs] * np.abs(y - prev)).sum())
            if moved <= allowed[p, t]:
                x[cs, t] = y
                continue
            for i in np.argsort(-(y - prev)):  # undo increases: always within inventory
                while moved > allowed[p, t] and y[i] > prev[i]:
                    y[i] -= 1
                    moved -= int(spr[cs[i]])
            used = int((spr[cs] * y).sum())
            for i in np.argsort(y - prev):  # then undo decreases where inventory allows
                while (
                    moved > allowed[p, t]
                    and y[i] < prev[i]
                    and y[i] < upper[cs[i], t]
                    and used + spr[cs[i]] <= inv.systems_available[p, t]
                ):
                    y[i] += 1
                    moved -= int(spr[cs[i]])
                    used += int(spr[cs[i]])
            if moved > allowed[p, t]:
                return None
            x[cs, t] = y
    return x


def _sticky(
    target: FloatArray, prev: IntArray, floor: IntArray, spr: IntArray, cap: float
) -> IntArray:
    """The integer of [floor, ceil] of ``target`` nearest to ``prev``, per candidate of one pool
    and period; then rounded-up replicas are dropped (smallest LP fraction first) while the
    pool's use exceeds ``cap``."""
    ceil = np.maximum(np.ceil(target - 1e-6), floor).astype(np.int64)
    y = np.minimum(np.maximum(prev, floor), ceil)
    used = int((spr * y).sum())
    if used > cap:
        for i in np.argsort(target - floor):
            while used > cap and y[i] > floor[i]:
                y[i] -= 1
                used -= int(spr[i])
    return y
