"""The model the solver solves, written down once: columns, the constraint families (1)-(6) and
the objective, each a function below in this numbering. ``planner.solve.model`` stacks the row
blocks into one matrix; every method (``planner.solve``) solves this model or a part of it.

Data (``planner.solve.tables.PlanningTables``): pools p with systems_available[p,t] and a cost per
system-hour; offers o = (family f, tier k, serving variant, price multiplier) with revenue
usd_per_output_token[o,t]; combos m of a family (one offer per tier) with demanded tokens/s
D[m,k,t] (MNL, so tiers substitute); candidates c (pool, family, tier, variant) with
systems_per_replica[c], tokens_per_s_per_replica[c,t] and max_replicas[c]; periods t of
``period_hours`` hours; window_periods[k] (w > 1: demand of each block of w periods may be served
anywhere in the block); an unserved penalty per tier.

Variables (named by domain key in dumps, e.g. ``replicas[pool=h200-us-east,cand=17,period=5]``):
    z[f,m]  in {0,1}  combo m is family f's price card for the whole horizon
    x[c,t]  integer   replicas of candidate c in period t
    s[o,t]  >= 0      output tokens/s of offer o served in period t
    d[c,t]  >= 0      replicas of c changed between t-1 and t (only with a reconfiguration limit)

Constraints:
    (1) one combo per family:  sum_m z[f,m] = 1.
    (2) served <= demand of the chosen combo, split by the tier's OWN offer: for each offer o of
        tier k and block b of w_k periods,
        sum_{t in b} s[o,t] <= sum_{m: combo_offer[m,k]=o} z[f,m] * sum_{t in b} D[m,k,t].
        Exact (one offer per tier is chosen), and it keeps the LP small: split by combo instead,
        the week-scale root LP did not solve in 60 s in our measurements.
    (3) capacity per (family, tier, variant) and period: sum_{o of fkv} s[o,t]
        <= sum_{c of fkv} tokens_per_s_per_replica[c,t] * x[c,t]; a candidate serves only
        offers of its own variant. (Summing the key's offers is exact -- only one is chosen --
        and keeps the LP from counting the same replicas for two blended prices.)
    (4) inventory per pool and period: sum_{c in p} systems_per_replica[c] * x[c,t]
        <= systems_available[p,t].
    (5) x[c,t] <= min(max_replicas[c], floor(systems_available[p,t] / systems_per_replica[c]))
        (valid for the integer model, tightens its relaxation).
    (6) optional reconfiguration limit r: d[c,t] >= |x[c,t] - x[c,t-1]| and
        sum_{c in p} systems_per_replica[c] * d[c,t] <= 2 r systems_available[p,t] (each system
        that changes role leaves one candidate and joins another).
Objective (USD over the horizon, maximized):
    sum_{o,t} (usd_per_output_token[o,t] + penalty_k) * s[o,t] * 3600 * period_hours
    - sum_{c,t} usd_per_system_hour[p] * systems_per_replica[c] * x[c,t] * period_hours
    - sum_{f,m} z[f,m] * sum_{k,t} penalty_k * D[m,k,t] * 3600 * period_hours,
i.e. revenue - running cost - penalty on the chosen combo's unserved demand.

In the arrays: served tokens/s are carried in units of ``token_scale`` tokens/s so that capacity
coefficients are O(1); every row is ``<=``; columns that can never be non-zero (replicas of a
candidate whose (family, tier, variant) no offer sells, periods with no systems, offers no combo
demands) are left out; the columns are x, then s, then d. Rows (2) are ``<= B z``: ``B`` is
``RowBlock.rhs_by_combo``. Rows (1) are built only where z are columns (``Structure.joint``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from planner.solve.tables import SECONDS_PER_HOUR, Demand, PlanningTables

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# Row kinds
DEMAND, CAPACITY, INVENTORY, RECONFIG_UP, RECONFIG_DOWN, RECONFIG_POOL = range(6)
# Column kinds
REPLICAS, SERVED, MOVED = range(3)


@dataclass(frozen=True, slots=True)
class Columns:
    """The model's columns x[c,t], s[o,t], d[c,t] (in that order) and what indexes them."""

    token_scale: float
    """Served columns are in units of this many output tokens/s."""
    rate: FloatArray
    """(cands, periods): tokens/s per replica, unscaled."""
    x_col: IntArray
    """(cands, periods): column of replicas[c, t], -1 when left out."""
    x_upper: FloatArray
    """(cands, periods): bound (5)."""
    xc: IntArray
    """(replica cols,): candidate of each replica column."""
    xt: IntArray
    s_offer: IntArray
    """(served cols,): offer of each served column."""
    s_period: IntArray
    s_row: IntArray
    """(served cols,): its demand row (2)."""
    s_upper: FloatArray
    """(served cols,): the largest block demand of the offer (redundant with (2) once z is
    fixed)."""
    dc: IntArray
    """(moved cols,): candidate of each moved column (reconfiguration limit only)."""
    dt: IntArray
    capacity: CapacityKeys

    @property
    def n_x(self) -> int:
        return int(self.xc.shape[0])

    @property
    def n_s(self) -> int:
        return int(self.s_offer.shape[0])

    @property
    def n_d(self) -> int:
        return int(self.dc.shape[0])

    @property
    def n_cols(self) -> int:
        return self.n_x + self.n_s + self.n_d


@dataclass(frozen=True, slots=True)
class CapacityKeys:
    """The (family, tier, variant) keys some offer sells: one capacity row (3) per key and
    period."""

    n_keys: int
    offer_key: IntArray
    """(offers,)."""
    cand_key: IntArray
    """(cands,): -1 when no offer sells the candidate's key."""


@dataclass(frozen=True, slots=True)
class DemandBlocks:
    """The rows of (2): one per (offer, block of its tier's window), offer by offer."""

    first: IntArray
    """(offers + 1,): first row of each offer; ``first[-1]`` rows in all."""
    offer: IntArray
    """(rows,)."""
    block: IntArray
    """(rows,): the block's index within the offer's tier."""
    by_combo: sparse.csr_array
    """(rows, combos): B, scaled tokens/s of demand summed over the block."""


@dataclass(frozen=True, slots=True)
class RowBlock:
    """One constraint family: ``sum_j value * v[col] <= rhs (+ rhs_by_combo @ z)`` per row, its
    entries numbered by row within the block."""

    name: str
    entry_row: IntArray
    entry_col: IntArray
    entry_value: FloatArray
    kind: IntArray
    """(rows,): the row kind (DEMAND, CAPACITY, ...)."""
    key: IntArray
    """(rows,): offer (demand), capacity key (capacity), pool (inventory, reconfig pool), cand."""
    period: IntArray
    """(rows,): period (first period of the block for demand rows)."""
    rhs: FloatArray
    rhs_by_combo: sparse.csr_array | None = None

    @property
    def n_rows(self) -> int:
        return int(self.rhs.shape[0])


def _pool_period_rows(n_pools: int, periods: int) -> tuple[IntArray, IntArray]:
    return np.repeat(np.arange(n_pools), periods), np.tile(np.arange(periods), n_pools)


def token_scale_of(tables: PlanningTables) -> float:
    """A power of ten near the median tokens/s per replica."""
    rate = np.asarray(tables.candidates.tokens_per_s_per_replica, dtype=float)
    positive = rate[rate > 0]
    return float(10.0 ** np.floor(np.log10(np.median(positive)))) if positive.size else 1.0


def windows_of(demand: Demand) -> IntArray:
    """(tiers,): window periods, at least 1."""
    return np.maximum(np.asarray(demand.window_periods, dtype=np.int64), 1)


def capacity_keys(tables: PlanningTables) -> CapacityKeys:
    """(3)'s keys: (family, tier, variant) sold by at least one offer."""
    d, cand = tables.demand, tables.candidates
    offers = d.offers
    n_tiers, n_var = len(d.tier_ids), len(d.variant_ids)
    key_code = (offers.family * n_tiers + offers.tier) * n_var + offers.variant
    keys, offer_key = np.unique(key_code, return_inverse=True)
    cand_code = (cand.family * n_tiers + cand.tier) * n_var + cand.variant
    pos = np.minimum(np.searchsorted(keys, cand_code), max(len(keys) - 1, 0))
    n_cand = int(cand.pool.shape[0])
    sold = keys[pos] == cand_code if len(keys) else np.zeros(n_cand, dtype=bool)
    return CapacityKeys(len(keys), offer_key, np.where(sold, pos, -1).astype(np.int64))


def replica_bound(tables: PlanningTables, keys: CapacityKeys) -> FloatArray:
    """(5) x[c,t] <= min(max_replicas[c], floor(systems_available[p,t] / systems_per_replica[c])),
    0 where the candidate can serve nothing (no offer sells its key, or no tokens/s)."""
    inv, cand = tables.inventory, tables.candidates
    rate = np.asarray(cand.tokens_per_s_per_replica, dtype=float)
    spr = np.asarray(cand.systems_per_replica, dtype=np.int64)
    avail = np.asarray(inv.systems_available, dtype=np.int64)[cand.pool]  # (cands, periods)
    upper = np.minimum(cand.max_replicas[:, None], avail // np.maximum(spr, 1)[:, None])
    return np.where((keys.cand_key[:, None] >= 0) & (rate > 0), upper, 0).astype(float)


def demand_blocks(tables: PlanningTables, token_scale: float) -> DemandBlocks:
    """The index of (2)'s rows and its right-hand side B: combo m, tier k with offer o >= 0
    demands sum_{t in b} D[m,k,t] of row (o, b), for every block b of the tier."""
    d, periods = tables.demand, tables.periods
    offers = d.offers
    n_off, n_tiers = int(offers.family.shape[0]), len(d.tier_ids)
    windows = windows_of(d)
    tps = np.asarray(d.tokens_per_s, dtype=float) / token_scale  # (combos, tiers, periods)
    blocks_of_tier = [np.arange(periods) // windows[k] for k in range(n_tiers)]
    n_blocks = [int(b[-1]) + 1 if periods else 0 for b in blocks_of_tier]
    off_tier = np.asarray(offers.tier, dtype=np.int64)
    row_off_list, row_blk_list = [], []
    for o in range(n_off):
        nb = n_blocks[off_tier[o]]
        row_off_list.append(np.full(nb, o))
        row_blk_list.append(np.arange(nb))
    dem_off = np.concatenate(row_off_list) if row_off_list else np.zeros(0, np.int64)
    dem_blk = np.concatenate(row_blk_list) if row_blk_list else np.zeros(0, np.int64)
    first = np.zeros(n_off + 1, dtype=np.int64)
    first[1:] = np.cumsum([n_blocks[off_tier[o]] for o in range(n_off)])
    b_rows, b_cols, b_vals = [], [], []
    for k in range(n_tiers):
        ms = np.flatnonzero(d.combo_offer[:, k] >= 0)
        if ms.size == 0:
            continue
        w = windows[k]
        nb = n_blocks[k]
        block_sum = np.add.reduceat(tps[ms, k, :], np.arange(0, periods, w), axis=1)  # (ms, nb)
        o = d.combo_offer[ms, k]
        rows = first[o][:, None] + np.arange(nb)[None, :]
        b_rows.append(rows.ravel())
        b_cols.append(np.repeat(ms, nb))
        b_vals.append(block_sum.ravel())
    n_dem = int(first[-1])
    by_combo = sparse.csr_array(
        (
            np.concatenate(b_vals) if b_vals else np.zeros(0),
            (
                np.concatenate(b_rows) if b_rows else np.zeros(0, np.int64),
                np.concatenate(b_cols) if b_cols else np.zeros(0, np.int64),
            ),
        ),
        shape=(n_dem, int(d.combo_family.shape[0])),
    )
    return DemandBlocks(first, dem_off, dem_blk, by_combo)


def columns(
    tables: PlanningTables,
    token_scale: float,
    dem: DemandBlocks,
    groups: IntArray,
    reconfiguration_limit: float | None,
) -> Columns:
    """x[c,t] where (5) allows a replica; s[o,t] where some combo demands the offer; d[c,t] for
    t >= 1 (with a reconfiguration limit) where either period has a replica column and no
    period-group boundary lies between t-1 and t."""
    offers, periods = tables.demand.offers, tables.periods
    n_off = int(offers.family.shape[0])
    keys = capacity_keys(tables)
    x_upper = replica_bound(tables, keys)
    xc, xt = np.nonzero(x_upper > 0)
    x_col = np.full(x_upper.shape, -1, dtype=np.int64)
    x_col[xc, xt] = np.arange(xc.shape[0])

    windows = windows_of(tables.demand)
    off_tier = np.asarray(offers.tier, dtype=np.int64)
    n_dem = int(dem.first[-1])
    dem_max = dem.by_combo.max(axis=1).toarray().ravel() if n_dem else np.zeros(0)
    so_all = np.repeat(np.arange(n_off), periods)
    st_all = np.tile(np.arange(periods), n_off)
    s_row_all = dem.first[so_all] + st_all // windows[off_tier[so_all]]
    s_up_all = dem_max[s_row_all] if n_dem else np.zeros(0)
    keep = s_up_all > 0

    if reconfiguration_limit is not None and periods > 1:
        same_group = groups[1:] == groups[:-1]
        dc, dt = np.nonzero(((x_col[:, 1:] >= 0) | (x_col[:, :-1] >= 0)) & same_group[None, :])
        dt = dt + 1
    else:
        dc = dt = np.zeros(0, dtype=np.int64)
    return Columns(
        token_scale=token_scale,
        rate=np.asarray(tables.candidates.tokens_per_s_per_replica, dtype=float),
        x_col=x_col,
        x_upper=x_upper,
        xc=xc,
        xt=xt,
        s_offer=so_all[keep],
        s_period=st_all[keep],
        s_row=s_row_all[keep],
        s_upper=s_up_all[keep],
        dc=dc,
        dt=dt,
        capacity=keys,
    )


def one_combo_per_family(demand: Demand) -> sparse.csr_array:
    """(1) sum_m z[f,m] = 1: the (families, combos) matrix of the rows, over the z columns."""
    n_combos = int(demand.combo_family.shape[0])
    return sparse.csr_array(
        (np.ones(n_combos), (demand.combo_family, np.arange(n_combos))),
        shape=(len(demand.family_ids), n_combos),
    )


def served_within_demand(tables: PlanningTables, cols: Columns, dem: DemandBlocks) -> RowBlock:
    """(2) sum_{t in b} s[o,t] <= sum_m z[f,m] * sum_{t in b} D[m,k,t], per offer and block."""
    windows = windows_of(tables.demand)
    off_tier = np.asarray(tables.demand.offers.tier, dtype=np.int64)
    n_dem = int(dem.first[-1])
    return RowBlock(
        name="(2) demand",
        entry_row=cols.s_row,
        entry_col=cols.n_x + np.arange(cols.n_s),
        entry_value=np.ones(cols.n_s),
        kind=np.full(n_dem, DEMAND),
        key=dem.offer,
        period=dem.block * windows[off_tier[dem.offer]] if n_dem else np.zeros(0, np.int64),
        rhs=np.zeros(n_dem),
        rhs_by_combo=dem.by_combo,
    )


def served_within_capacity(tables: PlanningTables, cols: Columns) -> RowBlock:
    """(3) sum_{o of key} s[o,t] - sum_{c of key} tokens_per_s_per_replica[c,t] x[c,t] <= 0."""
    periods, keys = tables.periods, cols.capacity
    n_keys = keys.n_keys
    served_rows = keys.offer_key[cols.s_offer] * periods + cols.s_period
    replica_rows = keys.cand_key[cols.xc] * periods + cols.xt
    return RowBlock(
        name="(3) capacity",
        entry_row=np.concatenate([served_rows, replica_rows]),
        entry_col=np.concatenate([cols.n_x + np.arange(cols.n_s), np.arange(cols.n_x)]),
        entry_value=np.concatenate(
            [np.ones(cols.n_s), -cols.rate[cols.xc, cols.xt] / cols.token_scale]
        ),
        kind=np.full(n_keys * periods, CAPACITY),
        key=np.repeat(np.arange(n_keys), periods),
        period=np.tile(np.arange(periods), n_keys),
        rhs=np.zeros(n_keys * periods),
    )


def pool_inventory(tables: PlanningTables, cols: Columns) -> RowBlock:
    """(4) sum_{c in p} systems_per_replica[c] x[c,t] <= systems_available[p,t]."""
    inv, cand, periods = tables.inventory, tables.candidates, tables.periods
    spr = np.asarray(cand.systems_per_replica, dtype=np.int64)
    n_pools = len(inv.pool_ids)
    key, period = _pool_period_rows(n_pools, periods)
    return RowBlock(
        name="(4) inventory",
        entry_row=cand.pool[cols.xc] * periods + cols.xt,
        entry_col=np.arange(cols.n_x),
        entry_value=spr[cols.xc].astype(float),
        kind=np.full(n_pools * periods, INVENTORY),
        key=key,
        period=period,
        rhs=np.asarray(inv.systems_available, dtype=float).ravel(),
    )


def reconfiguration(tables: PlanningTables, cols: Columns, limit: float) -> RowBlock:
    """(6) x[c,t] - x[c,t-1] - d[c,t] <= 0, x[c,t-1] - x[c,t] - d[c,t] <= 0, and
    sum_{c in p} systems_per_replica[c] d[c,t] <= 2 limit systems_available[p,t] (each moved
    system leaves one candidate and joins another)."""
    inv, cand, periods = tables.inventory, tables.candidates, tables.periods
    spr = np.asarray(cand.systems_per_replica, dtype=np.int64)
    n_d, dc, dt = cols.n_d, cols.dc, cols.dt
    d_cols = cols.n_x + cols.n_s + np.arange(n_d)
    ent_r: list[IntArray] = []
    ent_c: list[IntArray] = []
    ent_v: list[FloatArray] = []
    kinds, keys, periods_of, rhs = [], [], [], []
    base = 0
    for sign, kind in ((1.0, RECONFIG_UP), (-1.0, RECONFIG_DOWN)):
        rows = base + np.arange(n_d)
        now, before = cols.x_col[dc, dt], cols.x_col[dc, dt - 1]
        m_now, m_before = now >= 0, before >= 0
        ent_r += [rows[m_now], rows[m_before], rows]
        ent_c += [now[m_now], before[m_before], d_cols]
        ent_v += [np.full(m_now.sum(), sign), np.full(m_before.sum(), -sign), -np.ones(n_d)]
        kinds.append(np.full(n_d, kind))
        keys.append(dc)
        periods_of.append(dt)
        rhs.append(np.zeros(n_d))
        base += n_d
    n_pools = len(inv.pool_ids)
    ent_r.append(base + cand.pool[dc] * periods + dt)
    ent_c.append(d_cols)
    ent_v.append(spr[dc].astype(float))
    pool_key, pool_period = _pool_period_rows(n_pools, periods)
    kinds.append(np.full(n_pools * periods, RECONFIG_POOL))
    keys.append(pool_key)
    periods_of.append(pool_period)
    rhs.append(2.0 * float(limit) * np.asarray(inv.systems_available, dtype=float).ravel())
    return RowBlock(
        name="(6) reconfiguration",
        entry_row=np.concatenate(ent_r),
        entry_col=np.concatenate(ent_c),
        entry_value=np.concatenate(ent_v),
        kind=np.concatenate(kinds),
        key=np.concatenate(keys),
        period=np.concatenate(periods_of),
        rhs=np.concatenate(rhs),
    )


def objective(tables: PlanningTables, cols: Columns) -> FloatArray:
    """(cols,) USD per unit of each column over its period: served tokens earn their price plus
    the tier's penalty (the penalty on all demand is the constant ``unserved_penalty``), a
    replica costs its systems' running cost, moves are free."""
    inv, cand, offers = tables.inventory, tables.candidates, tables.demand.offers
    hours = tables.period_hours
    spr = np.asarray(cand.systems_per_replica, dtype=np.int64)
    price = np.asarray(offers.usd_per_output_token, dtype=float)
    pen = np.asarray(tables.demand.unserved_penalty_usd_per_output_token, dtype=float)
    off_tier = np.asarray(offers.tier, dtype=np.int64)
    unit = SECONDS_PER_HOUR * hours
    cost = inv.usd_per_system_hour[cand.pool] * spr * hours
    return np.concatenate(
        [
            -cost[cols.xc],
            (price[cols.s_offer, cols.s_period] + pen[off_tier[cols.s_offer]])
            * unit
            * cols.token_scale,
            np.zeros(cols.n_d),
        ]
    )


def unserved_penalty(tables: PlanningTables, groups: IntArray) -> FloatArray:
    """(groups, combos): sum_{k, t in group} penalty_k * D[m,k,t] * 3600 * period_hours, the
    objective's penalty if nothing of combo m's demand were served."""
    d = tables.demand
    pen = np.asarray(d.unserved_penalty_usd_per_output_token, dtype=float)
    pen_unit = pen * (SECONDS_PER_HOUR * tables.period_hours)
    per_period = np.einsum("mkt,k->mt", np.asarray(d.tokens_per_s, dtype=float), pen_unit)
    n_groups = int(groups.max()) + 1 if tables.periods else 0
    by_group = np.zeros((n_groups, int(d.combo_family.shape[0])))
    for g in range(n_groups):
        by_group[g] = per_period[:, groups == g].sum(axis=1)
    return by_group
