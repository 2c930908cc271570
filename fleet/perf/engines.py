"""An engine's factor arrays: the pooled ``CatalogArrays`` scaled by its multipliers.

``engine_arrays(catalog, arrays, engine_id)`` returns ``arrays`` itself for the pooled default
(``fleet.catalog.engines.POOLED``), so nothing moves unless an engine is picked; otherwise a copy
whose factors of each accelerator family the engine's entry names are multiplied
(``CatalogArrays.scaled``). Multipliers map to factor arrays by ``FIELDS``; a new factor array
(one per weight precision, a KV-read factor, ...) joins by adding its name there. The entry's
kernel terms go in beside them: the block-scaled FP8 MoE time per expert held, the routed
experts' prefill-time multiples and the engine's own MoE compute forms (``moe_compute_terms``),
which replace the part's where given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from fleet.catalog import PRECISIONS, Catalog
from fleet.catalog.engines import EngineFactors, MoeForm
from fleet.perf.arrays import CatalogArrays
from fleet.perf.transfer import moe_form_ratio, resolve_efficiency
from fleet.perf.types import Configs, Estimate

FIELDS: dict[str, tuple[str, ...]] = {
    # One bandwidth multiplier per engine: weight streaming (every precision), the LM head's
    # BF16 streaming and KV-cache reads move together (the runs do not separate them per engine).
    "bandwidth": (
        "bandwidth_fraction",
        "bandwidth_fraction_by_precision",
        "expert_bandwidth_fraction_by_precision",
        "kv_bandwidth_fraction",
    ),
    "link": ("link_fraction",),
    "step_overhead": ("step_overhead_s",),
    "layer_overhead": ("layer_overhead_s",),
    "collective_overhead": ("collective_overhead_s",),
}
"""Multiplier -> the ``AcceleratorArrays`` factors it scales (``flops.<precision>``: below)."""
W4A16_CALL = "moe_w4a16_call_us"
"""Not a multiplier: the engine's fitted fixed time per MoE layer of weight-only 4-bit experts,
microseconds, set (not scaled) on the entry's accelerators (``EngineFactors.moe_w4a16_call_us``)."""


def flat(factors: EngineFactors) -> dict[str, float]:
    """The multipliers given, by name (``flops.<precision>`` per precision)."""
    out = {n: getattr(factors, n) for n in FIELDS if getattr(factors, n) is not None}
    out.update({f"flops.{p}": factors.flops.get(p) for p in PRECISIONS if factors.flops.get(p)})
    if factors.moe_w4a16_call_us is not None:
        out[W4A16_CALL] = factors.moe_w4a16_call_us
    return out


def apply(
    arrays: CatalogArrays, accelerators: Sequence[str], multipliers: Mapping[str, float]
) -> CatalogArrays:
    """``arrays`` with ``multipliers`` (names as ``flat``) applied to ``accelerators`` (the
    W4A16 call term, ``W4A16_CALL``, set there)."""
    scale: dict[str, float | np.ndarray] = {}
    for name, value in multipliers.items():
        for field in FIELDS.get(name, ()):
            scale[field] = value
    flops = np.asarray([multipliers.get(f"flops.{p}", 1.0) for p in PRECISIONS])
    if np.any(flops != 1.0):
        scale["flops_fraction_by_precision"] = flops
        scale["flops_fraction"] = float(flops[PRECISIONS.index("bf16")])
    arrays = arrays.scaled(tuple(accelerators), scale)
    if W4A16_CALL in multipliers:
        call_s = multipliers[W4A16_CALL] * 1e-6
        arrays = arrays.with_moe_w4a16_call({a: call_s for a in accelerators})
    return arrays


def engine_arrays(catalog: Catalog, arrays: CatalogArrays, engine_id: str) -> CatalogArrays:
    """The factor arrays of ``engine_id`` (``arrays`` itself for the pooled default)."""
    engine = catalog.engine(engine_id)
    if engine is None:
        return arrays
    for factors in engine.factors:
        accs = [a for a in factors.accelerators if a in arrays.accelerators.ids]
        arrays = apply(arrays, accs, flat(factors))
    arrays = arrays.with_block_fp8_moe(block_fp8_moe_terms(catalog, engine_id))
    arrays = arrays.with_expert_prefill(expert_prefill_terms(catalog, engine_id))
    arrays = arrays.with_moe_compute(moe_compute_terms(catalog, engine_id))
    if engine.scheduling is not None:
        arrays = arrays.with_scheduling(
            request_overhead_s=engine.scheduling.request_overhead_ms * 1e-3,
            prefill_first=engine.scheduling.prefill_first,
            kv_of_free_memory=engine.scheduling.kv_cache_of_free_memory,
        )
    return arrays


def with_serving_overhead(arrays: CatalogArrays, configs: Configs, est: Estimate) -> Estimate:
    """``est`` with the engine's per-request serving cost (``CatalogArrays.request_overhead_s``:
    HTTP front-end, tokenization, scheduling, first detokenization) added to ``ttft_floor_s``,
    the time to first token a user sees with no queueing. The scorer charges the same cost on
    measured TTFTs (``fleet.perf.closed_loop``); a plan's TTFT promise must carry it too."""
    overhead = arrays.accelerators.request_overhead_s[arrays.systems.accelerator[configs.system]]
    return dataclasses.replace(est, ttft_floor_s=est.ttft_floor_s + overhead)


def expert_prefill_terms(catalog: Catalog, engine_id: str) -> dict[str, dict[str, float]]:
    """The engine's routed-expert prefill time per accelerator and expert kind, where its entry
    gives them (``EngineFactors.expert_prefill_time``)."""
    engine = catalog.engine(engine_id)
    if engine is None:
        return {}
    return {
        a: given
        for f in engine.factors
        if (given := f.expert_prefill_time.given())
        for a in f.accelerators
    }


def moe_compute_terms(catalog: Catalog, engine_id: str) -> dict[str, dict[str, MoeForm]]:
    """Accelerator id -> expert kind -> the engine's own MoE compute form there as the model reads
    it, (ratio, m0, n0) (``transfer.moe_form_ratio``), where its entries give one
    (``EngineFactors.moe_compute``; empty for the pooled default and TensorRT-LLM, whose forms are
    the parts')."""
    engine = catalog.engine(engine_id)
    if engine is None:
        return {}
    out: dict[str, dict[str, MoeForm]] = {}
    for f in engine.factors:
        for a in f.accelerators:
            acc = catalog.accelerator(a)
            for kind, (flops, m0, n0) in f.moe_forms().items():
                ratio = moe_form_ratio(acc, kind, flops)
                if ratio is not None:
                    out.setdefault(a, {})[kind] = (ratio, m0, n0)
    return out


def block_fp8_moe_terms(catalog: Catalog, engine_id: str) -> dict[str, float]:
    """Accelerator id -> ``engine_id``'s block-scaled FP8 MoE time per expert held, seconds, on
    the parts its entries measure it (empty for the pooled default)."""
    engine = catalog.engine(engine_id)
    if engine is None:
        return {}
    return {
        a: f.block_fp8_moe_local_expert_us * 1e-6
        for f in engine.factors
        if f.block_fp8_moe_local_expert_us is not None
        for a in f.accelerators
    }


def engine_note(
    catalog: Catalog,
    engine_id: str,
    accelerator_id: str,
    precisions: Iterable[str] | None = None,
) -> str | None:
    """A sentence when ``engine_id``'s factors on ``accelerator_id`` are not all measured (of the
    weight ``precisions`` asked for, all when None); None for the pooled default and for fully
    measured parts."""
    engine = catalog.engine(engine_id)
    if engine is None:
        return None
    factors = engine.factors_for(accelerator_id)
    if factors is None:
        return (
            f"engine {engine_id}: no measurements on {accelerator_id}; its factors there are the "
            "pooled ones (multipliers 1)"
        )
    acc = catalog.accelerator(accelerator_id)
    zero_per_layer = resolve_efficiency(catalog)[accelerator_id].layer_overhead_us == 0.0
    missing = [
        m
        for m in factors.not_measured()
        # flops of precisions the tensor cores do not run, and a multiplier on a zero cost,
        # change nothing
        if not (m.startswith("flops.") and m[6:] not in acc.native_precisions)
        and not (m.startswith("flops.") and precisions is not None and m[6:] not in precisions)
        and not (m == "layer_overhead" and zero_per_layer)
    ]
    if not missing:
        return None
    return (
        f"engine {engine_id} on {accelerator_id}: not measured, multiplier 1: {', '.join(missing)}"
    )
