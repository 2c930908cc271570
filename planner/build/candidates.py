"""Candidates: performance estimates filtered by a tier's SLOs and Pareto-pruned, per group.

A group is one (family, tier, serving variant, pool). Its rows are the performance model's
configurations of the variant's model on the pool's system (layouts x precisions x batch caps x
speculative options), estimated once per (model, system, token profile) by
``planner.build.pipeline``.

Filter (``eligible``): the configuration is valid and fits; its streaming speed at a full batch
(the slowest a stream gets, so the floor holds at any percentile) reaches the offer's speed; its
TTFT floor (prefill + one decode step, no queueing, plus the engine's per-request serving cost:
``fleet.perf.engines.with_serving_overhead``) is below the tier's TTFT SLO.

Headroom (``planner.build.queueing``): in period t the tier's requests arrive at lambda_t; a replica
of b = batch slots holding each request request_s seconds serves, within the TTFT percentile,
    tokens_per_s_per_replica[c, t] = raw_c x a / n*(lambda_t, request_s_c, slack_c),
with a = lambda_t x request_s_c and n* the fewest slots meeting the wait percentile. Because
raw = b x osl / request_s, this equals b x osl x lambda_t / n*: it grows with b and shrinks with
n*, and n* grows with request_s and shrinks with slack.

Pruning (``prune``) is exact for the solver's integer model: candidate A dominates B when
systems_per_replica_A <= systems_per_replica_B and A's capacity per replica >= B's in every period
(k replicas of B can always be swapped for k of A: no more systems, no less capacity, and a
larger max_replicas). Steps: (a) within each (systems per unit, slots) class, the 2-D skyline of
(request_s, TTFT floor); (b) the sufficient condition on all four (systems, slots, request_s,
TTFT floor at least as good -> at least as much capacity in every period, by the monotonicity
above); (c) headroom computed best-first, skipping rows whose raw capacity (an upper bound on
theirs) is already matched in every period by a computed row with no more systems; (d) the
per-period test on what remains. Tiers without a TTFT SLO have no headroom (cap 1): 2-D (systems
per replica, raw tokens/s per replica). A disaggregated unit (``planner.build.disagg``) also has a
ceiling, the most its decode side carries: capacity = min(raw x cap, ceiling), and the ceiling
joins the criteria of (a) (its own class) and (b) (a fifth criterion); (c) bounds a row by it.
Quality does not differ between candidates of one group (a
lossy precision's quality cost sits on its own serving variant, docs/demand.md), so nothing else
matters to the solver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet.catalog.schema import PRECISIONS
from fleet.perf.types import BoolArray, Configs, Estimate, FloatArray, IntArray, Problem
from planner.build.queueing import utilization_cap


@dataclass(frozen=True, slots=True)
class Slo:
    """What one offer demands of a configuration."""

    min_tokens_per_s_per_user: float
    """0 = no floor."""
    max_ttft_s: float | None
    ttft_quantile: float
    """0-1."""


@dataclass(frozen=True, slots=True)
class Pruned:
    """Surviving rows of one group and their per-period capacity."""

    rows: IntArray
    """Indices into the group's ``Columns``."""
    utilization_cap: FloatArray
    """(rows, periods)."""
    tokens_per_s_per_replica: FloatArray
    """(rows, periods): raw x cap."""


def describe(configs: Configs, row: int) -> str:
    """``tp=8 fp8 batch 1`` plus pp / dp / ep / speculative parts when they are not trivial."""
    parts = [f"tp={configs.tp[row]}"]
    for name in ("pp", "dp", "ep"):
        value = int(getattr(configs, name)[row])
        if value > 1:
            parts.append(f"{name}={value}")
    parts.append(PRECISIONS[int(configs.weight_precision[row])])
    parts.append(f"batch {configs.batch[row]}")
    if configs.spec_draft_tokens[row] > 0:
        parts.append(f"spec k={configs.spec_draft_tokens[row]}")
    return " ".join(parts)


def runnable(est: Estimate) -> BoolArray:
    """Valid layout, supported precision, fits in memory."""
    return (est.problem == Problem.OK) & est.fits


def fast_enough(est: Estimate, slo: Slo) -> BoolArray:
    return est.tokens_per_s_per_user >= slo.min_tokens_per_s_per_user * (1 - 1e-9)


def responsive(est: Estimate, slo: Slo) -> BoolArray:
    if slo.max_ttft_s is None:
        return np.ones(len(est), dtype=bool)
    return est.ttft_floor_s < slo.max_ttft_s


def eligible(est: Estimate, slo: Slo) -> BoolArray:
    return runnable(est) & fast_enough(est, slo) & responsive(est, slo)


def frontier(keys: FloatArray, block: int = 256) -> BoolArray:
    """Rows of ``keys`` (rows x criteria, larger is better) that no other row weakly dominates;
    of identical rows the first in scan order is kept.

    Rows are scanned by decreasing key sum, so a row's dominators come before it (a dominator's
    sum is at least as large: floating-point addition is monotone). A row is dropped exactly when
    an earlier row weakly dominates it; by transitivity it is enough to test the rows kept so far
    and the earlier rows of its own block, so each block is one vectorized comparison.

    Two criteria take a sort-based sweep instead (``_frontier_2d``), with the same result.
    """
    if keys.shape[1] == 2:
        fast = _frontier_2d(keys)
        if fast is not None:
            return fast
    order = np.argsort(-keys.sum(axis=1), kind="stable")
    keep = np.zeros(keys.shape[0], dtype=bool)
    kept = np.empty((0, keys.shape[1]))
    for start in range(0, order.shape[0], block):
        rows = order[start : start + block]
        k = keys[rows]
        by_kept = np.all(kept[:, None, :] >= k[None, :, :], axis=2).any(axis=0)
        earlier = np.tril(np.ones((rows.shape[0], rows.shape[0]), dtype=bool), k=-1)
        by_block = (np.all(k[None, :, :] >= k[:, None, :], axis=2) & earlier).any(axis=1)
        new = ~(by_kept | by_block)
        keep[rows[new]] = True
        kept = np.concatenate([kept, k[new]])
    return keep


def _frontier_2d(keys: FloatArray) -> BoolArray | None:
    """``frontier`` of two criteria in O(n log n); None where its scan order could matter.

    ``frontier`` drops a row exactly when a row earlier in its scan order (decreasing key sum,
    then index) weakly dominates it. A dominator that differs from the row has the larger sum
    unless the two sums round to the same float; when no two different rows share a sum, the
    rule is therefore: drop a row that another, different row weakly dominates, and every copy
    of an identical row but the first. Otherwise (or with non-finite keys) None: the caller
    scans.
    """
    n = keys.shape[0]
    if not np.all(np.isfinite(keys)):
        return None
    k0, k1 = keys[:, 0], keys[:, 1]
    total = keys.sum(axis=1)
    by_sum = np.lexsort((k1, k0, total))
    t, a, b = total[by_sum], k0[by_sum], k1[by_sum]
    if np.any((t[1:] == t[:-1]) & ((a[1:] != a[:-1]) | (b[1:] != b[:-1]))):
        return None
    # Best first: k0 descending, then k1 descending, then index (lexsort is stable).
    order = np.lexsort((-k1, -k0))
    s0, s1 = k0[order], k1[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = s0[1:] != s0[:-1]
    group = np.cumsum(starts) - 1
    best_in_group = s1[starts][group]
    # Best k1 among rows of strictly larger k0: the running maximum just before the group.
    running = np.maximum.accumulate(s1)
    before = np.concatenate([[-np.inf], running[:-1]])
    best_above = before[starts][group]
    copy = np.zeros(n, dtype=bool)
    copy[1:] = ~starts[1:] & (s1[1:] == s1[:-1])
    dropped = (s1 < best_in_group) | (best_above >= s1) | copy
    keep = np.zeros(n, dtype=bool)
    keep[order[~dropped]] = True
    return keep


def _class_skyline(
    spr: IntArray,
    slots: FloatArray,
    request_s: FloatArray,
    floor_s: FloatArray,
    tag: FloatArray | None = None,
) -> IntArray:
    """Rows not weakly dominated on (request_s, floor_s) by an earlier row of their own
    (spr, slots, tag) class (both criteria smaller is better); one row per identical set."""
    tag = np.zeros(spr.shape[0]) if tag is None else tag
    order = np.lexsort((floor_s, request_s, slots, tag, spr))
    s_spr, s_slots, s_floor, s_tag = spr[order], slots[order], floor_s[order], tag[order]
    new_class = np.ones(order.shape[0], dtype=bool)
    new_class[1:] = (
        (s_spr[1:] != s_spr[:-1]) | (s_slots[1:] != s_slots[:-1]) | (s_tag[1:] != s_tag[:-1])
    )
    group = np.cumsum(new_class)
    # Running minimum of floor_s over earlier rows of the same class: offset later classes
    # below every earlier one so that earlier classes never decide.
    big = float(np.ptp(s_floor)) + 1.0
    shifted = s_floor - group * big
    running = np.minimum.accumulate(shifted)
    before = np.concatenate([[np.inf], running[:-1]])
    keep = new_class | (shifted < before)
    return np.sort(order[keep])


@dataclass(frozen=True, slots=True)
class Columns:
    """What pruning needs of the eligible rows of one group (one entry per row)."""

    systems_per_unit: IntArray
    """Systems per unit (a replica, or several packed onto one system)."""
    tokens_per_s_per_unit: FloatArray
    """Raw output tokens/s of a unit at a full batch, no headroom."""
    request_s: FloatArray
    ttft_floor_s: FloatArray
    ceiling_tokens_per_s: FloatArray | None = None
    """Output tokens/s a unit never exceeds whatever its queue allows (a disaggregated unit's
    decode side, ``planner.build.disagg``); None = no bound beyond the queue's."""


def prune(cols: Columns, slo: Slo, requests_per_s: FloatArray, osl: float) -> Pruned:
    """Pareto-prune the eligible rows of one group; ``requests_per_s``: (periods,) the load that
    sizes the TTFT headroom. ``Pruned.rows`` index into ``cols``."""
    spr = cols.systems_per_unit
    raw = cols.tokens_per_s_per_unit
    request_s = cols.request_s
    floor_s = cols.ttft_floor_s
    ceiling = cols.ceiling_tokens_per_s
    periods = requests_per_s.shape[0]
    everything = np.arange(spr.shape[0])
    if slo.max_ttft_s is None:
        top = raw if ceiling is None else np.minimum(raw, ceiling)
        kept = everything[frontier(np.stack([-spr.astype(np.float64), top], axis=1))]
        cap = np.ones((kept.shape[0], periods))
        return Pruned(kept, cap, top[kept][:, None] * cap)
    slots = raw * request_s / osl
    # (a) Within each (systems per unit, slots) class only the 2-D skyline of (request_s, TTFT
    # floor) can survive (b); it is cheap and shrinks (b)'s input by orders of magnitude. Rows
    # with a ceiling only meet rows of the same ceiling.
    tag = None if ceiling is None else np.where(np.isfinite(ceiling), ceiling, -1.0)
    rows = _class_skyline(spr, np.round(slots, 6), request_s, floor_s, tag)
    # (b) The static sufficient condition on all four criteria (five with a ceiling: more of
    # it never lowers the capacity min(raw x cap, ceiling)).
    criteria = [-spr[rows].astype(np.float64), slots[rows], -request_s[rows], -floor_s[rows]]
    if ceiling is not None:
        criteria.append(np.minimum(ceiling[rows], raw[rows]))
    idx = rows[frontier(np.stack(criteria, axis=1))]
    top = raw if ceiling is None else np.minimum(raw, ceiling)
    # (c) Headroom, best raw capacity per system first; a row whose raw (no-headroom) capacity is
    # at most what a computed row with no more systems delivers in every period is dominated
    # without computing its own.
    idx = idx[np.argsort(-top[idx] / spr[idx], kind="stable")]
    done: list[np.ndarray] = []
    cap_rows: list[FloatArray] = []
    cap_done = np.empty((0, periods))
    spr_done = np.empty(0)
    # Periods with the same load have the same cap: compute each distinct load once.
    loads, period_load = np.unique(requests_per_s, return_inverse=True)
    for start in range(0, idx.shape[0], 32):
        block = idx[start : start + 32]
        if spr_done.size:
            covered = (spr_done[None, :] <= spr[block][:, None]) & np.all(
                cap_done[None, :, :] >= top[block][:, None, None], axis=2
            )
            block = block[~covered.any(axis=1)]
        if not block.size:
            continue
        erlangs = loads[None, :] * request_s[block, None]
        slack = (slo.max_ttft_s - floor_s[block])[:, None]
        cap = utilization_cap(erlangs, slack, request_s[block, None], slo.ttft_quantile)
        cap = cap[:, period_load]
        if ceiling is not None:  # the cap the ceiling leaves: capacity / raw
            cap = np.minimum(cap, top[block, None] / raw[block, None])
        done.append(block)
        cap_rows.append(cap)
        cap_done = np.concatenate([cap_done, raw[block, None] * cap])
        spr_done = np.concatenate([spr_done, spr[block]])
    idx = np.concatenate(done)
    cap = np.concatenate(cap_rows)
    capacity = cap_done
    final = frontier(np.concatenate([-spr[idx].astype(np.float64)[:, None], capacity], axis=1))
    return Pruned(idx[final], cap[final], capacity[final])
