"""DeepSeek-V4's compressed attention (``Model.compressed_attention``) in the performance model.

Every layer attends over the shared key-value vectors of its last ``sliding_window`` tokens: the
catalog holds those as sliding-window layers (all of them), which the common terms already
charge. This module adds, on the rows of models with compressed layers only, what the compressed
entries cost beyond that window, per layer and stream:

- held: one entry (the shared vector, at the KV precision) per complete run of ``ratio``
  tokens; a CSA layer also holds its indexer's 4-bit key per entry; every compressed layer its
  compressor's float32 partial-window state (``fleet.catalog.compressed``);
- a decode step reads, at a position x: a CSA layer the min(x / ratio, top-k) entries the
  indexer selects and every entry's indexer key, an HCA layer all x / 128 entries (means over
  the decode positions isl .. isl + osl, ``fleet.perf.sparse.mean_capped``);
- FLOPs per query token: scores and values over the entries read, 2 x heads x (head_dim +
  head_dim) each (the same per-entry figure as the window's), plus on CSA layers the indexer's
  2 x index heads x index dim over every entry; a prefill token likewise at the positions
  cached .. isl (the attention is in its multi-query form in prefill as in decode: one shared
  key-value vector, nothing to decompress).

The compressor states are written one row per token and read once per completed run, so a
decode step's traffic on them is a few rows: held, not charged as reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet.perf.sparse import mean_capped
from fleet.perf.types import FloatArray


@dataclass(frozen=True, slots=True)
class CompressedWork:
    """Per row of a compressed-attention model, beyond every layer's window, on one device: KV
    bytes one stream holds and reads per decode step, attention FLOPs per decode and per
    prefill token."""

    held_per_stream: FloatArray
    read_per_stream: FloatArray
    decode_flops_per_token: FloatArray
    prefill_flops_per_token: FloatArray


def compressed_work(
    *,
    csa_layers: FloatArray,
    csa_ratio: FloatArray,
    hca_layers: FloatArray,
    hca_ratio: FloatArray,
    topk: FloatArray,
    entry_bytes: FloatArray,
    index_bytes: FloatArray,
    state_bytes: FloatArray,
    attn_flops_per_entry: FloatArray,
    index_flops_per_entry: FloatArray,
    held_tokens: FloatArray,
    isl: FloatArray,
    osl: FloatArray,
    cached: FloatArray,
) -> CompressedWork:
    """``csa_layers``/``hca_layers`` are the layers of one stage, ``state_bytes`` that stage's
    share of the compressor states; ``held_tokens`` the context a stream holds (isl + osl +
    draft). Top-k caps compare with token positions, so the cap is top-k x ratio tokens."""
    held = (
        csa_layers * np.floor(held_tokens / csa_ratio) * (entry_bytes + index_bytes)
        + hca_layers * np.floor(held_tokens / hca_ratio) * entry_bytes
        + state_bytes
    )
    cap = topk * csa_ratio
    # decode: positions isl .. isl + osl; prefill: the uncached prompt, cached .. isl
    sel_decode = mean_capped(isl, isl + osl, cap) / csa_ratio
    sel_prefill = mean_capped(cached, isl, cap) / csa_ratio
    mean_decode = isl + 0.5 * osl
    mean_prefill = cached + 0.5 * (isl - cached)
    read = csa_layers * (
        sel_decode * entry_bytes + mean_decode / csa_ratio * index_bytes
    ) + hca_layers * (mean_decode / hca_ratio * entry_bytes)

    def flops(selected: FloatArray, mean: FloatArray) -> FloatArray:
        csa = selected * attn_flops_per_entry + mean / csa_ratio * index_flops_per_entry
        return csa_layers * csa + hca_layers * mean / hca_ratio * attn_flops_per_entry

    return CompressedWork(
        held_per_stream=held,
        read_per_stream=read,
        decode_flops_per_token=flops(sel_decode, mean_decode),
        prefill_flops_per_token=flops(sel_prefill, mean_prefill),
    )
