"""The hour model with prices fixed and integer replicas, solved group by group.

With the combos fixed no constraint crosses a period group (``planner.solve.model``), so the
integer problem is one small MIP per group (a batch window's block, or every period alone when
no tier has a window); consecutive groups are joined into chunks of ~2,000 columns. The chunks'
optima add up, and so do their proven bounds. Each chunk gets an equal share of the remaining
time; time a chunk leaves unused passes to the next.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.solve.linear import Engine, solve_program
from planner.solve.model import Structure

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class IntegerResult:
    values: FloatArray | None
    """(cols,) column values, None unless every group found a solution."""
    bound: float
    """Proven upper bound on the objective at these prices (inf when a group has none)."""


def chunks(st: Structure, chunk_cols: int) -> npt.NDArray[np.int64]:
    """(groups,): chunk of each group. Consecutive single-period groups are joined into chunks
    of about ``chunk_cols`` columns (hundreds of one-hour MIPs cost more in solver start-up than
    they save); a group spanning several periods (a batch window) is a hard MIP of its own and
    stays alone -- measured: joining 12-hour windows made a scenario 25x slower."""
    sizes = np.bincount(st.col_group, minlength=st.n_groups)
    pairs = np.unique(np.stack([st.col_group, st.col_period]), axis=1)
    periods_of_group = np.bincount(pairs[0], minlength=st.n_groups)
    out = np.zeros(st.n_groups, dtype=np.int64)
    chunk, filled, joinable = 0, 0, False
    for g in range(st.n_groups):
        single = periods_of_group[g] <= 1
        if filled and not (single and joinable and filled + sizes[g] <= chunk_cols):
            chunk, filled = chunk + 1, 0
        out[g] = chunk
        filled += int(sizes[g])
        joinable = single
    return out


def solve_fixed_integer(
    st: Structure,
    z: FloatArray,
    engine: Engine,
    deadline: float,
    relative_gap: float,
    chunk_cols: int = 2_000,
) -> IntegerResult:
    full = st.fixed(z, integer=True)
    values = np.zeros(st.n_cols)
    found = True
    bound = full.objective_offset
    chunk_of_group = chunks(st, chunk_cols)
    n_chunks = int(chunk_of_group.max()) + 1 if chunk_of_group.size else 0
    col_chunk, row_chunk = chunk_of_group[st.col_group], chunk_of_group[st.row_group]
    for g in range(n_chunks):
        cols = np.flatnonzero(col_chunk == g)
        rows = np.flatnonzero(row_chunk == g)
        if cols.size == 0:
            continue
        sub = full.restrict(rows, cols)
        share = (deadline - time.perf_counter()) / (n_chunks - g)
        res = solve_program(sub, engine, share, relative_gap=relative_gap)
        bound += res.bound
        if res.values is None:
            found = False
        else:
            values[cols] = res.values
    return IntegerResult(values if found else None, bound if math.isfinite(bound) else math.inf)
