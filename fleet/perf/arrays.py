"""Catalog numbers gathered into numpy arrays, indexed like ``Configs`` indices.

``build_arrays(catalog)`` runs once per loaded ``Catalog`` and is passed explicitly to
``estimate`` (no module-level cache). Model rows follow ``catalog.models`` order, accelerator rows
``catalog.accelerators`` order, system rows ``catalog.systems`` order; precision columns follow
``fleet.catalog.PRECISIONS``. Everything is SI: bytes, bytes/s, FLOP/s, seconds.

Weight bytes are counted by component (``fleet.catalog.params.param_breakdown``) because the
components shard differently (docs/performance-model.md):
- ``replicated_params``: attention, dense FFNs, shared experts and routers — split by tp,
  replicated over the dp attention ranks;
- ``expert_params``: routed experts — split over all tp x dp devices of a pipeline stage;
- embedding and LM head — kept in BF16, split by tp, on the first / last stage.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fleet.catalog import FOUR_BIT, MOE_ROUTINGS, MOE_SKEW_EP, PRECISIONS, Catalog, Model
from fleet.catalog.compressed import INDEX_KEY_BYTES_PER_ELEMENT, compressor_state_bytes
from fleet.catalog.engines import EXPERT_KINDS, MoeForm
from fleet.catalog.params import (
    attention_params_per_layer,
    conv_state_bytes_per_layer,
    kv_elements_per_token_per_layer,
    mamba_conv_channels,
    moe_layer_count,
    param_breakdown,
    sliding_kv_elements_per_token_per_layer,
    state_bytes_per_layer,
    state_flops_per_token_layer,
    state_layers,
)
from fleet.perf.closed_loop import REQUEST_OVERHEAD_S
from fleet.perf.transfer import resolve_efficiency
from fleet.perf.types import FloatArray, IntArray

BoolMatrix = np.ndarray


@dataclass(frozen=True, slots=True)
class ModelArrays:
    """One entry per catalog model."""

    ids: tuple[str, ...]
    num_layers: IntArray
    moe_layers: IntArray
    hidden_size: FloatArray
    num_heads: IntArray
    num_kv_heads: IntArray
    is_mla: FloatArray
    """1.0 for multi-head latent attention (KV latent replicated across tp ranks)."""
    qk_norm_across_heads: FloatArray
    """1 where the q/k norms span every head (``Model.qk_norm_across_heads``): one more
    tensor-parallel all-reduce per attention layer (``fleet.perf.comm.StageComm``)."""
    replicated_params: FloatArray
    """Attention + dense FFN + shared experts + router, all layers (split by tp only)."""
    expert_params: FloatArray
    """All routed experts, all layers (split over tp x dp)."""
    active_expert_fraction: FloatArray
    """experts_per_token / num_experts (0 for dense models)."""
    num_experts: IntArray
    """Routed experts per MoE layer (0 for dense models)."""
    expert_intermediate_size: FloatArray
    """One routed expert's intermediate (FFN) width (0 for dense models)."""
    moe_routing: IntArray
    """Index of the router's expert-load distribution in ``MOE_ROUTINGS`` (``Moe.routing``);
    -1 for balanced routing and dense models."""
    fp8_block_scaled: FloatArray
    """1.0 where the model's FP8 checkpoint is block-scaled (``Model.fp8_block_scaled``)."""
    experts_per_token: FloatArray
    vocab_size: FloatArray
    embedding_params: FloatArray
    lm_head_params: FloatArray
    """LM head params; equals the embedding when tied (the table is read as the head)."""
    tied_embeddings: FloatArray
    kv_elements_per_token_layer: FloatArray
    sliding_window: FloatArray
    """Window in tokens (inf when none)."""
    sliding_layers: FloatArray
    sliding_num_heads: IntArray
    """Query heads of a sliding-window layer (its own shape where the model gives one, else
    ``num_heads``); likewise the three columns below."""
    sliding_num_kv_heads: IntArray
    sliding_kv_elements_per_token_layer: FloatArray
    sliding_attention_flops_per_token_ctx_layer: FloatArray
    """Score and value FLOPs per query token, context token and sliding layer (GQA: the same in
    decode and prefill)."""
    attention_flops_per_token_ctx_layer: FloatArray
    """FLOPs of score and value products per query token, context token and layer (all heads),
    as decode runs them (MLA: the absorbed form over the latent)."""
    attention_prefill_flops_per_token_ctx_layer: FloatArray
    """The same for prefill (MLA: the uncompressed multi-head form; GQA: as decode; DeepSeek
    Sparse Attention: the absorbed form, as decode)."""
    sparse_topk: FloatArray
    """Context tokens attention reads and scores per query (DeepSeek Sparse Attention's
    top-k; inf for dense attention)."""
    index_elements_per_token_layer: FloatArray
    """Of ``kv_elements_per_token_layer``, the indexer key read for every context token under
    sparse attention (0 for dense attention: every element is read for every token)."""
    index_flops_per_token_ctx_layer: FloatArray
    """Indexer scoring FLOPs per query token, context token and layer (0 without top-k)."""
    attention_params_per_layer: FloatArray
    linear_layers: FloatArray
    """Layers with a fixed state per stream and no KV cache: linear attention (Gated DeltaNet)
    and Mamba2 mixers."""
    state_bytes_per_layer: FloatArray
    """One stream's state in one such layer, all heads (read and written every decode step)."""
    state_flops_per_token_layer: FloatArray
    """FLOPs of one token's recurrence in one such layer (the state's rank-1 update and its
    read-out: 4 x value heads x key dim x value dim; Mamba2: 4 x heads x head_dim x state)."""
    is_mamba: FloatArray
    """1.0 when the state layers are Mamba2 mixers (their kernels' own measured rates)."""
    conv_state_bytes_per_layer: FloatArray
    """Of ``state_bytes_per_layer``, a Mamba2 mixer's convolution window (0 otherwise)."""
    conv_bytes_per_token_layer: FloatArray
    """A Mamba2 mixer's causal convolution in prefill: each token's x, B and C channels read
    and written once, BF16 (0 otherwise)."""
    state_split_heads: FloatArray
    """Heads and groups a Mamba2 mixer splits over tp: tp must divide it (0 = no constraint)."""
    ffnless_layers: FloatArray
    """Blocks with a mixer and no FFN (a ``block_pattern``'s M and * blocks; 0 otherwise)."""
    mixerless_layers: FloatArray
    """Blocks with an FFN and no mixer (a ``block_pattern``'s E and - blocks; 0 otherwise)."""
    expert_width_ratio: FloatArray
    """Width tokens reach the routed experts in over the hidden width: a latent MoE's latent
    width (dispatch and combine move it), else 1."""
    layer_units: FloatArray
    """Layers as the fixed per-layer cost counts them: ``num_layers``, or for single-sublayer
    blocks half the blocks (a transformer layer is two sublayers, a mixer and an FFN)."""
    block_sparse_layers: FloatArray
    """Layers with block-sparse attention (MiniMax-M3; 0 otherwise): ``fleet.perf.block_sparse``."""
    block_sparse_topk_tokens: FloatArray
    """Tokens a query of such a layer attends to at most: top-k blocks x block size (0 without)."""
    block_sparse_index_elements_per_token_layer: FloatArray
    """Index-key elements each token adds to such a layer's cache, on every tp rank (0 without)."""
    block_sparse_index_heads: FloatArray
    """The indexer's query heads (split over tp like KV heads; 0 without)."""
    block_sparse_index_flops_per_head_ctx: FloatArray
    """Indexer scoring FLOPs per query token, context token and head: 2 x index_head_dim."""
    csa_layers: FloatArray
    """DeepSeek-V4 compressed sparse attention layers (``fleet.perf.compressed``); this and the
    columns below are 0 (ratios 1, top-k inf) for every other model."""
    csa_ratio: FloatArray
    hca_layers: FloatArray
    """DeepSeek-V4 heavily compressed attention layers."""
    hca_ratio: FloatArray
    compressed_topk: FloatArray
    """Compressed entries a CSA layer's attention reads per query (the indexer's top-k)."""
    index_key_bytes_per_entry: FloatArray
    """Bytes of one cached indexer key (4-bit) per compressed entry of a CSA layer."""
    index_flops_per_entry: FloatArray
    """Indexer scoring FLOPs per query token and compressed entry of a CSA layer."""
    compressor_state_bytes: FloatArray
    """One stream's partial-window compressor states, all layers."""
    residual_width_ratio: FloatArray
    """Width of the residual stream over the hidden width (hyper-connections' copies; else 1):
    what a pipeline hop carries."""
    four_bit_companion: IntArray
    """Precision column of the non-expert weights when the experts are 4-bit (BF16 but where
    the model's 4-bit checkpoints keep them FP8)."""


@dataclass(frozen=True, slots=True)
class AcceleratorArrays:
    """One entry per catalog accelerator; (n, P) matrices have one column per precision."""

    ids: tuple[str, ...]
    memory_bytes: FloatArray
    is_sram: FloatArray
    memory_bandwidth_bytes_per_s: FloatArray
    peak_flops: FloatArray
    """(n, P) dense peak FLOP/s per precision; 0 where not offered."""
    native: BoolMatrix
    """(n, P) tensor cores run this precision."""
    weight_only: BoolMatrix
    """(n, P) weights stored at this width, math at BF16."""
    scale_up_bytes_per_s: FloatArray
    scale_up_latency_s: FloatArray
    bandwidth_fraction: FloatArray
    """Weight streaming of 8- and 16-bit weights (the BF16 column of the matrix below)."""
    bandwidth_fraction_by_precision: FloatArray
    """(n, P) weight streaming per weight precision (NVFP4 GEMVs stream slower on Blackwell)."""
    expert_bandwidth_fraction_by_precision: FloatArray
    """(n, P) weight streaming of an MoE layer's routed experts per weight precision (grouped
    GEMMs stream differently from dense GEMMs on Blackwell; the same figures on Hopper)."""
    kv_bandwidth_fraction: FloatArray
    """KV-cache reads of decode attention."""
    flops_fraction: FloatArray
    """BF16 tensor-core fraction (attention math runs in BF16)."""
    flops_fraction_by_precision: FloatArray
    """(n, P) fraction of each precision's peak; differs from BF16 where kernels say so."""
    prefill_attention_flops_fraction: FloatArray
    """Fraction of the BF16 peak of prefill (flash) attention: a measured kernel figure."""
    state_bandwidth_fraction: FloatArray
    """A linear-attention layer's per-stream state, read and written back each decode step, as a
    fraction of HBM bandwidth (``transfer.ResolvedEfficiency``)."""
    state_prefill_flops_fraction: FloatArray
    """Fraction of the BF16 peak a linear-attention layer's prefill scan reaches."""
    mamba_conv_bandwidth_fraction: FloatArray
    """A Mamba2 mixer's convolution window, read and written back each decode step (its
    causal-conv update kernel), as a fraction of HBM bandwidth."""
    mamba_conv_prefill_bandwidth_fraction: FloatArray
    """A Mamba2 mixer's causal convolution over a prefill's tokens, as a fraction of HBM
    bandwidth."""
    step_overhead_s: FloatArray
    layer_overhead_s: FloatArray
    """Fixed cost per layer per step (kernel launches and synchronisation of its kernels)."""
    link_fraction: FloatArray
    collective_overhead_s: FloatArray
    """Fixed cost per collective call (launch, synchronisation), on top of the link latency."""
    moe_call_s: FloatArray
    """Fixed time of an MoE layer's routed-expert call per forward pass (measured kernels;
    ``transfer.ResolvedEfficiency.moe_call_us``)."""
    moe_fp4_call_s: FloatArray
    """The same for native FP4 experts (``transfer.ResolvedEfficiency.moe_fp4_call_us``)."""
    dsa_call_s: FloatArray
    """Fixed time of a DeepSeek Sparse Attention layer's attention module per forward pass
    (``transfer.ResolvedEfficiency.dsa_call_us``)."""
    moe_compute: FloatArray
    """(n, E, 3) per expert kind of ``EXPERT_KINDS``: (ratio, m0, n0) of the routed experts'
    grouped-GEMM compute on prefill tokens (``transfer.ResolvedEfficiency.moe_compute``;
    ``fleet.perf.kernel_moe_efficiency``)."""
    moe_routing_skew: FloatArray
    """(n, R, W) the most-loaded expert-parallel rank's routed-expert compute time over the
    balanced router's, per routing of ``MOE_ROUTINGS`` and width of ``MOE_SKEW_EP``
    (``transfer.ResolvedEfficiency.moe_routing_skew``; ``fleet.perf.kernel_moe_skew``)."""
    request_overhead_s: FloatArray
    """Per-request serving cost outside the forward passes, in a benchmark's TTFT (pooled, or
    the engine's: ``fleet.perf.closed_loop``)."""
    prefill_first: FloatArray
    """1 where the engine's scheduler prefills waiting requests before decoding (closed-loop
    waves stay bursts), 0 for mixed chunked-prefill schedulers and the pooled default."""
    kv_of_free_memory: FloatArray
    """1 where the engine sizes its KV pool as a fraction of the memory free after weights and
    workspace (``fleet.perf.memory.memory_terms``), 0 for a fraction of the device's memory."""
    block_fp8_moe_local_expert_s: FloatArray
    """The engine's block-scaled FP8 MoE kernel's fixed time per expert held on a rank, per MoE
    layer and forward pass (0 for the pooled default and kernels without the term;
    ``fleet.perf.kernel_moe_grid``)."""
    moe_w4a16_call_s: FloatArray
    """Fixed time of an MoE layer's routed-expert call per forward pass when the experts are
    weight-only 4-bit (0 for the pooled default, whose W4A16 streaming figure is fitted with no
    call time; an engine's fitted term, ``EngineFactors.moe_w4a16_call_us``)."""
    expert_prefill_time: FloatArray
    """(n, E) time of the routed experts' grouped GEMMs on prefill tokens, as a multiple of what
    the part's FLOP fraction gives: the engine's MoE kernel against TensorRT-LLM's at
    prefill-sized calls, one column per expert kind (``EXPERT_KINDS``; 1 for the pooled default
    and TensorRT-LLM, whose kernels the figures are fitted on;
    ``fleet.perf.kernel_moe_engines``)."""


@dataclass(frozen=True, slots=True)
class SystemArrays:
    """One entry per catalog system."""

    ids: tuple[str, ...]
    accelerator: IntArray
    devices_per_system: IntArray
    scale_up_domain: IntArray
    scale_out_bytes_per_s: FloatArray
    scale_out_latency_s: FloatArray
    usd_per_hour: FloatArray


@dataclass(frozen=True, slots=True)
class CatalogArrays:
    models: ModelArrays
    accelerators: AcceleratorArrays
    systems: SystemArrays

    def with_efficiency(
        self,
        accelerator_ids: tuple[str, ...],
        *,
        bandwidth_fraction: float,
        flops_fraction: float,
        step_overhead_s: float,
        link_fraction: float,
        layer_overhead_s: float = 0.0,
        collective_overhead_s: float = 0.0,
        kv_bandwidth_fraction: float | None = None,
        fp8_flops_fraction: float | None = None,
        four_bit_bandwidth_fraction: float | None = None,
    ) -> CatalogArrays:
        """A copy with the efficiency factors of ``accelerator_ids`` replaced (calibration).

        One figure per factor for every precision; the KV-read fraction is the weight-streaming
        one, the 8-bit (and FP4) FLOP fraction the BF16 one and the 4-bit weight streaming the
        8/16-bit one unless given.
        """
        acc = self.accelerators
        rows = np.array([acc.ids.index(a) for a in accelerator_ids], dtype=np.int64)
        by_precision = acc.flops_fraction_by_precision.copy()
        by_precision[rows, :] = flops_fraction
        if fp8_flops_fraction is not None:
            for p in ("fp8", "int8", "fp4"):
                by_precision[rows, PRECISIONS.index(p)] = fp8_flops_fraction
        streaming = acc.bandwidth_fraction_by_precision.copy()
        streaming[rows, :] = bandwidth_fraction
        if four_bit_bandwidth_fraction is not None:
            for p in FOUR_BIT:
                streaming[rows, PRECISIONS.index(p)] = four_bit_bandwidth_fraction
        new: dict[str, Any] = {"flops_fraction_by_precision": by_precision}
        new["bandwidth_fraction_by_precision"] = streaming
        # The run-fitted family charges experts at its weight-streaming figures.
        experts = acc.expert_bandwidth_fraction_by_precision.copy()
        experts[rows, :] = streaming[rows, :]
        new["expert_bandwidth_fraction_by_precision"] = experts
        kv = bandwidth_fraction if kv_bandwidth_fraction is None else kv_bandwidth_fraction
        for name, value in (
            ("kv_bandwidth_fraction", kv),
            ("bandwidth_fraction", bandwidth_fraction),
            ("flops_fraction", flops_fraction),
            ("step_overhead_s", step_overhead_s),
            ("link_fraction", link_fraction),
            ("layer_overhead_s", layer_overhead_s),
            ("collective_overhead_s", collective_overhead_s),
        ):
            column = getattr(acc, name).copy()
            column[rows] = value
            new[name] = column
        return dataclasses.replace(self, accelerators=dataclasses.replace(acc, **new))

    def with_scheduling(
        self, *, request_overhead_s: float, prefill_first: bool, kv_of_free_memory: bool = False
    ) -> CatalogArrays:
        """A copy whose every accelerator takes an engine's closed-loop TTFT terms and KV budget
        rule (serving software: the same on every part; ``fleet.perf.closed_loop``,
        ``fleet.perf.memory``)."""
        acc = self.accelerators
        n = len(acc.ids)
        return dataclasses.replace(
            self,
            accelerators=dataclasses.replace(
                acc,
                request_overhead_s=np.full(n, request_overhead_s),
                prefill_first=np.full(n, 1.0 if prefill_first else 0.0),
                kv_of_free_memory=np.full(n, 1.0 if kv_of_free_memory else 0.0),
            ),
        )

    def _with_column(self, field: str, values: Mapping[str, float]) -> CatalogArrays:
        """A copy whose accelerators named in ``values`` take those values of the per-accelerator
        factor ``field`` (the others keep theirs)."""
        acc = self.accelerators
        column = getattr(acc, field).copy()
        for a, value in values.items():
            if a in acc.ids:
                column[acc.ids.index(a)] = value
        new = dataclasses.replace(acc, **{field: column})
        return dataclasses.replace(self, accelerators=new)

    def with_block_fp8_moe(self, local_expert_s: Mapping[str, float]) -> CatalogArrays:
        """A copy whose accelerators named in ``local_expert_s`` take that block-scaled FP8 MoE
        time per expert held (an engine's kernel term; the others keep theirs)."""
        return self._with_column("block_fp8_moe_local_expert_s", local_expert_s)

    def with_moe_w4a16_call(self, call_s: Mapping[str, float]) -> CatalogArrays:
        """A copy whose accelerators named in ``call_s`` take that fixed time per MoE layer of
        weight-only 4-bit experts (an engine's fitted term; the others keep theirs)."""
        return self._with_column("moe_w4a16_call_s", call_s)

    def with_expert_prefill(self, time: Mapping[str, Mapping[str, float]]) -> CatalogArrays:
        """A copy whose accelerators named in ``time`` take those prefill-time multiples of their
        routed experts, by expert kind (an engine's MoE kernel; kinds not named keep theirs)."""
        acc = self.accelerators
        matrix = acc.expert_prefill_time.copy()
        for a, kinds in time.items():
            if a in acc.ids:
                for kind, value in kinds.items():
                    matrix[acc.ids.index(a), EXPERT_KINDS.index(kind)] = value
        new = dataclasses.replace(acc, expert_prefill_time=matrix)
        return dataclasses.replace(self, accelerators=new)

    def with_moe_compute(self, forms: Mapping[str, Mapping[str, MoeForm]]) -> CatalogArrays:
        """A copy whose accelerators named in ``forms`` take those routed-expert compute forms,
        (ratio, m0, n0) by expert kind (an engine's own MoE kernels, ``moe_compute``), in place of
        the part's; those kinds' prefill-time multiples go back to 1 (the form measures the
        engine's kernels itself). Kinds not named keep theirs."""
        acc = self.accelerators
        compute = acc.moe_compute.copy()
        prefill = acc.expert_prefill_time.copy()
        for a, kinds in forms.items():
            if a in acc.ids:
                i = acc.ids.index(a)
                for kind, form in kinds.items():
                    k = EXPERT_KINDS.index(kind)
                    compute[i, k] = form
                    prefill[i, k] = 1.0
        new = dataclasses.replace(acc, moe_compute=compute, expert_prefill_time=prefill)
        return dataclasses.replace(self, accelerators=new)

    def scaled(
        self, accelerator_ids: tuple[str, ...], multipliers: Mapping[str, float | FloatArray]
    ) -> CatalogArrays:
        """A copy with the named ``AcceleratorArrays`` factors of ``accelerator_ids`` multiplied
        (an engine's factors, ``fleet.perf.engines``); a multiplier broadcasts over the factor's
        row (one per precision for ``flops_fraction_by_precision``). Fractions stay <= 1."""
        acc = self.accelerators
        rows = np.array([acc.ids.index(a) for a in accelerator_ids], dtype=np.int64)
        new = {}
        for name, multiplier in multipliers.items():
            column = getattr(acc, name).copy()
            column[rows] = column[rows] * multiplier
            if "fraction" in name:
                column[rows] = np.minimum(column[rows], 1.0)
            new[name] = column
        return dataclasses.replace(self, accelerators=dataclasses.replace(acc, **new))


def build_arrays(catalog: Catalog) -> CatalogArrays:
    """Gather per-model, per-accelerator and per-system numbers once per catalog."""
    return CatalogArrays(
        models=_model_arrays(catalog),
        accelerators=_accelerator_arrays(catalog),
        systems=_system_arrays(catalog),
    )


def _model_arrays(catalog: Catalog) -> ModelArrays:
    rows: dict[str, list[float]] = {f.name: [] for f in dataclasses.fields(ModelArrays)}
    for model in catalog.models.values():
        b = param_breakdown(model)
        moe = model.moe
        mla = model.mla
        if mla is None:
            # q.k over head_dim and p.v over v_head_dim, 2 FLOPs per multiply-add.
            v_dim = model.v_head_dim or model.head_dim
            attn_flops = 2.0 * model.num_attention_heads * (model.head_dim + v_dim)
        else:
            # Absorbed MLA decode: scores over (latent + rope), values over the latent.
            attn_flops = (
                2.0 * model.num_attention_heads * (2 * mla.kv_lora_rank + mla.qk_rope_head_dim)
            )
        # Prefill runs MLA uncompressed (DeepSeek-V3 report, section 2.1; FlashMLA serves only
        # decode): scores over qk_nope + qk_rope, values over v_head_dim, per head.
        prefill_attn_flops = attn_flops
        topk = mla.index_topk if mla is not None else 0
        index_dim = mla.index_head_dim if mla is not None and topk else 0
        index_heads = mla.index_n_heads if mla is not None and topk else 0
        if mla is not None and not topk:
            prefill_attn_flops = (
                2.0
                * model.num_attention_heads
                * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim)
            )
        # DeepSeek Sparse Attention runs MLA in its MQA (absorbed) form in prefill too (the
        # DeepSeek-V3.2-Exp report, "Instantiation under MLA"), over the top-k selected tokens;
        # the indexer scores every token: q.k over its heads (ReLU, weighted sum).
        index_flops = 2.0 * index_heads * index_dim
        row = {
            "num_layers": model.num_layers,
            "moe_layers": moe_layer_count(model),
            "hidden_size": model.hidden_size,
            "num_heads": model.num_attention_heads,
            "num_kv_heads": model.num_kv_heads,
            "is_mla": 1.0 if mla is not None else 0.0,
            "qk_norm_across_heads": 1.0 if model.qk_norm_across_heads else 0.0,
            "replicated_params": (
                b.attention
                + b.dense_ffn
                + b.shared_experts
                + b.router
                + b.latent_projections
                + b.hyper_connections
            ),
            "expert_params": b.routed_experts,
            "active_expert_fraction": (
                moe.experts_per_token / moe.num_experts if moe is not None else 0.0
            ),
            "num_experts": moe.num_experts if moe is not None else 0,
            "expert_intermediate_size": (
                float(moe.expert_intermediate_size) if moe is not None else 0.0
            ),
            "moe_routing": (
                MOE_ROUTINGS.index(moe.routing) if moe is not None and moe.routing else -1
            ),
            "fp8_block_scaled": 1.0 if model.fp8_block_scaled else 0.0,
            "experts_per_token": moe.experts_per_token if moe is not None else 0,
            "vocab_size": model.vocab_size,
            "embedding_params": b.embedding,
            "lm_head_params": b.lm_head if b.lm_head else b.embedding,
            "tied_embeddings": 1.0 if model.tie_word_embeddings else 0.0,
            "kv_elements_per_token_layer": kv_elements_per_token_per_layer(model),
            "sliding_window": (
                float(model.sliding_window)
                if model.sliding_window is not None and model.sliding_window_layers
                else np.inf
            ),
            "sliding_layers": model.sliding_window_layers,
            **_sliding_columns(model, attn_flops),
            "attention_flops_per_token_ctx_layer": attn_flops,
            "attention_prefill_flops_per_token_ctx_layer": prefill_attn_flops,
            "sparse_topk": float(topk) if topk else np.inf,
            "index_elements_per_token_layer": index_dim,
            "index_flops_per_token_ctx_layer": index_flops,
            "attention_params_per_layer": attention_params_per_layer(model),
            "linear_layers": state_layers(model),
            "state_bytes_per_layer": state_bytes_per_layer(model),
            "state_flops_per_token_layer": state_flops_per_token_layer(model),
            **_block_columns(model),
            **_block_sparse_columns(model),
            **_compressed_columns(model),
        }
        for key, value in row.items():
            rows[key].append(value)
    ints = {"num_layers", "moe_layers", "num_heads", "num_kv_heads", "num_experts", "moe_routing"}
    ints.add("four_bit_companion")
    ints |= {"sliding_num_heads", "sliding_num_kv_heads"}
    columns: dict[str, Any] = {
        k: np.asarray(v, dtype=np.int64 if k in ints else np.float64)
        for k, v in rows.items()
        if k != "ids"
    }
    return ModelArrays(ids=tuple(catalog.models), **columns)


def _sliding_columns(model: Model, attn_flops: float) -> dict[str, float]:
    """The sliding-window layers' shape columns: their own (``Model.sliding_attention``), or the
    full layers' figures as they are (so that their differences are exactly 0)."""
    sw = model.sliding_attention
    if sw is None:
        return {
            "sliding_num_heads": model.num_attention_heads,
            "sliding_num_kv_heads": model.num_kv_heads,
            "sliding_kv_elements_per_token_layer": kv_elements_per_token_per_layer(model),
            "sliding_attention_flops_per_token_ctx_layer": attn_flops,
        }
    v_dim = sw.v_head_dim or sw.head_dim
    return {
        "sliding_num_heads": sw.num_attention_heads,
        "sliding_num_kv_heads": sw.num_kv_heads,
        "sliding_kv_elements_per_token_layer": sliding_kv_elements_per_token_per_layer(model),
        "sliding_attention_flops_per_token_ctx_layer": (
            2.0 * sw.num_attention_heads * (sw.head_dim + v_dim)
        ),
    }


def _block_columns(model: Model) -> dict[str, float]:
    """The Mamba2 and single-sublayer-block columns of one model's row."""
    pattern = model.block_pattern or ""
    mb = model.mamba
    return {
        "is_mamba": 1.0 if mb is not None else 0.0,
        "conv_state_bytes_per_layer": conv_state_bytes_per_layer(model),
        "conv_bytes_per_token_layer": 2.0 * 2.0 * mamba_conv_channels(model),
        "state_split_heads": float(math.gcd(mb.num_heads, mb.n_groups)) if mb else 0.0,
        "ffnless_layers": float(pattern.count("M") + pattern.count("*")),
        "mixerless_layers": float(pattern.count("E") + pattern.count("-")),
        "layer_units": len(pattern) / 2.0 if pattern else float(model.num_layers),
        "expert_width_ratio": (
            model.moe.latent_size / model.hidden_size
            if model.moe is not None and model.moe.latent_size
            else 1.0
        ),
    }


def _block_sparse_columns(model: Model) -> dict[str, float]:
    """The block-sparse attention columns of one model's row (0 without it)."""
    sparse = model.block_sparse_attention
    if sparse is None:
        return {
            "block_sparse_layers": 0.0,
            "block_sparse_topk_tokens": 0.0,
            "block_sparse_index_elements_per_token_layer": 0.0,
            "block_sparse_index_heads": 0.0,
            "block_sparse_index_flops_per_head_ctx": 0.0,
        }
    return {
        "block_sparse_layers": float(sparse.layers),
        "block_sparse_topk_tokens": float(sparse.topk_blocks * sparse.block_size),
        "block_sparse_index_elements_per_token_layer": float(sparse.index_head_dim),
        "block_sparse_index_heads": float(sparse.index_n_heads),
        "block_sparse_index_flops_per_head_ctx": 2.0 * sparse.index_head_dim,
    }


def _compressed_columns(model: Model) -> dict[str, float]:
    """DeepSeek-V4's compressed-attention columns (neutral values for every other model)."""
    ca = model.compressed_attention
    companion = float(PRECISIONS.index(model.four_bit_companion))
    if ca is None:
        return {
            "csa_layers": 0.0,
            "csa_ratio": 1.0,
            "hca_layers": 0.0,
            "hca_ratio": 1.0,
            "compressed_topk": np.inf,
            "index_key_bytes_per_entry": 0.0,
            "index_flops_per_entry": 0.0,
            "compressor_state_bytes": 0.0,
            "residual_width_ratio": 1.0,
            "four_bit_companion": companion,
        }
    return {
        "csa_layers": float(ca.csa_layers),
        "csa_ratio": float(ca.csa_ratio),
        "hca_layers": float(ca.hca_layers),
        "hca_ratio": float(ca.hca_ratio),
        "compressed_topk": float(ca.index_topk),
        "index_key_bytes_per_entry": ca.index_head_dim * INDEX_KEY_BYTES_PER_ELEMENT,
        # q.k over the indexer's heads (ReLU, weighted sum), 2 FLOPs per multiply-add
        "index_flops_per_entry": 2.0 * ca.index_n_heads * ca.index_head_dim,
        "compressor_state_bytes": compressor_state_bytes(model),
        "residual_width_ratio": float(ca.hc_mult),
        "four_bit_companion": companion,
    }


def _accelerator_arrays(catalog: Catalog) -> AcceleratorArrays:
    accs = list(catalog.accelerators.values())
    eff = resolve_efficiency(catalog)
    n = len(accs)
    peak = np.zeros((n, len(PRECISIONS)))
    flops_fraction = np.asarray(
        [[eff[a.id].flops_fraction[p] for p in PRECISIONS] for a in accs], dtype=np.float64
    )
    streaming = np.asarray(
        [[eff[a.id].weight_bandwidth[p] for p in PRECISIONS] for a in accs], dtype=np.float64
    )
    expert_streaming = np.asarray(
        [[eff[a.id].expert_bandwidth[p] for p in PRECISIONS] for a in accs], dtype=np.float64
    )
    native = np.zeros((n, len(PRECISIONS)), dtype=bool)
    weight_only = np.zeros((n, len(PRECISIONS)), dtype=bool)
    for i, acc in enumerate(accs):
        for j, p in enumerate(PRECISIONS):
            tflops = acc.peak_tflops.get(p)
            peak[i, j] = 0.0 if tflops is None else tflops * 1e12
            native[i, j] = p in acc.native_precisions
            weight_only[i, j] = p in acc.weight_only_precisions and p not in acc.native_precisions

    def col(get: object) -> FloatArray:
        return np.asarray([get(a) for a in accs], dtype=np.float64)  # type: ignore[operator]

    return AcceleratorArrays(
        ids=tuple(catalog.accelerators),
        memory_bytes=col(lambda a: a.memory_bytes),
        is_sram=col(lambda a: 1.0 if a.memory_kind == "sram" else 0.0),
        memory_bandwidth_bytes_per_s=col(lambda a: a.memory_bandwidth_bytes_per_s),
        peak_flops=peak,
        native=native,
        weight_only=weight_only,
        scale_up_bytes_per_s=col(lambda a: a.scale_up_bandwidth_bytes_per_s),
        scale_up_latency_s=col(lambda a: a.scale_up_latency_us * 1e-6),
        bandwidth_fraction=streaming[:, PRECISIONS.index("bf16")].copy(),
        bandwidth_fraction_by_precision=streaming,
        expert_bandwidth_fraction_by_precision=expert_streaming,
        kv_bandwidth_fraction=col(lambda a: eff[a.id].kv_bandwidth_fraction),
        flops_fraction=flops_fraction[:, PRECISIONS.index("bf16")].copy(),
        flops_fraction_by_precision=flops_fraction,
        prefill_attention_flops_fraction=col(lambda a: eff[a.id].prefill_attention_flops_fraction),
        state_bandwidth_fraction=col(lambda a: eff[a.id].state_bandwidth_fraction),
        state_prefill_flops_fraction=col(lambda a: eff[a.id].state_prefill_flops_fraction),
        mamba_conv_bandwidth_fraction=col(lambda a: eff[a.id].mamba_conv_bandwidth_fraction),
        mamba_conv_prefill_bandwidth_fraction=col(
            lambda a: eff[a.id].mamba_conv_prefill_bandwidth_fraction
        ),
        step_overhead_s=col(lambda a: eff[a.id].step_overhead_us * 1e-6),
        layer_overhead_s=col(lambda a: eff[a.id].layer_overhead_us * 1e-6),
        link_fraction=col(lambda a: eff[a.id].link_bandwidth_fraction),
        collective_overhead_s=col(lambda a: eff[a.id].collective_overhead_us * 1e-6),
        moe_call_s=col(lambda a: eff[a.id].moe_call_us * 1e-6),
        moe_fp4_call_s=col(lambda a: eff[a.id].moe_fp4_call_us * 1e-6),
        dsa_call_s=col(lambda a: eff[a.id].dsa_call_us * 1e-6),
        moe_compute=np.array([eff[a.id].moe_compute for a in accs], dtype=np.float64).reshape(
            n, len(EXPERT_KINDS), 3
        ),
        moe_routing_skew=np.array(
            [eff[a.id].moe_routing_skew for a in accs], dtype=np.float64
        ).reshape(n, len(MOE_ROUTINGS), len(MOE_SKEW_EP)),
        request_overhead_s=col(lambda a: REQUEST_OVERHEAD_S),
        prefill_first=col(lambda a: 0.0),
        kv_of_free_memory=col(lambda a: 0.0),
        block_fp8_moe_local_expert_s=col(lambda a: 0.0),
        moe_w4a16_call_s=col(lambda a: 0.0),
        expert_prefill_time=np.ones((n, len(EXPERT_KINDS)), dtype=np.float64),
    )


def _system_arrays(catalog: Catalog) -> SystemArrays:
    systems = list(catalog.systems.values())
    acc_index = {a: i for i, a in enumerate(catalog.accelerators)}
    usd = []
    for s in systems:
        if s.usd_per_hour is not None:
            usd.append(s.usd_per_hour)
        else:
            usd.append(s.devices_per_system * catalog.accelerators[s.accelerator].usd_per_hour)
    return SystemArrays(
        ids=tuple(catalog.systems),
        accelerator=np.asarray([acc_index[s.accelerator] for s in systems], dtype=np.int64),
        devices_per_system=np.asarray([s.devices_per_system for s in systems], dtype=np.int64),
        scale_up_domain=np.asarray([s.scale_up_domain_devices for s in systems], dtype=np.int64),
        scale_out_bytes_per_s=np.asarray(
            [s.scale_out_bandwidth_gb_per_s * 1e9 for s in systems], dtype=np.float64
        ),
        scale_out_latency_s=np.asarray(
            [s.scale_out_latency_us * 1e-6 for s in systems], dtype=np.float64
        ),
        usd_per_hour=np.asarray(usd, dtype=np.float64),
    )
