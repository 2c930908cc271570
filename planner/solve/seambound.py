"""A bound with the reconfiguration limit (6): the hour LP with (6) within day chunks, priced by
PDLP and bounded by weak duality.

With a limit the hour model couples every period. Dropping (6) between day chunks (its rows and
moved columns at each chunk's first period; ``build_structure(..., chunk_periods=...)``) gives a
relaxation whose chunks separate once prices are fixed. Each chunk's LP is solved by PDLP to a
loose tolerance (frontier week, one chunk: PDLP at 1e-4 in ~4 s against 8-15 s for HiGHS dual
simplex, its bound 0.05% above the chunk's optimum), and its row prices are turned into a cut per
chunk by ``planner.solve.cuts`` -- weak duality, recomputed from the prices, so the cut is valid
however approximate they are (an unfinished PDLP run still gives a valid, looser cut).

The cuts bound the choice of prices, not just the one they were computed at: for ANY combo
choice z, the integer optimum at z restricted to a chunk is feasible for that chunk's LP
((2)-(5) within the chunk, (6) between its periods, moved columns at |change of replicas|), so
its value there is at most the chunk's cut at z. The price master's theta variables are per
period group of the model without (6), and a chunk is a union of such groups (chunks start only
where every window block starts), so each cut reads sum_{groups g in chunk} theta_g <= alpha +
beta.z (``planner.solve.master.Master.add_coarse``): the integer optimum's value per group
satisfies these together with the cuts of the model without (6).
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from ortools.util.python.pybind_solve_interrupter import PySolveInterrupter
from scipy import sparse

from planner.solve.cuts import Cuts, benders_cuts
from planner.solve.linear import Engine, solve_program
from planner.solve.model import Structure

FloatArray = npt.NDArray[np.float64]

LOOSE_TOLERANCE = 3e-4
"""PDLP's relative optimality tolerance per chunk for the first bound at a combo choice.
Frontier week, limit 0.1, the LP with (6) within day chunks 633.07 M: PDLP at 1e-3 gives a bound
of 635.51 M in 4 s (all 7 chunks), 3e-4 633.86 M in 9-12 s, 1e-4 633.41 M in 24 s; one chunk
at 1e-5 takes 11 s (0.002% above its optimum)."""

TIGHT_TOLERANCE = 1e-4
"""The tolerance of the second bound at a combo choice, once its first plans are in."""


@dataclass(frozen=True, slots=True)
class ChunkBound:
    cuts: Cuts
    """One cut per chunk (the groups of the chunked structure)."""
    z: FloatArray
    """(combos,): the combo weights the prices were computed at."""
    value: float
    """The cuts at ``z``, less the unserved penalty: a bound on the objective there."""


def chunk_bound(
    seamed: Structure,
    z: FloatArray,
    deadline: float,
    tolerance: float = LOOSE_TOLERANCE,
    interrupter: PySolveInterrupter | None = None,
) -> ChunkBound | None:
    """Per-chunk cuts of ``seamed`` (built with the limit and ``chunk_periods``) from PDLP's row
    prices at combo weights ``z``; None when the deadline passes (or ``interrupter`` fires)
    before every chunk is priced (a chunk without prices would give a useless bound)."""
    full = seamed.fixed(z)
    duals = np.zeros(seamed.n_rows)
    for g in range(seamed.n_groups):
        cols = np.flatnonzero(seamed.col_group == g)
        rows = np.flatnonzero(seamed.row_group == g)
        if cols.size == 0:
            continue
        left = deadline - time.perf_counter()
        if left <= 0 or (interrupter is not None and interrupter.interrupted):
            return None
        res = solve_program(
            full.restrict(rows, cols),
            Engine.PDLP,
            left,
            pdlp_tolerance=tolerance,
            interrupter=interrupter,
        )
        if res.duals is None:
            return None
        duals[rows] = res.duals
    cuts = benders_cuts(seamed, duals)
    value = cuts.value(z) - float(seamed.combo_penalty_usd @ z)
    return ChunkBound(cuts=cuts, z=z, value=value)


def chunk_members(relaxed: Structure, seamed: Structure) -> sparse.csr_array:
    """(chunks, groups): 1 where period group g of ``relaxed`` (the model without (6)) lies in
    chunk k of ``seamed``. Every group lies in exactly one chunk (checked)."""
    periods = relaxed.tables.periods
    group_of = np.full(periods, -1, dtype=np.int64)
    chunk_of = np.full(periods, -1, dtype=np.int64)
    group_of[relaxed.row_period] = relaxed.row_group
    chunk_of[seamed.row_period] = seamed.row_group
    pairs = np.unique(np.stack([chunk_of, group_of]), axis=1)
    pairs = pairs[:, (pairs >= 0).all(axis=0)]
    if np.unique(pairs[1]).size != pairs.shape[1]:
        raise ValueError("a period group of the model without (6) crosses a day chunk")
    return sparse.csr_array(
        (np.ones(pairs.shape[1]), (pairs[0], pairs[1])), shape=(seamed.n_groups, relaxed.n_groups)
    )


@dataclass(slots=True)
class SeamBounds:
    """Bounds with (6) at the combo choices asked for, computed inline or, with ``background``,
    in one worker thread while the caller goes on (MathOpt releases the interpreter lock while
    PDLP runs, so the two share the machine's cores)."""

    seamed: Structure
    deadline: float
    background: bool
    _done: list[ChunkBound] = field(default_factory=list)
    _pending: list[Future[ChunkBound | None]] = field(default_factory=list)
    _stop: PySolveInterrupter = field(default_factory=PySolveInterrupter)
    _pool: ThreadPoolExecutor | None = None

    def start(self, z: FloatArray, tolerance: float) -> bool:
        """Bound at combo weights ``z``: at once (False when the deadline stopped it), or queued
        for the worker (True)."""
        if not self.background:
            got = chunk_bound(self.seamed, z, self.deadline, tolerance)
            if got is not None:
                self._done.append(got)
            return got is not None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seam-bound")
        self._pending.append(
            self._pool.submit(chunk_bound, self.seamed, z, self.deadline, tolerance, self._stop)
        )
        return True

    def take(self) -> list[ChunkBound]:
        """Bounds finished since the last call."""
        for fut in [f for f in self._pending if f.done()]:
            self._pending.remove(fut)
            got = fut.result()
            if got is not None:
                self._done.append(got)
        out, self._done = self._done, []
        return out

    def close(self) -> None:
        """Interrupt the worker's solve and wait for it to return."""
        self._stop.interrupt()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
