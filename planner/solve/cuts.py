"""Benders cuts on the combo choice from the duals of an hour-model LP.

For fixed combos ``z`` the hour model is an LP ``max c.v, A v <= b0 + B z, 0 <= v <= U`` whose
value V(z) is concave in z. For ANY row prices ``y >= 0``, weak duality gives

    V(z) <= y.(b0 + B z) + U.max(0, c - A'y)          for every z,

so the cut is valid whatever the LP engine's tolerances were -- it is recomputed here from ``y``
rather than read from the solver. The hour model separates into period groups (no row crosses a
group), so the bound splits into one cut per group: theta_g <= alpha_g + beta_g.z.

Before the cut is formed, ``y`` is improved in two ways that can only lower the bound:
- a capacity row (3) price is raised until one of its replica columns would gain reduced cost
  (a key with no usable replica gets a price high enough to make serving it worthless);
- a demand row (2) price is set to the least value that keeps its served columns dual feasible,
  max(0, max_t (value of a served token - capacity price)). Rows of offers the current combos do
  not choose thus get prices too, so the cut says what switching to them could earn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from planner.solve.formulation import DEMAND, REPLICAS, SERVED
from planner.solve.model import Structure

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Cuts:
    alpha: FloatArray
    """(groups,)."""
    beta: sparse.csr_array
    """(groups, combos)."""

    def value(self, z: FloatArray) -> float:
        return float(self.alpha.sum() + (self.beta @ z).sum())


def improved_duals(st: Structure, y_rows: FloatArray) -> FloatArray:
    """Row prices >= 0, capacity prices raised, demand prices minimal (see module docstring)."""
    y = np.maximum(np.asarray(y_rows, dtype=float)[: st.n_rows], 0.0)
    at = st.matrix.T.tocsr()
    c = st.objective
    is_dem = st.row_kind == DEMAND
    y[is_dem] = 0.0
    # Raise capacity prices: for replica column j in capacity row r (coefficient -rate_j),
    # the reduced cost c_j - (A'y)_j grows by rate_j per unit of y_r.
    rc = c - at @ y
    xcols = np.flatnonzero((st.col_kind == REPLICAS) & (st.col_cap_row >= 0))
    rows = st.col_cap_row[xcols]
    rate = st.col_rate[xcols]
    room = np.where(rate > 0, np.maximum(-rc[xcols], 0.0) / np.maximum(rate, 1e-300), np.inf)
    raise_by = np.full(st.n_rows, np.inf)
    np.minimum.at(raise_by, rows, room)
    scols = np.flatnonzero(st.col_kind == SERVED)
    srows = st.col_cap_row[scols]
    top = np.zeros(st.n_rows)
    np.maximum.at(top, srows, c[scols])
    cap_rows = np.unique(srows)
    finite = np.isfinite(raise_by[cap_rows])
    y[cap_rows[finite]] += raise_by[cap_rows[finite]]
    y[cap_rows[~finite]] = np.maximum(y[cap_rows[~finite]], top[cap_rows[~finite]])
    # Minimal demand prices.
    need = c - at @ y
    drows = st.col_dem_row[scols]
    np.maximum.at(y, drows, need[scols])
    y[is_dem] = np.maximum(y[is_dem], 0.0)
    return y


def benders_cuts(st: Structure, y_rows: FloatArray) -> Cuts:
    y = improved_duals(st, y_rows)
    rc = st.objective - st.matrix.T @ y
    col_term = np.maximum(rc, 0.0) * st.col_upper
    # bincount with weights counts in float64
    alpha = np.bincount(st.col_group, weights=col_term, minlength=st.n_groups).astype(
        np.float64, copy=False
    )
    alpha += np.bincount(st.row_group, weights=y * st.row_rhs, minlength=st.n_groups)
    dem = np.flatnonzero(st.row_kind == DEMAND)
    weighted = sparse.diags_array(y[dem]) @ st.demand_by_combo[dem]
    group_rows = sparse.csr_array(
        (np.ones(dem.shape[0]), (st.row_group[dem], np.arange(dem.shape[0]))),
        shape=(st.n_groups, dem.shape[0]),
    )
    beta = sparse.csr_array(group_rows @ weighted)
    return Cuts(alpha=alpha, beta=beta)
