"""Wire types and conversions of ``POST /v1/estimate`` and ``POST /v1/frontier``.

A request names configurations with catalog ids and plain numbers; ``fleet.perf`` wants index
arrays. ``to_configs`` resolves ids row by row so that an unknown id is reported with its path
(``$.configs[3].model: unknown model ...``), then builds one ``Configs`` for the whole batch;
``rows`` turns the vectorized ``Estimate`` back into one ``EstimateRow`` per configuration, in the
units the faces use (milliseconds, GB, tokens/s, USD per hour and per million output tokens at
the catalog's hourly price, ``fleet.perf.cost``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any

import numpy as np
from msgspec import Meta, Struct

from fleet.catalog import PRECISIONS, Catalog
from fleet.catalog.schema import Id, Precision
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.cost import usd_per_hour_per_replica, usd_per_m_output_tokens
from fleet.perf.engines import engine_note
from fleet.perf.explain import describe_problem
from fleet.perf.frontier import DEFAULT_BATCHES, frontier_size, supported_precisions
from fleet.perf.grid import model_spec, search_options
from fleet.perf.types import Bound, Configs, Estimate, Problem

PositiveInt = Annotated[int, Meta(gt=0, le=1_000_000)]
Degree = Annotated[int, Meta(gt=0, le=4096)]
MAX_ROWS = 4096
MAX_FRONTIER_CONFIGS = 250_000
"""Configurations one frontier request may evaluate (layouts x precisions x batches x
speculative options): ~1 KB of memory each while evaluated, so at most ~0.3 GB and about a second
of CPU. The catalog's widest grid at the defaults (all four precisions, 11 batches, no
speculation) is ~38,000: qwen3-30b-a3b on the groqrack, 857 layouts."""


class Frozen(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of the request types: immutable, unknown fields rejected."""


class ConfigSpec(Frozen, frozen=True):
    """One serving configuration; give ``system`` or ``accelerator`` (its default system)."""

    model: Id
    system: Id | None = None
    accelerator: Id | None = None
    precision: Precision | None = None
    """Weight precision. Default: the accelerator's (``Accelerator.default_precision``, the
    precision of its highest peak tensor throughput: fp8 on Hopper, fp4 on Blackwell), as the
    CLI's ``farebox estimate``."""
    kv_precision: Precision | None = None
    """Default: FP8 when the weights are 8 bits or narrower and the accelerator runs FP8."""
    tp: Degree = 1
    pp: Degree = 1
    dp: Degree = 1
    ep: Degree = 1
    batch: PositiveInt = 1
    """Concurrent requests of the replica."""
    isl: PositiveInt = 1024
    """Input tokens per request."""
    osl: PositiveInt = 256
    """Output tokens per request."""
    spec_draft_tokens: Annotated[int, Meta(ge=0, le=16)] = 0
    spec_acceptance: Annotated[float, Meta(ge=0, lt=1)] = 0.0


ENGINE_DOC = (
    "Serving engine whose efficiency multipliers apply (fleet/data/engines.toml): trtllm, vllm or "
    'sglang; "any" (the default) = the factors pooled over all three.'
)
EngineId = Annotated[Id, Meta(description=ENGINE_DOC)]


class EstimateRequest(Frozen, frozen=True):
    configs: Annotated[tuple[ConfigSpec, ...], Meta(min_length=1, max_length=MAX_ROWS)]
    engine: EngineId = "any"


class SpecOption(Frozen, frozen=True):
    draft_tokens: Annotated[int, Meta(ge=0, le=16)]
    acceptance: Annotated[float, Meta(ge=0, lt=1)]


class FrontierRequest(Frozen, frozen=True):
    model: Id
    system: Id | None = None
    accelerator: Id | None = None
    isl: PositiveInt = 1024
    osl: PositiveInt = 256
    precisions: Annotated[tuple[Precision, ...], Meta(min_length=1, max_length=8)] | None = None
    """Default: every precision the accelerator runs. Repeats are evaluated once."""
    batches: Annotated[tuple[PositiveInt, ...], Meta(min_length=1, max_length=64)] = DEFAULT_BATCHES
    speculative: Annotated[tuple[SpecOption, ...], Meta(max_length=16)] = (
        SpecOption(draft_tokens=0, acceptance=0.0),
    )
    engine: EngineId = "any"
    disaggregated: bool = False
    """Frontier of disaggregated prefill/decode units (k decode replicas fed by m prefill
    replicas of the system) instead of aggregated replicas; the rows' layout is the decode
    replica's, ``layouts`` says the whole unit."""


class EstimateRow(Frozen, frozen=True):
    """A configuration and what the performance model says it does."""

    model: str
    system: str
    precision: str
    kv_precision: str
    tp: int
    pp: int
    dp: int
    ep: int
    batch: int
    isl: int
    osl: int
    spec_draft_tokens: int
    spec_acceptance: float
    fits: bool
    problem: str
    """"ok", "bad_layout", "over_scale_up", "precision_unsupported" or "does_not_fit"."""
    explanation: str | None
    """Why there is no usable estimate, in words (None when problem is "ok")."""
    bound: str | None
    """Which term of the decode step binds: compute, memory, communication, overhead."""
    devices_per_replica: int
    systems_per_replica: int
    max_batch: int
    weight_gb_per_device: float
    kv_gb_per_device: float
    memory_gb_per_device: float
    usable_gb_per_device: float
    step_ms: float | None
    tpot_ms: float | None
    tpot_burst_ms: float | None
    """TPOT a closed-loop benchmark at concurrency ``batch`` measures: ``tpot_ms`` under a
    scheduler that mixes prefill chunks into decode steps, less under a prefill-first one."""
    ttft_floor_ms: float | None
    ttft_burst_ms: float | None
    """Mean TTFT of a closed-loop benchmark at concurrency ``batch`` (clients start together)."""
    prefill_ms: float | None
    tokens_per_s_per_user: float | None
    tokens_per_s_per_replica: float | None
    tokens_per_s_per_device: float | None
    usd_per_hour_per_replica: float | None = None
    """The replica's share of its system's hourly price in the catalog (``fleet.perf.cost``)."""
    usd_per_m_output_tokens: float | None = None
    """USD per million output tokens of the replica busy at full batch, at that price."""


class EstimateResponse(Frozen, frozen=True):
    rows: tuple[EstimateRow, ...]
    engine: str = "any"
    engine_notes: tuple[str, ...] = ()
    """Accelerators of the rows where the engine's multipliers are not (all) measured."""


class FrontierResponse(Frozen, frozen=True):
    model: str
    system: str
    rows: tuple[EstimateRow, ...]
    """Pareto-optimal configurations (tokens/s per device vs per user), fastest per user first."""
    engine: str = "any"
    engine_notes: tuple[str, ...] = ()
    layouts: tuple[str, ...] = ()
    """With ``disaggregated``: per row, the unit (decode and prefill replicas and layouts)."""


def resolve_system(
    catalog: Catalog, system: str | None, accelerator: str | None, where: str
) -> str:
    if (system is None) == (accelerator is None):
        raise InputError(f"{where}: give exactly one of system or accelerator")
    if system is not None:
        if system not in catalog.systems:
            raise InputError(
                f"{where}.system: unknown system {system!r}; known: {', '.join(catalog.systems)}"
            )
        return system
    assert accelerator is not None
    if accelerator not in catalog.accelerators:
        raise InputError(
            f"{where}.accelerator: unknown accelerator {accelerator!r}; known: "
            f"{', '.join(catalog.accelerators)}"
        )
    return catalog.default_system(accelerator).id


def check_frontier_size(catalog: Catalog, data: FrontierRequest, system: str) -> None:
    """Refuse a frontier over ``MAX_FRONTIER_CONFIGS`` configurations before evaluating it,
    naming the longest list (the one to shorten) and the limit."""
    precisions = data.precisions or supported_precisions(catalog, system)
    spec = tuple((o.draft_tokens, o.acceptance) for o in data.speculative)
    # the grid with the model's own MTP draft, and the most units it can form when disaggregated
    n = frontier_size(
        catalog,
        data.model,
        system,
        precisions=precisions,
        batches=data.batches,
        spec=spec,
        disaggregated=data.disaggregated,
    )
    if n <= MAX_FRONTIER_CONFIGS:
        return
    precs, batches, options = search_options(
        precisions, data.batches, model_spec(catalog, data.model, spec)
    )
    lists = {"batches": len(batches), "speculative": len(options), "precisions": len(precs)}
    field = max(lists, key=lambda name: lists[name])
    n_layouts = n // (len(precs) * len(batches) * len(options))
    raise InputError(
        f"$.{field}: this frontier would evaluate {n:,} configurations ({n_layouts} layouts x "
        f"{len(precs)} precisions x {len(batches)} batches x {len(options)} speculative options), "
        f"over the limit of {MAX_FRONTIER_CONFIGS:,}; ask for fewer {field}"
    )


def check_engine(catalog: Catalog, engine: str) -> None:
    if engine not in catalog.engine_ids:
        raise InputError(
            f"$.engine: unknown engine {engine!r}; known: {', '.join(catalog.engine_ids)}"
        )


def engine_notes(catalog: Catalog, engine: str, configs: Configs) -> tuple[str, ...]:
    """What ``engine_note`` says about each accelerator of ``configs``, once each."""
    systems = list(catalog.systems)
    seen = dict.fromkeys(
        catalog.systems[systems[int(s)]].accelerator for s in np.unique(configs.system)
    )
    precisions = [PRECISIONS[int(p)] for p in np.unique(configs.weight_precision)]
    notes = (engine_note(catalog, engine, a, precisions) for a in seen)
    return tuple(n for n in notes if n)


def check_model(catalog: Catalog, model: str, where: str) -> None:
    if model not in catalog.models:
        raise InputError(
            f"{where}.model: unknown model {model!r}; known: {', '.join(catalog.models)}"
        )


def to_configs(catalog: Catalog, specs: tuple[ConfigSpec, ...]) -> Configs:
    systems = []
    for i, spec in enumerate(specs):
        where = f"$.configs[{i}]"
        check_model(catalog, spec.model, where)
        systems.append(resolve_system(catalog, spec.system, spec.accelerator, where))

    def column(name: str) -> list[Any]:
        return [getattr(spec, name) for spec in specs]

    configs = make_configs(
        catalog,
        model=column("model"),
        system=systems,
        tp=column("tp"),
        pp=column("pp"),
        dp=column("dp"),
        ep=column("ep"),
        precision=[
            spec.precision
            or catalog.accelerators[catalog.system(sid).accelerator].default_precision
            for spec, sid in zip(specs, systems, strict=True)
        ],
        batch=column("batch"),
        isl=column("isl"),
        osl=column("osl"),
        spec_draft_tokens=column("spec_draft_tokens"),
        spec_acceptance=column("spec_acceptance"),
    )
    given = np.array([spec.kv_precision is not None for spec in specs])
    if given.any():
        kv = configs.kv_precision.copy()
        for i in np.flatnonzero(given).tolist():
            kv[i] = PRECISIONS.index(specs[i].kv_precision)
        configs = dataclasses.replace(configs, kv_precision=kv)
    return configs


def rows(
    catalog: Catalog, configs: Configs, est: Estimate, arrays: CatalogArrays
) -> tuple[EstimateRow, ...]:
    models = list(catalog.models)
    per_hour = usd_per_hour_per_replica(arrays, configs, est)
    per_m = usd_per_m_output_tokens(arrays, configs, est)
    systems = list(catalog.systems)
    out = []
    for i in range(len(configs)):
        ok = Problem(int(est.problem[i])) == Problem.OK
        out.append(
            EstimateRow(
                model=models[configs.model[i]],
                system=systems[configs.system[i]],
                precision=PRECISIONS[configs.weight_precision[i]],
                kv_precision=PRECISIONS[configs.kv_precision[i]],
                tp=int(configs.tp[i]),
                pp=int(configs.pp[i]),
                dp=int(configs.dp[i]),
                ep=int(configs.ep[i]),
                batch=int(configs.batch[i]),
                isl=int(configs.isl[i]),
                osl=int(configs.osl[i]),
                spec_draft_tokens=int(configs.spec_draft_tokens[i]),
                spec_acceptance=float(configs.spec_acceptance[i]),
                fits=bool(est.fits[i]),
                problem=Problem(int(est.problem[i])).name.lower(),
                explanation=describe_problem(catalog, configs, est, i),
                bound=Bound(int(est.bound[i])).name.lower() if ok else None,
                devices_per_replica=int(est.devices_per_replica[i]),
                systems_per_replica=int(est.systems_per_replica[i]),
                max_batch=int(est.max_batch[i]),
                weight_gb_per_device=_num(est.weight_bytes_per_device[i], 1e-9),
                kv_gb_per_device=_num(est.kv_bytes_per_device[i], 1e-9),
                memory_gb_per_device=_num(est.memory_bytes_per_device[i], 1e-9),
                usable_gb_per_device=_num(est.usable_bytes_per_device[i], 1e-9),
                step_ms=_opt(est.step_s[i], 1e3, ok),
                tpot_ms=_opt(est.tpot_s[i], 1e3, ok),
                tpot_burst_ms=_opt(est.tpot_burst_s[i], 1e3, ok),
                ttft_floor_ms=_opt(est.ttft_floor_s[i], 1e3, ok),
                ttft_burst_ms=_opt(est.ttft_burst_s[i], 1e3, ok),
                prefill_ms=_opt(est.prefill_s[i], 1e3, ok),
                tokens_per_s_per_user=_opt(est.tokens_per_s_per_user[i], 1.0, ok),
                tokens_per_s_per_replica=_opt(est.tokens_per_s_per_replica[i], 1.0, ok),
                tokens_per_s_per_device=_opt(est.tokens_per_s_per_device[i], 1.0, ok),
                usd_per_hour_per_replica=_opt(per_hour[i], 1.0, True),
                usd_per_m_output_tokens=_opt(per_m[i], 1.0, ok),
            )
        )
    return tuple(out)


def _num(value: float, scale: float) -> float:
    v = float(value) * scale
    return v if math.isfinite(v) else 0.0


def _opt(value: float, scale: float, ok: bool) -> float | None:
    v = float(value) * scale
    return v if ok and math.isfinite(v) else None
