"""Stack the hour model (the row blocks (2)-(6) of ``planner.solve.formulation``) into arrays,
once per solve.

``Structure`` holds the index maps and the price-independent matrix. Two programs come out of it:
- ``fixed(z)``: the prices fixed (``z`` a point of the combo simplex, integral or not), replicas
  continuous or integer -- the subproblem of the decomposition; demand rows (2) get right-hand
  side ``B z``;
- ``joint(integer)``: ``z`` as columns with rows (1) -- the LP relaxation (root) or the monolithic
  MILP.

Served tokens/s are carried in units of ``token_scale`` tokens/s so that capacity coefficients are
O(1) (GLOP scales too; this keeps the tolerances meaningful).

Row and column groups: periods are cut into the coarsest groups that no constraint crosses (batch
windows join periods; a reconfiguration limit joins all). Each group's part of the objective is a
concave function of the combo choice, bounded separately by one Benders cut per group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from planner.solve import formulation as form
from planner.solve.formulation import REPLICAS, SERVED
from planner.solve.linear import LinearProgram
from planner.solve.names import column_names, combo_names
from planner.solve.tables import PlanningTables

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


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

    def column_names(self) -> tuple[str, ...]:
        """Domain-keyed names of the columns, e.g. ``replicas[pool=..,cand=17,period=5]``."""
        return column_names(self.tables, self.x_col, self.s_offer, self.s_period, self.col_kind)

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
            col_names=self.column_names() if names else None,
        )

    def joint(self, *, integer: bool, names: bool = False) -> LinearProgram:
        """Combo columns z appended after the hour columns; (1) one combo per family."""
        d = self.tables.demand
        n_combos = int(d.combo_family.shape[0])
        n_fam = len(d.family_ids)
        fam_rows = form.one_combo_per_family(d)
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
            col_names=self.column_names() + combo_names(self.tables.demand) if names else None,
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
    """The hour model of ``tables`` (``planner.solve.formulation``); ``token_scale`` None picks a
    power of ten near the median tokens/s per replica. With a reconfiguration limit and
    ``chunk_periods``, the periods are cut into chunks of at least that many periods (window
    blocks kept whole) and (6) is left out between the last period of a chunk and the first of
    the next: a relaxation whose chunks separate once prices are fixed."""
    periods = tables.periods
    windows = form.windows_of(tables.demand)
    groups = period_groups(windows, periods, reconfiguration_limit is not None, chunk_periods)
    if token_scale is None:
        token_scale = form.token_scale_of(tables)
    dem = form.demand_blocks(tables, token_scale)
    cols = form.columns(tables, token_scale, dem, groups, reconfiguration_limit)
    blocks = [
        form.served_within_demand(tables, cols, dem),
        form.served_within_capacity(tables, cols),
        form.pool_inventory(tables, cols),
    ]
    if cols.n_d:
        assert reconfiguration_limit is not None  # moved columns exist only with a limit
        blocks.append(form.reconfiguration(tables, cols, reconfiguration_limit))
    first_row = np.cumsum([0] + [b.n_rows for b in blocks])
    n_rows, n_cols = int(first_row[-1]), cols.n_cols
    n_x, n_s, n_d = cols.n_x, cols.n_s, cols.n_d
    entry_row = [b.entry_row + first_row[i] for i, b in enumerate(blocks)]
    matrix = sparse.csr_array(
        (
            np.concatenate([b.entry_value for b in blocks]),
            (np.concatenate(entry_row), np.concatenate([b.entry_col for b in blocks])),
        ),
        shape=(n_rows, n_cols),
    )
    matrix.sum_duplicates()
    row_period = np.concatenate([b.period for b in blocks]).astype(np.int64)
    demand = blocks[0]
    assert demand.rhs_by_combo is not None
    n_dem, n_combos = demand.n_rows, int(tables.demand.combo_family.shape[0])
    demand_full = sparse.vstack(
        [demand.rhs_by_combo, sparse.csr_array((n_rows - n_dem, n_combos))], format="csr"
    )
    by_group = form.unserved_penalty(tables, groups)
    keys = cols.capacity
    xc, xt = cols.xc, cols.xt
    col_period = np.concatenate([xt, cols.s_period, cols.dt]).astype(np.int64)
    return Structure(
        tables=tables,
        token_scale=token_scale,
        x_col=cols.x_col,
        x_upper=cols.x_upper,
        s_offer=cols.s_offer,
        s_period=cols.s_period,
        col_kind=np.concatenate(
            [np.full(n_x, form.REPLICAS), np.full(n_s, form.SERVED), np.full(n_d, form.MOVED)]
        ).astype(np.int64),
        col_period=col_period,
        col_group=groups[col_period],
        objective=form.objective(tables, cols),
        col_upper=np.concatenate(
            [
                cols.x_upper[xc, xt],
                cols.s_upper,
                tables.candidates.max_replicas[cols.dc].astype(float),
            ]
        ),
        matrix=matrix,
        row_kind=np.concatenate([b.kind for b in blocks]).astype(np.int64),
        row_group=groups[row_period] if n_rows else np.zeros(0, np.int64),
        row_rhs=np.concatenate([b.rhs for b in blocks]),
        row_key=np.concatenate([b.key for b in blocks]).astype(np.int64),
        row_period=row_period,
        demand_by_combo=demand_full,
        combo_penalty_usd=by_group.sum(axis=0),
        combo_penalty_by_group_usd=by_group,
        cap_key_of_cand=keys.cand_key,
        col_cap_row=np.concatenate(
            [
                n_dem + keys.cand_key[xc] * periods + xt,
                n_dem + keys.offer_key[cols.s_offer] * periods + cols.s_period,
                np.full(n_d, -1),
            ]
        ).astype(np.int64),
        col_dem_row=np.concatenate([np.full(n_x, -1), cols.s_row, np.full(n_d, -1)]).astype(
            np.int64
        ),
        col_rate=np.concatenate([cols.rate[xc, xt] / token_scale, np.zeros(n_s + n_d)]),
        n_groups=by_group.shape[0],
    )
