"""Tiny planning instances for the solver tests, built directly as PlanningTables, and an
independent brute-force optimum (every combo choice x every integer replica assignment).

The brute force shares no code with ``planner.solve``: for fixed combos and replicas the served
tokens/s are min(demand, capacity) per product and period -- per block for a windowed tier, placed
on the block's best-paying periods -- and the value is revenue - cost - penalty.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from planner.solve.tables import Candidates, Demand, Inventory, Offers, PlanningTables


def tiny_tables(
    seed: int,
    *,
    window: bool = False,
    penalty: bool = False,
    varying_prices: bool = False,
    max_assignments: int = 4000,
) -> PlanningTables:
    rng = np.random.default_rng(seed)
    n_fam = int(rng.integers(1, 3))
    n_tiers = int(rng.integers(2, 4))
    n_pools = int(rng.integers(1, 3))
    n_opts = int(rng.integers(2, 4))
    periods = int(rng.integers(2, 5))
    variant_ids = [f"f{f}-main" for f in range(n_fam)] + ["f0-mini"]
    o_fam, o_tier, o_var, o_mult = [], [], [], []
    by_fk: dict[tuple[int, int], list[int]] = {}
    for f in range(n_fam):
        for k in range(n_tiers):
            by_fk[(f, k)] = []
            for i in range(n_opts):
                mini = f == 0 and k == n_tiers - 1 and i == n_opts - 1
                by_fk[(f, k)].append(len(o_fam))
                o_fam.append(f)
                o_tier.append(k)
                o_var.append(n_fam if mini else f)
                o_mult.append(float(1.0 + 0.5 * i + k))
    n_off = len(o_fam)
    base = rng.uniform(1.0, 3.0, n_fam)
    price = np.array([base[o_fam[o]] * o_mult[o] for o in range(n_off)])[:, None] * np.ones(periods)
    if varying_prices:
        price = price * rng.uniform(0.7, 1.3, (n_off, periods))
    combo_family, combo_offer = [], []
    for f in range(n_fam):
        all_combos = list(itertools.product(*[by_fk[(f, k)] for k in range(n_tiers)]))
        pick = rng.permutation(len(all_combos))[: int(rng.integers(2, 6))]
        for i in sorted(pick.tolist()):
            combo_family.append(f)
            combo_offer.append(all_combos[i])
    combo_family_a = np.array(combo_family, dtype=np.int64)
    combo_offer_a = np.array(combo_offer, dtype=np.int64)
    n_combos = len(combo_family)
    mult = np.array(o_mult)[combo_offer_a]  # (combos, tiers)
    tokens = (
        rng.uniform(1.0, 12.0, (n_combos, n_tiers, 1))
        * np.exp(-0.3 * mult)[:, :, None]
        * rng.uniform(0.3, 1.7, (n_combos, n_tiers, periods))
    )
    # Candidates: 2-3, each for a (family, tier, variant) that some offer sells.
    keys = sorted({(o_fam[o], o_tier[o], o_var[o]) for o in range(n_off)})
    n_cand = int(rng.integers(2, 4))
    chosen = [keys[i] for i in rng.integers(0, len(keys), n_cand)]
    systems = rng.integers(1, 4, (n_pools, periods)).astype(np.int64)
    pool = rng.integers(0, n_pools, n_cand).astype(np.int64)
    spr = rng.integers(1, 3, n_cand).astype(np.int64)
    max_rep = np.minimum(2, systems.max(axis=1)[pool] // spr).astype(np.int64)
    # Keep the joint enumeration small: shorten the horizon if needed.
    while periods > 2 and int(np.prod((max_rep + 1.0) ** periods)) > max_assignments:
        periods -= 1
    systems, price, tokens = systems[:, :periods], price[:, :periods], tokens[:, :, :periods]
    max_rep = np.minimum(max_rep, systems.max(axis=1)[pool] // spr).astype(np.int64)
    rate = rng.uniform(2.0, 9.0, (n_cand, 1)) * rng.uniform(0.8, 1.2, (n_cand, periods))
    windows = np.ones(n_tiers, dtype=np.int64)
    if window:
        windows[0] = periods
    pen = np.zeros(n_tiers)
    if penalty:
        pen[rng.integers(0, n_tiers)] = float(rng.uniform(0.1, 1.0))
    demand = Demand(
        family_ids=tuple(f"fam{f}" for f in range(n_fam)),
        tier_ids=tuple(f"tier{k}" for k in range(n_tiers)),
        variant_ids=tuple(variant_ids),
        offers=Offers(
            family=np.array(o_fam, dtype=np.int64),
            tier=np.array(o_tier, dtype=np.int64),
            variant=np.array(o_var, dtype=np.int64),
            multiplier=np.array(o_mult),
            usd_per_output_token=price / 3600.0,
        ),
        combo_family=combo_family_a,
        combo_offer=combo_offer_a,
        tokens_per_s=tokens,
        reference_combo=np.array(
            [np.flatnonzero(combo_family_a == f)[0] for f in range(n_fam)], dtype=np.int64
        ),
        window_periods=windows,
        unserved_penalty_usd_per_output_token=pen / 3600.0,
    )
    candidates = Candidates(
        pool=pool,
        family=np.array([k[0] for k in chosen], dtype=np.int64),
        tier=np.array([k[1] for k in chosen], dtype=np.int64),
        variant=np.array([k[2] for k in chosen], dtype=np.int64),
        systems_per_replica=spr,
        tokens_per_s_per_replica=rate,
        max_replicas=max_rep,
    )
    inventory = Inventory(
        pool_ids=tuple(f"pool{p}" for p in range(n_pools)),
        systems_available=systems,
        usd_per_system_hour=rng.uniform(0.5, 6.0, n_pools),
    )
    return PlanningTables(inventory=inventory, demand=demand, candidates=candidates)


def with_systems(tables: PlanningTables, systems: np.ndarray) -> PlanningTables:
    """The same instance with other inventory (max_replicas recomputed from it)."""
    cand = tables.candidates
    max_rep = np.minimum(2, systems.max(axis=1)[cand.pool] // cand.systems_per_replica)
    return replace(
        tables,
        inventory=replace(tables.inventory, systems_available=systems),
        candidates=replace(cand, max_replicas=max_rep.astype(np.int64)),
    )


def brute_force(tables: PlanningTables, reconfiguration_limit: float | None = None) -> float:
    """The optimal objective by enumeration."""
    inv, d, cand = tables.inventory, tables.demand, tables.candidates
    periods = tables.periods
    n_cand = cand.pool.shape[0]
    n_fam, n_tiers = len(d.family_ids), len(d.tier_ids)
    upper = np.minimum(
        cand.max_replicas[:, None],
        inv.systems_available[cand.pool] // cand.systems_per_replica[:, None],
    )
    ranges = [range(int(upper[c, t]) + 1) for c in range(n_cand) for t in range(periods)]
    xs = np.array(list(itertools.product(*ranges)), dtype=np.int64).reshape(-1, n_cand, periods)
    used = np.zeros((xs.shape[0], len(inv.pool_ids), periods))
    for c in range(n_cand):
        used[:, cand.pool[c], :] += cand.systems_per_replica[c] * xs[:, c, :]
    ok = (used <= inv.systems_available[None]).all(axis=(1, 2))
    if reconfiguration_limit is not None and periods > 1:
        moved = np.zeros_like(used)
        for c in range(n_cand):
            moved[:, cand.pool[c], 1:] += cand.systems_per_replica[c] * np.abs(
                np.diff(xs[:, c, :], axis=1)
            )
        limit = 2 * reconfiguration_limit * inv.systems_available[None, :, 1:]
        ok &= (moved[:, :, 1:] <= limit + 1e-9).all(axis=(1, 2))
    xs = xs[ok]
    cost = np.zeros(xs.shape[0])
    for c in range(n_cand):
        cost += (
            inv.usd_per_system_hour[cand.pool[c]]
            * cand.systems_per_replica[c]
            * xs[:, c, :].sum(axis=1)
            * tables.period_hours
        )
    unit = 3600.0 * tables.period_hours
    fam_combos = [np.flatnonzero(d.combo_family == f) for f in range(n_fam)]
    best = -np.inf
    for choice in itertools.product(*fam_combos):
        total = -cost
        for f, m in enumerate(choice):
            for k in range(n_tiers):
                o = int(d.combo_offer[m, k])
                if o < 0:
                    continue
                v = int(d.offers.variant[o])
                serving = [
                    c
                    for c in range(n_cand)
                    if cand.family[c] == f and cand.tier[c] == k and cand.variant[c] == v
                ]
                cap = np.zeros((xs.shape[0], periods))
                for c in serving:
                    cap += cand.tokens_per_s_per_replica[c][None, :] * xs[:, c, :]
                dem = d.tokens_per_s[m, k]
                value = (
                    d.offers.usd_per_output_token[o] + d.unserved_penalty_usd_per_output_token[k]
                )
                w = int(d.window_periods[k])
                served_value = np.zeros(xs.shape[0])
                for start in range(0, periods, w):
                    ts = list(range(start, min(start + w, periods)))
                    left = np.full(xs.shape[0], dem[ts].sum())
                    for t in sorted(ts, key=lambda t: -value[t]):
                        if value[t] <= 0:
                            break
                        take = np.minimum(cap[:, t], left)
                        served_value += value[t] * take * unit
                        left -= take
                penalty = d.unserved_penalty_usd_per_output_token[k] * dem.sum() * unit
                total = total + served_value - penalty
        best = max(best, float(total.max()))
    return best
