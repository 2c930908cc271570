"""The tables the solver sees: inventory, offers and demand, candidates. Nothing else crosses.

Vocabulary:
- family f: a model family sold under one name (flagship plus optional distilled variants);
- tier k: batch / standard / fast ..., each with SLOs and a menu of price multipliers;
- offer o: one way to sell tier k of family f = (serving variant, price multiplier). The serving
  variant is part of the offer because customers see it (quality enters the choice model);
- combo m: one offer per tier of a family, i.e. the family's price card. Exactly one combo per
  family is chosen for the whole horizon; demand per tier and period is known per combo (MNL);
- candidate c: a configuration (pool, variant, layout, precision, batch cap, speculative option)
  that meets tier k's SLOs for family f; its replicas per period are the integer decisions;
- period t: an hour (``period_hours`` long) of the horizon.

Rates are output tokens per second; input tokens ride along in the family's token profile and are
already priced into ``usd_per_output_token`` and costed into each candidate's capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

SECONDS_PER_HOUR = 3600.0
"""Rates are per second, periods are hours: tokens in a period = rate x this x period_hours."""


@dataclass(frozen=True, slots=True)
class Inventory:
    pool_ids: tuple[str, ...]
    systems_available: IntArray
    """(pools, periods): systems usable in each period (count x availability, floored)."""
    usd_per_system_hour: FloatArray
    """(pools,): running cost of one used system for one hour."""


@dataclass(frozen=True, slots=True)
class Offers:
    """One row per offer o (variant x multiplier of one family's tier)."""

    family: IntArray
    tier: IntArray
    variant: IntArray
    multiplier: FloatArray
    usd_per_output_token: FloatArray
    """(offers, periods): revenue per served output token, input tokens included."""


@dataclass(frozen=True, slots=True)
class Demand:
    family_ids: tuple[str, ...]
    tier_ids: tuple[str, ...]
    variant_ids: tuple[str, ...]
    offers: Offers
    combo_family: IntArray
    """(combos,): the family each combo belongs to."""
    combo_offer: IntArray
    """(combos, tiers): the offer of each tier in the combo; -1 when the family does not sell
    that tier."""
    tokens_per_s: FloatArray
    """(combos, tiers, periods): output tokens/s demanded of each tier when the combo is
    chosen (0 where the tier is not sold)."""
    reference_combo: IntArray
    """(families,): the combo at the scenario's reference prices (baselines start from it)."""
    window_periods: IntArray
    """(tiers,): 1 = demand must be served in its own period; w > 1 = demand of each block of w
    consecutive periods may be served anywhere inside the block (a batch completion window)."""
    unserved_penalty_usd_per_output_token: FloatArray
    """(tiers,): cost of each demanded token not served (0 = lost revenue only)."""


@dataclass(frozen=True, slots=True)
class Candidates:
    """One row per candidate c."""

    pool: IntArray
    family: IntArray
    tier: IntArray
    variant: IntArray
    systems_per_replica: IntArray
    tokens_per_s_per_replica: FloatArray
    """(cands, periods): output tokens/s one replica serves within the tier's SLOs, queueing
    headroom for the TTFT percentile already taken off."""
    max_replicas: IntArray
    """(cands,): floor(max systems of the pool over periods / systems_per_replica)."""


@dataclass(frozen=True, slots=True)
class PlanningTables:
    inventory: Inventory
    demand: Demand
    candidates: Candidates
    period_hours: float = 1.0

    @property
    def periods(self) -> int:
        return int(self.inventory.systems_available.shape[1])
