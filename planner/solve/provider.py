"""The plan a provider runs today, and the same plan with its price cards searched.

``provider_fill`` is how a capacity team without an optimizer fills a fleet at a given set of price
cards (by default the list prices, ``Demand.reference_combo``):
- interactive products (a tier served in its own hour) first, the best-paying first; each fills its
  demand hour by hour from its candidates in increasing cost per output token (a replica's
  running cost over the tokens it serves in that hour), replica by replica while a replica pays
  for itself;
- then batch products (a tier with a completion window of w > 1 hours): each block's demand is
  placed in the block's cheapest hours first, i.e. the hours whose cheapest candidate that still
  has free systems makes a token for the least, again only with replicas that pay for themselves.
Only candidates of each product's chosen serving variant serve it, as in the plan.

``price_search`` is that fill plus a coordinate search over price cards, the way a pricing team
moves one price at a time: family by family and tier by tier, every card that differs from the
current one in that tier's offer only (its multiplier or serving variant) is tried with everything
else held, and the best kept, until a full pass changes nothing (or ``max_passes``, or a
deadline). Each try re-fills the whole fleet, so the value is exact under the same ``evaluate``
as the plan's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from planner.solve.evaluate import PlanValue, Products, evaluate, products, replica_upper
from planner.solve.tables import SECONDS_PER_HOUR, PlanningTables

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

MAX_PASSES = 3
"""Passes of the coordinate search over price cards (each pass tries every combo once)."""


def provider_fill(
    tables: PlanningTables, combo: IntArray | None = None, fleet: _Fleet | None = None
) -> IntArray:
    """(cands, periods) replicas: cheapest tokens first, batch in its window's cheapest hours.
    ``fleet`` is ``_fleet(tables)``, passed in when filling the same tables many times."""
    combo = tables.demand.reference_combo if combo is None else combo
    fleet = _fleet(tables) if fleet is None else fleet
    prods = products(tables, combo)
    cand = tables.candidates
    fill = _Fill(
        prods=prods,
        rate=cand.tokens_per_s_per_replica,
        cost=fleet.cost,
        pool=cand.pool,
        spr=cand.systems_per_replica,
        unit_s=fleet.unit_s,
        usd_per_token=fleet.usd_per_token,
        left_upper=fleet.upper.copy(),
        free=tables.inventory.systems_available.astype(np.int64),
        x=np.zeros(cand.tokens_per_s_per_replica.shape, dtype=np.int64),
    )
    order = _by_price(prods)
    for j in order:
        if prods.window[j] <= 1:
            fill.hourly(j)
    for j in order:
        if prods.window[j] > 1:
            fill.windowed(j)
    return fill.x


@dataclass(frozen=True, slots=True)
class _Fleet:
    """What every fill of the same tables shares, whatever the price cards."""

    unit_s: float
    cost: FloatArray
    """(cands,): running cost of one replica for one period."""
    usd_per_token: FloatArray
    """(cands, periods): that cost over the output tokens the replica serves in the period."""
    upper: IntArray


def _fleet(tables: PlanningTables) -> _Fleet:
    cand, inv = tables.candidates, tables.inventory
    unit_s = SECONDS_PER_HOUR * tables.period_hours
    cost = inv.usd_per_system_hour[cand.pool] * cand.systems_per_replica * tables.period_hours
    rate = cand.tokens_per_s_per_replica
    with np.errstate(divide="ignore"):
        usd_per_token = np.where(rate > 0, cost[:, None] / (rate * unit_s), np.inf)
    return _Fleet(unit_s, cost, usd_per_token, replica_upper(tables))


@dataclass(frozen=True, slots=True)
class SearchResult:
    combo: IntArray
    replicas: IntArray
    value: PlanValue
    tries: int


def price_search(
    tables: PlanningTables, max_passes: int = MAX_PASSES, deadline: float | None = None
) -> SearchResult:
    """Coordinate search over price cards with ``provider_fill`` as the fleet plan; stops with
    the best card so far at ``deadline`` (``time.perf_counter()`` seconds), if given."""
    d = tables.demand
    combo = d.reference_combo.copy()
    fleet = _fleet(tables)
    replicas = provider_fill(tables, combo, fleet)
    best = evaluate(tables, combo, replicas)
    tries = 1
    for _ in range(max_passes):
        improved = False
        for f in range(len(d.family_ids)):
            for k in range(len(d.tier_ids)):
                for m in _along_tier(d.combo_offer, d.combo_family, int(combo[f]), k):
                    if deadline is not None and time.perf_counter() >= deadline:
                        return SearchResult(combo, replicas, best, tries)
                    trial = combo.copy()
                    trial[f] = m
                    x = provider_fill(tables, trial, fleet)
                    value = evaluate(tables, trial, x)
                    tries += 1
                    if value.objective_usd > best.objective_usd + 1e-9 * max(
                        1.0, abs(best.objective_usd)
                    ):
                        combo, replicas, best, improved = trial, x, value, True
        if not improved:
            break
    return SearchResult(combo=combo, replicas=replicas, value=best, tries=tries)


def _along_tier(combo_offer: IntArray, combo_family: IntArray, m: int, k: int) -> IntArray:
    """The family's other cards that differ from card m in tier k's offer only."""
    others = np.delete(np.arange(combo_offer.shape[1]), k)
    same = (combo_family == combo_family[m]) & (
        combo_offer[:, others] == combo_offer[m, others]
    ).all(axis=1)
    same &= combo_offer[:, k] != combo_offer[m, k]
    return np.flatnonzero(same)


def _by_price(prods: Products) -> list[int]:
    """Products that sell something, best-paying (mean value per token) first."""
    sold = np.flatnonzero(prods.offer >= 0)
    score = prods.value_usd_per_token[sold].mean(axis=1)
    return [int(j) for j in sold[np.argsort(-score, kind="stable")]]


@dataclass(slots=True)
class _Fill:
    """The fleet as it fills: replicas placed so far and what is left."""

    prods: Products
    rate: FloatArray
    cost: FloatArray
    pool: IntArray
    spr: IntArray
    unit_s: float
    usd_per_token: FloatArray
    left_upper: IntArray
    """(cands, periods): replicas a candidate may still add."""
    free: IntArray
    """(pools, periods): systems not yet used."""
    x: IntArray

    def _cands(self, j: int) -> IntArray:
        return np.flatnonzero(self.prods.useful & (self.prods.product_of_cand == j))

    def _room(self, c: int, t: IntArray | int) -> IntArray:
        return np.minimum(self.left_upper[c, t], self.free[self.pool[c], t] // self.spr[c])

    def _place(self, c: int, t: IntArray | int, n: IntArray | int) -> None:
        self.x[c, t] += n
        self.left_upper[c, t] -= n
        self.free[self.pool[c], t] -= n * self.spr[c]

    def hourly(self, j: int) -> None:
        """Fill product j's demand in each hour, cheapest tokens first (vectorized over hours)."""
        cs = self._cands(j)
        if cs.size == 0:
            return
        left = self.prods.demand_tokens_per_s[j].copy()
        value = self.prods.value_usd_per_token[j] * self.unit_s
        hours = np.arange(left.shape[0])
        # Each hour's candidates in increasing cost per token: rank, then walk rank by rank.
        order = cs[np.argsort(self.usd_per_token[cs], axis=0, kind="stable")]
        for r in range(order.shape[0]):
            if not (left > 0).any():
                break
            c_t = order[r]
            rate = self.rate[c_t, hours]
            cost = self.cost[c_t]
            ok = (left > 0) & (rate > 0) & (value * rate > cost)
            n_full = np.floor(np.divide(left, rate, out=np.zeros_like(left), where=rate > 0))
            tail = value * (left - n_full * rate) > cost
            want = np.where(ok, n_full + tail, 0)
            room = np.minimum(
                self.left_upper[c_t, hours], self.free[self.pool[c_t], hours] // self.spr[c_t]
            )
            n = np.minimum(want, room).astype(np.int64)
            if not n.any():
                continue
            self.x[c_t, hours] += n
            self.left_upper[c_t, hours] -= n
            np.subtract.at(self.free, (self.pool[c_t], hours), n * self.spr[c_t])
            left = left - n * rate

    def windowed(self, j: int) -> None:
        """Fill product j's window blocks, each block's cheapest hours first."""
        cs = self._cands(j)
        if cs.size == 0:
            return
        demand = self.prods.demand_tokens_per_s[j]
        w = int(self.prods.window[j])
        periods = demand.shape[0]
        for start in range(0, periods, w):
            hours = np.arange(start, min(start + w, periods))
            left = float(demand[hours].sum())
            for t in self._cheapest_hours(cs, hours):
                if left <= 0:
                    break
                left = self._fill_hour(j, cs, int(t), left)

    def _cheapest_hours(self, cs: IntArray, hours: IntArray) -> IntArray:
        """The block's hours by the cost per token of their cheapest candidate with room."""
        room = self._rooms(cs, hours) > 0
        price = np.where(room, self.usd_per_token[np.ix_(cs, hours)], np.inf).min(axis=0)
        return hours[np.argsort(price, kind="stable")]

    def _rooms(self, cs: IntArray, hours: IntArray) -> IntArray:
        """(len(cs), len(hours)) replicas each candidate may still add in each hour."""
        free = self.free[np.ix_(self.pool[cs], hours)] // self.spr[cs][:, None]
        return np.minimum(self.left_upper[np.ix_(cs, hours)], free)

    def _fill_hour(self, j: int, cs: IntArray, t: int, left: float) -> float:
        value = float(self.prods.value_usd_per_token[j, t]) * self.unit_s
        rate, cost = self.rate[cs, t], self.cost[cs]
        pays = (rate > 0) & (value * rate > cost) & (self._rooms(cs, np.array([t]))[:, 0] > 0)
        live = cs[pays]
        for c in live[np.argsort(self.usd_per_token[live, t], kind="stable")]:
            if left <= 0:
                break
            r, k = float(self.rate[c, t]), float(self.cost[c])
            n_full = np.floor(left / r)
            n = int(min(n_full + float(value * (left - n_full * r) > k), self._room(int(c), t)))
            if n > 0:
                self._place(int(c), t, n)
                left -= n * r
        return left
