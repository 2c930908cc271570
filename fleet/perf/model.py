"""The roofline performance model: ``estimate(arrays, configs) -> Estimate``, pure and vectorized.

Per configuration (docs/performance-model.md has the derivations):

1. Validity -> ``Problem``: heads divisible by tp (GQA KV heads divisible by tp or dividing it),
   ep dividing the experts and the tp x dp devices of a stage, pp <= layers, positive sizes,
   0 <= prefix-cached tokens < isl -> BAD_LAYOUT; a stage's tp x dp may span several scale-up
   domains (multi-node tensor / expert parallel over the scale-out network, ``fleet.perf.comm``)
   but only in whole domains (hierarchical collectives need equal groups): tp x dp beyond the
   domain and not a multiple of it -> OVER_SCALE_UP; weight precision neither native nor
   weight-only, or KV precision not native -> PRECISION_UNSUPPORTED; memory over the usable
   capacity -> DOES_NOT_FIT (``fleet.perf.memory``).
2. One pipeline-stage step carries a micro-batch of batch / pp streams, each verifying k + 1
   tokens (k = speculative draft length). Per device:
   memory s  = weights touched / (bw x f_bw of their precision) + LM head / (bw x f_bw BF16)
               + KV read at mean context isl + osl/2 / (bw x f_kv),
               routed-expert bytes scaled by the fraction of experts touched,
               1 - (1 - k_e/E)^tokens_in_step (per layer, the same for every EP shard);
   compute s = 2 x active params x tokens + attention FLOPs, at the precision's tensor rate
               (BF16 for weight-only formats such as FP4 on Hopper) x f_flops; attention in BF16,
               decode attention at the BF16 f_flops, prefill (flash) attention at its own
               measured fraction of the BF16 peak (``prefill_attention_flops_fraction``);
               routed experts' FLOPs x the routing skew at the row's ep (the most-loaded
               rank's share over an even one, ``routing_skew``; ``fleet.perf.kernel_moe_skew``);
               on prefill tokens the routed experts' grouped GEMMs also follow the part's
               measured MoE compute form, x (1 + m0 / m) x (1 + n0 / n) / ratio with m the
               (token, expert) pairs per touched expert of the step and n an expert's width on
               the rank (``AcceleratorArrays.moe_compute``, ``fleet.perf.kernel_moe_efficiency``);
   comm s    = ``fleet.perf.comm.StageComm``.
   Stage time = roof(the rest) + roof(the routed experts) + comm: the experts' grouped GEMMs are
   kernels of their own, each part of the step on its own roofline; roof = a smooth max
   (``_roof``).
3. Decode step of the replica (``step_s``): pp stage times (a stream's token passes every stage;
   the pp micro-batches keep every stage busy, so pp adds stages, not speed) + pp hops when pp > 1
   + the fixed step overhead (per step and per layer) + the draft cost.
4. Aggregated serving (``tpot_s``): each request that replaces a finished one gets its whole
   prompt (isl - cached tokens) prefilled in chunks of at most ``PREFILL_CHUNK_TOKENS`` riding
   with a decode step; P = batch x accepted / osl x (isl - cached) prefill tokens arrive per step,
   so a fraction P / chunk of the steps carries one (chunk = max(min(isl - cached, 8192), P)).
   TPOT = (decode step + P / chunk x (mixed step - decode step)) / accepted tokens per step,
   (1 - a^(k+1)) / (1 - a). ``tpot_burst_s``, the mean TPOT of a closed-loop benchmark, counts
   the share of that interference a request's decode window holds: all of it under a mixed
   scheduler, half under a prefill-first one, whose waves return as bursts
   (``fleet.perf.closed_loop.prefill_share_in_decode``). Prefill attention uses the prefill
   FLOPs per token-context-layer (MLA uncompressed, ``fleet.perf.arrays``).
5. Prefill alone (``prefill_s``) is the same stage model at the isl - cached uncached tokens in
   passes of at most 8192 (``prefill_wave_s``: one prompt on each of the dp attention ranks in
   the same passes, a prefill-only replica's cycle); TTFT floor = prefill + one decode step; a
   request holds its batch slot for ``request_s`` = TTFT floor + (osl - 1) x TPOT, so tokens/s
   per replica = batch x osl / request_s (the closed-loop throughput of a full batch).
   ``ttft_burst_s`` is the mean TTFT of a closed-loop benchmark at concurrency batch: waves
   prefilling all prompts at once or staggered, as the engine's scheduler makes them
   (``fleet.perf.closed_loop``).

Precision: 4-bit weight formats (``FOUR_BIT``) on an MoE model apply to the routed experts only;
the other linear weights are BF16 in bytes and FLOP rate (as published checkpoints ship them), or
FP8 where the model's ``four_bit_companion`` says so and the part runs FP8 (DeepSeek-V4).

DeepSeek-V4's compressed attention (``fleet.perf.compressed``): every layer's window is charged
as a sliding-window layer's; the compressed entries, indexer keys and compressor states beyond
it are added on those models' rows only.

DeepSeek Sparse Attention (``Mla.index_topk``, GLM-5): attention reads and scores only the
selected min(context, top-k) latent entries (mean over the positions), in MLA's
absorbed form in prefill as in decode, while the indexer reads and scores every token's key; the
KV held is the whole context's.

Block-sparse attention with its own indexer (``Model.block_sparse_attention``, MiniMax-M3): on
its layers attention reads and scores the K/V of the min(context, top-k blocks x block size)
selected tokens, the indexer every token's index key, held whole on every tp rank
(``fleet.perf.block_sparse``).

Prefix caching (``prefix_cached_tokens``) only removes prefill work: the cached prefix's KV is
held per stream and read every decode step like the rest of the prompt (memory, max batch and the
decode step use the full isl), and the uncached tokens' attention still spans the whole context.

Speculative decoding assumes an EAGLE/MTP-style draft head: one decoder layer of the target's width
plus the target's LM head, run k times per step (``draft_s``); see docs/performance-model.md.
SRAM-resident parts (memory_kind = "sram") use the same equations: a replica is a chain of pp
chips (or wafers) of tp each, weights and KV in their SRAM, only the residual stream crossing chip
boundaries (the pipeline hop).
"""

from __future__ import annotations

import numpy as np

from fleet.catalog import BYTES_PER_ELEMENT, FOUR_BIT, MOE_SKEW_EP, PRECISIONS
from fleet.catalog.engines import EXPERT_KINDS
from fleet.perf.arrays import AcceleratorArrays, CatalogArrays, ModelArrays
from fleet.perf.block_sparse import block_sparse_terms, index_heads_per_device
from fleet.perf.closed_loop import (
    ctx_hold_steps,
    prefill_share_in_decode,
    recv_wait_s,
    scheduler_bursts,
    ttft_closed_loop,
)
from fleet.perf.comm import Links, StageComm, pipeline_hop_s
from fleet.perf.compressed import compressed_work
from fleet.perf.memory import kv_tokens_held, memory_terms, weight_bytes_per_device
from fleet.perf.sparse import attention_work
from fleet.perf.types import Bound, Configs, Estimate, FloatArray, Problem

_BYTES = np.asarray([BYTES_PER_ELEMENT[p] for p in PRECISIONS])
_BF16 = PRECISIONS.index("bf16")
_FP8 = PRECISIONS.index("fp8")
_FP4 = PRECISIONS.index("fp4")
_FOUR_BIT = np.asarray([p in FOUR_BIT for p in PRECISIONS])
_KIND_BF16, _KIND_FP8, _KIND_FP8_BLOCK, _KIND_FP4, _KIND_INT4 = (
    EXPERT_KINDS.index(k) for k in ("bf16", "fp8", "fp8_block", "fp4", "int4")
)
_EXPERT_KIND = np.asarray(
    [
        {"bf16": _KIND_BF16, "fp8": _KIND_FP8, "fp4": _KIND_FP4, "int4": _KIND_INT4}.get(p, -1)
        for p in PRECISIONS
    ]
)
"""Expert kind (``EXPERT_KINDS``) of each weight precision; -1: no kind-specific kernel terms."""
ROOF_SHARPNESS = 2.0
"""p of the smooth roofline; preferred to max() (p = inf) by the calibration."""
PREFILL_CHUNK_TOKENS = 8192.0
"""Prompt tokens per forward pass under chunked prefill (TensorRT-LLM max_num_tokens and SGLang
chunked_prefill_size default to 8192)."""
DRAFT_OVERHEAD_FRACTION = 0.1
"""Share of the fixed step overhead each draft step costs (a few kernel launches)."""


def _roof(compute_s: FloatArray, memory_s: FloatArray) -> FloatArray:
    """Smooth roofline: the ROOF_SHARPNESS-norm of compute and memory time.

    >= max(compute, memory) (never faster than either roof), equal to it far from the ridge and
    sqrt(2) x at the ridge, where real kernels neither stream at full bandwidth nor compute at
    full rate.
    """
    if ROOF_SHARPNESS == 2.0:  # the same norm in three passes (times are far from overflow)
        out = compute_s * compute_s
        out += memory_s * memory_s
        return np.sqrt(out, out=out)
    hi = np.maximum(compute_s, memory_s)
    lo = np.minimum(compute_s, memory_s)
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    return hi * (1.0 + ratio**ROOF_SHARPNESS) ** (1.0 / ROOF_SHARPNESS)


_OWN_SLIDING, _SPLIT_STATE, _BLOCKS, _MAMBA, _COMPRESSED, _COMPANION = 1, 2, 4, 8, 16, 32
_BLOCK_SPARSE = 64


def _row_kinds(M: ModelArrays) -> np.ndarray:
    """Per model, bit flags of the terms only some models have, so they are computed on those
    rows alone (elsewhere they are exactly 0): _OWN_SLIDING, sliding-window layers of a shape of
    their own (heads, KV heads, KV elements or attention FLOPs differ from a full layer's:
    Gemma 4, MiMo-V2); _SPLIT_STATE, a state-space mixer whose heads tp must divide; _BLOCKS,
    single-sublayer blocks (mixer-only and FFN-only: Nemotron-H); _MAMBA, Mamba2 mixers;
    _COMPRESSED, DeepSeek-V4's compressed attention layers (``fleet.perf.compressed``);
    _COMPANION, non-expert weights kept at another precision than BF16 beside 4-bit experts;
    _BLOCK_SPARSE, block-sparse attention layers (MiniMax-M3: ``fleet.perf.block_sparse``)."""
    own = (
        (M.sliding_num_heads != M.num_heads)
        | (M.sliding_num_kv_heads != M.num_kv_heads)
        | (M.sliding_kv_elements_per_token_layer != M.kv_elements_per_token_layer)
        | (M.sliding_attention_flops_per_token_ctx_layer != M.attention_flops_per_token_ctx_layer)
    )
    blocks = (M.mixerless_layers > 0) | (M.ffnless_layers > 0)
    return (
        own * _OWN_SLIDING
        + (M.state_split_heads > 0) * _SPLIT_STATE
        + blocks * _BLOCKS
        + (M.conv_state_bytes_per_layer > 0) * _MAMBA
        + (M.block_sparse_layers > 0) * _BLOCK_SPARSE
        + ((M.csa_layers + M.hca_layers) > 0) * _COMPRESSED
        + (M.four_bit_companion != _BF16) * _COMPANION
    ).astype(np.int64)


def routing_skew(
    A: AcceleratorArrays, M: ModelArrays, a: np.ndarray, m: np.ndarray, ep: FloatArray
) -> FloatArray:
    """Per row: the most-loaded expert-parallel rank's routed-expert compute over an even
    share, at the row's ep (log2-interpolated between ``MOE_SKEW_EP``, flat beyond), for the
    model's routing on the part (1 for balanced routing and dense models)."""
    routing = M.moe_routing[m]
    out = np.ones_like(ep)
    skewed = np.flatnonzero(routing >= 0)
    if skewed.size == 0:
        return out
    acc, r = a[skewed], routing[skewed]
    x = np.clip(np.log2(ep[skewed]), 0.0, np.log2(MOE_SKEW_EP[-1]))
    grid = np.log2(np.asarray(MOE_SKEW_EP, dtype=np.float64))
    hi = np.clip(np.searchsorted(grid, x, side="right"), 1, grid.size - 1)
    lo = hi - 1
    w = (x - grid[lo]) / (grid[hi] - grid[lo])
    curves = A.moe_routing_skew
    out[skewed] = curves[acc, r, lo] * (1.0 - w) + curves[acc, r, hi] * w
    return out


def estimate(arrays: CatalogArrays, configs: Configs) -> Estimate:
    """Evaluate every configuration of ``configs``; never raises on bad rows (see ``problem``)."""
    M, A, S = arrays.models, arrays.accelerators, arrays.systems
    c = configs
    m, s = c.model, c.system
    a = S.accelerator[s]
    f = np.float64
    tp, pp, dp, ep = (np.maximum(x, 1).astype(f) for x in (c.tp, c.pp, c.dp, c.ep))
    batch = np.maximum(c.batch, 1).astype(f)
    isl = np.maximum(c.isl, 1).astype(f)
    cached = np.clip(c.prefix_cached_tokens, 0, np.maximum(c.isl - 1, 0)).astype(f)
    fresh = isl - cached  # prompt tokens that are prefilled
    osl = np.maximum(c.osl, 1).astype(f)
    k_draft = np.maximum(c.spec_draft_tokens, 0).astype(f)
    accept = np.clip(c.spec_acceptance, 0.0, 1.0)
    wp, kp = c.weight_precision, c.kv_precision

    layers = M.num_layers[m].astype(f)
    hidden = M.hidden_size[m]
    heads = M.num_heads[m]
    kv_heads = M.num_kv_heads[m]
    n_exp = M.num_experts[m]
    mla = M.is_mla[m]

    # (1) validity
    problem = np.zeros(len(c), dtype=np.int64)
    ctp = np.maximum(c.tp, 1)
    stage_devices_i = ctp * np.maximum(c.dp, 1)
    bad = (c.tp < 1) | (c.pp < 1) | (c.dp < 1) | (c.ep < 1) | (c.batch < 1)
    bad |= (c.isl < 1) | (c.osl < 1) | (c.spec_draft_tokens < 0)
    bad |= (c.prefix_cached_tokens < 0) | (c.prefix_cached_tokens >= c.isl)
    bad |= (c.spec_acceptance < 0) | (c.spec_acceptance > 1)
    bad |= heads % ctp != 0
    bad |= (mla == 0) & (kv_heads % ctp != 0) & (ctp % kv_heads != 0)
    # Rows whose sliding layers have a shape of their own (Gemma 4, MiMo-V2): the terms of that
    # shape are computed on these rows only (elsewhere they are exactly 0); both shapes split
    # over tp.
    kind = _row_kinds(M)[m]
    special = np.flatnonzero(kind)  # rows with any such term (one pass; the flags on these)
    special_kind = kind[special]

    def rows_of(flag: int) -> np.ndarray:
        return special[(special_kind & flag) != 0]

    own = rows_of(_OWN_SLIDING)
    if own.size:
        s_heads, s_kv_heads = M.sliding_num_heads[m[own]], M.sliding_num_kv_heads[m[own]]
        o_tp = ctp[own]
        bad[own] |= (s_heads % o_tp != 0) | (
            (mla[own] == 0) & (s_kv_heads % o_tp != 0) & (o_tp % s_kv_heads != 0)
        )
    bad |= c.pp > M.num_layers[m]
    # a Mamba2 mixer splits its heads and B/C groups over tp
    split_rows = rows_of(_SPLIT_STATE)
    if split_rows.size:
        bad[split_rows] |= np.fmod(M.state_split_heads[m[split_rows]], ctp[split_rows]) != 0
    is_moe = n_exp > 0
    cep = np.maximum(c.ep, 1)
    bad |= is_moe & ((n_exp % cep != 0) | (stage_devices_i % cep != 0))
    bad |= ~is_moe & (c.ep != 1)
    domain_i = np.minimum(S.scale_up_domain[s], S.devices_per_system[s])
    over = (stage_devices_i > domain_i) & (stage_devices_i % domain_i != 0)
    unsupported = ~(A.native[a, wp] | A.weight_only[a, wp]) | ~A.native[a, kp]
    problem[unsupported] = Problem.PRECISION_UNSUPPORTED
    problem[over] = Problem.OVER_SCALE_UP
    problem[bad] = Problem.BAD_LAYOUT

    # Shapes of one pipeline stage.
    n = tp * dp
    # Stages are balanced by bytes (layers / pp each, split inside a layer when pp does not divide
    # the layers, as SRAM pipelines do); a token passes every stage, so pp stages = the model once.
    frac = 1.0 / pp
    sliding_stage = M.sliding_layers[m] * frac
    linear_stage = M.linear_layers[m] * frac
    # single-sublayer blocks (block_pattern): FFN-only blocks attend nowhere, mixer-only blocks
    # have no FFN (both counts are 0 for layers of a mixer and an FFN)
    full_stage = layers * frac - sliding_stage - linear_stage
    blocks = rows_of(_BLOCKS)  # rows of single-sublayer block models
    if blocks.size:
        mixerless_stage = M.mixerless_layers[m[blocks]] * frac[blocks]
        full_stage[blocks] -= mixerless_stage
    tfrac = frac
    moe_t = M.moe_layers[m] * tfrac
    dense_t = layers * tfrac - moe_t
    sliding_t = M.sliding_layers[m] * tfrac
    linear_t = M.linear_layers[m] * tfrac
    full_t = layers * tfrac - sliding_t - linear_t
    # blocks ending in an attention-style all-reduce: every layer, or every mixer block
    mixer_t = dense_t + moe_t
    if blocks.size:
        o = blocks
        dense_t[o] -= M.ffnless_layers[m[o]] * tfrac[o]
        full_t[o] -= mixerless_stage
        mixer_t[o] = layers[o] * tfrac[o] - mixerless_stage
    # attention layers whose q/k norms span every head: one more all-reduce each (comm)
    norm_flag = M.qk_norm_across_heads[m]
    norm_t = (full_t + sliding_t) * norm_flag if np.any(norm_flag > 0.0) else None
    window = M.sliding_window[m]
    # A linear-attention layer's state is split over tp by heads, like KV heads.
    state_per_layer = M.state_bytes_per_layer[m] / tp

    # (memory) weights, KV, workspace. 4-bit formats on an MoE model: experts only (FOUR_BIT).
    rp = np.where(_FOUR_BIT[wp] & is_moe, _BF16, wp)  # precision of the non-expert weights
    companion = rows_of(_COMPANION)  # their 4-bit checkpoints keep them FP8 (DeepSeek-V4)
    if companion.size:
        o = companion
        keep = M.four_bit_companion[m[o]]
        native = A.native[a[o], keep]
        rp[o] = np.where(_FOUR_BIT[wp[o]] & is_moe[o] & native, keep, rp[o])
    wbytes = _BYTES[wp]
    rbytes = _BYTES[rp]
    kbytes = _BYTES[kp]
    replicated, experts = M.replicated_params[m], M.expert_params[m]
    weights = weight_bytes_per_device(
        weight_bytes_per_param=wbytes,
        replicated_bytes_per_param=rbytes,
        replicated_params=replicated,
        expert_params=experts,
        embedding_params=M.embedding_params[m],
        lm_head_params=M.lm_head_params[m],
        tied=M.tied_embeddings[m],
        stage_fraction=frac,
        tp=tp,
        devices_per_stage=n,
        pp=pp,
    )
    kv_share = np.where(mla > 0, 1.0, np.maximum(1.0 / tp, 1.0 / kv_heads))
    kv_per_layer_token = M.kv_elements_per_token_layer[m] * kv_share * kbytes
    held = kv_tokens_held(isl + osl + k_draft, full_stage, sliding_stage, window)
    kv_bytes_per_stream = kv_per_layer_token * held + linear_stage * state_per_layer
    # a sliding layer of its own shape holds own_kv more per token than a full layer
    own_kv = own_attn = np.zeros(0)
    if own.size:
        o = own
        s_kv_share = np.where(mla[o] > 0, 1.0, np.maximum(1.0 / tp[o], 1.0 / s_kv_heads))
        own_kv = M.sliding_kv_elements_per_token_layer[m[o]] * s_kv_share * kbytes[o]
        own_kv = own_kv - kv_per_layer_token[o]
        kv_bytes_per_stream[o] += (
            own_kv * sliding_stage[o] * np.minimum(isl[o] + osl[o] + k_draft[o], window[o])
        )
    # block-sparse layers (MiniMax-M3): index keys held, selected K/V read (fleet.perf.block_sparse)
    sparse_rows = rows_of(_BLOCK_SPARSE)
    if sparse_rows.size:
        o, mo = sparse_rows, m[sparse_rows]
        index_heads = index_heads_per_device(M.block_sparse_index_heads[mo], tp[o])
        block_sparse = block_sparse_terms(
            sparse_layers=M.block_sparse_layers[mo] * frac[o],
            kv_per_layer_token=kv_per_layer_token[o],
            index_per_layer_token=M.block_sparse_index_elements_per_token_layer[mo] * kbytes[o],
            attn_per_ctx=M.attention_flops_per_token_ctx_layer[mo] / tp[o],
            attn_prefill_per_ctx=M.attention_prefill_flops_per_token_ctx_layer[mo] / tp[o],
            index_per_ctx=M.block_sparse_index_flops_per_head_ctx[mo] * index_heads,
            topk_tokens=M.block_sparse_topk_tokens[mo],
            isl=isl[o],
            osl=osl[o],
            cached=cached[o],
            draft=k_draft[o],
        )
        kv_bytes_per_stream[o] += block_sparse.held_per_stream
    # DeepSeek-V4: compressed entries beyond every layer's window (fleet.perf.compressed)
    compressed = rows_of(_COMPRESSED)
    if compressed.size:
        o, mo = compressed, m[compressed]
        cw = compressed_work(
            csa_layers=M.csa_layers[mo] * frac[o],
            csa_ratio=M.csa_ratio[mo],
            hca_layers=M.hca_layers[mo] * frac[o],
            hca_ratio=M.hca_ratio[mo],
            topk=M.compressed_topk[mo],
            entry_bytes=kv_per_layer_token[o],
            index_bytes=M.index_key_bytes_per_entry[mo],
            state_bytes=M.compressor_state_bytes[mo] * frac[o],
            attn_flops_per_entry=M.attention_flops_per_token_ctx_layer[mo] / tp[o],
            index_flops_per_entry=M.index_flops_per_entry[mo] / tp[o],
            held_tokens=isl[o] + osl[o] + k_draft[o],
            isl=isl[o],
            osl=osl[o],
            cached=cached[o],
        )
        kv_bytes_per_stream[o] += cw.held_per_stream
    mem = memory_terms(
        weight_bytes=weights,
        kv_bytes_per_stream=kv_bytes_per_stream,
        batch=batch,
        dp=dp,
        tp=tp,
        isl=isl,
        hidden_size=hidden,
        vocab_size=M.vocab_size[m],
        memory_bytes=A.memory_bytes[a],
        is_sram=A.is_sram[a],
        kv_of_free_memory=A.kv_of_free_memory[a],
    )
    fits = (mem.total_bytes <= mem.usable_bytes) & (problem == Problem.OK)
    problem[(problem == Problem.OK) & ~fits] = Problem.DOES_NOT_FIT

    # Rates.
    # Bandwidths: weights stream at their precision's fraction (non-expert weights at theirs),
    # routed experts at the grouped-GEMM (MoE kernel) fraction of their precision, the LM head
    # at the BF16 one, KV reads of decode attention at the KV fraction.
    peak_bw = A.memory_bandwidth_bytes_per_s[a]
    bw_e = peak_bw * A.expert_bandwidth_fraction_by_precision[a, wp]
    bw_r = peak_bw * A.bandwidth_fraction_by_precision[a, rp]
    bw_head = peak_bw * A.bandwidth_fraction[a]
    bw_kv = peak_bw * A.kv_bandwidth_fraction[a]
    compute_col = np.where(A.native[a, wp], wp, _BF16)
    flops = A.peak_flops[a, compute_col] * A.flops_fraction_by_precision[a, compute_col]
    flops_r = np.where(rp == wp, flops, A.peak_flops[a, rp] * A.flops_fraction_by_precision[a, rp])
    attn_flops_rate = A.peak_flops[a, _BF16] * A.flops_fraction[a]
    # prefill (flash) attention at its own measured fraction of the BF16 peak (kernel tables)
    attn_prefill_rate = A.peak_flops[a, _BF16] * A.prefill_attention_flops_fraction[a]
    link = A.scale_up_bytes_per_s[a] * A.link_fraction[a]
    hop = A.scale_up_latency_s[a]
    nic = S.scale_out_bytes_per_s[s] / S.devices_per_system[s] * A.link_fraction[a]
    links = Links(link, hop, nic, S.scale_out_latency_s[s], A.collective_overhead_s[a])
    in_one_domain = (n * pp <= S.scale_up_domain[s]) & (n * pp <= S.devices_per_system[s])
    pp_link = np.where(in_one_domain, link, S.scale_out_bytes_per_s[s] * A.link_fraction[a])
    pp_latency = np.where(in_one_domain, hop, S.scale_out_latency_s[s])
    units = M.layer_units[m]  # layers as the per-layer cost counts them (blocks / 2)
    residual = hidden * M.residual_width_ratio[m]  # what a pipeline hop carries
    overhead = A.step_overhead_s[a] + A.layer_overhead_s[a] * units
    # each MoE layer's routed-expert call takes a fixed kernel time (routing, permutation, the
    # grouped GEMMs' launch and tail; measured; native 4-bit experts at their own kernel's), but
    # for weight-only 4-bit experts, whose streaming figure is fitted end to end on runs (or
    # moved from that fit) and holds it: they take only an engine's fitted W4A16 call term (0
    # for the pooled default)
    call = np.where(_FOUR_BIT[wp], A.moe_fp4_call_s[a], A.moe_call_s[a])
    kernel_fixed = np.where(A.weight_only[a, wp] & _FOUR_BIT[wp], A.moe_w4a16_call_s[a], call)
    overhead = overhead + kernel_fixed * M.moe_layers[m]
    # each DeepSeek Sparse Attention layer's attention module likewise (its kernels' fixed time,
    # the indexer and top-k included; measured, fleet.perf.kernel_dsa): every full-attention
    # layer of a model with a top-k, on every stage
    dsa_layers = np.where(np.isfinite(M.sparse_topk[m]), full_t * pp, 0.0)
    overhead = overhead + A.dsa_call_s[a] * dsa_layers
    # an engine's block-scaled FP8 MoE kernel: a fixed time per expert held on the rank, in every
    # MoE layer of every forward pass (fleet.perf.kernel_moe_grid; 0 for the pooled default, and
    # where the configuration runs a kernel without it: Configs.moe_held_expert_time)
    grid = A.block_fp8_moe_local_expert_s[a] * M.fp8_block_scaled[m] * c.moe_held_expert_time
    if np.any(grid > 0.0):
        held = np.where(wp == _FP8, n_exp / ep, 0.0)
        overhead = overhead + grid * M.moe_layers[m] * held

    head_bytes = 2.0 * M.lm_head_params[m] / tp
    head_flops_per_token = 2.0 * M.lm_head_params[m] / tp
    touched_log = np.log1p(-np.minimum(M.active_expert_fraction[m], 1.0 - 1e-12))
    active_experts = experts * M.active_expert_fraction[m]
    attn_per_ctx = M.attention_flops_per_token_ctx_layer[m] / tp
    attn_prefill_per_ctx = M.attention_prefill_flops_per_token_ctx_layer[m] / tp
    # a sliding layer of its own shape scores own_attn more FLOPs per context token (GQA:
    # prefill as decode)
    if own.size:
        own_attn = M.sliding_attention_flops_per_token_ctx_layer[m[own]] / tp[own]
        own_attn = own_attn - attn_per_ctx[own]
    ctx_decode = kv_tokens_held(isl + 0.5 * osl, full_t, sliding_t, window)
    # mean context of a prefilled token: after the cached prefix, half-way through the rest
    ctx_prefill = kv_tokens_held(cached + 0.5 * fresh, full_t, sliding_t, window)
    # attention's reads and FLOPs: every context token, or under DeepSeek Sparse Attention the
    # top-k selected ones and the indexer over all (fleet.perf.sparse)
    work = attention_work(
        kv_per_layer_token=kv_per_layer_token,
        index_per_layer_token=M.index_elements_per_token_layer[m] * kbytes,
        attn_per_ctx=attn_per_ctx,
        attn_prefill_per_ctx=attn_prefill_per_ctx,
        index_per_ctx=M.index_flops_per_token_ctx_layer[m] / tp,
        topk=M.sparse_topk[m],
        isl=isl,
        osl=osl,
        cached=cached,
        ctx_decode=ctx_decode,
        ctx_prefill=ctx_prefill,
        full_layers=full_t,
        sliding_layers=sliding_t,
        window=window,
        own_rows=own,
        own_kv=own_kv,
        own_attn=own_attn,
    )
    if sparse_rows.size:  # fresh arrays of attention_work: added to in place
        work.kv_read_per_stream[sparse_rows] += block_sparse.kv_read_per_stream
        work.decode_flops_per_token[sparse_rows] += block_sparse.decode_flops_per_token
        work.prefill_flops_per_token[sparse_rows] += block_sparse.prefill_flops_per_token
    kv_read_per_stream = work.kv_read_per_stream
    if compressed.size:
        kv_read_per_stream[compressed] += cw.read_per_stream
        work.decode_flops_per_token[compressed] += cw.decode_flops_per_token
        work.prefill_flops_per_token[compressed] += cw.prefill_flops_per_token
    # the state of a linear-attention layer is read and written back every decode step, at the
    # state kernels' measured rate; a Mamba2 mixer's convolution window at its conv kernel's
    state_rw_s = 2.0 * linear_t * state_per_layer / (peak_bw * A.state_bandwidth_fraction[a])
    mamba = rows_of(_MAMBA)  # rows of Mamba2 models
    if mamba.size:
        o, ao = mamba, a[mamba]
        conv_per_layer = M.conv_state_bytes_per_layer[m[o]] / tp[o]
        recurrent_per_layer = state_per_layer[o] - conv_per_layer
        state_rw_s[o] = 2.0 * linear_t[o] * recurrent_per_layer / (
            peak_bw[o] * A.state_bandwidth_fraction[ao]
        ) + 2.0 * linear_t[o] * conv_per_layer / (peak_bw[o] * A.mamba_conv_bandwidth_fraction[ao])

    # seconds of reading per stage step: fixed weights, all routed experts, KV per stream
    fixed_read_s = tfrac * rbytes * replicated / (tp * bw_r) + head_bytes / (pp * bw_head)
    expert_read_s = tfrac * wbytes * experts / (n * bw_e)
    kv_read_s = kv_read_per_stream / bw_kv + state_rw_s

    # Compute seconds per token of a stage step: linear layers (non-expert at their precision's
    # rate, split over the busy attention ranks; experts at the weight precision's, over all n
    # devices), plus per decode token the LM head and attention over the decode context, per
    # prefill token attention over the prefill context (at BF16), both on the busy ranks.
    replicated_per_token_s = 2.0 * tfrac * replicated / (tp * flops_r)
    expert_per_token_s = 2.0 * tfrac * active_experts / (n * flops) * routing_skew(A, M, a, m, ep)
    # on prefill tokens the experts' grouped GEMMs run at the engine's own prefill-sized MoE
    # kernels: a measured multiple of TensorRT-LLM's per expert kind (1 for the pooled default,
    # and where the engine's own form below replaces the part's)
    kind = _EXPERT_KIND[wp]  # per weight precision; block-scaled FP8 checkpoints below
    kind = np.where((kind == _KIND_FP8) & (M.fp8_block_scaled[m] > 0.0), _KIND_FP8_BLOCK, kind)
    expert_prefill_per_token_s = expert_per_token_s
    if np.any(A.expert_prefill_time != 1.0):
        prefill_time = np.where(kind >= 0, A.expert_prefill_time[a, np.maximum(kind, 0)], 1.0)
        expert_prefill_per_token_s = expert_per_token_s * prefill_time
    # On prefill tokens the grouped GEMMs' rate follows the call's shape (the part's measured MoE
    # compute form, or the engine's own, fleet.perf.kernel_moe_efficiency):
    # (1 + m0 / m) x (1 + n0 / n) / ratio, m the (token, expert) pairs per expert the step
    # touches, n an expert's intermediate width on the rank; (ratio, m0, n0) = (1, 0, 0) where
    # the part and its family have no form. The width term is the row's own: it goes into the
    # prefill rate once.
    forms = np.concatenate([A.moe_compute, np.ones((len(A.ids), 1, 3))], axis=1)
    forms[:, -1, 1:] = 0.0  # the flat form, for rows of no expert kind
    pick = a * forms.shape[1] + np.where(kind < 0, forms.shape[1] - 1, kind)
    ratio, m0, n0 = (forms[:, :, i].ravel()[pick] for i in range(3))
    moe_width = M.expert_intermediate_size[m] / np.maximum(n / ep, 1.0)
    expert_prefill_per_token_s = expert_prefill_per_token_s * (
        (1.0 + n0 / np.maximum(moe_width, 1.0)) / ratio
    )
    # the token term's coefficient: the prefill rate x m0 over the experts' share k / E (dense
    # rows have no experts: both are 0 there whatever the form reads)
    prefill_m0_per_share = (
        expert_prefill_per_token_s * m0 / np.maximum(M.active_expert_fraction[m], 1e-12)
    )

    def touched_at(tokens: FloatArray) -> FloatArray:
        """Fraction of the routed experts a step of ``tokens`` tokens touches (uniform routing)."""
        return -np.expm1(tokens * touched_log)

    def expert_prefill_s(
        prefill_tokens: FloatArray, tokens: FloatArray, touched: FloatArray
    ) -> FloatArray:
        """The routed experts' compute seconds of a step's ``prefill_tokens`` (of ``tokens`` in
        all, > 0, touching ``touched`` of the experts): the prefill rate x (1 + m0 / m), m =
        tokens x k / E / touched pairs per touched expert."""
        return prefill_tokens * (
            expert_prefill_per_token_s + prefill_m0_per_share * touched / tokens
        )

    state_per_token = linear_t * M.state_flops_per_token_layer[m] / tp
    decode_per_token_s = head_flops_per_token / (pp * flops_r) + (
        work.decode_flops_per_token + state_per_token
    ) / (attn_flops_rate)
    # the chunked linear-attention scan of a prefill runs at its own measured (low) rate
    state_prefill_rate = A.peak_flops[a, _BF16] * A.state_prefill_flops_fraction[a]
    prefill_per_token_s = (
        work.prefill_flops_per_token / attn_prefill_rate + state_per_token / state_prefill_rate
    )
    if mamba.size:
        # and a Mamba2 mixer's causal convolution over the prompt at its measured bandwidth
        o = mamba
        prefill_per_token_s[o] += (
            linear_t[o]
            * M.conv_bytes_per_token_layer[m[o]]
            / tp[o]
            / (peak_bw[o] * A.mamba_conv_prefill_bandwidth_fraction[a[o]])
        )

    def busy_ranks(streams: FloatArray) -> FloatArray:
        """Attention ranks a step's streams occupy: at most dp, at least one."""
        return np.minimum(dp, np.maximum(streams, 1.0))

    def compute(
        decode_tokens: FloatArray,
        prefill_tokens: FloatArray,
        ranks: FloatArray,
        touched: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:
        """Compute seconds of one stage step whose tokens spread over ``ranks`` attention ranks
        and touch ``touched`` of the experts: (the dense layers, attention and LM head; the
        routed experts)."""
        tokens = decode_tokens + prefill_tokens
        experts = decode_tokens * expert_per_token_s
        if prefill_tokens.any():  # not on a pure decode step
            experts = experts + expert_prefill_s(prefill_tokens, tokens, touched)
        rest = (
            tokens * replicated_per_token_s / ranks
            + (decode_tokens * decode_per_token_s + prefill_tokens * prefill_per_token_s) / ranks
        )
        return rest, experts

    def memory(
        touched: FloatArray, streams: FloatArray, ranks: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """Memory seconds of one stage step: (fixed weights and KV; the experts as touched)."""
        return fixed_read_s + kv_read_s * streams / ranks, expert_read_s * touched

    def core(comp: tuple[FloatArray, FloatArray], mem: tuple[FloatArray, FloatArray]) -> FloatArray:
        """A step's kernels without communication: the routed experts' grouped GEMMs are kernels
        of their own, each on its own roofline, beside the rest of the step's."""
        return _roof(comp[0], mem[0]) + _roof(comp[1], mem[1])

    stage_comm = StageComm(
        tp=tp,
        dp=dp,
        ep=ep,
        hidden_size=hidden,
        experts_per_token=M.experts_per_token[m],
        dense_layers=dense_t,
        moe_layers=moe_t,
        mixer_layers=mixer_t,
        norm_layers=norm_t,
        expert_width_ratio=M.expert_width_ratio[m],
        domain=domain_i.astype(f),
        link=links,
    )

    def stage(decode_tokens: FloatArray, prefill_tokens: FloatArray, streams: FloatArray):
        """Compute, memory and comm seconds of one stage step (tokens summed over dp ranks).

        The streams are spread over the dp attention ranks, at least one per busy rank: fewer
        streams than ranks leave ranks idle, and a lone prefill runs on one rank.
        """
        tokens = decode_tokens + prefill_tokens
        ranks = busy_ranks(streams)
        touched = touched_at(tokens)
        memory_s = memory(touched, streams, ranks)
        compute_s = compute(decode_tokens, prefill_tokens, ranks, touched)
        comm_s = stage_comm(tokens)
        hop_s = np.where(
            pp > 1,
            pp
            * pipeline_hop_s(
                tokens=tokens, hidden_size=residual, link_bytes_per_s=pp_link, latency_s=pp_latency
            ),
            0.0,
        )
        return compute_s, memory_s, comm_s, hop_s

    # (2-3) pure decode step of the replica
    verify = k_draft + 1.0
    micro = np.maximum(batch / pp, 1.0)  # streams per micro-batch; with batch < pp stages idle
    zero = np.zeros_like(micro)
    comp_d, mem_d, comm_d, hops_d = stage(micro * verify, zero, micro)
    core_d = core(comp_d, mem_d)
    draft_s = k_draft * (
        pp * core_d / units + head_bytes / bw_head + DRAFT_OVERHEAD_FRACTION * overhead
    )
    step_s = pp * (core_d + comm_d) + hops_d + overhead + draft_s
    accepted = np.where(
        k_draft > 0,
        np.where(accept < 1.0, (1.0 - accept**verify) / np.maximum(1.0 - accept, 1e-12), verify),
        1.0,
    )

    # (4) aggregated serving: each replacement request's whole prompt is prefilled in chunks of
    # at most PREFILL_CHUNK_TOKENS that ride with a decode step; the extra time of those mixed
    # steps is spread over all steps (a fraction prefill_per_step / chunk of the steps carry
    # one). Prompts arriving faster than one chunk per step all ride in every step (the fused
    # limit), so that fraction never exceeds 1.
    decode_s = pp * (core_d + comm_d) + hops_d
    prefill_per_step = micro * accepted * fresh / osl  # prefill tokens per stage step, mean
    chunk = np.maximum(np.minimum(fresh, PREFILL_CHUNK_TOKENS), prefill_per_step)
    comp_a, mem_a, comm_a, hops_a = stage(micro * verify, chunk, micro)
    mixed_s = pp * (core(comp_a, mem_a) + comm_a) + hops_a
    interference = prefill_per_step / chunk * (mixed_s - decode_s)
    agg_step = step_s + interference
    tpot = agg_step / accepted
    # A closed-loop benchmark's mean TPOT: under a prefill-first scheduler its waves return as
    # bursts and half of a wave's prefill lands in the TTFT (closed_loop.prefill_share_in_decode);
    # not when the benchmark's lengths vary (its waves arrive staggered: closed_loop).
    bursts = scheduler_bursts(A.prefill_first[a], c.lengths_vary)
    share = prefill_share_in_decode(bursts)
    tpot_burst = (step_s + share * interference) / accepted

    # (5) prefill of one request alone (TTFT floor), and a burst of batch requests at once
    one = np.ones_like(micro)
    first = np.minimum(fresh, PREFILL_CHUNK_TOKENS)
    passes = fresh / first
    comp_p, mem_p, comm_p, hops_p = stage(zero, first, one)
    pass_s = core(comp_p, mem_p) + comm_p  # one stage, one chunk
    prefill_s = (passes + pp - 1.0) * pass_s + hops_p + passes * overhead
    ttft = prefill_s + step_s
    # Burst: all batch requests start together (a closed-loop benchmark). In the first wave each
    # dp rank prefills its batch / dp prompts in full chunks; the mean request is served after
    # half the wave's tokens (plus its own), then one decode step. Later waves arrive staggered
    # by the first one's spread (a request waits for the step in flight, then its prefill), or
    # as bursts again under a prefill-first scheduler (fleet.perf.closed_loop).
    # A burst pass of b = chunk x dp tokens, from the one-prompt pass of `first` tokens: compute
    # is linear in the prompt tokens; communication and hops are affine in the tokens of a step
    # (fleet.perf.comm; tests/fleet/test_prefill_precision.py checks it), their slope read off
    # the decode and mixed steps, which differ by `chunk` tokens.
    rank_tokens = np.ceil(batch / dp) * fresh
    burst_chunk = np.minimum(rank_tokens, PREFILL_CHUNK_TOKENS)
    extra = burst_chunk * dp - first
    touched_b = touched_at(burst_chunk * dp)
    comp_b = compute(zero, burst_chunk * dp, dp, touched_b)
    mem_b = memory(touched_b, one, dp)
    comm_b = comm_p + (comm_a - comm_d) / chunk * extra
    hops_b = hops_p + (hops_a - hops_d) / chunk * extra
    burst_passes = 0.5 * (rank_tokens + fresh) / burst_chunk
    burst_pass_s = core(comp_b, mem_b) + comm_b
    first_wave = (burst_passes + pp - 1.0) * burst_pass_s + hops_b + burst_passes * overhead
    # A prefill-only replica (disaggregated serving) keeps every attention rank busy: each dp
    # rank prefills its own prompt in the same passes (dp prompts per prefill_wave_s; equal to
    # prefill_s when dp = 1), costed like the burst pass above with one prompt per rank.
    wave_extra = first * (dp - 1.0)
    touched_w = touched_at(first * dp)
    comp_w = compute(zero, first * dp, dp, touched_w)
    mem_w = memory(touched_w, dp, dp)
    comm_w = comm_p + (comm_a - comm_d) / chunk * wave_extra
    hops_w = hops_p + (hops_a - hops_d) / chunk * wave_extra
    prefill_wave_s = (passes + pp - 1.0) * (core(comp_w, mem_w) + comm_w) + hops_w
    prefill_wave_s = prefill_wave_s + passes * overhead
    # A staggered arrival meets a decoding replica: the step in flight, the scheduler's next
    # poll for new requests (closed_loop.recv_wait_s), any hold of new prompts for a batch
    # (closed_loop.ctx_hold_steps, prompts arriving as requests finish), then its own prefill
    # and first step.
    staggered = ttft + agg_step
    if np.any(c.recv_interval > 1):  # a benchmark's server setting; serving grids have none
        staggered = staggered + recv_wait_s(c.recv_interval, step_s)
    if np.any(c.ctx_hold_iters > 0):
        arrivals = batch * agg_step / (ttft + (osl - 1.0) * tpot)
        held = ctx_hold_steps(c.ctx_hold_requests, c.ctx_hold_iters, c.ctx_hold_periodic, arrivals)
        staggered = staggered + held * agg_step
    ttft_burst = ttft_closed_loop(first_wave + step_s, staggered, bursts, A.request_overhead_s[a])
    request_s = ttft + (osl - 1.0) * tpot
    devices = (tp * dp * pp).astype(np.int64)
    per_replica = batch * osl / request_s
    systems = -(-devices // S.devices_per_system[s])

    compute_t, memory_t = pp * (comp_d[0] + comp_d[1]), pp * (mem_d[0] + mem_d[1])
    comm_t = pp * comm_d + hops_d
    overhead_t = overhead + draft_s
    bound = np.where(
        np.maximum(compute_t, memory_t) >= np.maximum(comm_t, overhead_t),
        np.where(compute_t >= memory_t, Bound.COMPUTE, Bound.MEMORY),
        np.where(comm_t >= overhead_t, Bound.COMMUNICATION, Bound.OVERHEAD),
    ).astype(np.int64)

    invalid = (problem != Problem.OK) & (problem != Problem.DOES_NOT_FIT)

    def out(x: FloatArray) -> FloatArray:
        # in place: every array passed is a fresh result of this call, used nowhere else
        np.putmask(x, invalid, np.nan)
        return x

    return Estimate(
        problem=problem,
        fits=fits,
        devices_per_replica=devices,
        systems_per_replica=systems.astype(np.int64),
        weight_bytes_per_device=out(mem.weight_bytes),
        kv_bytes_per_device=out(mem.kv_bytes),
        workspace_bytes_per_device=out(mem.workspace_bytes),
        memory_bytes_per_device=out(mem.total_bytes),
        usable_bytes_per_device=mem.usable_bytes,
        max_batch=np.where(invalid, 0, mem.max_batch).astype(np.int64),
        step_compute_s=out(compute_t),
        step_memory_s=out(memory_t),
        step_comm_s=out(comm_t),
        step_overhead_s=out(overhead_t),
        step_s=out(step_s),
        bound=bound,
        tokens_per_step=accepted,
        tpot_s=out(tpot),
        tpot_burst_s=out(tpot_burst),
        tokens_per_s_per_user=out(1.0 / tpot),
        tokens_per_s_per_replica=out(per_replica),
        tokens_per_s_per_device=out(per_replica / devices),
        prefill_s=out(prefill_s),
        prefill_wave_s=out(prefill_wave_s),
        ttft_floor_s=out(ttft),
        ttft_burst_s=out(ttft_burst),
        request_s=out(request_s),
        step_draft_s=out(draft_s),
        aggregated_step_s=out(agg_step),
    )
