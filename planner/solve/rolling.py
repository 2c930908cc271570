"""The hour LP with the reconfiguration limit (6) at fixed prices, solved chunk by chunk in time.

(6) couples every period to the next, so with a limit the hour LP is one LP over the whole
horizon. At frontier size (168 hours, ~700 candidates) that LP has ~250,000 rows: GLOP needs
minutes, HiGHS' dual simplex ~30 s. Cut into chunks of about a day (window blocks kept whole),
each chunk is ~1 s for HiGHS -- the cost grows faster than linearly in the hours.

Rolling horizon (a primal heuristic, not a bound): the chunks are solved in order; the replicas
of the period before a chunk are fixed at the values the previous chunk chose, so the rows of
(6) at the seam become rows of the chunk with that part moved to the right-hand side. The
assembled continuous plan therefore satisfies (2)-(6) over the whole horizon; only its rounding
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

from planner.solve.linear import Engine, LinearProgram, Outcome, solve_program
from planner.solve.model import Structure, period_groups

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

CHUNK_PERIODS = 24


def chunk_of_period(st: Structure, chunk_periods: int = CHUNK_PERIODS) -> IntArray:
    """(periods,): chunk of each period, window blocks kept whole."""
    d = st.tables.demand
    windows = np.maximum(np.asarray(d.window_periods, dtype=np.int64), 1)
    return period_groups(windows, st.tables.periods, True, chunk_periods)


def rolling_lp(
    st: Structure,
    z: FloatArray,
    deadline: float,
    chunk_periods: int = CHUNK_PERIODS,
    threads: int = 1,
) -> FloatArray | None:
    """(cols,) column values of ``st`` (built with the limit, one group) at combo weights ``z``,
    chunk after chunk; None when a chunk does not finish before ``deadline``."""
    full: LinearProgram = st.fixed(z)
    chunk = chunk_of_period(st, chunk_periods)
    col_chunk = chunk[st.col_period]
    row_chunk = chunk[st.row_period]
    values = np.zeros(st.n_cols)
    csc = st.matrix.tocsc()
    for k in range(int(chunk.max()) + 1 if chunk.size else 0):
        cols = np.flatnonzero(col_chunk == k)
        rows = np.flatnonzero(row_chunk == k)
        if cols.size == 0:
            continue
        sub = full.restrict(rows, cols)
        # Columns of earlier chunks in these rows (the replicas of the period before the
        # chunk, through the seam rows of (6)) are fixed: move them to the right-hand side.
        before = np.flatnonzero(col_chunk < k)
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
        if left <= 0:
            return None
        res = solve_program(sub, Engine.HIGHS, left, threads=threads)
        if res.outcome is not Outcome.OPTIMAL or res.values is None:
            return None
        values[cols] = res.values
    return values
