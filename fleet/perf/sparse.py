"""DeepSeek Sparse Attention (``Mla.index_topk``, GLM-5) in the performance model.

A lightning indexer scores every context token; attention then reads and scores only the
min(context, top-k) tokens it selects, in MLA's MQA (absorbed) form in prefill as in decode
(the DeepSeek-V3.2-Exp report, "instantiation under MLA"). Per layer and stream: a decode step
reads the latent of the selected tokens (their mean over the decode positions,
``mean_capped``) and the indexer key of every token; attention FLOPs run over the selected
tokens, the indexer's over all of them; a prefill likewise over the prompt's positions. The KV
held is the whole context's (``fleet.perf.memory``). Dense rows (top-k = inf) keep exactly the
dense figures; only the sparse rows are recomputed, so a batch without them costs nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet.perf.memory import kv_tokens_held
from fleet.perf.types import FloatArray


def mean_capped(low: FloatArray, high: FloatArray, cap: FloatArray) -> FloatArray:
    """Mean of min(x, cap) over x uniform on [low, high] (low < high): the mean context a
    top-k sparse attention reads over a range of positions; low + (high - low) / 2 when cap >=
    high (dense attention: cap = inf)."""
    c = np.clip(cap, low, high)
    span = np.maximum(high - low, 1.0)
    inside = ((c - low) * 0.5 * (low + c) + (high - c) * c) / span
    return np.where(cap >= high, low + 0.5 * (high - low), np.where(cap <= low, cap, inside))


@dataclass(frozen=True, slots=True)
class AttentionWork:
    """Per configuration: the KV bytes one stream's decode step reads per device, and the
    attention FLOPs (per device) per decode token and per prefill token."""

    kv_read_per_stream: FloatArray
    decode_flops_per_token: FloatArray
    prefill_flops_per_token: FloatArray


def attention_work(
    *,
    kv_per_layer_token: FloatArray,
    index_per_layer_token: FloatArray,
    attn_per_ctx: FloatArray,
    attn_prefill_per_ctx: FloatArray,
    index_per_ctx: FloatArray,
    topk: FloatArray,
    isl: FloatArray,
    osl: FloatArray,
    cached: FloatArray,
    ctx_decode: FloatArray,
    ctx_prefill: FloatArray,
    full_layers: FloatArray,
    sliding_layers: FloatArray,
    window: FloatArray,
    own_rows: np.ndarray | None = None,
    own_kv: FloatArray | None = None,
    own_attn: FloatArray | None = None,
) -> AttentionWork:
    """Dense figures for every row (every context token read and scored), then the sparse rows
    (finite ``topk``) replaced: latents of the selected tokens, indexer keys and scores of all.
    ``ctx_*`` are the dense layer-tokens (``kv_tokens_held`` at the mean context). On
    ``own_rows``, sliding layers of their own shape (GQA only, never sparse) read ``own_kv``
    bytes and score ``own_attn`` FLOPs more per context token than a full layer (one value per
    row of ``own_rows``)."""
    kv_read = kv_per_layer_token * ctx_decode
    decode = attn_per_ctx * ctx_decode
    prefill = attn_prefill_per_ctx * ctx_prefill
    if own_rows is not None and own_rows.size:
        o = own_rows
        assert own_kv is not None and own_attn is not None
        # sliding layer-tokens at the mean contexts ctx_* count: the prompt and half the output
        # in decode, the cached prefix and half the rest in prefill
        sliding_decode = sliding_layers[o] * np.minimum(isl[o] + 0.5 * osl[o], window[o])
        sliding_prefill = sliding_layers[o] * np.minimum(
            cached[o] + 0.5 * (isl[o] - cached[o]), window[o]
        )
        kv_read[o] += own_kv * sliding_decode
        decode[o] += own_attn * sliding_decode
        prefill[o] += own_attn * sliding_prefill
    sparse = np.flatnonzero(np.isfinite(topk))
    if sparse.size:
        s = sparse
        k, lo = topk[s], isl[s]
        held = full_layers[s], sliding_layers[s], window[s]
        sel_decode = kv_tokens_held(mean_capped(lo, lo + osl[s], k), *held)
        sel_prefill = kv_tokens_held(mean_capped(cached[s], lo, k), *held)
        index = index_per_layer_token[s]
        kv_read[s] = (kv_per_layer_token[s] - index) * sel_decode + index * ctx_decode[s]
        decode[s] = attn_per_ctx[s] * sel_decode + index_per_ctx[s] * ctx_decode[s]
        prefill[s] = attn_prefill_per_ctx[s] * sel_prefill + index_per_ctx[s] * ctx_prefill[s]
    return AttentionWork(kv_read, decode, prefill)
