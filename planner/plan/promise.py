"""The TTFT promise at the planned load: queues as the scenario routes requests, their wait, and
the post-solve step that makes every reported assignment meet its tier's TTFT SLO.

Queues. A router per (family, tier, routing domain) dispatches the tier's requests of a period to
the batch slots of every replica it fronts, FIFO: an M/M/n queue with n = their slots, the load
routed to it in Erlangs, and the load-weighted mean holding time (``planner.build.queueing``). The
domain is the pool's region under ``fleet.routing = "region"`` (the default: a replica joins its
region's queue, pools of other regions never share it) and the whole fleet under ``"global"``.
A request's TTFT = the queue's wait + the TTFT floor of the replica that takes it, so every
member c of a queue meets the SLO T at percentile p when the wait's p-quantile <= T - floor_c.

Why a step after the solve. The headroom in the tables (``planner.build.candidates``) is a
utilization cap per candidate, fixed before the solve at the tier's demand. A queue that carries
less (a region's share, a rationed tier, a spill-over pool) pools fewer slots and waits longer at
the same utilization, and one member with a high floor tightens the whole queue. The solver sees
tables only, so the plan it returns is checked queue by queue and repaired:

1. Capacity of each queue: the most tokens/s it can take with its slots (its members' split of
   the load as the solver made it: in proportion to their table capacity) while its wait stays
   within the smallest slack of its members (bisection on the load).
2. Per (family, tier, period): queues over capacity hand their excess to queues of the same
   product with room (a router splits a Poisson stream into Poisson streams, so re-splitting is
   free); what is still in excess is worth a replica more of a candidate of the product (one
   the plan runs in that period or one it left idle: ``repair_members``) where its pool has idle
   systems (and, under a reconfiguration limit, churn to spare in that period and the next: the
   plan keeps constraint (6) of ``planner.solve.formulation``) and the tokens it saves are worth
   more than it costs (greedy, best gain first); the rest is shed, as unserved demand.
3. The objective is restated: revenue of the shed tokens lost, their penalty added, the added
   replicas' cost added. The bound is the solver's bound on the planning tables (the repaired
   plan is feasible in them, so the bound still bounds its objective), and the gap is re-stated
   against it; a plan whose restated gap exceeds the target is reported feasible, not optimal.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from fleet.perf.types import BoolArray
from planner.build.pipeline import Built, routing_domains
from planner.build.queueing import wait_quantile_s
from planner.solve.evaluate import Products, products, replica_upper
from planner.solve.solution import SolveResult, SolveStatus
from planner.solve.tables import SECONDS_PER_HOUR, FloatArray, IntArray

_BISECTION_STEPS = 60
_MARGIN = 1e-9
"""Relative margin kept below a queue's capacity, so the reported wait recomputed from the split
load stays within the slack despite rounding."""


def queue_of(built: Built, c_idx: IntArray, p_idx: IntArray) -> IntArray:
    """A queue id per (candidate, period): (family, tier, routing domain, period)."""
    t = built.tables
    cand = t.candidates
    domain = routing_domains(built.scenario)
    n_dom = int(domain.max()) + 1
    n_tiers = len(built.scenario.tiers)
    key = (cand.family[c_idx] * n_tiers + cand.tier[c_idx]) * n_dom + domain[cand.pool[c_idx]]
    return key * t.periods + p_idx


def queue_wait_s(
    built: Built, c_idx: IntArray, p_idx: IntArray, replicas: IntArray, served: FloatArray
) -> FloatArray:
    """Per member (candidate c_idx in period p_idx, with model ``replicas`` serving ``served``
    output tokens/s): its queue's wait for a slot at the tier's TTFT percentile, seconds (inf
    when the queue is unstable). Members of one queue see the same wait."""
    det = built.candidates
    slots = replicas * det.queue_slots[c_idx]
    rate = served / det.output_tokens[c_idx]
    erlangs = rate * det.request_s[c_idx]
    groups, which = np.unique(queue_of(built, c_idx, p_idx), return_inverse=True)
    n = groups.shape[0]
    # As floats: a bincount of no members comes back as int64 whatever its weights.
    pooled_slots = np.bincount(which, slots, n).astype(np.float64)
    pooled_erlangs = np.bincount(which, erlangs, n).astype(np.float64)
    pooled_rate = np.bincount(which, rate, n).astype(np.float64)
    holding_s = np.divide(
        pooled_erlangs, pooled_rate, out=np.ones(n, dtype=np.float64), where=pooled_rate > 0
    )
    q = np.zeros(n)
    q[which] = det.ttft_quantile[c_idx]  # one tier per queue, one quantile per tier
    return wait_quantile_s(pooled_slots, pooled_erlangs, holding_s, q)[which]


def max_load(
    slots: FloatArray,
    erlangs_per_token: FloatArray,
    holding_s: FloatArray,
    quantile: FloatArray,
    slack_s: FloatArray,
) -> FloatArray:
    """Per queue: the most output tokens/s it carries with the wait's ``quantile`` <= ``slack_s``
    (0 without slots or slack)."""
    top = np.divide(slots, erlangs_per_token, out=np.zeros_like(slots), where=erlangs_per_token > 0)
    lo, hi = np.zeros_like(top), top.copy()
    open_ = (top > 0) & (slack_s > 0)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        w = wait_quantile_s(slots, mid * erlangs_per_token, holding_s, quantile)
        good = w <= slack_s
        lo = np.where(good, mid, lo)
        hi = np.where(good, hi, mid)
    return np.where(open_, lo * (1.0 - _MARGIN), 0.0)


class _Repair:
    """The repair state of one plan (see the module docstring)."""

    def __init__(self, built: Built, result: SolveResult) -> None:
        t, det = built.tables, built.candidates
        self.built, self.t, self.det = built, t, det
        self.replicas = result.replicas.copy()
        self.served = result.served_tokens_per_s.copy()
        self.unserved = result.unserved_tokens_per_s.copy()
        cand = t.candidates
        used = np.zeros(t.inventory.systems_available.shape, dtype=np.int64)
        np.add.at(used, cand.pool, self.replicas * cand.systems_per_replica[:, None])
        self.free = t.inventory.systems_available - used
        self.upper = replica_upper(t)
        # A reconfiguration limit r bounds each pool's churn (systems changing role between
        # consecutive periods, constraint (6) of planner.solve.formulation): a replica added
        # must keep it, in its period and the next.
        limit = built.scenario.options.reconfiguration_limit
        self.churn_limit = (
            None if limit is None else 2.0 * limit * t.inventory.systems_available.astype(float)
        )
        moved = np.abs(np.diff(self.replicas, axis=1)) * cand.systems_per_replica[:, None]
        self.churn = np.zeros(t.inventory.systems_available.shape)
        np.add.at(self.churn[:, 1:], cand.pool, moved)
        self.domain = routing_domains(built.scenario)[cand.pool]
        self.slots_per_unit = det.queue_slots * det.replicas_per_unit
        self.ceiling = det.ceiling_tokens_per_s
        self.slack = det.ttft_slo_s - det.ttft_floor_s
        self.unit_usd = (
            t.inventory.usd_per_system_hour[cand.pool] * cand.systems_per_replica * t.period_hours
        )
        self.added_usd = 0.0
        self.shed_usd = 0.0
        self.penalty_usd = 0.0
        self.added_units = 0
        self.shed_tokens = 0.0

    def churn_after(self, c: IntArray, p: int, units: IntArray) -> tuple[FloatArray, FloatArray]:
        """The churn of each candidate's pool in periods ``p`` and ``p + 1`` were candidate ``c``
        to run ``units + 1`` replicas in period ``p`` (``units``: its count there now)."""
        spr = self.t.candidates.systems_per_replica[c].astype(float)
        pool = self.t.candidates.pool[c]
        periods = self.replicas.shape[1]
        if p > 0:
            before = self.replicas[c, p - 1]
            d_p = spr * (np.abs(units + 1 - before) - np.abs(units - before))
        else:  # period 0 has no predecessor: no churn there
            d_p = np.zeros_like(spr)
        after = self.replicas[c, p + 1] if p + 1 < periods else units
        d_next = spr * (np.abs(after - units - 1) - np.abs(after - units))
        now_next = self.churn[pool, p + 1] if p + 1 < periods else np.zeros(c.shape[0])
        return self.churn[pool, p] + d_p, now_next + d_next

    def churn_allows(self, c: IntArray, p: int, units: IntArray) -> BoolArray:
        """Whether one more replica of each candidate in period ``p`` keeps its pool's churn
        within the reconfiguration limit in ``p`` and ``p + 1`` (always, without a limit)."""
        if self.churn_limit is None:
            return np.ones(c.shape[0], dtype=bool)
        at_p, at_next = self.churn_after(c, p, units)
        pool = self.t.candidates.pool[c]
        periods = self.replicas.shape[1]
        limit_next = self.churn_limit[pool, p + 1] if p + 1 < periods else np.inf
        return (at_p <= self.churn_limit[pool, p] + 1e-9) & (at_next <= limit_next + 1e-9)

    def stats(
        self, members: IntArray, queue: IntArray, units: IntArray, p: int
    ) -> tuple[FloatArray, ...]:
        """Per queue: (weight W, erlangs-weight E, rate-weight R, slots N, slack, quantile,
        ceiling), the members splitting its load in proportion to their table capacity (the
        solver's split): per output token/s the queue carries E / W Erlangs at R / W
        requests/s; ceiling: the most its disaggregated members' decode sides carry (inf
        without them)."""
        det, cand = self.det, self.t.candidates
        n_q = int(queue.max()) + 1
        weight = units * cand.tokens_per_s_per_replica[members, p]
        per_erlang = det.request_s[members] / det.output_tokens[members]
        w = _by_queue(queue, weight, n_q)
        e = _by_queue(queue, weight * per_erlang, n_q)
        r = _by_queue(queue, weight / det.output_tokens[members], n_q)
        n = _by_queue(queue, units * self.slots_per_unit[members], n_q)
        slack = np.full(n_q, np.inf)
        np.minimum.at(slack, queue, np.where(units > 0, self.slack[members], np.inf))
        q = np.zeros(n_q)
        q[queue] = det.ttft_quantile[members]
        top = _by_queue(queue, units * np.where(np.isfinite(self.ceiling[members]), 0, 1), n_q)
        ceiling = np.where(
            top > 0,
            np.inf,
            _by_queue(queue, units * np.nan_to_num(self.ceiling[members], posinf=0.0), n_q),
        )
        return w, e, r, n, slack, q, ceiling

    @staticmethod
    def room_of(
        w: FloatArray,
        e: FloatArray,
        r: FloatArray,
        n: FloatArray,
        slack: FloatArray,
        q: FloatArray,
        ceiling: FloatArray,
    ) -> FloatArray:
        """The most tokens/s each queue carries within its slack (and its members' ceilings:
        a queue with only bounded members carries at most their sum)."""
        per_token = np.divide(e, w, out=np.zeros_like(e), where=w > 0)
        holding = np.divide(e, r, out=np.ones_like(e), where=r > 0)
        room = max_load(n, per_token, holding, q, np.where(np.isfinite(slack), slack, 0.0))
        return np.minimum(room, ceiling)

    def queues(self, members: IntArray) -> IntArray:
        """Per member of one (family, tier) in one period: the index of its queue."""
        return np.unique(self.domain[members], return_inverse=True)[1]

    def product(
        self,
        members: IntArray,
        queue: IntArray,
        p: int,
        value_usd: float,
        price_usd: float,
        room: FloatArray,
    ) -> None:
        """Repair one (family, tier) in period ``p``: ``members`` its candidates, ``queue`` their
        queues, ``room`` what each queue carries now (``room_of``); ``value_usd``: what a served
        token is worth (price + unserved penalty), ``price_usd``: its revenue."""
        cand, det = self.t.candidates, self.det
        units = self.replicas[members, p].copy()
        load = np.bincount(queue, self.served[members, p])
        stats = self.stats(members, queue, units, p)
        excess = float(load.sum() - room.sum())
        seconds = SECONDS_PER_HOUR * self.t.period_hours
        cap = cand.tokens_per_s_per_replica[members, p]
        spu = cand.systems_per_replica[members]
        pool = cand.pool[members]
        while excess > 0:
            # Every member that one more replica could grow, evaluated at once: only its own
            # queue changes (a member with slack joins the slack minimum only if it had none).
            opt = np.flatnonzero(
                (units < self.upper[members, p])
                & (self.free[pool, p] >= spu)
                & (cap > 0)
                & self.churn_allows(members, p, units)
            )
            if not opt.size:
                break
            qo = queue[opt]
            w, e, r, n, slack, q, ceiling = (x[qo] for x in stats)
            trial = self.room_of(
                w + cap[opt],
                e + cap[opt] * det.request_s[members[opt]] / det.output_tokens[members[opt]],
                r + cap[opt] / det.output_tokens[members[opt]],
                n + self.slots_per_unit[members[opt]],
                np.minimum(slack, self.slack[members[opt]]),
                q,
                ceiling + self.ceiling[members[opt]],
            )
            grown = trial - room[qo]
            gain = np.minimum(grown, excess) * value_usd * seconds - self.unit_usd[members[opt]]
            best = int(np.argmax(gain))
            if gain[best] <= 0:
                break
            i = int(opt[best])
            at_p, at_next = self.churn_after(members[i : i + 1], p, units[i : i + 1])
            self.churn[pool[i], p] = at_p[0]
            if p + 1 < self.replicas.shape[1]:
                self.churn[pool[i], p + 1] = at_next[0]
            units[i] += 1
            self.free[pool[i], p] -= int(spu[i])
            self.added_usd += float(self.unit_usd[members[i]])
            self.added_units += 1
            excess -= float(grown[best])
            stats = self.stats(members, queue, units, p)
            room = self.room_of(*stats)
        # Final split: each queue up to its capacity; the excess to queues with room, in
        # proportion to their room; the rest is shed.
        total = float(load.sum())
        kept = np.minimum(load, room)
        spare = room - kept
        moved = min(total - float(kept.sum()), float(spare.sum()))
        if spare.sum() > 0:
            kept = kept + spare * (moved / float(spare.sum()))
        shed = max(total - float(kept.sum()), 0.0)
        weight = units * cand.tokens_per_s_per_replica[members, p]
        share = weight / np.maximum(np.bincount(queue, weight)[queue], 1e-300)
        self.replicas[members, p] = units
        self.served[members, p] = kept[queue] * share
        if shed > 0:
            f, k = int(cand.family[members[0]]), int(cand.tier[members[0]])
            self.unserved[f, k, p] += shed
            self.shed_tokens += shed * seconds
            self.shed_usd += shed * price_usd * seconds
            self.penalty_usd += shed * (value_usd - price_usd) * seconds


def repair_members(active: IntArray, prods: Products, has_slo: BoolArray, j: int) -> IntArray:
    """The candidates the repair of product ``j`` may grow in a period: those the plan runs for it
    there (``active``) and every other useful candidate of the product with a TTFT SLO, idle in
    the plan: one more replica of a layout the solver left unused (more slots per system, or in a
    pool with idle systems) may give a late queue its room for less than the tokens it sheds."""
    spare = np.flatnonzero((prods.product_of_cand == j) & has_slo)  # has_slo: useful ones only
    return np.unique(np.concatenate([active, spare]))


def keep_ttft_promise(built: Built, result: SolveResult) -> SolveResult:
    """``result`` with every queue of a tier with a TTFT SLO within it at the planned load
    (module docstring); unchanged when nothing misses."""
    t, det = built.tables, built.candidates
    if not result.status.has_plan:
        return result
    prods = products(t, result.combo)
    repair = _Repair(built, result)
    has_slo = ~np.isnan(det.ttft_slo_s) & prods.useful
    c_idx, p_idx = np.nonzero((result.replicas > 0) | (result.served_tokens_per_s > 0))
    keep = has_slo[c_idx]
    c_idx, p_idx = c_idx[keep], p_idx[keep]
    if not c_idx.size:
        return result
    wait = queue_wait_s(
        built,
        c_idx,
        p_idx,
        result.replicas[c_idx, p_idx] * det.replicas_per_unit[c_idx],
        result.served_tokens_per_s[c_idx, p_idx],
    )
    late = det.ttft_floor_s[c_idx] + wait > det.ttft_slo_s[c_idx]
    if not np.any(late):
        return result
    d = t.demand
    n_fam = len(d.family_ids)
    price = np.where(
        (prods.offer >= 0)[:, None], d.offers.usd_per_output_token[np.maximum(prods.offer, 0)], 0.0
    )
    product = prods.product_of_cand[c_idx]
    late_keys = np.unique(product[late] * t.periods + p_idx[late])
    work = []
    for key in late_keys.tolist():
        j, p = divmod(int(key), t.periods)
        members = repair_members(c_idx[(product == j) & (p_idx == p)], prods, has_slo, j)
        queue = repair.queues(members)
        units = repair.replicas[members, p]
        work.append((j, p, members, queue, repair.stats(members, queue, units, p)))
    # What every queue carries now, in one bisection; then each product in turn.
    rooms = repair.room_of(*(np.concatenate([w[4][i] for w in work]) for i in range(7)))
    bounds = np.cumsum([0] + [w[4][0].shape[0] for w in work])
    for (j, p, members, queue, _), lo, hi in zip(work, bounds[:-1], bounds[1:], strict=True):
        value, revenue_per_token = float(prods.value_usd_per_token[j, p]), float(price[j, p])
        repair.product(members, queue, p, value, revenue_per_token, rooms[lo:hi])
    assert repair.unserved.shape == (n_fam, len(d.tier_ids), t.periods)
    revenue = result.revenue_usd - repair.shed_usd
    cost = result.cost_usd + repair.added_usd
    penalty = result.penalty_usd + repair.penalty_usd
    objective = revenue - cost - penalty
    bound = result.bound_usd
    gap = (bound - objective) / max(abs(bound), 1.0) if math.isfinite(bound) else result.gap
    target = built.scenario.options.gap_target
    status = result.status
    if status is SolveStatus.OPTIMAL and gap > target:
        status = SolveStatus.FEASIBLE
    lost = repair.shed_usd + repair.added_usd + repair.penalty_usd
    message = (
        f"{result.message}; TTFT promise kept at the planned load ({built.scenario.fleet.routing}"
        f" routing): {repair.added_units} replica(s) added, {repair.shed_tokens / 1e6:,.1f}M "
        f"output tokens shed, objective {lost:,.0f} USD lower, gap {gap:.2%} against the bound"
    )
    return dataclasses.replace(
        result,
        status=status,
        objective_usd=objective,
        gap=gap,
        replicas=repair.replicas,
        served_tokens_per_s=repair.served,
        unserved_tokens_per_s=repair.unserved,
        revenue_usd=revenue,
        cost_usd=cost,
        penalty_usd=penalty,
        message=message,
    )


def _by_queue(queue: IntArray, weights: np.ndarray, n_q: int) -> FloatArray:
    """Sum of ``weights`` per queue index (0..n_q-1), as floats."""
    return np.bincount(queue, weights, n_q).astype(np.float64, copy=False)
