"""The hour LP with the reconfiguration limit (6) at fixed prices, solved chunk by chunk in time.

(6) couples every period to the next, so with a limit the hour LP is one LP over the whole
horizon. At frontier size (168 hours, ~700 candidates) that LP has ~250,000 rows: GLOP needs
minutes, HiGHS' dual simplex ~30 s. Cut into chunks of about a day (window blocks kept whole),
each chunk is ~1 s for HiGHS -- the cost grows faster than linearly in the hours.

Rolling horizon (a primal heuristic, not a bound): the chunks are solved in order; the replicas
of the period before a chunk are fixed at the values the previous chunk chose, so the rows of
(6) at the seam become rows of the chunk with that part moved to the right-hand side. The
assembled continuous plan therefore satisfies (2)-(6) over the whole horizon (inventory rows are
tightened by the backward reach of ``pool_reach`` so that no chunk ends where the next cannot
follow); only its rounding
(``planner.solve.repair.round_within_reconfiguration``) remains. A chunk does not see the
demand after it (it may end placed badly for the next day); the loss measured at frontier size
is small against the LP with (6) over the whole horizon (docs/solver.md).

The engine is HiGHS (dual simplex): on these LPs it is ~10x faster than GLOP (frontier, one
day: 1.1 s against 11 s; PDLP 8 s, HiGHS IPM 6.6 s).
"""

from __future__ import annotations

import time

import numpy as np
import numpy.typing as npt

from planner.solve.evaluate import replica_upper
from planner.solve.formulation import INVENTORY, MOVED, RECONFIG_UP
from planner.solve.linear import Engine, LinearProgram, Outcome, solve_program
from planner.solve.model import Structure, period_groups
from planner.solve.tables import PlanningTables

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

CHUNK_PERIODS = 24


def chunk_of_period(st: Structure, chunk_periods: int = CHUNK_PERIODS) -> IntArray:
    """(periods,): chunk of each period, window blocks kept whole."""
    d = st.tables.demand
    windows = np.maximum(np.asarray(d.window_periods, dtype=np.int64), 1)
    return period_groups(windows, st.tables.periods, True, chunk_periods)


def rolling_lp(
    st: Structure,
    z: FloatArray,
    limit: float,
    deadline: float,
    chunk_periods: int = CHUNK_PERIODS,
    threads: int = 1,
    candidates: BoolArray | None = None,
    engine: Engine = Engine.HIGHS,
    pdlp_tolerance: float = 1e-4,
) -> tuple[FloatArray, int, int] | None:
    """(cols,) column values of ``st`` (built with the limit, one group) at combo weights ``z``,
    chunk after chunk, with the number of chunks solved and of chunks in all. When the deadline
    stops it after the first chunk, the replicas of the periods left are held at those of the
    last period solved (no moves: (6) holds; a repair can grow them); None when not even the
    first chunk finished. ``candidates`` (cands,): only these may have replicas (a smaller LP;
    the plan stays feasible)."""
    full: LinearProgram = st.fixed(z)
    inv = (st.row_kind == INVENTORY).nonzero()[0]
    reach = pool_reach(st.tables, limit)
    reach_rows = reach[st.row_key[inv], st.row_period[inv]]
    full.row_upper[inv] = np.minimum(full.row_upper[inv], reach_rows)  # a fresh array per fixed()
    chunk = chunk_of_period(st, chunk_periods)
    col_chunk = chunk[st.col_period]
    if candidates is not None:
        col_cand = np.full(st.n_cols, -1, dtype=np.int64)
        xc, xt = np.nonzero(st.x_col >= 0)
        col_cand[st.x_col[xc, xt]] = xc
        col_cand[st.col_kind == MOVED] = st.row_key[st.row_kind == RECONFIG_UP]
        dropped = (col_cand >= 0) & ~candidates[np.maximum(col_cand, 0)]
        col_chunk = np.where(dropped, -1, col_chunk)
    row_chunk = chunk[st.row_period]
    values = np.zeros(st.n_cols)
    csc = st.matrix.tocsc()
    csr = st.matrix
    n_chunks = int(chunk.max()) + 1 if chunk.size else 0
    for k in range(n_chunks):
        cols = np.flatnonzero(col_chunk == k)
        rows = np.flatnonzero(row_chunk == k)
        if candidates is not None:  # rows left empty by the dropped columns go too
            rows = rows[np.diff(csr[rows][:, cols].indptr) > 0]
        if cols.size == 0:
            continue
        sub = full.restrict(rows, cols)
        # Columns of earlier chunks in these rows (the replicas of the period before the
        # chunk, through the seam rows of (6)) are fixed: move them to the right-hand side.
        before = np.flatnonzero((col_chunk < k) & (col_chunk >= 0))
        if before.size:
            fixed_part = csc[:, before] @ values[before]
            sub = LinearProgram(
                objective=sub.objective,
                col_upper=sub.col_upper,
                col_integer=sub.col_integer,
                matrix=sub.matrix,
                row_lower=sub.row_lower,
                row_upper=sub.row_upper - fixed_part[rows],
            )
        left = deadline - time.perf_counter()
        res = (
            None
            if left <= 0
            else solve_program(sub, engine, left, threads=threads, pdlp_tolerance=pdlp_tolerance)
        )
        if res is None or res.outcome is not Outcome.OPTIMAL or res.values is None:
            if k == 0:
                return None
            _hold(st, values, int(np.flatnonzero(chunk == k)[0]))
            return values, k, n_chunks
        values[cols] = res.values
    return values, n_chunks, n_chunks


def pool_reach(tables: PlanningTables, limit: float) -> FloatArray:
    """(pools, periods): most systems a pool can use in a period and still fit the inventory of
    every later period: moved systems >= |change of the pool's use|, so use_t <= use_{t+1} +
    2 limit systems_{t+1}, and use_t <= min(systems_t, sum of its candidates' replica bounds).
    Implied by (4), (5) and (6), so a valid tightening of (4); without it a chunk can end with
    more in use than the next chunk's inventory lets (6) shed in time."""
    avail = tables.inventory.systems_available.astype(float)
    cand = tables.candidates
    usable = np.zeros_like(avail)  # what the pool's candidates can use at most
    np.add.at(usable, cand.pool, cand.systems_per_replica[:, None] * replica_upper(tables))
    reach = np.minimum(avail, usable)
    for t in range(tables.periods - 2, -1, -1):
        reach[:, t] = np.minimum(reach[:, t], reach[:, t + 1] + 2.0 * limit * avail[:, t + 1])
    return reach


def _hold(st: Structure, values: FloatArray, first: int) -> None:
    """Replicas of periods ``first``.. set to those of period ``first - 1`` (other columns are
    left at 0: only replicas are read from a rolling plan)."""
    prev = st.x_col[:, first - 1]
    for t in range(first, st.tables.periods):
        now = st.x_col[:, t]
        both = (now >= 0) & (prev >= 0)
        values[now[both]] = np.minimum(values[prev[both]], st.x_upper[both, t])
