"""Synthetic planning instances with the shapes of farebox's problem, built as PlanningTables.

Shapes, not facts: system costs, tokens/s per replica and the demand model below are invented to
look like a 2026 inference fleet (8-GPU nodes, NVL72 racks, wafer-scale systems; flagship models
with distilled fast variants; MNL demand with 6 fast x 3 standard x 2 batch price options = 36
combos per family; diurnal and weekly demand; peak demand up to ~3x what the fleet can serve).
No figure here is sourced or meant to be quoted; the benchmark uses them to measure the solver.

Sizes (``SIZES``):
- ``region``: one region, ~2k accelerators, 4 pools, 3 variants (2 families), 3 tiers, 24 h;
- ``multi_region``: ~20k accelerators, 12 pools, 6 variants (4 families), 168 h;
- ``frontier``: a frontier lab's week, >= 100k accelerators, 24 pools, 10 variants
  (6 families), 3 tiers, 168 h, ~650 candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.solve.tables import Candidates, Demand, Inventory, Offers, PlanningTables


@dataclass(frozen=True, slots=True)
class SystemType:
    name: str
    accelerators: int
    usd_per_hour: float
    speed: float
    """Throughput per system relative to an 8x H100 node."""
    wafer: bool = False


SYSTEM_TYPES = (
    SystemType("h100x8", 8, 20.0, 1.0),
    SystemType("h200x8", 8, 26.0, 1.4),
    SystemType("b200x8", 8, 40.0, 2.6),
    SystemType("mi300x8", 8, 22.0, 1.2),
    SystemType("gb200nvl72", 72, 330.0, 30.0),
    SystemType("wse3", 1, 45.0, 0.0, wafer=True),
)


@dataclass(frozen=True, slots=True)
class Size:
    regions: int
    system_types: tuple[int, ...]
    families: int
    distilled: int
    """How many families also sell a distilled (SRAM-resident) fast variant."""
    periods: int
    accelerators: int
    configs_per_product: float
    """Mean candidates per (family, tier, variant, pool) (1-2 survive Pareto pruning)."""


SIZES = {
    "region": Size(1, (0, 1, 2, 3), 2, 1, 24, 2_000, 1.4),
    "multi_region": Size(3, (0, 1, 2, 3), 4, 2, 168, 20_000, 1.4),
    "frontier": Size(4, (0, 1, 2, 3, 4, 5), 6, 4, 168, 110_000, 1.5),
}

TIERS = ("batch", "standard", "fast")
FAST_FLAGSHIP = (4.0, 6.0, 8.0)
FAST_DISTILLED = (3.0, 4.0, 5.0)
FAST_ONLY_FLAGSHIP = (3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
STANDARD = (0.8, 1.0, 1.25)
BATCH = (0.4, 0.5)
TIER_RATE = {"batch": 2.2, "standard": 1.0, "fast": 0.3}
"""Tokens/s per replica relative to the standard tier (batch runs bigger batches)."""


def synthetic_tables(size: str, seed: int = 0, peak_ratio: float = 3.0) -> PlanningTables:
    """A random instance of ``size``; ``peak_ratio`` = peak demand at reference prices / what the
    fleet serves at standard-tier rates."""
    spec = SIZES[size]
    rng = np.random.default_rng(seed)
    periods = spec.periods

    # Pools: system type x region, accelerators split by random weights.
    pool_types = [st for _ in range(spec.regions) for st in spec.system_types]
    pool_ids = tuple(
        f"{SYSTEM_TYPES[st].name}-r{r}" for r in range(spec.regions) for st in spec.system_types
    )
    weights = rng.uniform(0.5, 1.5, len(pool_types))
    weights[[i for i, st in enumerate(pool_types) if SYSTEM_TYPES[st].wafer]] *= 0.3
    acc = spec.accelerators * weights / weights.sum()
    count = np.maximum(
        1, np.round(acc / [SYSTEM_TYPES[st].accelerators for st in pool_types])
    ).astype(np.int64)
    availability = rng.uniform(0.95, 0.99, (len(pool_types), periods))
    dips = rng.random((len(pool_types), periods)) < 0.02
    availability[dips] *= 0.8
    systems = np.floor(count[:, None] * availability).astype(np.int64)
    usd_per_system_hour = np.array(
        [SYSTEM_TYPES[st].usd_per_hour for st in pool_types]
    ) * rng.uniform(0.9, 1.1, len(pool_types))

    # Families and variants: flagship v, plus a distilled variant for the first `distilled`.
    family_ids = tuple(f"fam{f}" for f in range(spec.families))
    variant_ids: list[str] = []
    flagship, distilled = [], []
    for f in range(spec.families):
        flagship.append(len(variant_ids))
        variant_ids.append(f"fam{f}-flagship")
        if f < spec.distilled:
            distilled.append(len(variant_ids))
            variant_ids.append(f"fam{f}-distilled")
        else:
            distilled.append(-1)
    usd_per_token_base = 10 ** rng.uniform(np.log10(0.6e-6), np.log10(30e-6), spec.families)
    # Standard tokens/s per 8xH100-equivalent: cheaper models are smaller and faster.
    rate_base = 2_500.0 * (15e-6 / usd_per_token_base) ** 0.6

    # Offers and combos.
    o_fam, o_tier, o_var, o_mult = [], [], [], []
    combo_family, combo_offer, reference = [], [], []
    for f in range(spec.families):
        fast = (
            [(flagship[f], m) for m in FAST_FLAGSHIP] + [(distilled[f], m) for m in FAST_DISTILLED]
            if distilled[f] >= 0
            else [(flagship[f], m) for m in FAST_ONLY_FLAGSHIP]
        )
        ids: dict[str, list[int]] = {}
        for tier, menu in (
            ("batch", [(flagship[f], m) for m in BATCH]),
            ("standard", [(flagship[f], m) for m in STANDARD]),
            ("fast", fast),
        ):
            ids[tier] = []
            for v, m in menu:
                ids[tier].append(len(o_fam))
                o_fam.append(f)
                o_tier.append(TIERS.index(tier))
                o_var.append(v)
                o_mult.append(m)
        for ob in ids["batch"]:
            for os_ in ids["standard"]:
                for of in ids["fast"]:
                    if (
                        o_var[of] == flagship[f]
                        and o_mult[of] == 6.0
                        and o_mult[os_] == 1.0
                        and (o_mult[ob] == 0.5)
                    ):
                        reference.append(len(combo_family))
                    combo_family.append(f)
                    combo_offer.append((ob, os_, of))
    o_fam_a = np.array(o_fam, dtype=np.int64)
    o_mult_a = np.array(o_mult)
    price = (usd_per_token_base[o_fam_a] * o_mult_a)[:, None] * np.ones(periods)
    offers = Offers(
        family=o_fam_a,
        tier=np.array(o_tier, dtype=np.int64),
        variant=np.array(o_var, dtype=np.int64),
        multiplier=o_mult_a,
        usd_per_output_token=price,
    )
    combo_family_a = np.array(combo_family, dtype=np.int64)
    combo_offer_a = np.array(combo_offer, dtype=np.int64)

    # Candidates: (family, tier, variant, pool), 1-2 configurations each.
    c_pool, c_fam, c_tier, c_var, c_spr, c_rate = [], [], [], [], [], []
    for f in range(spec.families):
        products = [(k, flagship[f]) for k in range(3)]
        if distilled[f] >= 0:
            products.append((2, distilled[f]))
        for k, v in products:
            is_distilled = v == distilled[f]
            for p, st in enumerate(pool_types):
                sysd = SYSTEM_TYPES[st]
                if sysd.wafer and not is_distilled:
                    continue
                n_cfg = 1 + int(rng.random() < spec.configs_per_product - 1.0)
                for _ in range(n_cfg):
                    if sysd.wafer:
                        spr = 4
                        per_replica = rate_base[f] * 3.0 * rng.uniform(0.8, 1.2)
                    else:
                        big = usd_per_token_base[f] > 8e-6 and sysd.speed < 2.0
                        spr = 2 if big else 1
                        mult = (0.5 if is_distilled else 1.0) * TIER_RATE[TIERS[k]]
                        if is_distilled:
                            mult = 2.0 * TIER_RATE["fast"]
                        per_replica = (
                            rate_base[f] * sysd.speed * spr * mult * rng.uniform(0.75, 1.1)
                        )
                    c_pool.append(p)
                    c_fam.append(f)
                    c_tier.append(k)
                    c_var.append(v)
                    c_spr.append(spr)
                    c_rate.append(per_replica)
    c_pool_a = np.array(c_pool, dtype=np.int64)
    c_spr_a = np.array(c_spr, dtype=np.int64)
    rate = np.array(c_rate)[:, None] * np.ones(periods)
    candidates = Candidates(
        pool=c_pool_a,
        family=np.array(c_fam, dtype=np.int64),
        tier=np.array(c_tier, dtype=np.int64),
        variant=np.array(c_var, dtype=np.int64),
        systems_per_replica=c_spr_a,
        tokens_per_s_per_replica=rate,
        max_replicas=systems.max(axis=1)[c_pool_a] // c_spr_a,
    )

    # MNL demand. Utilities: u = a_k - b_k * multiplier (- quality gap for distilled).
    t = np.arange(periods)
    diurnal = 1.0 + 0.45 * np.sin(2 * np.pi * (t % 24 - 9) / 24)
    weekly = np.where((t // 24) % 7 >= 5, 0.75, 1.0)
    shape = diurnal * weekly * rng.uniform(0.95, 1.05, periods)
    a = {"batch": 0.3, "standard": 1.8, "fast": 1.0}
    b = {"batch": 2.5, "standard": 1.8, "fast": 0.22}
    quality_gap = 0.6
    market_weight = rng.uniform(0.5, 1.5, spec.families)
    market_weight /= market_weight.sum()
    # Fleet's standard-tier capacity, per family share, in tokens/s.
    fleet_tokens_per_s = float(
        sum(
            systems[p].mean() * SYSTEM_TYPES[st].speed
            for p, st in enumerate(pool_types)
            if not SYSTEM_TYPES[st].wafer
        )
    )
    n_combos = combo_family_a.shape[0]
    tokens = np.zeros((n_combos, 3, periods))
    for f in range(spec.families):
        ms = np.flatnonzero(combo_family_a == f)
        util = np.zeros((ms.shape[0], 3))
        for k, tier in enumerate(TIERS):
            o = combo_offer_a[ms, k]
            util[:, k] = a[tier] - b[tier] * o_mult_a[o]
            if tier == "fast":
                util[:, k] -= np.where(offers.variant[o] == distilled[f], quality_gap, 0.0)
        ex = np.exp(util)
        share = ex / (1.0 + ex.sum(axis=1, keepdims=True))
        ref_share = share[ms == reference[f]][0]
        # Market size so that peak reference demand uses peak_ratio x this family's fleet share,
        # counting each tier's demand in standard-tier-equivalent tokens/s.
        equiv = float(sum(ref_share[k] / TIER_RATE[TIERS[k]] for k in range(3)))
        peak_market = peak_ratio * market_weight[f] * fleet_tokens_per_s * rate_base[f] / equiv
        market = peak_market * shape / shape.max()
        tokens[ms] = share[:, :, None] * market[None, None, :]

    demand = Demand(
        family_ids=family_ids,
        tier_ids=TIERS,
        variant_ids=tuple(variant_ids),
        offers=offers,
        combo_family=combo_family_a,
        combo_offer=combo_offer_a,
        tokens_per_s=tokens,
        reference_combo=np.array(reference, dtype=np.int64),
        window_periods=np.array([24 if periods >= 24 else 1, 1, 1], dtype=np.int64),
        unserved_penalty_usd_per_output_token=np.zeros(3),
    )
    inventory = Inventory(
        pool_ids=pool_ids, systems_available=systems, usd_per_system_hour=usd_per_system_hour
    )
    return PlanningTables(inventory=inventory, demand=demand, candidates=candidates)


def accelerators(tables: PlanningTables) -> int:
    """Accelerators in the synthetic fleet (pool ids name their system type)."""
    per = {st.name: st.accelerators for st in SYSTEM_TYPES}
    counts = tables.inventory.systems_available.max(axis=1)
    return int(
        sum(
            per[pid.rsplit("-", 1)[0]] * n
            for pid, n in zip(tables.inventory.pool_ids, counts.tolist(), strict=True)
        )
    )
