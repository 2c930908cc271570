"""Operating points of a plan on the throughput-vs-interactivity frontier, for the frontier chart.

For the (family, serving model, system) triples that carry the most served tokens, evaluate the
performance model over the scenario's search grid (every valid layout x precision x speculative
option, batch caps from the scenario's plus a denser ladder so the curve reads smoothly) with the
family's token profile, exactly as ``planner.build.pipeline`` does; keep the configurations that
fit; take the Pareto frontier (no other configuration is both faster per user and higher in
throughput per device); and place each configuration the plan chose on it, per tier. Disaggregated
units (``options.search.disaggregated``) are not on these aggregated curves and are not placed.

Needs the scenario (pool -> system, the family's token profile, the search options) and the
catalog: a plan read back from JSON alone has neither, and its report has no frontier chart.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet.catalog import PRECISIONS, Catalog
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.engines import engine_arrays
from fleet.perf.frontier import pareto_mask
from fleet.perf.grid import evaluate_grid
from fleet.perf.types import FloatArray
from planner.build.pipeline import token_profile
from planner.plan.schema import Plan
from planner.scenario.schema import Scenario

DENSE_BATCHES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


@dataclass(frozen=True, slots=True)
class Point:
    """A configuration the plan chose, where it sits on its curve."""

    tier: str
    label: str
    """``tp8 fp8 b16 spec3``."""
    tokens_per_s_per_user: float
    tokens_per_s_per_device: float
    served_share: float
    """Share of the curve's served tokens this configuration carries."""


@dataclass(frozen=True, slots=True)
class Curve:
    family: str
    model: str
    system: str
    isl: int
    """Whole prompt, prefix-cached tokens included."""
    osl: int
    served_output_tokens_per_s: float
    """Mean over the horizon of what the plan serves with this (model, system)."""
    grid_user: FloatArray
    grid_device: FloatArray
    frontier_user: FloatArray
    """Ascending per-user speed along the frontier."""
    frontier_device: FloatArray
    points: tuple[Point, ...]
    tier_floors: tuple[tuple[str, float], ...]
    """(tier, tokens/s per user floor) of the tiers chosen on this curve that have one."""
    engine: str = "any"
    """The serving engine whose factors the curve is evaluated with."""


def _label(tp: int, pp: int, dp: int, ep: int, precision: str, batch: int, spec: int) -> str:
    layout = f"tp{tp}" + (f" pp{pp}" if pp > 1 else "") + (f" dp{dp}" if dp > 1 else "")
    layout += f" ep{ep}" if ep > 1 else ""
    return f"{layout} {precision} b{batch}" + (f" spec{spec}" if spec else "")


def operating_curves(
    plan: Plan,
    scenario: Scenario,
    catalog: Catalog,
    *,
    arrays: CatalogArrays | None = None,
    max_curves: int = 4,
) -> list[Curve]:
    """Curves of the ``max_curves`` busiest (family, model, system, engine) of the plan."""
    system_of = {p.id: p.system for p in scenario.fleet.pools}
    demand_of = {d.family: d for d in scenario.demand}
    served: dict[tuple[str, str, str, str], float] = {}
    for a in plan.assignments:
        key = (a.family, a.variant, system_of[a.pool], a.engine)
        served[key] = served.get(key, 0.0) + a.served_tokens_per_s / max(plan.periods, 1)
    busiest = sorted(served, key=lambda k: -served[k])[:max_curves]
    if not busiest:
        return []
    arrays = arrays if arrays is not None else build_arrays(catalog)
    search = scenario.options.search
    batches = tuple(sorted(set(search.batch_caps) | set(DENSE_BATCHES)))
    curves = []
    for family, model, system, engine in busiest:
        d = demand_of[family]
        isl, cached = token_profile(d)
        osl = max(1, round(d.mean_output_tokens))
        configs, est = evaluate_grid(
            catalog,
            engine_arrays(catalog, arrays, engine),
            model,
            system,
            batches=batches,
            precisions=search.precisions,
            isl=isl,
            osl=osl,
            prefix_cached_tokens=cached,
            spec=tuple((o.draft_tokens, o.acceptance) for o in search.speculative),
        )
        fits = np.flatnonzero(est.fits)
        user = est.tokens_per_s_per_user[fits]
        device = est.tokens_per_s_per_device[fits]
        on_front = np.flatnonzero(pareto_mask(user, device))
        front = on_front[np.argsort(user[on_front], kind="stable")]
        index = {
            (
                int(configs.tp[i]),
                int(configs.pp[i]),
                int(configs.dp[i]),
                int(configs.ep[i]),
                PRECISIONS[int(configs.weight_precision[i])],
                int(configs.batch[i]),
                int(configs.spec_draft_tokens[i]),
            ): i
            for i in fits.tolist()
        }
        chosen: dict[tuple[str, tuple[int, int, int, int, str, int, int]], float] = {}
        for a in plan.assignments:
            if (a.family, a.variant, system_of[a.pool], a.engine) != (
                family,
                model,
                system,
                engine,
            ):
                continue
            if a.disaggregated:  # a unit, not an aggregated replica of this curve
                continue
            layout = (a.tp, a.pp, a.dp, a.ep, a.precision, a.batch_cap, a.spec_draft_tokens)
            chosen[(a.tier, layout)] = chosen.get((a.tier, layout), 0.0) + a.served_tokens_per_s
        total = sum(chosen.values()) or 1.0
        points = tuple(
            Point(
                tier=tier,
                label=_label(*key),
                tokens_per_s_per_user=float(est.tokens_per_s_per_user[index[key]]),
                tokens_per_s_per_device=float(est.tokens_per_s_per_device[index[key]]),
                served_share=tokens / total,
            )
            for (tier, key), tokens in sorted(chosen.items(), key=lambda kv: -kv[1])
            if key in index
        )
        floors = {t.id: t.min_tokens_per_s_per_user for t in scenario.tiers}
        tier_floors = tuple(
            (tier, float(floor))
            for tier in dict.fromkeys(p.tier for p in points)
            if (floor := floors.get(tier)) is not None
        )
        curves.append(
            Curve(
                family=family,
                model=model,
                system=system,
                isl=isl,
                osl=osl,
                served_output_tokens_per_s=served[(family, model, system, engine)],
                grid_user=user,
                grid_device=device,
                frontier_user=user[front],
                frontier_device=device[front],
                points=points,
                tier_floors=tier_floors,
                engine=engine,
            )
        )
    return curves
