"""Domain-keyed names for the model's columns, for dumps and solver logs that read like the
business: ``replicas[pool=h200-us-east,cand=17,period=5]``, ``served[family=..,tier=..,...]``,
``moved[...]`` (reconfiguration), ``combo[family=..,combo=..]``."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from planner.solve.formulation import MOVED
from planner.solve.tables import Demand, PlanningTables

IntArray = npt.NDArray[np.int64]


def column_names(
    t: PlanningTables, x_col: IntArray, s_offer: IntArray, s_period: IntArray, col_kind: IntArray
) -> tuple[str, ...]:
    """Domain-keyed names, e.g. ``replicas[pool=..,cand=17,period=5]``, ``served[...]``, of the
    columns ``planner.solve.formulation.columns`` lays out (x, s, d)."""
    pools, cand, offers, d = t.inventory.pool_ids, t.candidates, t.demand.offers, t.demand
    names: list[str] = []
    xc, xt = np.nonzero(x_col >= 0)
    order = np.argsort(x_col[xc, xt])
    for c, p in zip(xc[order].tolist(), xt[order].tolist(), strict=True):
        names.append(f"replicas[pool={pools[cand.pool[c]]},cand={c},period={p}]")
    for o, p in zip(s_offer.tolist(), s_period.tolist(), strict=True):
        names.append(
            f"served[family={d.family_ids[offers.family[o]]},tier={d.tier_ids[offers.tier[o]]},"
            f"variant={d.variant_ids[offers.variant[o]]},mult={offers.multiplier[o]:g},"
            f"offer={o},period={p}]"
        )
    moved = np.flatnonzero(col_kind == MOVED)
    if moved.size:
        # moved columns follow the order of their creation: (cand, period) nonzero order
        dc, dt = np.nonzero((x_col[:, 1:] >= 0) | (x_col[:, :-1] >= 0))
        for c, p in zip(dc.tolist(), (dt + 1).tolist(), strict=True):
            names.append(f"moved[pool={pools[cand.pool[c]]},cand={c},period={p}]")
    return tuple(names)


def combo_names(d: Demand) -> tuple[str, ...]:
    """``combo[family=..,combo=..]`` per combo column z."""
    return tuple(
        f"combo[family={d.family_ids[f]},combo={m}]" for m, f in enumerate(d.combo_family.tolist())
    )
