"""Candidate grids for the planner: valid layouts of one model on one system, crossed with batch
sizes, precisions and speculative-decoding options, evaluated in one vectorized pass.

Usage (the planner's loop, per (model, system)):

    arrays = build_arrays(catalog)                      # once per catalog
    configs, est = evaluate_grid(
        catalog, arrays, "deepseek-r1", "hgx-h200-8",
        batches=(1, 4, 16, 64, 256), precisions=("fp8", "fp4"),
        isl=2048, osl=512, spec=((0, 0.0), (3, 0.7)),
        prefix_cached_tokens=512,                        # optional, default 0
    )
    ok = est.fits                                        # drop rows that do not fit
    est.tokens_per_s_per_user, est.tokens_per_s_per_replica, est.request_s,
    est.ttft_floor_s, est.devices_per_replica, est.systems_per_replica   # per row

``layouts(catalog, model_id, system_id)`` lists the layouts alone; ``grid_configs`` builds the
``Configs`` without evaluating them. Rows whose layout or precision is invalid on the system
(``Problem`` BAD_LAYOUT, OVER_SCALE_UP, PRECISION_UNSUPPORTED) are dropped by ``evaluate_grid``;
rows that do not fit are kept (``fits`` False) so callers can see why a batch is out of reach.

Layouts enumerated (devices per replica = tp x dp x pp; ep splits each MoE layer's experts over the
tp x dp devices of a stage):
- tp: powers of two dividing the attention heads (GQA: dividing or multiple of the KV heads),
  tp x dp within the scale-up domain;
- dp (data-parallel attention): powers of two, MoE models only (for dense models a second replica
  is the better way to use more devices);
- ep: powers of two dividing both the experts and tp x dp (1 for dense models);
- wide expert parallel (MoE models, systems whose scale-up domain is below ``WIDE_EP_DEVICES``):
  also stages of tp = 1 (attention data parallel on every device, as DeepSeek-style wide-EP
  deployments run) over 2, 4, ... whole domains up to ``WIDE_EP_DEVICES`` devices, with the
  widest ep; their all-to-alls cross the scale-out network (``fleet.perf.comm``). An NVL72
  rack's 72-GPU domain already holds them on NVLink;
- pp, HBM parts: the smallest pp whose weights fit (in the smallest runnable precision), and up
  to ``extra_pp_factor`` x that (more pipeline stages free memory for KV, hence larger batches),
  powers of two, stages spanning at most ``max_systems`` systems;
- pp, SRAM parts: enough chips that the weights and a little KV fit in their aggregate SRAM
  (``sram_pp_factors`` x the minimum), for each precision the part runs, at most one stage per
  layer.
Speculative options: the caller's, plus for a model shipping MTP modules with a published
acceptance (``Model.mtp_layers``, ``Model.mtp_acceptance``: DeepSeek-V3/R1, GLM-5) its own MTP
draft, k = ``Model.mtp_draft`` at that acceptance (``model_spec``), in ``evaluate_grid``.
Minimum stage counts are taken over the precisions the part can run (``Accelerator.runs``):
others produce no configuration, so their smaller weights must not size the pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from fleet.catalog import BYTES_PER_ELEMENT, PRECISIONS, Catalog
from fleet.catalog.params import param_breakdown
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.memory import USABLE_FRACTION
from fleet.perf.model import estimate
from fleet.perf.types import Configs, Estimate, IntArray, Problem

SRAM_PP_FACTORS = (1.0, 1.25, 1.5, 2.0)
T = TypeVar("T", bound=Hashable)
WIDE_EP_DEVICES = 64
"""Largest stage of the wide-EP layouts (8 HGX nodes; DeepSeek's own decode deployment spreads
its experts over 144-320 GPUs, SGLang's large-scale EP over 96, TRT-LLM's wide EP over 32-72)."""


@dataclass(frozen=True, slots=True)
class Layouts:
    tp: IntArray
    pp: IntArray
    dp: IntArray
    ep: IntArray

    def __len__(self) -> int:
        return int(self.tp.shape[0])


def _powers_of_two(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def layouts(
    catalog: Catalog,
    model_id: str,
    system_id: str,
    *,
    precisions: Sequence[str] = ("fp8",),
    max_systems: int = 8,
    extra_pp_factor: int = 4,
    sram_pp_factors: Sequence[float] = SRAM_PP_FACTORS,
) -> Layouts:
    """Every layout of ``model_id`` on ``system_id`` worth evaluating (see module docstring)."""
    model = catalog.model(model_id)
    system = catalog.system(system_id)
    acc = catalog.accelerator(system.accelerator)
    domain = system.scale_up_domain_devices
    heads, kv_heads = model.num_attention_heads, model.num_kv_heads
    sw = model.sliding_attention  # the sliding layers' own heads split over tp too
    s_heads, s_kv = (sw.num_attention_heads, sw.num_kv_heads) if sw else (heads, kv_heads)
    # a Mamba2 mixer splits its heads and B/C groups over tp (the model's BAD_LAYOUT rule)
    mamba = model.mamba
    split = math.gcd(mamba.num_heads, mamba.n_groups) if mamba is not None else 0
    tps = [
        t
        for t in _powers_of_two(domain)
        if heads % t == 0
        and s_heads % t == 0
        and (model.mla is not None or kv_heads % t == 0 or t % kv_heads == 0)
        and (s_kv % t == 0 or t % s_kv == 0)
        and (split == 0 or split % t == 0)
    ]
    moe = model.moe
    usable = USABLE_FRACTION * acc.memory_bytes
    breakdown = param_breakdown(model)
    # Size pipelines for the precisions this part can run: one it cannot run yields no
    # configuration (PRECISION_UNSUPPORTED), so its smaller weights must not shrink the pipeline
    # (with fp4 in the search, a bf16-only wafer would otherwise get too few stages for bf16).
    known = [p for p in precisions if p in PRECISIONS]
    element_bytes = sorted({BYTES_PER_ELEMENT[p] for p in known if acc.runs(p)}) or [
        min(BYTES_PER_ELEMENT[p] for p in known)
    ]
    edges = 2.0 * (breakdown.embedding + breakdown.lm_head)  # kept in 16 bits
    body = breakdown.total - breakdown.embedding - breakdown.lm_head
    rows: list[tuple[int, int, int, int]] = []
    stages = [
        (tp, dp) for tp in tps for dp in (_powers_of_two(domain // tp) if moe is not None else [1])
    ]
    wide = [domain * 2**j for j in range(1, 8) if domain * 2**j <= WIDE_EP_DEVICES]
    if moe is not None and acc.memory_kind != "sram":
        stages += [(1, n) for n in wide if n <= max_systems * system.devices_per_system]
    for tp, dp in stages:
        n = tp * dp
        eps = [e for e in _powers_of_two(n) if moe is not None and moe.num_experts % e == 0]
        eps = eps or [1]
        if n > domain:
            eps = eps[-1:]
        # Stages the weights alone need, per runnable element size: weight bytes per device
        # with pp = 1 (routed experts over n, the rest over tp) over usable memory.
        pp_mins = []
        for b in element_bytes:
            experts = breakdown.routed_experts * b
            per_device_pp1 = (b * body + edges - experts) / tp + experts / n
            pp_mins.append(max(1, int(np.ceil(per_device_pp1 / usable))))
        pp_min = min(pp_mins)
        if acc.memory_kind == "sram":
            # Every precision gets its own few stage counts: SRAM leaves little room beyond
            # the weights, so the stages one precision needs are useless to another.
            pps = sorted({int(np.ceil(m * f)) for m in pp_mins for f in sram_pp_factors})
        else:
            pp_cap = max_systems * system.devices_per_system // n
            pps = [p for p in _powers_of_two(pp_cap) if pp_min <= p <= extra_pp_factor * pp_min]
        for pp in pps:
            if pp > model.num_layers:
                continue
            rows.extend((tp, pp, dp, ep) for ep in eps)
    arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
    return Layouts(tp=arr[:, 0], pp=arr[:, 1], dp=arr[:, 2], ep=arr[:, 3])


def unique(values: Sequence[T]) -> tuple[T, ...]:
    """``values`` without repeats, first occurrences in order."""
    return tuple(dict.fromkeys(values))


def search_options(
    precisions: Sequence[str], batches: Sequence[int], spec: Sequence[tuple[int, float]]
) -> tuple[tuple[str, ...], tuple[int, ...], tuple[tuple[int, float], ...]]:
    """The distinct precisions, batches and speculative options (draft length 0 = off, one
    option whatever its acceptance) that ``grid_configs`` crosses."""
    return unique(precisions), unique(batches), unique(tuple((k, a if k else 0.0) for k, a in spec))


def grid_size(
    catalog: Catalog,
    model_id: str,
    system_id: str,
    *,
    batches: Sequence[int],
    precisions: Sequence[str],
    spec: Sequence[tuple[int, float]] = ((0, 0.0),),
) -> int:
    """Rows ``grid_configs`` would build, without building them (milliseconds): callers bound
    the work a request asks for before doing it."""
    precs, batch, options = search_options(precisions, batches, spec)
    n_layouts = len(layouts(catalog, model_id, system_id, precisions=precs))
    return n_layouts * len(precs) * len(batch) * len(options)


def grid_configs(
    catalog: Catalog,
    model_id: str,
    system_id: str,
    *,
    batches: Sequence[int],
    precisions: Sequence[str],
    isl: int,
    osl: int,
    spec: Sequence[tuple[int, float]] = ((0, 0.0),),
    kv_precision: str | None = None,
    prefix_cached_tokens: int = 0,
    layout: Layouts | None = None,
) -> Configs:
    """The cross product layouts x precisions x batches x spec options as ``Configs``.

    Repeated precisions, batches and speculative options are evaluated once (a request listing
    "fp8" 400 times must not cost 400 times the work); every draft length 0 is the same option,
    no speculation, whatever acceptance it carries."""
    precisions, batches, spec = search_options(precisions, batches, spec)
    lay = (
        layout
        if layout is not None
        else layouts(catalog, model_id, system_id, precisions=precisions)
    )
    n_l, n_p, n_b, n_s = len(lay), len(precisions), len(batches), len(spec)
    li, pi, bi, si = (
        g.reshape(-1)
        for g in np.meshgrid(
            np.arange(n_l), np.arange(n_p), np.arange(n_b), np.arange(n_s), indexing="ij"
        )
    )
    spec_k = np.asarray([k for k, _ in spec], dtype=np.int64)
    spec_a = np.asarray([a for _, a in spec], dtype=np.float64)
    return make_configs(
        catalog,
        model=model_id,
        system=system_id,
        tp=lay.tp[li],
        pp=lay.pp[li],
        dp=lay.dp[li],
        ep=lay.ep[li],
        precision=np.asarray(precisions)[pi],
        kv_precision=kv_precision,
        batch=np.asarray(batches, dtype=np.int64)[bi],
        isl=isl,
        osl=osl,
        prefix_cached_tokens=prefix_cached_tokens,
        spec_draft_tokens=spec_k[si],
        spec_acceptance=spec_a[si],
    )


def model_spec(
    catalog: Catalog, model_id: str, spec: Sequence[tuple[int, float]]
) -> tuple[tuple[int, float], ...]:
    """``spec`` plus the model's own MTP draft (k = the draft tokens its published acceptance
    was measured at, ``Model.mtp_draft``)."""
    model = catalog.model(model_id)
    out = tuple(spec)
    if model.mtp_draft > 0 and model.mtp_acceptance is not None:
        mtp = (model.mtp_draft, model.mtp_acceptance)
        if mtp not in out:
            out = (*out, mtp)
    return out


def evaluate_grid(
    catalog: Catalog,
    arrays: CatalogArrays,
    model_id: str,
    system_id: str,
    *,
    batches: Sequence[int],
    precisions: Sequence[str],
    isl: int,
    osl: int,
    spec: Sequence[tuple[int, float]] = ((0, 0.0),),
    kv_precision: str | None = None,
    prefix_cached_tokens: int = 0,
    own_mtp: bool = True,
) -> tuple[Configs, Estimate]:
    """``grid_configs`` (with the model's MTP draft added to ``spec`` unless ``own_mtp`` is
    False) evaluated; rows with an invalid layout or precision are dropped."""
    configs = grid_configs(
        catalog,
        model_id,
        system_id,
        batches=batches,
        precisions=precisions,
        isl=isl,
        osl=osl,
        spec=model_spec(catalog, model_id, spec) if own_mtp else spec,
        kv_precision=kv_precision,
        prefix_cached_tokens=prefix_cached_tokens,
    )
    est = estimate(arrays, configs)
    keep = (est.problem == Problem.OK) | (est.problem == Problem.DOES_NOT_FIT)
    return configs.take(keep), est.take(keep)
