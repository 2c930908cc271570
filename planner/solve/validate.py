"""Shape checks on the tables (a mismatch is a bug upstream, raised as ValueError naming the
field) and plain-words notes on products no candidate can serve."""

from __future__ import annotations

import numpy as np

from planner.solve.tables import PlanningTables


def check_tables(tables: PlanningTables) -> None:
    inv, d, cand = tables.inventory, tables.demand, tables.candidates
    n_pools, periods = len(inv.pool_ids), tables.periods
    n_off, n_combos = d.offers.family.shape[0], d.combo_family.shape[0]
    n_fam, n_tiers, n_cand = len(d.family_ids), len(d.tier_ids), cand.pool.shape[0]
    expect = {
        "inventory.systems_available": (inv.systems_available, (n_pools, periods)),
        "inventory.usd_per_system_hour": (inv.usd_per_system_hour, (n_pools,)),
        "demand.offers.usd_per_output_token": (d.offers.usd_per_output_token, (n_off, periods)),
        "demand.combo_offer": (d.combo_offer, (n_combos, n_tiers)),
        "demand.tokens_per_s": (d.tokens_per_s, (n_combos, n_tiers, periods)),
        "demand.reference_combo": (d.reference_combo, (n_fam,)),
        "demand.window_periods": (d.window_periods, (n_tiers,)),
        "demand.unserved_penalty_usd_per_output_token": (
            d.unserved_penalty_usd_per_output_token,
            (n_tiers,),
        ),
        "candidates.tokens_per_s_per_replica": (cand.tokens_per_s_per_replica, (n_cand, periods)),
        "candidates.max_replicas": (cand.max_replicas, (n_cand,)),
        "candidates.systems_per_replica": (cand.systems_per_replica, (n_cand,)),
    }
    for name, (arr, shape) in expect.items():
        if np.shape(arr) != shape:
            raise ValueError(f"{name} has shape {np.shape(arr)}, expected {shape}")
    if n_cand and (cand.systems_per_replica < 1).any():
        raise ValueError("candidates.systems_per_replica must be >= 1")
    if (d.tokens_per_s < 0).any() or (cand.tokens_per_s_per_replica < 0).any():
        raise ValueError("tokens_per_s must be >= 0")
    if (inv.systems_available < 0).any():
        raise ValueError("inventory.systems_available must be >= 0")
    for f in range(n_fam):
        if not (d.combo_family == f).any():
            continue  # reported by the solver as infeasible, in words
        ref = int(d.reference_combo[f])
        if not (0 <= ref < n_combos) or d.combo_family[ref] != f:
            raise ValueError(f"demand.reference_combo[{f}] is not a combo of family {f}")


def unservable(tables: PlanningTables) -> list[str]:
    """Offers with demand that no candidate of their (family, tier, variant) can serve."""
    d, cand = tables.demand, tables.candidates
    offers = d.offers
    notes = []
    have = set(zip(cand.family.tolist(), cand.tier.tolist(), cand.variant.tolist(), strict=True))
    demanded = np.zeros(offers.family.shape[0], dtype=bool)
    for k in range(len(d.tier_ids)):
        col = d.combo_offer[:, k]
        ok = (col >= 0) & (d.tokens_per_s[:, k, :].sum(axis=1) > 0)
        demanded[col[ok]] = True
    seen = set()
    for o in np.flatnonzero(demanded):
        key = (int(offers.family[o]), int(offers.tier[o]), int(offers.variant[o]))
        if key in have or key in seen:
            continue
        seen.add(key)
        f, k, v = key
        notes.append(
            f"no configuration of {d.variant_ids[v]} on any pool meets the {d.tier_ids[k]} "
            f"tier's SLOs for family {d.family_ids[f]}: its {d.tier_ids[k]} demand goes unserved"
        )
    return notes
