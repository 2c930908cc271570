"""Disaggregated prefill/decode units as candidates (``options.search.disaggregated``).

``fleet.perf.disagg.form_units`` turns a search grid into units of k decode + m prefill replicas
of the pool's system; ``planner.build`` appends them to the grid's rows, so every group (family,
tier, variant, pool) screens, prunes and solves them like any other candidate "replica" (a unit
is one table replica: its systems, its output tokens/s).

Queues. A unit's requests queue at its prefill replicas: m replicas of dp attention ranks, each
rank holding a prompt for the replica's prefill wave, so its TTFT headroom
(``planner.build.queueing``, ``planner.plan.promise``) is the Erlang C wait of m x dp slots held
``prefill_wave_s`` each (``Units.prefill_slots``, ``Units.prefill_hold_s``): the candidate's
queue slots are m x dp and its ``request_s`` is that hold (raw queue capacity
m x dp x osl / prefill_wave_s, the identity
raw = slots x osl / request_s the headroom uses). The decode side then bounds the unit: a request
that finishes its prefill must find a free decode slot without waiting at the tier's TTFT
percentile (all of the slack goes to the prefill queue), so the decode side carries at most
u_d x its full-batch rate, u_d the largest occupancy of the unit's own k x b decode slots at which
the Erlang C probability of waiting is <= 1 - percentile (one unit's slots: conservative, a router
spreading over several units waits less). That bound is the candidate's ceiling
(``planner.build.candidates.Columns.ceiling_tokens_per_s``): capacity = min(raw x cap, ceiling).
Tiers without a TTFT SLO take min(prefill, decode) full-rate capacity.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields

import numpy as np

from fleet.perf.disagg import Units, label
from fleet.perf.types import Configs, Estimate, FloatArray, IntArray
from planner.build.candidates import Columns, Slo
from planner.build.queueing import erlang_c

_BISECTION_STEPS = 50


@dataclass(frozen=True, slots=True)
class Serving:
    """The disaggregated units appended to one grid: rows from ``aggregated`` on are units."""

    units: Units
    aggregated: int
    """Rows of the aggregated grid (units follow them)."""


def combine(configs: Configs, est: Estimate, units: Units) -> tuple[Configs, Estimate]:
    """The grid's rows followed by the units' rows (decode configuration, unit estimate)."""

    def cat(a: object, b: object) -> dict[str, np.ndarray]:
        return {f.name: np.concatenate([getattr(a, f.name), getattr(b, f.name)]) for f in fields(a)}  # type: ignore[arg-type]

    return Configs(**cat(configs, units.configs)), Estimate(**cat(est, units.estimate))


def decode_slot_cap(slots: FloatArray, quantile: float) -> FloatArray:
    """Largest occupancy a / n of n ``slots`` with P(wait) = Erlang C(n, a) <= 1 - quantile."""
    # Slot counts are k x batch: few distinct values, each bisected once per process.
    distinct, where = np.unique(np.asarray(slots, dtype=np.float64), return_inverse=True)
    caps = np.asarray([_slot_cap(float(n), float(quantile)) for n in distinct.tolist()])
    return caps[where.reshape(np.shape(slots))] if caps.size else np.zeros(np.shape(slots))


@functools.lru_cache(maxsize=4096)
def _slot_cap(n: float, quantile: float) -> float:
    if n <= 0:
        return 0.0
    lo, hi = 0.0, n
    tail = 1.0 - quantile
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if float(erlang_c(n, mid)) <= tail:
            lo = mid
        else:
            hi = mid
    return lo / n


@dataclass(frozen=True, slots=True)
class GroupColumns:
    """What a group's rows bring to pruning and to the plan's details."""

    pack: IntArray
    """Replicas per table unit (aggregated replicas smaller than a system are packed; 1 for a
    disaggregated unit, which counts its own systems)."""
    columns: Columns
    queue_slots: FloatArray
    """Queue slots per replica: its batch, or a unit's prefill replicas."""
    raw_tokens_per_s: FloatArray
    """Output tokens/s per replica at full use, no headroom (a unit: min(prefill, decode))."""
    ceiling_tokens_per_s: FloatArray
    """Per table unit; inf when none."""


def group_columns(
    configs: Configs,
    est: Estimate,
    rows: IntArray,
    devices_per_system: int,
    serving: Serving | None,
    slo: Slo,
) -> GroupColumns:
    """Pruning columns of a group's ``rows`` (indices into the combined grid)."""
    devices = est.devices_per_replica[rows]
    pack = np.where(devices < devices_per_system, devices_per_system // devices, 1).astype(np.int64)
    spu = -(-devices * pack // devices_per_system)
    tokens = est.tokens_per_s_per_replica[rows] * pack
    request_s = est.request_s[rows].copy()
    slots = configs.batch[rows].astype(np.float64)
    ceiling = np.full(rows.shape[0], np.inf)
    raw = est.tokens_per_s_per_replica[rows].copy()
    if serving is not None and np.any(rows >= serving.aggregated):
        unit = rows >= serving.aggregated
        j = rows[unit] - serving.aggregated
        u = serving.units
        pack[unit] = 1
        spu[unit] = est.systems_per_replica[rows[unit]]
        prefill = u.prefill_tokens_per_s[j]
        decode = u.decode_tokens_per_s[j]
        tokens[unit] = prefill
        request_s[unit] = u.prefill_hold_s[j]
        slots[unit] = u.prefill_slots[j]
        if slo.max_ttft_s is not None:
            decode_slots = u.decode_replicas[j] * u.configs.batch[j]
            decode = decode * decode_slot_cap(decode_slots.astype(np.float64), slo.ttft_quantile)
        ceiling[unit] = np.minimum(decode, prefill)
        raw[unit] = est.tokens_per_s_per_replica[rows[unit]]
    has_ceiling = bool(np.any(np.isfinite(ceiling)))
    cols = Columns(
        systems_per_unit=spu.astype(np.int64),
        tokens_per_s_per_unit=tokens,
        request_s=request_s,
        ttft_floor_s=est.ttft_floor_s[rows],
        ceiling_tokens_per_s=ceiling if has_ceiling else None,
    )
    return GroupColumns(pack, cols, slots, raw, ceiling)


def layout_labels(serving: Serving | None, rows: IntArray) -> list[str]:
    """Per row of the combined grid: the disaggregated layout, '' for an aggregated replica."""
    if serving is None:
        return [""] * rows.shape[0]
    return [
        label(serving.units, int(r) - serving.aggregated) if r >= serving.aggregated else ""
        for r in rows.tolist()
    ]
