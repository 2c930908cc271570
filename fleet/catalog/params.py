"""Parameter counts and KV-cache sizes derived from a model's architecture fields.

Pure functions of a ``Model``; nothing is read from files. Counted: the input embedding and the LM
head (once when tied), attention projections (GQA: q, k, v, o; MLA: the q down/up projections or
the plain q projection, the joint kv down projection incl. the decoupled RoPE key, the kv up
projection and o; the DSA indexer where present; no v where the full layers' keys double as
values, ``attention_k_eq_v``), dense gated FFNs (gate, up, down = 3 matrices),
MoE layers (every routed expert, shared experts, the router). Norms, biases, attention sinks and
MTP/next-token-prediction heads are not counted: the first three are < 0.1% of any catalog model,
and MTP modules are not part of the served forward pass (published totals that include them say
so in the catalog's sources).

KV cache per token and layer, in elements: GQA stores K and V of every KV head,
``kv_heads x (head_dim + v_head_dim)`` (``2 x kv_heads x head_dim`` when values are as wide as
keys); sliding-window layers with their own shape (``sliding_attention``: Gemma 4,
MiMo-V2-Flash) count their own heads and widths, in the cache and in the weights; MLA stores
the compressed latent and the RoPE key, ``kv_lora_rank + qk_rope_head_dim`` (plus the DSA
indexer key where present). Sliding-window layers keep at most ``sliding_window`` tokens.
DeepSeek-V4's compressed attention (``fleet.catalog.compressed``) stores one shared key-value
vector per token (``num_kv_heads x head_dim``) in every layer's window, plus its compressed
entries, indexer keys and compressor states; its weights are its own projections, compressors,
indexers and hyper-connection maps.
Linear-attention (Gated DeltaNet) layers keep no KV cache but a fixed state per request: value
heads x key dim x value dim of recurrent state plus the convolution's last ``conv_kernel - 1``
inputs (``state_bytes_per_layer``); their weights are the q/k/v/z input projection, the b/a gate
projection, the depthwise convolution and the output projection.

Hybrid models with a ``block_pattern`` (Nemotron-H) count blocks instead of layers: ``*`` blocks
are attention, ``M`` blocks Mamba2 mixers, ``E`` blocks MoE FFNs, ``-`` blocks dense FFNs, each
one sublayer. A Mamba2 mixer's weights are its input projection (hidden -> z, x of the inner width
heads x head_dim, B and C of n_groups x state_size each, one dt per head), the depthwise
convolution over x, B and C, and the output projection (its per-head A, D and dt bias and its
gated norm are < 0.01% and not counted, like norms); its state per request is heads x head_dim x
state_size at ``state_bytes`` plus the convolution's last ``conv_kernel - 1`` inputs of x, B and C
at 2 bytes. Non-gated FFNs (``ffn_gated = false``, relu2) have 2 matrices instead of 3. A latent
MoE (``Moe.latent_size``) adds the projections hidden -> latent and latent -> hidden per MoE
layer, and its routed experts work in the latent width (router and shared experts in the
hidden width).

Block-sparse attention (``block_sparse_attention``, MiniMax-M3) adds per sparse layer the
indexer's projections, hidden -> index heads x index_head_dim (queries) and hidden ->
index_head_dim (the key all heads share), and to the cache one index key of index_head_dim
elements per token; the layer's K and V of every token stay cached (blocks are selected from
all of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fleet.catalog.compressed import (
    compressed_entry_elements,
    compressed_kv_bytes_per_sequence,
    compression_params,
    hyper_connection_params,
    shared_attention_params_per_layer,
)
from fleet.catalog.schema import EmbeddingsCounted, Model

FloatLike = float | npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class ParamBreakdown:
    """Parameter counts of one model by component (whole model, all layers)."""

    embedding: float
    """Input embedding table (a lookup: one row per token is read)."""
    lm_head: float
    """Output projection; 0 when tied to the input embedding."""
    attention: float
    dense_ffn: float
    """FFNs of the dense (non-MoE) layers."""
    routed_experts: float
    """Every routed expert of every MoE layer."""
    routed_experts_active: float
    """The ``experts_per_token`` routed experts one token uses, over all MoE layers."""
    shared_experts: float
    router: float
    latent_projections: float = 0.0
    """A latent MoE's projections into and out of the experts' latent width, all MoE layers."""
    hyper_connections: float = 0.0
    """Hyper-connection mixing maps (DeepSeek-V4, ``fleet.catalog.compressed``)."""

    @property
    def total(self) -> float:
        return (
            self.embedding
            + self.lm_head
            + self.attention
            + self.dense_ffn
            + self.routed_experts
            + self.shared_experts
            + self.router
            + self.latent_projections
            + self.hyper_connections
        )

    @property
    def active(self) -> float:
        """Parameters one token's forward pass uses, both embedding tables included."""
        return self.total - self.routed_experts + self.routed_experts_active

    @property
    def non_expert(self) -> float:
        """Everything but routed experts: replicated or tensor-parallel, never expert-parallel."""
        return self.total - self.routed_experts


def _blocks(model: Model, kind: str) -> int:
    """Blocks of ``kind`` (a ``block_pattern`` character); 0 without a pattern."""
    return model.block_pattern.count(kind) if model.block_pattern is not None else 0


def moe_layer_count(model: Model) -> int:
    """Layers with an MoE FFN: after ``dense_layers``, every ``moe_layer_interval``-th layer
    (hybrid models: the ``E`` blocks)."""
    moe = model.moe
    if moe is None:
        return 0
    if model.block_pattern is not None:
        return _blocks(model, "E")
    return sum(
        1
        for i in range(moe.dense_layers, model.num_layers)
        if (i + 1) % moe.moe_layer_interval == 0
    )


def linear_attention_layers(model: Model) -> int:
    """Layers with a linear-attention block (no KV cache)."""
    return model.linear_attention.layers if model.linear_attention is not None else 0


def mamba_layers(model: Model) -> int:
    """Blocks with a Mamba2 mixer."""
    return _blocks(model, "M") if model.mamba is not None else 0


def state_layers(model: Model) -> int:
    """Layers (blocks) keeping a fixed per-request state instead of a KV cache: linear attention
    and Mamba2 mixers."""
    return linear_attention_layers(model) + mamba_layers(model)


def attention_layers(model: Model) -> int:
    """Layers (blocks) with softmax attention over a KV cache, sliding-window ones included."""
    if model.block_pattern is not None:
        return _blocks(model, "*")
    return model.num_layers - linear_attention_layers(model)


def dense_ffn_layers(model: Model) -> int:
    """Layers (blocks) with a dense FFN."""
    if model.block_pattern is not None:
        return _blocks(model, "-")
    return model.num_layers - moe_layer_count(model)


def ffn_matrices(model: Model) -> int:
    """Weight matrices per unit of FFN width: gate, up, down (3), or up, down (2) un-gated."""
    return 3 if model.ffn_gated else 2


def mamba_params_per_layer(model: Model) -> float:
    """Weights of one Mamba2 mixer: in_proj (z, x, B, C, dt), conv1d, out_proj."""
    mb = model.mamba
    if mb is None:
        return 0.0
    h = model.hidden_size
    inner = mb.num_heads * mb.head_dim
    bc = 2 * mb.n_groups * mb.state_size
    in_proj = h * (2 * inner + bc + mb.num_heads)
    conv = (inner + bc) * mb.conv_kernel
    return float(in_proj + conv + inner * h)


def mamba_conv_channels(model: Model) -> int:
    """Channels of a Mamba2 mixer's causal convolution (x, B and C): its window's width."""
    mb = model.mamba
    return 0 if mb is None else mb.num_heads * mb.head_dim + 2 * mb.n_groups * mb.state_size


def conv_state_bytes_per_layer(model: Model) -> float:
    """Of ``state_bytes_per_layer``, a Mamba2 mixer's convolution window (2 bytes); 0 for linear
    attention, whose window is counted with its recurrent state."""
    mb = model.mamba
    if mb is None:
        return 0.0
    return float(mamba_conv_channels(model) * (mb.conv_kernel - 1) * 2)


def linear_attention_params_per_layer(model: Model) -> float:
    """Weights of one Gated DeltaNet block: in_proj_qkvz, in_proj_ba, conv1d, out_proj."""
    la = model.linear_attention
    if la is None:
        return 0.0
    h = model.hidden_size
    keys, values = la.num_key_heads * la.key_head_dim, la.num_value_heads * la.value_head_dim
    qkvz = h * (2 * keys + 2 * values)
    ba = h * 2 * la.num_value_heads
    conv = (2 * keys + values) * la.conv_kernel
    return float(qkvz + ba + conv + values * h)


def state_bytes_per_layer(model: Model) -> float:
    """Bytes of one request's state in one linear-attention layer or Mamba2 mixer (all heads)."""
    mb = model.mamba
    if mb is not None:
        recurrent = mb.num_heads * mb.head_dim * mb.state_size * mb.state_bytes
        return float(recurrent) + conv_state_bytes_per_layer(model)
    la = model.linear_attention
    if la is None:
        return 0.0
    recurrent = la.num_value_heads * la.key_head_dim * la.value_head_dim * la.state_bytes
    conv_inputs = 2 * la.num_key_heads * la.key_head_dim + la.num_value_heads * la.value_head_dim
    return float(recurrent + conv_inputs * (la.conv_kernel - 1) * 2)


def state_flops_per_token_layer(model: Model) -> float:
    """FLOPs of one token's recurrence in one linear-attention layer: the state's rank-1 update
    and its read-out, 4 x value heads x key dim x value dim (Mamba2: 4 x heads x head_dim x
    state_size)."""
    mb = model.mamba
    if mb is not None:
        return 4.0 * mb.num_heads * mb.head_dim * mb.state_size
    la = model.linear_attention
    if la is None:
        return 0.0
    return 4.0 * la.num_value_heads * la.key_head_dim * la.value_head_dim


def block_sparse_layers(model: Model) -> int:
    """Layers with block-sparse attention (``block_sparse_attention``); 0 without."""
    sparse = model.block_sparse_attention
    return sparse.layers if sparse is not None else 0


def block_sparse_index_params_per_layer(model: Model) -> float:
    """Weights of one block-sparse layer's indexer: its queries (index heads x index_head_dim)
    and the one key all its heads share, both projected from the hidden state."""
    sparse = model.block_sparse_attention
    if sparse is None:
        return 0.0
    return float(model.hidden_size * (sparse.index_n_heads + 1) * sparse.index_head_dim)


def block_sparse_index_elements_per_token_layer(model: Model) -> int:
    """Index-key elements one token adds to one block-sparse layer's cache (one key, shared by
    the indexer's heads); 0 without block-sparse attention."""
    sparse = model.block_sparse_attention
    return sparse.index_head_dim if sparse is not None else 0


def _gqa_params(model: Model, heads: int, kv_heads: int, head_dim: int, v_dim: int) -> int:
    """Weights of one GQA block: q (doubled by an output gate), k, v (none when keys double as
    values on the full layers) and o, whose input is the heads' values."""
    h = model.hidden_size
    q = h * heads * head_dim * (2 if model.attention_output_gate else 1)
    return q + h * kv_heads * head_dim + h * kv_heads * v_dim + heads * v_dim * h


def attention_params_per_layer(model: Model) -> float:
    """Weights of one (softmax) attention block (projections only); of a full-attention layer
    where the sliding layers have their own shape (``sliding_attention_params_per_layer``)."""
    h = model.hidden_size
    heads = model.num_attention_heads
    mla = model.mla
    if model.compressed_attention is not None:
        return shared_attention_params_per_layer(model)
    if mla is None:
        v_dim = model.v_head_dim or model.head_dim
        out = _gqa_params(model, heads, model.num_kv_heads, model.head_dim, v_dim)
        if model.attention_k_eq_v:
            out -= h * model.num_kv_heads * v_dim  # no value projection
        return float(out)
    qk_head = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank:
        q = h * mla.q_lora_rank + mla.q_lora_rank * heads * qk_head
    else:
        q = h * heads * qk_head
    kv_down = h * (mla.kv_lora_rank + mla.qk_rope_head_dim)
    kv_up = mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    o = heads * mla.v_head_dim * h
    indexer = 0
    if mla.index_n_heads:
        q_in = mla.q_lora_rank or h
        indexer = (
            q_in * mla.index_n_heads * mla.index_head_dim  # indexer queries
            + h * mla.index_head_dim  # indexer key
            + h * mla.index_n_heads  # per-head weights
        )
    return float(q + kv_down + kv_up + o + indexer)


def sliding_attention_params_per_layer(model: Model) -> float:
    """Weights of one sliding-window layer's attention block: its own shape where
    ``sliding_attention`` gives one (always with a value projection), else a full layer's."""
    sw = model.sliding_attention
    if sw is None:
        return attention_params_per_layer(model)
    v_dim = sw.v_head_dim or sw.head_dim
    return float(_gqa_params(model, sw.num_attention_heads, sw.num_kv_heads, sw.head_dim, v_dim))


def param_breakdown(model: Model) -> ParamBreakdown:
    """Count every weight matrix of ``model`` by component."""
    h = model.hidden_size
    embedding = float(model.vocab_size * h)
    lm_head = 0.0 if model.tie_word_embeddings else embedding
    linear = linear_attention_layers(model)
    # integer counts: exact in float64 whichever way the layers are grouped
    sliding = model.sliding_window_layers
    attention = (
        (attention_layers(model) - sliding) * attention_params_per_layer(model)
        + sliding * sliding_attention_params_per_layer(model)
        + linear * linear_attention_params_per_layer(model)
    )
    if model.mamba is not None:
        attention += mamba_layers(model) * mamba_params_per_layer(model)
    attention += block_sparse_layers(model) * block_sparse_index_params_per_layer(model)
    attention += compression_params(model)  # DeepSeek-V4 compressors and indexers (else 0)
    hyper = hyper_connection_params(model)
    gated_ffn = ffn_matrices(model) * h  # gate (if gated), up and down per unit of FFN width
    moe = model.moe
    n_moe = moe_layer_count(model)
    dense_ffn = float(dense_ffn_layers(model) * gated_ffn * model.intermediate_size)
    if moe is None:
        return ParamBreakdown(
            embedding, lm_head, attention, dense_ffn, 0.0, 0.0, 0.0, 0.0, hyper_connections=hyper
        )
    # a latent MoE's experts work in the latent width (Nemotron 3 Super/Ultra)
    expert = ffn_matrices(model) * (moe.latent_size or h) * moe.expert_intermediate_size
    shared_width = moe.shared_expert_intermediate_size or moe.expert_intermediate_size
    return ParamBreakdown(
        embedding=embedding,
        lm_head=lm_head,
        attention=attention,
        dense_ffn=dense_ffn,
        routed_experts=float(n_moe * moe.num_experts * expert),
        routed_experts_active=float(n_moe * moe.experts_per_token * expert),
        shared_experts=float(n_moe * moe.num_shared_experts * gated_ffn * shared_width),
        router=float(n_moe * h * moe.num_experts),
        latent_projections=float(n_moe * 2 * h * moe.latent_size),
        hyper_connections=hyper,
    )


def total_params(model: Model) -> float:
    """All parameters of the served model (no MTP heads)."""
    return param_breakdown(model).total


def active_params(model: Model, embeddings: EmbeddingsCounted = "input_and_output") -> float:
    """Parameters used per token, counting the embedding tables as ``embeddings`` says.

    The default counts both tables, as most publishers do; ``Model.published_active_embeddings``
    says how the publisher of a model counted its published figure.
    """
    b = param_breakdown(model)
    if embeddings == "none":
        return b.active - b.embedding - b.lm_head
    if embeddings == "output_only" and not model.tie_word_embeddings:
        return b.active - b.embedding
    # Tied embeddings: the one table is also the output projection, so "output only" keeps it.
    return b.active


def kv_elements_per_token_per_layer(model: Model) -> int:
    """KV-cache elements one token adds to one (full-)attention layer: a key of ``head_dim`` and
    a value of ``v_head_dim`` per KV head (GQA), or the MLA latent and RoPE key."""
    mla = model.mla
    if model.compressed_attention is not None:
        return compressed_entry_elements(model)  # one shared key-value vector
    if mla is None:
        return model.num_kv_heads * (model.head_dim + (model.v_head_dim or model.head_dim))
    return mla.kv_lora_rank + mla.qk_rope_head_dim + mla.index_head_dim


def sliding_kv_elements_per_token_per_layer(model: Model) -> int:
    """KV-cache elements one token adds to one sliding-window layer (its own shape where
    ``sliding_attention`` gives one, else a full layer's)."""
    sw = model.sliding_attention
    if sw is None:
        return kv_elements_per_token_per_layer(model)
    return sw.num_kv_heads * (sw.head_dim + (sw.v_head_dim or sw.head_dim))


def kv_bytes_per_sequence(
    model: Model, kv_bytes_per_element: float, context_tokens: FloatLike
) -> FloatLike:
    """KV-cache bytes of one sequence holding ``context_tokens`` tokens (all layers).

    Sliding-window layers hold at most ``sliding_window`` tokens, each of their own shape's
    size. ``context_tokens`` may be an array (vectorized over configurations).
    """
    per_token_layer = kv_elements_per_token_per_layer(model) * kv_bytes_per_element
    linear = state_layers(model)
    full_layers = attention_layers(model) - model.sliding_window_layers
    tokens = np.asarray(context_tokens, dtype=np.float64)
    held = full_layers * tokens
    own_shape: FloatLike = 0.0  # the sliding layers' KV where they have their own shape
    if model.sliding_window is not None and model.sliding_window_layers:
        sliding_held = model.sliding_window_layers * np.minimum(tokens, model.sliding_window)
        if model.sliding_attention is None:
            held = held + sliding_held
        else:
            sliding_per = sliding_kv_elements_per_token_per_layer(model) * kv_bytes_per_element
            own_shape = sliding_per * sliding_held
    out = per_token_layer * held + linear * state_bytes_per_layer(model) + own_shape
    if model.block_sparse_attention is not None:  # the indexer's keys, every token
        index = block_sparse_index_elements_per_token_layer(model) * kv_bytes_per_element
        out = out + block_sparse_layers(model) * index * tokens
    if model.compressed_attention is not None:
        out = out + compressed_kv_bytes_per_sequence(model, kv_bytes_per_element, tokens)
    return float(out) if out.ndim == 0 else out


def kv_bytes_per_token(
    model: Model, kv_bytes_per_element: float, context_tokens: FloatLike
) -> FloatLike:
    """Average KV bytes per held token of a ``context_tokens``-token sequence (all layers).

    Equals ``num_layers x kv_elements_per_token_per_layer x kv_bytes_per_element`` without
    sliding-window layers; less once the context exceeds the window.
    """
    tokens = np.maximum(np.asarray(context_tokens, dtype=np.float64), 1.0)
    out = np.asarray(kv_bytes_per_sequence(model, kv_bytes_per_element, tokens)) / tokens
    return float(out) if out.ndim == 0 else out
