"""Assemble the hour model (constraints (2)-(6) of ``planner.solve``) as arrays, once per solve.

``Structure`` holds the index maps and the price-independent matrix. Two programs come out of it:
- ``fixed(z)``: the prices fixed (``z`` a point of the combo simplex, integral or not), replicas
  continuous or integer -- the subproblem of the decomposition; demand rows (2) get right-hand
  side ``B z``;
- ``joint(integer)``: ``z`` as columns with rows (1) -- the LP relaxation (root) or the monolithic
  MILP.

Served tokens/s are carried in units of ``token_scale`` tokens/s so that capacity coefficients are
O(1) (GLOP scales too; this keeps the tolerances meaningful). Columns that can never be non-zero
(replicas of a candidate whose (family, tier, variant) no offer sells, periods with no systems,
offers no combo demands) are left out.

Row and column groups: periods are cut into the coarsest groups that no constraint crosses (batch
windows join periods; a reconfiguration limit joins all). Each group's part of the objective is a
concave function of the combo choice, bounded separately by one Benders cut per group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from planner.solve.linear import LinearProgram
from planner.tables import PlanningTables

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

SECONDS_PER_HOUR = 3600.0

# Row kinds
DEMAND, CAPACITY, INVENTORY, RECONFIG_UP, RECONFIG_DOWN, RECONFIG_POOL = range(6)
# Column kinds
REPLICAS, SERVED, MOVED = range(3)


@dataclass(frozen=True, slots=True)
class Structure:
    tables: PlanningTables
    token_scale: float
    """Served columns are in units of this many output tokens/s."""
    x_col: IntArray
    """(cands, periods): column of replicas[c, t], -1 when left out."""
    x_upper: FloatArray
    """(cands, periods): valid upper bound min(max_replicas, floor(systems / per replica))."""
    s_offer: IntArray
    """(served cols,): offer of each served column."""
    s_period: IntArray
    col_kind: IntArray
    col_period: IntArray
    col_group: IntArray
    objective: FloatArray
    """(cols,) USD per unit of each column over its period."""
    col_upper: FloatArray
    matrix: sparse.csr_array
    """(rows, cols): price-independent coefficients, all rows ``<=``."""
    row_kind: IntArray
    row_group: IntArray
    row_rhs: FloatArray
    """(rows,): right-hand side without the combo part."""
    row_key: IntArray
    """(rows,): offer (demand), capacity key (capacity), pool (inventory, reconfig pool), cand."""
    row_period: IntArray
    """(rows,): period (first period of the block for demand rows)."""
    demand_by_combo: sparse.csr_array
    """(rows, combos): B, right-hand side of demand rows = B z (scaled tokens/s summed over the
    block); zero on other rows."""
    combo_penalty_usd: FloatArray
    """(combos,): unserved penalty if nothing of the combo's demand were served."""
    combo_penalty_by_group_usd: FloatArray
    """(groups, combos): the same, per period group."""
    cap_key_of_cand: IntArray
    """(cands,): capacity key (family, tier, variant) index, -1 when no offer sells it."""
    col_cap_row: IntArray
    """(cols,): the capacity row (3) of a replicas or served column, -1 otherwise."""
    col_dem_row: IntArray
    """(cols,): the demand row (2) of a served column, -1 otherwise."""
    col_rate: FloatArray
    """(cols,): scaled tokens/s one replica adds to its capacity row (0 for other columns)."""
    n_groups: int

    @property
    def n_cols(self) -> int:
        return int(self.objective.shape[0])

    @property
    def n_rows(self) -> int:
        return int(self.row_rhs.shape[0])

    def fixed(self, z: FloatArray, *, integer: bool = False, names: bool = False) -> LinearProgram:
        """The hour model with the combo choice ``z`` (combos,) fixed."""
        rhs = self.row_rhs + self.demand_by_combo @ z
        # With z fixed the demand rows (2) bound the served columns; their own bound (the most
        # demand over combos) is then redundant, and where it equals the row's right-hand side
        # it makes the LP degenerate: GLOP may price the demand through the column bound and
        # leave the demand row's shadow price (the binding report's) at 0. So drop it here.
        return LinearProgram(
            objective=self.objective,
            col_upper=np.where(self.col_kind == SERVED, np.inf, self.col_upper),
            col_integer=(self.col_kind == REPLICAS) & integer,
            matrix=self.matrix,
            row_lower=np.full(self.n_rows, -np.inf),
            row_upper=rhs,
            objective_offset=-float(self.combo_penalty_usd @ z),
            col_names=_names(self, with_combos=False) if names else None,
        )

    def joint(self, *, integer: bool, names: bool = False) -> LinearProgram:
        """Combo columns z appended after the hour columns; (1) one combo per family."""
        d = self.tables.demand
        n_combos = int(d.combo_family.shape[0])
        n_fam = len(d.family_ids)
        fam_rows = sparse.csr_array(
            (np.ones(n_combos), (d.combo_family, np.arange(n_combos))), shape=(n_fam, n_combos)
        )
        matrix = sparse.vstack(
            [
                sparse.hstack([self.matrix, -self.demand_by_combo]),
                sparse.hstack([sparse.csr_array((n_fam, self.n_cols)), fam_rows]),
            ],
            format="csr",
        )
        return LinearProgram(
            objective=np.concatenate([self.objective, -self.combo_penalty_usd]),
            col_upper=np.concatenate([self.col_upper, np.ones(n_combos)]),
            col_integer=np.concatenate(
                [(self.col_kind == REPLICAS) & integer, np.full(n_combos, integer)]
            ),
            matrix=matrix,
            row_lower=np.concatenate([np.full(self.n_rows, -np.inf), np.ones(n_fam)]),
            row_upper=np.concatenate([self.row_rhs, np.ones(n_fam)]),
            col_names=_names(self, with_combos=True) if names else None,
        )


def period_groups(
    window_periods: IntArray, periods: int, coupled: bool, chunk_periods: int | None = None
) -> IntArray:
    """(periods,): group id; a new group starts where every window block starts too.
    ``coupled``: one group, unless ``chunk_periods`` is given: then consecutive groups are
    joined until each spans at least that many periods (the last may be shorter)."""
    if coupled and chunk_periods is None:
        return np.zeros(periods, dtype=np.int64)
    t = np.arange(periods)
    starts = np.ones(periods, dtype=bool)
    for w in np.unique(window_periods):
        if w > 1:
            starts &= t % w == 0
    if coupled and chunk_periods is not None:
        last = 0
        for s in np.flatnonzero(starts):
            if s - last < chunk_periods:
                starts[s] = False
            else:
                last = int(s)
    if periods:
        starts[0] = True
    return np.cumsum(starts) - 1


def build_structure(
    tables: PlanningTables,
    reconfiguration_limit: float | None,
    token_scale: float | None = None,
    chunk_periods: int | None = None,
) -> Structure:
    """The hour model of ``tables``; ``token_scale`` None picks a power of ten near the median
    tokens/s per replica. With a reconfiguration limit and ``chunk_periods``, the periods are cut
    into chunks of at least that many periods (window blocks kept whole) and (6) is left out
    between the last period of a chunk and the first of the next: a relaxation whose chunks
    separate once prices are fixed."""
    inv, d, cand = tables.inventory, tables.demand, tables.candidates
    offers = d.offers
    periods = tables.periods
    n_off = int(offers.family.shape[0])
    n_cand = int(cand.pool.shape[0])
    n_combos = int(d.combo_family.shape[0])
    n_tiers = len(d.tier_ids)
    n_var = len(d.variant_ids)
    hours = tables.period_hours
    windows = np.maximum(np.asarray(d.window_periods, dtype=np.int64), 1)
    groups = period_groups(windows, periods, reconfiguration_limit is not None, chunk_periods)

    rate = np.asarray(cand.tokens_per_s_per_replica, dtype=float)
    positive = rate[rate > 0]
    if token_scale is None:
        token_scale = (
            float(10.0 ** np.floor(np.log10(np.median(positive)))) if positive.size else 1.0
        )

    # Capacity keys: (family, tier, variant) sold by at least one offer.
    key_code = (offers.family * n_tiers + offers.tier) * n_var + offers.variant
    keys, offer_key = np.unique(key_code, return_inverse=True)
    cand_code = (cand.family * n_tiers + cand.tier) * n_var + cand.variant
    pos = np.minimum(np.searchsorted(keys, cand_code), max(len(keys) - 1, 0))
    sold = keys[pos] == cand_code if len(keys) else np.zeros(n_cand, dtype=bool)
    cap_key_of_cand = np.where(sold, pos, -1).astype(np.int64)

    # Replica columns.
    spr = np.asarray(cand.systems_per_replica, dtype=np.int64)
    avail = np.asarray(inv.systems_available, dtype=np.int64)[cand.pool]  # (cands, periods)
    x_upper = np.minimum(cand.max_replicas[:, None], avail // np.maximum(spr, 1)[:, None])
    x_upper = np.where((cap_key_of_cand[:, None] >= 0) & (rate > 0), x_upper, 0).astype(float)
    xc, xt = np.nonzero(x_upper > 0)
    n_x = xc.shape[0]
    x_col = np.full((n_cand, periods), -1, dtype=np.int64)
    x_col[xc, xt] = np.arange(n_x)

    # Demand per combo, tier and block (tokens/s summed over the block), scaled.
    tps = np.asarray(d.tokens_per_s, dtype=float) / token_scale  # (combos, tiers, periods)
    blocks_of_tier = [np.arange(periods) // windows[k] for k in range(n_tiers)]
    n_blocks = [int(b[-1]) + 1 if periods else 0 for b in blocks_of_tier]
    # demand rows: one per (offer, block of its tier)
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
    # B entries: combo m, tier k with offer o >= 0 -> rows (o, b) for all blocks b
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
    demand_b = sparse.csr_array(
        (
            np.concatenate(b_vals) if b_vals else np.zeros(0),
            (
                np.concatenate(b_rows) if b_rows else np.zeros(0, np.int64),
                np.concatenate(b_cols) if b_cols else np.zeros(0, np.int64),
            ),
        ),
        shape=(n_dem, n_combos),
    )
    dem_max = demand_b.max(axis=1).toarray().ravel() if n_dem else np.zeros(0)

    # Served columns: offer o, period t, bounded by the largest block demand of the offer.
    so_all = np.repeat(np.arange(n_off), periods)
    st_all = np.tile(np.arange(periods), n_off)
    s_row_all = first[so_all] + st_all // windows[off_tier[so_all]]
    s_up_all = dem_max[s_row_all] if n_dem else np.zeros(0)
    keep = s_up_all > 0
    s_offer, s_period, s_row, s_up = so_all[keep], st_all[keep], s_row_all[keep], s_up_all[keep]
    n_s = s_offer.shape[0]

    # Reconfiguration columns d[c, t] for t >= 1 where either period has a replica column.
    if reconfiguration_limit is not None and periods > 1:
        same_group = groups[1:] == groups[:-1]
        dc, dt = np.nonzero(((x_col[:, 1:] >= 0) | (x_col[:, :-1] >= 0)) & same_group[None, :])
        dt = dt + 1
    else:
        dc = dt = np.zeros(0, dtype=np.int64)
    n_d = dc.shape[0]

    n_cols = n_x + n_s + n_d
    col_kind = np.concatenate(
        [np.full(n_x, REPLICAS), np.full(n_s, SERVED), np.full(n_d, MOVED)]
    ).astype(np.int64)
    col_period = np.concatenate([xt, s_period, dt]).astype(np.int64)
    price = np.asarray(offers.usd_per_output_token, dtype=float)
    pen = np.asarray(d.unserved_penalty_usd_per_output_token, dtype=float)
    unit = SECONDS_PER_HOUR * hours
    cost = inv.usd_per_system_hour[cand.pool] * spr * hours
    objective = np.concatenate(
        [
            -cost[xc],
            (price[s_offer, s_period] + pen[off_tier[s_offer]]) * unit * token_scale,
            np.zeros(n_d),
        ]
    )
    col_upper = np.concatenate([x_upper[xc, xt], s_up, cand.max_replicas[dc].astype(float)])

    # Rows. (2) demand
    r_kind = [np.full(n_dem, DEMAND)]
    r_key = [dem_off]
    r_period = [dem_blk * windows[off_tier[dem_off]] if n_dem else np.zeros(0, np.int64)]
    r_rhs = [np.zeros(n_dem)]
    ent_r = [s_row]
    ent_c = [n_x + np.arange(n_s)]
    ent_v = [np.ones(n_s)]
    base = n_dem
    # (3) capacity per (key, period): served of the key's offers <= replicas x rate
    n_keys = len(keys)
    cap_row = base + offer_key[s_offer] * periods + s_period
    ent_r.append(cap_row)
    ent_c.append(n_x + np.arange(n_s))
    ent_v.append(np.ones(n_s))
    ent_r.append(base + cap_key_of_cand[xc] * periods + xt)
    ent_c.append(np.arange(n_x))
    ent_v.append(-rate[xc, xt] / token_scale)
    r_kind.append(np.full(n_keys * periods, CAPACITY))
    r_key.append(np.repeat(np.arange(n_keys), periods))
    r_period.append(np.tile(np.arange(periods), n_keys))
    r_rhs.append(np.zeros(n_keys * periods))
    base += n_keys * periods
    # (4) inventory per (pool, period)
    n_pools = len(inv.pool_ids)
    ent_r.append(base + cand.pool[xc] * periods + xt)
    ent_c.append(np.arange(n_x))
    ent_v.append(spr[xc].astype(float))
    r_kind.append(np.full(n_pools * periods, INVENTORY))
    r_key.append(np.repeat(np.arange(n_pools), periods))
    r_period.append(np.tile(np.arange(periods), n_pools))
    r_rhs.append(avail_pool := np.asarray(inv.systems_available, dtype=float).ravel())
    base += n_pools * periods
    # (6) reconfiguration: x[c,t] - x[c,t-1] <= d, x[c,t-1] - x[c,t] <= d,
    #     sum_c spr d[c,t] <= 2 * limit * systems[p,t] (each moved system leaves and arrives).
    if n_d:
        assert reconfiguration_limit is not None  # moved columns exist only with a limit
        d_cols = n_x + n_s + np.arange(n_d)
        for sign, kind in ((1.0, RECONFIG_UP), (-1.0, RECONFIG_DOWN)):
            rows = base + np.arange(n_d)
            now, before = x_col[dc, dt], x_col[dc, dt - 1]
            m_now, m_before = now >= 0, before >= 0
            ent_r += [rows[m_now], rows[m_before], rows]
            ent_c += [now[m_now], before[m_before], d_cols]
            ent_v += [np.full(m_now.sum(), sign), np.full(m_before.sum(), -sign), -np.ones(n_d)]
            r_kind.append(np.full(n_d, kind))
            r_key.append(dc)
            r_period.append(dt)
            r_rhs.append(np.zeros(n_d))
            base += n_d
        ent_r.append(base + cand.pool[dc] * periods + dt)
        ent_c.append(d_cols)
        ent_v.append(spr[dc].astype(float))
        r_kind.append(np.full(n_pools * periods, RECONFIG_POOL))
        r_key.append(np.repeat(np.arange(n_pools), periods))
        r_period.append(np.tile(np.arange(periods), n_pools))
        r_rhs.append(2.0 * float(reconfiguration_limit) * avail_pool)
        base += n_pools * periods
    n_rows = base
    matrix = sparse.csr_array(
        (np.concatenate(ent_v), (np.concatenate(ent_r), np.concatenate(ent_c))),
        shape=(n_rows, n_cols),
    )
    matrix.sum_duplicates()
    row_period = np.concatenate(r_period).astype(np.int64)
    demand_full = sparse.vstack(
        [demand_b, sparse.csr_array((n_rows - n_dem, n_combos))], format="csr"
    )
    pen_unit = pen * unit
    per_period = np.einsum("mkt,k->mt", np.asarray(d.tokens_per_s, dtype=float), pen_unit)
    n_groups = int(groups.max()) + 1 if periods else 0
    by_group = np.zeros((n_groups, n_combos))
    for g in range(n_groups):
        by_group[g] = per_period[:, groups == g].sum(axis=1)
    combo_penalty = by_group.sum(axis=0)
    return Structure(
        tables=tables,
        token_scale=token_scale,
        x_col=x_col,
        x_upper=x_upper,
        s_offer=s_offer,
        s_period=s_period,
        col_kind=col_kind,
        col_period=col_period,
        col_group=groups[col_period],
        objective=objective,
        col_upper=col_upper,
        matrix=matrix,
        row_kind=np.concatenate(r_kind).astype(np.int64),
        row_group=groups[row_period] if n_rows else np.zeros(0, np.int64),
        row_rhs=np.concatenate(r_rhs),
        row_key=np.concatenate(r_key).astype(np.int64),
        row_period=row_period,
        demand_by_combo=demand_full,
        combo_penalty_usd=combo_penalty,
        combo_penalty_by_group_usd=by_group,
        cap_key_of_cand=cap_key_of_cand,
        col_cap_row=np.concatenate(
            [n_dem + cap_key_of_cand[xc] * periods + xt, cap_row, np.full(n_d, -1)]
        ).astype(np.int64),
        col_dem_row=np.concatenate([np.full(n_x, -1), s_row, np.full(n_d, -1)]).astype(np.int64),
        col_rate=np.concatenate([rate[xc, xt] / token_scale, np.zeros(n_s + n_d)]),
        n_groups=n_groups,
    )


def _names(st: Structure, *, with_combos: bool) -> tuple[str, ...]:
    from planner.solve.names import column_names, combo_names  # names imports this module

    return column_names(st) + (combo_names(st) if with_combos else ())
