"""Two plans a capacity planner would make without the optimizer, valued like the optimizer's.

Both price every family at its reference combo (``Demand.reference_combo``: no price search, no
substitution between tiers) and use only candidates of the reference offer's serving variant.

- ``greedy``: products (family, tier) in decreasing order of revenue per system-hour of their best
  candidate; each product fills its demand period by period from its candidates in decreasing
  order of tokens/s per system, replica by replica while a replica pays for itself.
- ``price_list``: config search plus a price list -- each product runs only its single highest
  tokens/s-per-system candidate (which meets its SLOs by construction of the candidate table),
  with ceil(demand / rate) replicas if a full replica pays for itself; where products share a
  pool, those earning more per system-hour take their replicas first and the rest get what is
  left.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.solve.evaluate import Products, products, replica_upper
from planner.solve.tables import SECONDS_PER_HOUR, PlanningTables

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class _Start:
    """What both baselines start from: reference prices, and an empty fleet."""

    prods: Products
    unit_s: float
    """Seconds in a period."""
    per_system: FloatArray
    """(cands,): mean tokens/s per system."""
    cost_usd: FloatArray
    """(cands,): running cost of one replica for one period."""
    upper: IntArray
    x: IntArray
    free: IntArray
    """(pools, periods): systems not yet used."""


def _start(tables: PlanningTables) -> _Start:
    cand, inv = tables.candidates, tables.inventory
    return _Start(
        prods=products(tables, tables.demand.reference_combo),
        unit_s=SECONDS_PER_HOUR * tables.period_hours,
        per_system=cand.tokens_per_s_per_replica.mean(axis=1) / cand.systems_per_replica,
        cost_usd=inv.usd_per_system_hour[cand.pool]
        * cand.systems_per_replica
        * tables.period_hours,
        upper=replica_upper(tables),
        x=np.zeros((cand.pool.shape[0], tables.periods), dtype=np.int64),
        free=inv.systems_available.astype(np.int64).copy(),
    )


def greedy(tables: PlanningTables) -> IntArray:
    st = _start(tables)
    prods, cand, unit, per_sys = st.prods, tables.candidates, st.unit_s, st.per_system
    cost, upper, x, free = st.cost_usd, st.upper, st.x, st.free
    order_score = []
    for j in range(prods.offer.shape[0]):
        cs = np.flatnonzero(prods.useful & (prods.product_of_cand == j))
        best = per_sys[cs].max() if cs.size else 0.0
        order_score.append(prods.value_usd_per_token[j].mean() * best * unit)
    for j in np.argsort(-np.asarray(order_score), kind="stable"):
        cs = np.flatnonzero(prods.useful & (prods.product_of_cand == j))
        cs = cs[np.argsort(-per_sys[cs], kind="stable")]
        for t in range(tables.periods):
            left = prods.demand_tokens_per_s[j, t]
            for c in cs:
                rate = cand.tokens_per_s_per_replica[c, t]
                p, spr = cand.pool[c], cand.systems_per_replica[c]
                if left <= 0:
                    break
                if rate <= 0:
                    continue
                value = prods.value_usd_per_token[j, t] * unit
                if value * rate <= cost[c]:
                    continue
                n_full = np.floor(left / rate)
                n = n_full + float(value * (left - n_full * rate) > cost[c])
                n = int(min(n, upper[c, t] - x[c, t], free[p, t] // spr))
                x[c, t] += n
                free[p, t] -= n * spr
                left -= n * rate
    return x


def price_list(tables: PlanningTables) -> IntArray:
    st = _start(tables)
    prods, cand, unit, per_sys = st.prods, tables.candidates, st.unit_s, st.per_system
    cost, upper, x, free = st.cost_usd, st.upper, st.x, st.free
    picks = []
    for j in range(prods.offer.shape[0]):
        cs = np.flatnonzero(prods.useful & (prods.product_of_cand == j))
        if cs.size:
            c = int(cs[np.argmax(per_sys[cs])])
            picks.append((float(prods.value_usd_per_token[j].mean() * per_sys[c] * unit), j, c))
    for _, j, c in sorted(picks, reverse=True):
        rate = cand.tokens_per_s_per_replica[c]
        spr = int(cand.systems_per_replica[c])
        pays = prods.value_usd_per_token[j] * unit * rate > cost[c]
        need = np.ceil(prods.demand_tokens_per_s[j] / np.maximum(rate, 1e-300))
        fits = free[cand.pool[c]] // spr
        n = np.where(pays, np.minimum(np.minimum(need, upper[c]), fits), 0).astype(np.int64)
        x[c] = n
        free[cand.pool[c]] -= n * spr
    return x
