"""Recipes of a published curve: the serving configurations the benchmark actually ran.

``Recipe`` / ``recipe_frontier``: aggregated serving instances (devices per instance swept, the
largest concurrency at each, data-parallel attention or not); the frontier of those
configurations only: replicas of a swept device count up to its concurrency, no pipeline stages,
dp > 1 only with data-parallel attention.

``DisaggRecipe`` / ``disaggregated_recipe_frontier``: a published point measured on
disaggregated serving (NVIDIA Dynamo with TensorRT-LLM or SGLang) comes from units of
``prefill_workers`` prefill workers and ``decode_workers`` decode workers of a given size, at a
list of concurrencies; the benchmark's configuration file lists them. Where a point carries them,
``disaggregated_recipe_frontier`` searches those units only: each worker's exact layout (which
farebox's own layout grid may not enumerate, e.g. tensor parallel over two 8-GPU nodes), decode
batches up to the unit's largest concurrency per decode worker, the model's own MTP draft where
the unit ran MTP and no draft where it did not, and the unit assembled by
``fleet.perf.disagg.assemble_units`` with the recipe's worker counts (not the counts farebox
would choose). Both compare farebox with the published figure on the ground it was measured on.

Worker fields follow the configuration file: ``tp`` is the worker's GPU count, ``ep`` the expert
parallel size, ``attention_dp`` data-parallel attention over all ``tp`` GPUs. In farebox's terms
that is tp = 1, dp = ``tp`` with data-parallel attention, else tp = ``tp``, dp = 1; ep = ``ep``;
no pipeline stages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated

import numpy as np
from msgspec import Meta, Struct

from fleet.catalog import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.disagg import Units, assemble_units
from fleet.perf.frontier import Frontier, pareto_mask
from fleet.perf.grid import Layouts, evaluate_grid, grid_configs, model_spec
from fleet.perf.model import estimate
from fleet.perf.types import BoolArray, Configs, Problem

Count = Annotated[int, Meta(gt=0)]
Tokens = Count
Text = Annotated[str, Meta(min_length=1)]
MAX_UNITS = 32
"""Unit shapes per recipe (a configuration file lists about ten per curve)."""
MAX_WORKERS = 64
"""Workers of one kind per unit."""
MAX_GPUS_PER_WORKER = 72
"""A worker's GPUs (an NVL72 rack)."""


class Recipe(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What the published benchmark swept for a point's curve (its serving configurations), so
    that farebox is compared on the same ground: a serving instance (one replica) of ``gpus[i]``
    devices at most ``max_concurrency[i]`` concurrent requests, no pipeline stages, and
    data-parallel attention only when ``attention_dp``."""

    gpus: Annotated[tuple[Tokens, ...], Meta(min_length=1)]
    max_concurrency: Annotated[tuple[Tokens, ...], Meta(min_length=1)]
    attention_dp: bool
    source: Annotated[str, Meta(pattern=r"^https://")]
    note: Text


def recipe_frontier(
    catalog: Catalog,
    arrays: CatalogArrays,
    model: str,
    system_id: str,
    recipe: Recipe,
    *,
    isl: int,
    osl: int,
    precision: str,
    batches: Sequence[int],
    spec: Sequence[tuple[int, float]] = ((0, 0.0),),
    own_mtp: bool = False,
) -> Frontier:
    """The frontier of the configurations the recipe swept (``Recipe``): replicas of one of its
    device counts at up to that count's largest concurrency (which is itself searched), no
    pipeline stages, dp > 1 only with data-parallel attention."""
    caps = set(recipe.max_concurrency)
    capped = sorted({b for b in batches if b <= max(caps)} | caps)
    configs, est = evaluate_grid(
        catalog,
        arrays,
        model,
        system_id,
        batches=capped,
        precisions=(precision,),
        isl=isl,
        osl=osl,
        spec=spec,
        own_mtp=own_mtp,
    )
    swept = np.zeros(len(configs), dtype=bool)
    for gpus, cap in zip(recipe.gpus, recipe.max_concurrency, strict=True):
        swept |= (est.devices_per_replica == gpus) & (configs.batch <= cap)
    swept &= est.fits & (configs.pp == 1)
    if not recipe.attention_dp:
        swept &= configs.dp == 1
    rows = np.flatnonzero(swept)
    keep = rows[pareto_mask(est.tokens_per_s_per_user[rows], est.tokens_per_s_per_device[rows])]
    order = keep[np.argsort(-est.tokens_per_s_per_user[keep], kind="stable")]
    return Frontier(configs=configs.take(order), estimate=est.take(order))


class Worker(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One prefill or decode worker as the configuration file gives it."""

    tp: Annotated[int, Meta(gt=0, le=MAX_GPUS_PER_WORKER)]
    """GPUs of the worker."""
    ep: Count
    """Expert-parallel size."""
    attention_dp: bool
    """Data-parallel attention over the worker's GPUs (else tensor-parallel attention)."""


class DisaggUnit(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A unit shape the benchmark ran: prefill and decode workers, the largest concurrency it was
    measured at, and whether its decode used MTP speculative decoding."""

    prefill_workers: Annotated[int, Meta(gt=0, le=MAX_WORKERS)]
    prefill: Worker
    decode_workers: Annotated[int, Meta(gt=0, le=MAX_WORKERS)]
    decode: Worker
    max_concurrency: Count
    mtp: bool


class DisaggRecipe(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The disaggregated units behind a published curve (every framework the configuration file
    lists for it), with the file and commit read."""

    units: Annotated[tuple[DisaggUnit, ...], Meta(min_length=1, max_length=MAX_UNITS)]
    source: Annotated[str, Meta(pattern=r"^https://")]
    note: Annotated[str, Meta(min_length=1)]


def _layout(worker: Worker) -> tuple[int, int, int, int]:
    """(tp, pp, dp, ep) in farebox's terms."""
    if worker.attention_dp:
        return 1, 1, worker.tp, worker.ep
    return worker.tp, 1, 1, worker.ep


def _text(worker: Worker) -> str:
    tp, _, dp, ep = _layout(worker)
    return f"tp{tp}" + (f" dp{dp}" if dp > 1 else "") + (f" ep{ep}" if ep > 1 else "")


def recipe_batches(recipe: DisaggRecipe, batches: Sequence[int]) -> tuple[int, ...]:
    """Decode batches searched: ``batches`` up to the largest per-worker concurrency of any unit,
    plus each unit's own (its largest concurrency spread over its decode workers)."""
    caps = {math.ceil(u.max_concurrency / u.decode_workers) for u in recipe.units}
    return tuple(sorted({b for b in batches if b <= max(caps)} | caps | {1}))


def disaggregated_recipe_frontier(
    catalog: Catalog,
    arrays: CatalogArrays,
    model: str,
    system_id: str,
    recipe: DisaggRecipe,
    *,
    isl: int,
    osl: int,
    precision: str,
    batches: Sequence[int],
    spec: Sequence[tuple[int, float]] = ((0, 0.0),),
) -> Frontier:
    """The frontier of the recipe's units (module docstring); ``Frontier.layouts`` names each
    row's unit. ``spec`` beyond (0, 0) is offered to every unit (the ``--spec`` probe)."""
    extra = tuple(o for o in spec if o[0] > 0)
    own = tuple(o for o in model_spec(catalog, model, ()) if o[0] > 0)
    options = ((0, 0.0), *own, *extra)
    shapes = sorted({_layout(w) for u in recipe.units for w in (u.prefill, u.decode)})
    lay = Layouts(*(np.asarray(col, dtype=np.int64) for col in zip(*shapes, strict=True)))
    configs = grid_configs(
        catalog,
        model,
        system_id,
        batches=recipe_batches(recipe, batches),
        precisions=(precision,),
        isl=isl,
        osl=osl,
        spec=options,
        layout=lay,
    )
    est = estimate(arrays, configs)
    usable = est.fits & (est.problem == Problem.OK)
    d_rows, p_rows, ks, ms, names = [], [], [], [], []
    for unit in recipe.units:
        cap = math.ceil(unit.max_concurrency / unit.decode_workers)
        drafts = (own or ((0, 0.0),)) if unit.mtp else ((0, 0.0),)
        allowed = np.zeros(len(configs), dtype=bool)
        for k, a in (*drafts, *extra):
            allowed |= (configs.spec_draft_tokens == k) & (
                (k == 0) | (configs.spec_acceptance == a)
            )
        decode = np.flatnonzero(
            usable & _is(configs, unit.decode) & (configs.batch <= cap) & allowed
        )
        prefill = np.flatnonzero(
            usable & _is(configs, unit.prefill) & (configs.spec_draft_tokens == 0)
        )
        if decode.size == 0 or prefill.size == 0:
            continue
        p = int(prefill[np.argmin(configs.batch[prefill])])  # prefill time is batch-free
        d_rows.append(decode)
        p_rows.append(np.full(decode.size, p, dtype=np.int64))
        ks.append(np.full(decode.size, unit.decode_workers, dtype=np.int64))
        ms.append(np.full(decode.size, unit.prefill_workers, dtype=np.int64))
        names.extend(
            [
                f"disaggregated {unit.prefill_workers} prefill x ({_text(unit.prefill)}) + "
                f"{unit.decode_workers} decode x ({_text(unit.decode)})"
            ]
            * decode.size
        )
    if not d_rows:
        none = np.zeros(0, dtype=np.int64)
        return Frontier(configs=configs.take(none), estimate=est.take(none))
    units: Units = assemble_units(
        arrays,
        configs,
        est,
        np.concatenate(d_rows),
        np.concatenate(p_rows),
        np.concatenate(ks),
        np.concatenate(ms),
    )
    e = units.estimate
    keep = pareto_mask(e.tokens_per_s_per_user, e.tokens_per_s_per_device)
    rows = np.flatnonzero(keep)
    order = rows[np.argsort(-e.tokens_per_s_per_user[rows], kind="stable")]
    return Frontier(
        configs=units.configs.take(order),
        estimate=e.take(order),
        layouts=tuple(names[i] for i in order),
    )


def _is(configs: Configs, worker: Worker) -> BoolArray:
    tp, pp, dp, ep = _layout(worker)
    return (configs.tp == tp) & (configs.pp == pp) & (configs.dp == dp) & (configs.ep == ep)
