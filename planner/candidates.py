"""Candidates: performance estimates filtered by a tier's SLOs and Pareto-pruned, per group.

A group is one (family, tier, serving variant, pool). Its rows are the performance model's
configurations of the variant's model on the pool's system (layouts x precisions x batch caps x
speculative options), estimated once per (model, system, token profile) by ``planner.build``.

Filter (``eligible``): the configuration is valid and fits; its streaming speed at a full batch
(the slowest a stream gets, so the floor holds at any percentile) reaches the offer's speed; its
TTFT floor (prefill + one decode step, no queueing) is below the tier's TTFT SLO.

Headroom (``planner.queueing``): in period t the tier's requests arrive at lambda_t; a replica of
b = batch slots holding each request request_s seconds serves, within the TTFT percentile,
    tokens_per_s_per_replica[c, t] = raw_c x a / n*(lambda_t, request_s_c, slack_c),
with a = lambda_t x request_s_c and n* the fewest slots meeting the wait percentile. Because
raw = b x osl / request_s, this equals b x osl x lambda_t / n*: it grows with b and shrinks with
n*, and n* grows with request_s and shrinks with slack.

Pruning (``prune``) is exact for the solver's integer model: candidate A dominates B when
systems_per_replica_A <= systems_per_replica_B and A's capacity per replica >= B's in every period
(k replicas of B can always be swapped for k of A: no more systems, no less capacity, and a
larger max_replicas). It runs in two passes: first the cheap sufficient condition
(systems_per_replica, b, request_s, TTFT floor all at least as good -> at least as much capacity in
every period, by the monotonicity above), then the per-period test on the survivors, after their
headroom is computed. Tiers without a TTFT SLO have no headroom (cap 1): 2-D (systems per replica,
raw tokens/s per replica). Quality does not differ between candidates of one group (precision is
taken as quality-neutral), so nothing else matters to the solver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet.catalog.schema import PRECISIONS
from fleet.perf.types import BoolArray, Configs, Estimate, FloatArray, IntArray, Problem
from planner.queueing import utilization_cap


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


def _undominated(better_or_equal: BoolArray, strictly: BoolArray) -> BoolArray:
    """Rows no other row dominates; among exact ties the first row is kept.

    ``better_or_equal[i, j]``: row i is at least as good as row j in every criterion;
    ``strictly[i, j]``: better in at least one.
    """
    n = better_or_equal.shape[0]
    before = np.triu(np.ones((n, n), dtype=bool), k=1)  # before[i, j]: i comes before j
    ties = better_or_equal & better_or_equal.T
    dominated_by = better_or_equal & (strictly | (ties & before))
    np.fill_diagonal(dominated_by, False)
    return ~dominated_by.any(axis=0)


def _static_frontier(
    spr: IntArray, slots: FloatArray, request_s: FloatArray, ttft_floor_s: FloatArray
) -> BoolArray:
    """Sufficient (exact) dominance on (systems_per_replica, slots, request_s, TTFT floor)."""
    keys = np.stack([-spr.astype(np.float64), slots, -request_s, -ttft_floor_s], axis=1)
    ge = np.all(keys[:, None, :] >= keys[None, :, :], axis=2)
    gt = np.any(keys[:, None, :] > keys[None, :, :], axis=2)
    return _undominated(ge, gt)


def _period_frontier(spr: IntArray, capacity: FloatArray) -> BoolArray:
    """Exact dominance on systems_per_replica and capacity in every period."""
    keys = np.concatenate([-spr.astype(np.float64)[:, None], capacity], axis=1)
    ge = np.all(keys[:, None, :] >= keys[None, :, :], axis=2)
    gt = np.any(keys[:, None, :] > keys[None, :, :], axis=2)
    return _undominated(ge, gt)


@dataclass(frozen=True, slots=True)
class Columns:
    """What pruning needs of the eligible rows of one group (one entry per row)."""

    systems_per_unit: IntArray
    """Systems per unit (a replica, or several packed onto one system)."""
    tokens_per_s_per_unit: FloatArray
    """Raw output tokens/s of a unit at a full batch, no headroom."""
    request_s: FloatArray
    ttft_floor_s: FloatArray


def prune(
    cols: Columns, slo: Slo, requests_per_s: FloatArray, osl: float, chunk: int = 512
) -> Pruned:
    """Pareto-prune the eligible rows of one group; ``requests_per_s``: (periods,) the load that
    sizes the TTFT headroom. ``Pruned.rows`` index into ``cols``."""
    spr = cols.systems_per_unit
    raw = cols.tokens_per_s_per_unit
    request_s = cols.request_s
    floor_s = cols.ttft_floor_s
    periods = requests_per_s.shape[0]
    everything = np.arange(spr.shape[0])
    if slo.max_ttft_s is None:
        zeros = np.zeros_like(raw)
        kept = everything[_static_frontier(spr, raw, zeros, zeros)]
        cap = np.ones((kept.shape[0], periods))
        return Pruned(kept, cap, raw[kept][:, None] * cap)
    slots = raw * request_s / osl
    # The static pass is quadratic; take it in chunks (survivors of each chunk compete again,
    # which is exact because dominance is transitive).
    order = np.argsort(-slots / np.maximum(spr, 1), kind="stable")
    survivors = np.empty(0, dtype=np.int64)
    for start in range(0, order.shape[0], chunk):
        pool = np.concatenate([survivors, order[start : start + chunk]])
        mask = _static_frontier(spr[pool], slots[pool], request_s[pool], floor_s[pool])
        survivors = pool[mask]
    idx = np.sort(survivors)
    erlangs = requests_per_s[None, :] * request_s[idx, None]
    slack = (slo.max_ttft_s - floor_s[idx])[:, None]
    cap = utilization_cap(erlangs, slack, request_s[idx, None], slo.ttft_quantile)
    capacity = raw[idx, None] * cap
    final = _period_frontier(spr[idx], capacity)
    return Pruned(idx[final], cap[final], capacity[final])
