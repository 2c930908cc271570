"""DeepSeek-V4's compressed attention (``Model.compressed_attention``): weights, KV held.

Facts from DeepSeek's V4 release (the model card, the technical report "DeepSeek-V4: Towards
Highly Efficient Million-Token Context Intelligence", and the reference inference code published
with the checkpoints), as the catalog counts them:

- Every layer's attention: a query bottleneck (hidden -> ``q_lora_rank`` -> heads x head_dim),
  one shared key-value projection (hidden -> head_dim: one KV head whose key is also the value),
  a grouped output projection (``o_groups`` groups of heads x head_dim / o_groups ->
  ``o_lora_rank`` each) and hidden <- o_groups x o_lora_rank. Every layer caches the shared
  vector of its last ``sliding_window`` tokens.
- A compressed layer of ratio r adds a compressor: key-value and gate projections hidden ->
  coff x head_dim and a learned position bias of r x coff x head_dim, where coff = 2 for the
  overlapping windows of the ratio-4 (CSA) layers and 1 otherwise; it caches one entry of
  head_dim per r tokens, and keeps its partial window as a float32 state per request (key-value
  and score buffers of coff x r rows of coff x head_dim each).
- A CSA layer adds the lightning indexer: query projection q_lora_rank -> index heads x index
  dim, per-head weights hidden -> index heads, and its own ratio-4 compressor of index dim,
  whose entries are cached at 4 bits (``INDEX_KEY_BYTES_PER_ELEMENT``).
- Hyper-connections (``hc_mult`` > 1): before and after each sublayer a map from the
  hc_mult x hidden residual stream to (2 + hc_mult) x hc_mult mixing weights, plus one at the
  output head (hc_mult x hc_mult x hidden). Their biases and scales (a few dozen numbers) and the
  norms are not counted, as norms are not elsewhere.
- The hash-routed layers' token-id -> experts table is an index, not weights: not counted.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fleet.catalog.schema import CompressedAttention, Model

FloatLike = float | npt.NDArray[np.float64]

INDEX_KEY_BYTES_PER_ELEMENT = 0.5
"""The indexer's compressed keys are cached in FP4 (the reference code quantizes them to 4 bits
before caching; aiconfigurator-core 0.12.0 sizes them at half a byte per element)."""
STATE_BYTES_PER_ELEMENT = 4.0
"""A compressor's partial-window state is float32 (the reference code's buffers)."""


def _coff(ca: CompressedAttention, ratio: int) -> int:
    """Windows overlap (the projections are twice as wide) in the ratio-4 (CSA) layers."""
    return 2 if ratio == ca.csa_ratio else 1


def _compressor_params(model: Model, ca: CompressedAttention, ratio: int, dim: int) -> float:
    coff = _coff(ca, ratio)
    return float(2 * model.hidden_size * coff * dim + ratio * coff * dim)


def shared_attention_params_per_layer(model: Model) -> float:
    """Weights of one layer's attention without its compressor and indexer (every layer)."""
    ca = model.compressed_attention
    assert ca is not None
    h, heads, d = model.hidden_size, model.num_attention_heads, model.head_dim
    q = h * ca.q_lora_rank + ca.q_lora_rank * heads * d
    kv = h * model.num_kv_heads * d
    o = heads * d * ca.o_lora_rank + ca.o_groups * ca.o_lora_rank * h
    return float(q + kv + o)


def indexer_params_per_layer(model: Model) -> float:
    """Weights of one CSA layer's lightning indexer, its compressor included."""
    ca = model.compressed_attention
    assert ca is not None
    q = ca.q_lora_rank * ca.index_n_heads * ca.index_head_dim
    weights = model.hidden_size * ca.index_n_heads
    return float(q + weights) + _compressor_params(model, ca, ca.csa_ratio, ca.index_head_dim)


def compression_params(model: Model) -> float:
    """Compressors and indexers of all layers (0 without compressed attention)."""
    ca = model.compressed_attention
    if ca is None:
        return 0.0
    d = model.head_dim
    csa = _compressor_params(model, ca, ca.csa_ratio, d) + indexer_params_per_layer(model)
    hca = _compressor_params(model, ca, ca.hca_ratio, d)
    return float(ca.csa_layers * csa + ca.hca_layers * hca)


def hyper_connection_params(model: Model) -> float:
    """Hyper-connection mixing maps of all layers and the head (0 for a plain residual)."""
    ca = model.compressed_attention
    if ca is None or ca.hc_mult <= 1:
        return 0.0
    hc, h = ca.hc_mult, model.hidden_size
    per_sublayer = (2 + hc) * hc * hc * h
    return float(2 * model.num_layers * per_sublayer + hc * hc * h)


def compressed_entry_elements(model: Model) -> int:
    """Elements of one cached entry, window or compressed: the shared key-value vector."""
    return model.num_kv_heads * model.head_dim


def compressor_state_bytes(model: Model) -> float:
    """Bytes of one request's partial-window compressor states, all layers."""
    ca = model.compressed_attention
    if ca is None:
        return 0.0

    def state(ratio: int, dim: int) -> float:
        coff = _coff(ca, ratio)
        return 2.0 * coff * ratio * coff * dim * STATE_BYTES_PER_ELEMENT

    d = model.head_dim
    csa = state(ca.csa_ratio, d) + state(ca.csa_ratio, ca.index_head_dim)
    return ca.csa_layers * csa + ca.hca_layers * state(ca.hca_ratio, d)


def compressed_kv_bytes_per_sequence(
    model: Model, kv_bytes_per_element: float, context_tokens: FloatLike
) -> FloatLike:
    """KV bytes a sequence of ``context_tokens`` holds beyond every layer's window: the
    compressed entries (complete runs of ratio tokens), the indexer keys of the CSA layers, and
    the compressor states. 0 without compressed attention."""
    ca = model.compressed_attention
    tokens = np.asarray(context_tokens, dtype=np.float64)
    if ca is None:
        out = np.zeros_like(tokens)
    else:
        entry = compressed_entry_elements(model) * kv_bytes_per_element
        index = ca.index_head_dim * INDEX_KEY_BYTES_PER_ELEMENT
        out = (
            ca.csa_layers * np.floor(tokens / ca.csa_ratio) * (entry + index)
            + ca.hca_layers * np.floor(tokens / ca.hca_ratio) * entry
            + compressor_state_bytes(model)
        )
    return float(out) if out.ndim == 0 else out
