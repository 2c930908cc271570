"""Turn the search's plan and bound into a ``SolveResult``: served split, binding constraints."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.solve.evaluate import products
from planner.solve.formulation import DEMAND, INVENTORY
from planner.solve.incumbent import Incumbent
from planner.solve.model import Structure
from planner.solve.solution import BindingConstraint, SolveResult, SolveStatus
from planner.solve.tables import PlanningTables

FloatArray = npt.NDArray[np.float64]


def served_by_candidate(tables: PlanningTables, inc: Incumbent) -> FloatArray:
    """(cands, periods): each product's served tokens/s split over its useful candidates in
    proportion to their capacity."""
    assert inc.combo is not None and inc.replicas is not None and inc.value is not None
    prods = products(tables, inc.combo)
    cap = inc.value.capacity_tokens_per_s
    util = np.divide(inc.value.served_tokens_per_s, cap, out=np.zeros_like(cap), where=cap > 0)
    rate = tables.candidates.tokens_per_s_per_replica * inc.replicas * prods.useful[:, None]
    return rate * util[prods.product_of_cand]


def binding_constraints(st: Structure, inc: Incumbent) -> tuple[BindingConstraint, ...]:
    """Pool-periods left with less idle than the pool's smallest replica, and products with all
    their demand served in a period (or window block); shadow prices from the hour LP at the
    plan's prices when it was solved (USD per system for one period; USD per output token/s of
    demand for one period)."""
    assert inc.combo is not None and inc.replicas is not None and inc.value is not None
    tables = st.tables
    inv, cand, d = tables.inventory, tables.candidates, tables.demand
    y = inc.duals
    out: list[BindingConstraint] = []
    n_pools, periods = inv.systems_available.shape
    used = np.zeros((n_pools, periods), dtype=np.int64)
    np.add.at(used, cand.pool, cand.systems_per_replica[:, None] * inc.replicas)
    smallest = np.full(n_pools, np.iinfo(np.int64).max)
    np.minimum.at(smallest, cand.pool, cand.systems_per_replica)
    inv_rows = np.flatnonzero(st.row_kind == INVENTORY).reshape(n_pools, periods)
    full = (inv.systems_available - used < smallest[:, None]) & (inv.systems_available > 0)
    for p, t in zip(*np.nonzero(full), strict=True):
        price = float(y[inv_rows[p, t]]) if y is not None else 0.0
        out.append(BindingConstraint("inventory", f"pool={inv.pool_ids[p]},period={t}", price))
    prods = products(tables, inc.combo)
    served, demand = inc.value.served_tokens_per_s, prods.demand_tokens_per_s
    n_tiers = len(d.tier_ids)
    for j in np.flatnonzero(prods.offer >= 0):
        o = int(prods.offer[j])
        f, k = divmod(int(j), n_tiers)
        w = int(prods.window[j])
        rows = np.flatnonzero((st.row_kind == DEMAND) & (st.row_key == o))
        for b, start in enumerate(range(0, periods, w)):
            sl = slice(start, min(start + w, periods))
            dem = float(demand[j, sl].sum())
            if dem <= 0 or float(served[j, sl].sum()) < dem * (1 - 1e-9):
                continue
            when = f"period={start}" if w == 1 else f"periods={start}-{sl.stop - 1}"
            price = float(y[rows[b]]) / st.token_scale if y is not None and b < rows.size else 0.0
            out.append(
                BindingConstraint(
                    "demand", f"family={d.family_ids[f]},tier={d.tier_ids[k]},{when}", price
                )
            )
    return tuple(out)


def solve_result(
    st: Structure,
    inc: Incumbent,
    status: SolveStatus,
    message: str,
    build_s: float,
    solve_s: float,
) -> SolveResult:
    assert inc.combo is not None and inc.replicas is not None and inc.value is not None
    tables = st.tables
    n_fam, n_tiers = len(tables.demand.family_ids), len(tables.demand.tier_ids)
    v = inc.value
    return SolveResult(
        status=status,
        objective_usd=v.objective_usd,
        bound_usd=inc.bound,
        gap=inc.gap,
        solve_s=solve_s,
        build_s=build_s,
        combo=inc.combo,
        replicas=inc.replicas,
        served_tokens_per_s=served_by_candidate(tables, inc),
        unserved_tokens_per_s=v.unserved_tokens_per_s.reshape(n_fam, n_tiers, tables.periods),
        revenue_usd=v.revenue_usd,
        cost_usd=v.cost_usd,
        penalty_usd=v.penalty_usd,
        binding=binding_constraints(st, inc),
        message=message,
    )
