"""Block-sparse attention with an indexer of its own (MiniMax Sparse Attention, MiniMax-M3) in
the performance model.

On each block-sparse layer the KV cache is cut into blocks of ``block_size`` tokens. Per query,
an indexer of ``index_n_heads`` heads (one per GQA group) scores every cached token's index key
(one ``index_head_dim``-wide key per token and layer, which all its heads share) and keeps the
``topk_blocks`` best blocks per group, the query's own (local) block among them (MiniMax's MSA
kernels return the local block as the last of the top-k); attention then reads and scores only
the keys and values of those blocks: at most top-k x block size tokens per query, 2048 on
MiniMax-M3 (public MSA repository, github.com/MiniMax-AI/MSA, and the MiniMax-M3 model card).

Per layer and stream, against the dense figures ``fleet.perf.model`` computes for every layer:

- held: every token's K and V stay cached (blocks are chosen from all of them), plus its index
  key, which each tensor-parallel rank keeps whole (the indexer's key is not split by heads);
- decode: the K/V read and the attention FLOPs run over the selected min(context, top-k)
  tokens (their mean over the decode positions, ``fleet.perf.sparse.mean_capped``); the indexer
  reads every token's index key and scores it with each of its heads on this rank
  (2 x index_head_dim FLOPs per head, the heads split over tp like the KV heads);
- prefill: likewise over the prompt's positions after the cached prefix.

Only rows of models with block-sparse layers are evaluated (``fleet.perf.model._row_kinds``);
the terms returned are what those rows add to the dense figures.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet.perf.sparse import mean_capped
from fleet.perf.types import FloatArray


@dataclass(frozen=True, slots=True)
class BlockSparseTerms:
    """Per row of block-sparse models, what they add to the dense figures of their stage, per
    device: index-key bytes one stream holds, KV bytes one stream's decode step reads, and
    attention FLOPs per decode token and per prefill token (negative where the selection reads
    fewer tokens than the dense context)."""

    held_per_stream: FloatArray
    kv_read_per_stream: FloatArray
    decode_flops_per_token: FloatArray
    prefill_flops_per_token: FloatArray


def block_sparse_terms(
    *,
    sparse_layers: FloatArray,
    kv_per_layer_token: FloatArray,
    index_per_layer_token: FloatArray,
    attn_per_ctx: FloatArray,
    attn_prefill_per_ctx: FloatArray,
    index_per_ctx: FloatArray,
    topk_tokens: FloatArray,
    isl: FloatArray,
    osl: FloatArray,
    cached: FloatArray,
    draft: FloatArray,
) -> BlockSparseTerms:
    """``sparse_layers``: the stage's block-sparse layers; ``kv_per_layer_token``: K and V bytes
    per token and layer on this device; ``index_per_layer_token``: index-key bytes per token and
    layer (whole on every tp rank); ``attn_*per_ctx`` and ``index_per_ctx``: FLOPs per query
    token and context token on this device. All arrays have one value per row."""
    held = sparse_layers * index_per_layer_token * (isl + osl + draft)
    # decode: the mean context over the output positions, and the selected part of it
    ctx_decode = isl + 0.5 * osl
    sel_decode = mean_capped(isl, isl + osl, topk_tokens)
    kv_read = sparse_layers * (
        kv_per_layer_token * (sel_decode - ctx_decode) + index_per_layer_token * ctx_decode
    )
    decode = sparse_layers * (attn_per_ctx * (sel_decode - ctx_decode) + index_per_ctx * ctx_decode)
    # prefill: a prompt token after the cached prefix, half-way through the rest on average
    ctx_prefill = cached + 0.5 * (isl - cached)
    sel_prefill = mean_capped(cached, isl, topk_tokens)
    prefill = sparse_layers * (
        attn_prefill_per_ctx * (sel_prefill - ctx_prefill) + index_per_ctx * ctx_prefill
    )
    return BlockSparseTerms(held, kv_read, decode, prefill)


def index_heads_per_device(index_heads: FloatArray, tp: FloatArray) -> FloatArray:
    """The indexer's heads one tp rank runs: split like KV heads, at least one (replicated once
    tp exceeds them)."""
    return np.maximum(index_heads / tp, 1.0)
