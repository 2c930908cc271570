"""The throughput-vs-interactivity Pareto frontier of one model on one system.

Evaluates every layout x precision x batch (x speculative option) of ``fleet.perf.grid`` and keeps
the configurations that fit and that no other configuration beats on both tokens/s per device
(cost efficiency) and tokens/s per user (interactivity). The planner reuses ``pareto_mask`` to
prune dominated candidates; ``frontier`` is what ``farebox frontier`` prints and plots.
With ``disaggregated=True`` the frontier is of disaggregated prefill/decode units
(``fleet.perf.disagg``) formed from the same grid: compare it with the aggregated one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fleet.catalog import PRECISIONS, Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.grid import evaluate_grid
from fleet.perf.types import BoolArray, Configs, Estimate, FloatArray

DEFAULT_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True, slots=True)
class Frontier:
    """Frontier rows, sorted by tokens/s per user (fastest first)."""

    configs: Configs
    """The (decode) replica's configuration."""
    estimate: Estimate
    layouts: tuple[str, ...] = ()
    """Per row of a disaggregated frontier, the unit's layout (``fleet.perf.disagg.label``)."""

    def __len__(self) -> int:
        return len(self.configs)


def pareto_mask(per_user: FloatArray, per_device: FloatArray) -> BoolArray:
    """Rows not dominated (>= on both, > on one) by any other row; NaN rows are dominated."""
    n = per_user.shape[0]
    keep = np.zeros(n, dtype=bool)
    valid = np.isfinite(per_user) & np.isfinite(per_device)
    idx = np.flatnonzero(valid)
    # Fastest per user first; ties broken by per-device descending.
    order = idx[np.lexsort((-per_device[idx], -per_user[idx]))]
    best = -np.inf
    for i in order:
        if per_device[i] > best:
            keep[i] = True
            best = per_device[i]
    return keep


def supported_precisions(catalog: Catalog, system_id: str) -> tuple[str, ...]:
    acc = catalog.accelerator(catalog.system(system_id).accelerator)
    return tuple(p for p in PRECISIONS if acc.runs(p))


def frontier_size(
    catalog: Catalog,
    model_id: str,
    system_id: str,
    *,
    precisions: Sequence[str] | None = None,
    batches: Sequence[int] = DEFAULT_BATCHES,
    spec: Sequence[tuple[int, float]] = ((0, 0.0),),
    disaggregated: bool = False,
    own_mtp: bool = True,
) -> int:
    """Configurations ``frontier`` evaluates with the same arguments (its grid, with the model's
    own MTP draft unless ``own_mtp`` is False, plus the most units it can form when
    ``disaggregated``), counted from the lists' sizes without evaluating anything."""
    from fleet.perf.disagg import units_bound  # imports this module
    from fleet.perf.grid import grid_size, model_spec

    precs = tuple(precisions) if precisions else supported_precisions(catalog, system_id)
    options = model_spec(catalog, model_id, tuple(spec)) if own_mtp else tuple(spec)
    n = grid_size(catalog, model_id, system_id, batches=batches, precisions=precs, spec=options)
    return n + (units_bound(catalog, system_id, precs) if disaggregated else 0)


def frontier(
    catalog: Catalog,
    arrays: CatalogArrays,
    model_id: str,
    system_id: str,
    *,
    isl: int,
    osl: int,
    precisions: Sequence[str] | None = None,
    batches: Sequence[int] = DEFAULT_BATCHES,
    spec: Sequence[tuple[int, float]] = ((0, 0.0),),
    disaggregated: bool = False,
    own_mtp: bool = True,
) -> Frontier:
    """Pareto frontier of tokens/s per device vs tokens/s per user (configurations that fit;
    disaggregated units instead of replicas with ``disaggregated``); ``own_mtp`` False leaves out
    the model's own MTP draft (``fleet.perf.grid.model_spec``)."""
    precs = tuple(precisions) if precisions else supported_precisions(catalog, system_id)
    configs, est = evaluate_grid(
        catalog,
        arrays,
        model_id,
        system_id,
        batches=batches,
        precisions=precs,
        isl=isl,
        osl=osl,
        spec=spec,
        own_mtp=own_mtp,
    )
    units = None
    if disaggregated:
        from fleet.perf.disagg import form_units  # imports this module

        units = form_units(arrays, configs, est)
        configs, est = units.configs, units.estimate
    fits = np.flatnonzero(est.fits)
    keep = fits[pareto_mask(est.tokens_per_s_per_user[fits], est.tokens_per_s_per_device[fits])]
    order = keep[np.argsort(-est.tokens_per_s_per_user[keep], kind="stable")]
    layouts: tuple[str, ...] = ()
    if units is not None:
        from fleet.perf.disagg import label

        layouts = tuple(label(units, int(i)) for i in order)
    return Frontier(configs=configs.take(order), estimate=est.take(order), layouts=layouts)
