"""The default method: Benders over the price binaries, hour LPs underneath, integer repair.

1. Root: the LP relaxation, each period group with its own combo weights (``planner.solve.grouped``,
   GLOP). Its value is a valid bound; its row prices give the first cut per period group
   (``planner.solve.cuts``); its combo weights, rounded to the heaviest combo per family, give
   the first prices to try.
2. For each combo choice to try: solve the hour model with those prices fixed and replicas
   continuous (GLOP, per period group), add its cuts, round replicas down and repair greedily
   (``planner.solve.repair``) -> an integer plan.
3. Master (``planner.solve.master``): the best combo choice under all cuts; its proven optimum is
   the bound. A new choice goes to step 2. When the master insists on a choice already solved as
   an LP, the remaining gap is replica integrality at that choice: its hour model is solved with
   integer replicas (``planner.solve.integer``: SCIP per period group, time-limited) and a value
   cut records its bound.
Stops when the gap reaches the target, on the time limit, or when no step can make progress.
With a reconfiguration limit, bounds and cuts come from the model without (6) (a relaxation),
plans are rounded within the limit, and a choice the master insists on is solved, in turn, as a
rolling-horizon LP with (6) (``planner.solve.rolling``; day chunks, first on the candidates the LP
without (6) uses, then adding those near zero reduced cost, then on all: plans only), as the LP
with (6) within day chunks (HiGHS; a relaxation: a value cut), then with integer replicas. After
its first rolling pass (beside the next ones, in a worker thread, with ``threads`` >= 2) the LP
with (6) within day chunks is priced by PDLP (``planner.solve.seambound``): coarse cuts with
(6), valid for every choice; a second, tighter pricing follows the passes on candidate subsets.
Every plan reported is complete and feasible: the first ones are the greedy baseline and the
provider's plan at list prices (``planner.solve.provider``; with a reconfiguration limit, the
greedy plan's steady part grown within the limit), found before any LP is solved. When the root
LP cannot end before the last ``PRICE_SEARCH_SHARE`` of the time limit, that reserve goes to the
provider's price-card search instead, so a limit shorter than the root LP returns more than
greedy.
"""

from __future__ import annotations

import math
import time

import numpy as np
import numpy.typing as npt

from planner.solve import baselines, provider
from planner.solve.budgets import (
    FINAL_MASTER_S,
    FIRST_REPAIR_S,
    LIMIT_COSTS,
    NEAR_REDUCED_COST,
    PASS_REPAIR_S,
    POLISH_SHARE,
    PRICE_SEARCH_SHARE,
    ROLLING_MARGIN,
)
from planner.solve.cuts import benders_cuts
from planner.solve.grouped import FixedResult, solve_fixed, solve_root
from planner.solve.incumbent import Incumbent, trivial_bound
from planner.solve.integer import solve_fixed_integer
from planner.solve.linear import Engine
from planner.solve.master import Master
from planner.solve.model import Structure, build_structure
from planner.solve.repair import reconfiguration_ok, repair, round_within_reconfiguration
from planner.solve.rolling import CHUNK_PERIODS, rolling_lp
from planner.solve.seambound import LOOSE_TOLERANCE, TIGHT_TOLERANCE, SeamBounds, chunk_members
from planner.solve.solution import SolveOptions
from planner.solve.swap import improve_by_swaps

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def one_hot(st: Structure, combo: IntArray) -> FloatArray:
    z = np.zeros(st.tables.demand.combo_family.shape[0])
    z[combo] = 1.0
    return z


def fractional(st: Structure, values: FloatArray) -> FloatArray:
    """(cands, periods) replicas read from the model's column values."""
    xs = np.zeros(st.x_col.shape)
    mask = st.x_col >= 0
    xs[mask] = values[st.x_col[mask]]
    return xs


def replicas_from(st: Structure, values: FloatArray, *, round_down: bool) -> IntArray:
    xs = fractional(st, values)
    xs = np.floor(xs + 1e-6) if round_down else np.round(xs)
    return np.maximum(xs, 0).astype(np.int64)


def heaviest(st: Structure, z: FloatArray) -> IntArray:
    fam = st.tables.demand.combo_family
    n_fam = len(st.tables.demand.family_ids)
    out = np.zeros(n_fam, dtype=np.int64)
    for f in range(n_fam):
        ms = np.flatnonzero(fam == f)
        out[f] = ms[np.argmax(z[ms])]
    return out


def decompose(st: Structure, options: SolveOptions, inc: Incumbent, deadline: float) -> str:
    """Improve ``inc`` (plan and bound) until the gap target or the deadline; returns why it
    stopped, in words."""
    tables = st.tables
    begun = time.perf_counter()

    def left() -> float:
        return deadline - time.perf_counter()

    ref = tables.demand.reference_combo
    limit = options.reconfiguration_limit

    def offer_baseline(combo: IntArray, plan: IntArray, source: str, steady: bool) -> None:
        """Offer a baseline plan; with a limit and ``steady``, also its steady part grown within
        (6) (the plan may move more systems than (6) allows; its per-candidate minimum over the
        horizon moves none, and a bounded repair grows it within the limit: seconds at frontier
        size, so it is done for the greedy plan only)."""
        inc.offer(combo, plan, None, source)
        if limit is not None and steady:
            flat = np.repeat(plan.min(axis=1, keepdims=True), tables.periods, axis=1)
            flat = repair(tables, combo, flat, reconfiguration_limit=limit, max_rounds=200)
            inc.offer(combo, flat, None, f"{source}, steady part")

    inc.offer(ref, np.zeros(st.x_col.shape, dtype=np.int64), None, "empty plan")
    greedy = baselines.greedy(tables)
    offer_baseline(ref, greedy, "greedy baseline", steady=True)
    reserve_s = PRICE_SEARCH_SHARE * max(left(), 0.0)
    offer_baseline(ref, provider.provider_fill(tables), "provider baseline", steady=False)
    inc.tighten(trivial_bound(tables), "demand at best prices")
    if inc.proven(options.stop_gap):
        return "gap target met by a baseline plan"

    # With a reconfiguration limit (6) couples all periods: bounds and cuts then come from the
    # model without (6) (a relaxation, solved per period group); (6) enters through the
    # rounding, the per-combo LP with (6) and the integer stage.
    relaxed = st if limit is None else build_structure(tables, None, st.token_scale)
    root = solve_root(relaxed, deadline - reserve_s)
    if root is None:
        # No LP plan will come: spend the reserve on the provider's price-card search.
        search = provider.price_search(tables, deadline=deadline)
        offer_baseline(
            search.combo, search.replicas, "provider baseline, price cards searched", steady=False
        )
        return "time limit in the root LP"
    inc.tighten(root.bound, "root LP" if limit is None else "root LP without (6)")
    master = Master(tables.demand.combo_family, st.combo_penalty_usd, relaxed.n_groups)
    master.add(benders_cuts(relaxed, root.duals))
    lp_value: dict[tuple[int, ...], float] = {}
    exact_lp_done: set[tuple[int, ...]] = set()
    rolled: dict[tuple[int, ...], int] = {}
    """Rolling-horizon LPs done per combo choice (0; 1 = used candidates only; 2 = those and the
    ones near zero reduced cost; 3 = all)."""
    passes: dict[tuple[int, ...], list[npt.NDArray[np.bool_] | None]] = {}
    """Per combo choice, the candidate sets of the rolling-horizon passes (None: all)."""
    seamed = st if limit is None else build_structure(tables, limit, st.token_scale, CHUNK_PERIODS)
    rolling_limit = None if limit is None else (1.0 - ROLLING_MARGIN) * limit
    # Same columns as ``st`` (only the right-hand side of (6) differs): its values read alike.
    margined = (
        None if rolling_limit is None else build_structure(tables, rolling_limit, st.token_scale)
    )
    integer_done: set[tuple[int, ...]] = set()
    polished: set[tuple[int, ...]] = set()
    seam_bounded: dict[tuple[int, ...], int] = {}
    """Bounds with (6) started per combo choice (1: at ``LOOSE_TOLERANCE``, 2: also tight)."""
    limit_costs: set[tuple[int, ...]] = set()
    """Combo choices whose loose bound with (6) fell below their LP without (6): only these
    get the tight one."""
    members = None if limit is None else chunk_members(relaxed, seamed)
    # With more than one thread the bound with (6) runs beside the rolling-horizon LP.
    bounds = None if limit is None else SeamBounds(seamed, deadline, options.threads >= 2)

    def padded(duals: FloatArray) -> FloatArray:
        """Row prices of ``relaxed`` on ``st``'s rows (the rows of (6) come last)."""
        return np.concatenate([duals, np.zeros(st.n_rows - duals.shape[0])])

    def offer_rounded(
        combo: IntArray,
        values: FloatArray,
        duals: FloatArray | None,
        source: str,
        repair_s: float | None = None,
        grace: bool = False,
    ) -> None:
        """Round, repair (for ``repair_s`` at most; past the deadline with ``grace``), offer."""
        frac = fractional(st, values)
        starts: list[FloatArray | IntArray | None]
        if limit is None:
            starts = [np.floor(frac + 1e-6)]  # rounding to nearest was tried: never better
        else:
            # Both roundings: neither wins everywhere (frontier, limit 0.1: +-0.03%).
            starts = [
                round_within_reconfiguration(tables, frac, limit, sticky=sticky)
                for sticky in (False, True)
            ]
        stop = deadline if repair_s is None else time.perf_counter() + repair_s
        stop = stop if grace else min(stop, deadline)
        prices = None if duals is None else padded(duals)
        for start in starts:
            if start is None:
                continue
            x = repair(
                tables, combo, start.astype(np.int64), reconfiguration_limit=limit, deadline=stop
            )
            inc.offer(combo, x, prices, source)
            if limit is None and not inc.proven(options.stop_gap):
                x = improve_by_swaps(tables, combo, x, deadline)
                inc.offer(combo, x, prices, "swaps of replicas")

    def try_prices(combo: IntArray) -> bool:
        fixed = solve_fixed(relaxed, one_hot(st, combo), deadline)
        if fixed is None:
            return False
        lp_value[tuple(combo.tolist())] = fixed.objective
        if limit is not None:
            passes[tuple(combo.tolist())] = candidate_passes(relaxed, combo, fixed)
        master.add(benders_cuts(relaxed, fixed.duals))
        offer_rounded(
            combo,
            fixed.values,
            fixed.duals,
            "prices fixed, replicas rounded",
            None if limit is None else FIRST_REPAIR_S,
        )
        return True

    def rolling(combo: IntArray) -> bool:
        """The hour LP with (6) at these prices, day chunk after day chunk (a plan, no bound):
        first with only the candidates the LP without (6) uses (a few times faster), then with
        all; the limit lowered by ``ROLLING_MARGIN`` so that the rounding has room."""
        assert limit is not None and margined is not None and rolling_limit is not None, (
            "the rolling-horizon LP runs only with a reconfiguration limit"
        )
        key = tuple(combo.tolist())
        stage = rolled.get(key, 0)
        rolled[key] = stage + 1
        only = passes.get(key, [None])[stage]
        rolled_lp = rolling_lp(
            margined, one_hot(st, combo), rolling_limit, deadline, candidates=only
        )
        if rolled_lp is None:
            return left() > 0
        values, done, n_chunks = rolled_lp
        source = "prices fixed, rolling-horizon LP with (6)"
        if only is not None:
            source += f" on {int(only.sum())} candidates the LP without (6) uses or nearly uses"
        partial = done < n_chunks
        if partial:
            source += f" ({done} of {n_chunks} day chunks solved in time, the rest held steady)"
        # A partial plan gets a short repair even past the deadline: its held tail needs it.
        repair_s = FIRST_REPAIR_S if partial else None
        if stage == 0 and len(passes.get(key, [None])) > 1 and not partial:
            repair_s = PASS_REPAIR_S  # a later pass supersedes this plan
        offer_rounded(combo, values, None, source + ", rounded", repair_s, grace=partial)
        return left() > 0  # a chunk may also stop on an infeasible LP (tolerances): go on

    def seam_bound(combo: IntArray) -> bool:
        """Cuts with (6) within day chunks from PDLP's row prices at these prices
        (``planner.solve.seambound``), at once or in the background: valid for every combo
        choice, so the master's bound falls below the model without (6) where the limit
        costs."""
        assert bounds is not None, "the bound with (6) runs only with a reconfiguration limit"
        key = tuple(combo.tolist())
        seam_bounded[key] = seam_bounded.get(key, 0) + 1
        tolerance = LOOSE_TOLERANCE if seam_bounded[key] == 1 else TIGHT_TOLERANCE
        return bounds.start(one_hot(st, combo), tolerance)

    def bound_due(key: tuple[int, ...], first_rolled: bool) -> bool:
        """The loose bound with (6) comes after the first rolling pass (beside the next ones, in
        the background); the tight one once the passes on candidate subsets are done."""
        if key not in seam_bounded:
            return first_rolled
        todo = passes.get(key, [None])[rolled.get(key, 0) :]
        return seam_bounded[key] == 1 and key in limit_costs and all(p is None for p in todo)

    def absorb() -> bool:
        """Add the finished bounds with (6) to the master; whether there were any."""
        got = [] if bounds is None else bounds.take()
        for priced in got:
            assert members is not None
            master.add_coarse(priced.cuts, members)
            key = tuple(np.flatnonzero(priced.z > 0.5).tolist())
            if priced.value < lp_value.get(key, math.inf) - LIMIT_COSTS * abs(priced.value):
                limit_costs.add(key)
        return bool(got)

    def exact_lp(combo: IntArray) -> bool:
        """The hour LP with (6) at these prices, (6) relaxed between day chunks (exact when the
        horizon is one chunk): a value cut, and one more rounding start."""
        exact_lp_done.add(tuple(combo.tolist()))
        fixed = solve_fixed(seamed, one_hot(st, combo), deadline, Engine.HIGHS)
        if fixed is None:
            return False
        master.add_value_cut(combo, fixed.objective, inc.bound - fixed.objective)
        source = "LP with (6)" if seamed.n_groups == 1 else "LP with (6) within day chunks"
        offer_rounded(combo, fixed.values, None, f"prices fixed, {source} rounded")
        return True

    def solve_integer(combo: IntArray, gap: float, until: float) -> None:
        key = tuple(combo.tolist())
        integer_done.add(key)
        mip = solve_fixed_integer(st, one_hot(st, combo), Engine.SCIP, until, max(0.9 * gap, 1e-9))
        if mip.values is not None:
            x = replicas_from(st, mip.values, round_down=False)
            if reconfiguration_ok(tables, x, limit):
                x = repair(tables, combo, x, reconfiguration_limit=limit, deadline=deadline)
            inc.offer(combo, x, None, "prices fixed, integer replicas (SCIP)")
        if math.isfinite(mip.bound):
            master.add_value_cut(combo, mip.bound, inc.bound - mip.bound)

    def improve() -> str:
        if not try_prices(heaviest(relaxed, root.weights)):
            return "hour LP at the root's prices did not finish"
        while True:
            if inc.proven(options.stop_gap):
                return "gap target met"
            absorb()
            if left() <= 0:
                return "time limit"
            res = master.solve(left(), max(options.gap_target / 4, 1e-9))
            if math.isfinite(res.bound):
                inc.tighten(res.bound, "price master")
            if inc.proven(options.stop_gap):
                return "gap target met"
            if res.combo is None:
                return "price master found no choice within the time limit"
            key = tuple(res.combo.tolist())
            # The bound waits for the first rolling pass (in the background too: beside it, it
            # slowed the pass past 15 s at frontier, where the pass alone ends in 10-14 s).
            first_rolled = rolled.get(key, 0) >= 1
            if key not in lp_value:
                if not try_prices(res.combo):
                    return "time limit in an hour LP"
            elif limit is not None and bound_due(key, first_rolled):
                if not seam_bound(res.combo):
                    return "time limit in the bound with the reconfiguration limit"
            elif limit is not None and rolled.get(key, 0) < len(passes.get(key, [None])):
                if not rolling(res.combo):
                    return "time limit in the rolling-horizon LP with the reconfiguration limit"
            elif limit is not None and key not in exact_lp_done:
                if not exact_lp(res.combo):
                    return "time limit in the hour LP with the reconfiguration limit"
            elif key not in integer_done:
                solve_integer(res.combo, options.gap_target, deadline)
            elif key not in polished and options.stop_gap < options.gap_target:
                polished.add(key)
                now = time.perf_counter()
                budget = min(POLISH_SHARE * left(), 2.0 * (now - begun) + 1.0)
                solve_integer(res.combo, options.stop_gap, min(deadline, now + budget))
            else:
                return "no further progress: the master's best choice is solved exactly"

    try:
        why = improve()
    finally:
        if bounds is not None:
            bounds.close()
    if absorb():  # a bound with (6) finished as the search stopped: read it, briefly
        res = master.solve(FINAL_MASTER_S, max(options.gap_target / 4, 1e-9))
        if math.isfinite(res.bound):
            inc.tighten(res.bound, "price master")
    return why


def candidate_passes(
    relaxed: Structure, combo: IntArray, fixed: FixedResult
) -> list[npt.NDArray[np.bool_] | None]:
    """Candidate sets of the rolling-horizon passes at ``combo``, from the LP without (6) there:
    the candidates it uses; those and the ones whose best reduced cost (at its row prices) is
    within ``NEAR_REDUCED_COST`` of their running cost of zero; all (None). A set equal to the
    next one is skipped."""
    used = np.any(fractional(relaxed, fixed.values) > 1e-6, axis=1)
    lp = relaxed.fixed(one_hot(relaxed, combo))
    reduced = lp.objective - lp.matrix.T @ np.maximum(fixed.duals, 0.0)
    mask = relaxed.x_col >= 0
    ratio = np.full(relaxed.x_col.shape, -np.inf)
    cols = relaxed.x_col[mask]
    ratio[mask] = reduced[cols] / np.maximum(np.abs(lp.objective[cols]), 1e-12)
    near = used | (ratio.max(axis=1) >= -NEAR_REDUCED_COST)
    out: list[npt.NDArray[np.bool_] | None] = []
    for cands in (used, near):
        if not cands.all() and not any(o is not None and np.array_equal(o, cands) for o in out):
            out.append(cands)
    out.append(None)
    return out
