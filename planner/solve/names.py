"""Domain-keyed names for the model's columns, for dumps and solver logs that read like the
business: ``replicas[pool=h200-us-east,cand=17,period=5]``, ``served[family=..,tier=..,...]``,
``moved[...]`` (reconfiguration), ``combo[family=..,combo=..]``."""

from __future__ import annotations

import numpy as np

from planner.solve.model import MOVED, Structure


def column_names(st: Structure) -> tuple[str, ...]:
    """Domain-keyed names, e.g. ``replicas[pool=..,cand=17,period=5]``, ``served[...]``."""
    t = st.tables
    pools, cand, offers, d = t.inventory.pool_ids, t.candidates, t.demand.offers, t.demand
    names: list[str] = []
    xc, xt = np.nonzero(st.x_col >= 0)
    order = np.argsort(st.x_col[xc, xt])
    for c, p in zip(xc[order].tolist(), xt[order].tolist(), strict=True):
        names.append(f"replicas[pool={pools[cand.pool[c]]},cand={c},period={p}]")
    for o, p in zip(st.s_offer.tolist(), st.s_period.tolist(), strict=True):
        names.append(
            f"served[family={d.family_ids[offers.family[o]]},tier={d.tier_ids[offers.tier[o]]},"
            f"variant={d.variant_ids[offers.variant[o]]},mult={offers.multiplier[o]:g},"
            f"offer={o},period={p}]"
        )
    moved = np.flatnonzero(st.col_kind == MOVED)
    if moved.size:
        # moved columns follow the order of their creation: (cand, period) nonzero order
        dc, dt = np.nonzero((st.x_col[:, 1:] >= 0) | (st.x_col[:, :-1] >= 0))
        for c, p in zip(dc.tolist(), (dt + 1).tolist(), strict=True):
            names.append(f"moved[pool={pools[cand.pool[c]]},cand={c},period={p}]")
    return tuple(names)


def combo_names(st: Structure) -> tuple[str, ...]:
    d = st.tables.demand
    return tuple(
        f"combo[family={d.family_ids[f]},combo={m}]" for m, f in enumerate(d.combo_family.tolist())
    )
