"""Parameter counts and KV-cache sizes derived from a model's architecture fields.

Pure functions of a ``Model``; nothing is read from files. Counted: the input embedding and the LM
head (once when tied), attention projections (GQA: q, k, v, o; MLA: the q down/up projections or
the plain q projection, the joint kv down projection incl. the decoupled RoPE key, the kv up
projection and o; the DSA indexer where present), dense gated FFNs (gate, up, down = 3 matrices),
MoE layers (every routed expert, shared experts, the router). Norms, biases, attention sinks and
MTP/next-token-prediction heads are not counted: the first three are < 0.1% of any catalog model,
and MTP modules are not part of the served forward pass (published totals that include them say
so in the catalog's sources).

KV cache per token and layer, in elements: GQA stores K and V of every KV head,
``2 x kv_heads x head_dim``; MLA stores the compressed latent and the RoPE key,
``kv_lora_rank + qk_rope_head_dim`` (plus the DSA indexer key where present). Sliding-window
layers keep at most ``sliding_window`` tokens. Linear-attention (Gated DeltaNet) layers keep no
KV cache but a fixed state per request: value heads x key dim x value dim of recurrent state
plus the convolution's last ``conv_kernel - 1`` inputs (``state_bytes_per_layer``); their
weights are the q/k/v/z input projection, the b/a gate projection, the depthwise convolution and
the output projection.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

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
        )

    @property
    def active(self) -> float:
        """Parameters one token's forward pass uses, both embedding tables included."""
        return self.total - self.routed_experts + self.routed_experts_active

    @property
    def non_expert(self) -> float:
        """Everything but routed experts: replicated or tensor-parallel, never expert-parallel."""
        return self.total - self.routed_experts


def moe_layer_count(model: Model) -> int:
    """Layers with an MoE FFN: after ``dense_layers``, every ``moe_layer_interval``-th layer."""
    moe = model.moe
    if moe is None:
        return 0
    return sum(
        1
        for i in range(moe.dense_layers, model.num_layers)
        if (i + 1) % moe.moe_layer_interval == 0
    )


def linear_attention_layers(model: Model) -> int:
    """Layers with a linear-attention block (no KV cache)."""
    return model.linear_attention.layers if model.linear_attention is not None else 0


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
    """Bytes of one request's state in one linear-attention layer (all heads)."""
    la = model.linear_attention
    if la is None:
        return 0.0
    recurrent = la.num_value_heads * la.key_head_dim * la.value_head_dim * la.state_bytes
    conv_inputs = 2 * la.num_key_heads * la.key_head_dim + la.num_value_heads * la.value_head_dim
    return float(recurrent + conv_inputs * (la.conv_kernel - 1) * 2)


def state_flops_per_token_layer(model: Model) -> float:
    """FLOPs of one token's recurrence in one linear-attention layer: the state's rank-1 update
    and its read-out, 4 x value heads x key dim x value dim."""
    la = model.linear_attention
    if la is None:
        return 0.0
    return 4.0 * la.num_value_heads * la.key_head_dim * la.value_head_dim


def attention_params_per_layer(model: Model) -> float:
    """Weights of one (softmax) attention block (projections only)."""
    h = model.hidden_size
    heads = model.num_attention_heads
    mla = model.mla
    if mla is None:
        q_width = heads * model.head_dim * (2 if model.attention_output_gate else 1)
        q_and_o = h * q_width + h * heads * model.head_dim
        kv = 2 * h * model.num_kv_heads * model.head_dim
        return float(q_and_o + kv)
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


def param_breakdown(model: Model) -> ParamBreakdown:
    """Count every weight matrix of ``model`` by component."""
    h = model.hidden_size
    embedding = float(model.vocab_size * h)
    lm_head = 0.0 if model.tie_word_embeddings else embedding
    linear = linear_attention_layers(model)
    attention = (model.num_layers - linear) * attention_params_per_layer(
        model
    ) + linear * linear_attention_params_per_layer(model)
    gated_ffn = 3 * h  # gate, up and down projections per unit of FFN width
    moe = model.moe
    n_moe = moe_layer_count(model)
    dense_ffn = float((model.num_layers - n_moe) * gated_ffn * model.intermediate_size)
    if moe is None:
        return ParamBreakdown(embedding, lm_head, attention, dense_ffn, 0.0, 0.0, 0.0, 0.0)
    expert = gated_ffn * moe.expert_intermediate_size
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
    """KV-cache elements one token adds to one attention layer."""
    mla = model.mla
    if mla is None:
        return 2 * model.num_kv_heads * model.head_dim
    return mla.kv_lora_rank + mla.qk_rope_head_dim + mla.index_head_dim


def kv_bytes_per_sequence(
    model: Model, kv_bytes_per_element: float, context_tokens: FloatLike
) -> FloatLike:
    """KV-cache bytes of one sequence holding ``context_tokens`` tokens (all layers).

    Sliding-window layers hold at most ``sliding_window`` tokens. ``context_tokens`` may be an
    array (vectorized over configurations).
    """
    per_token_layer = kv_elements_per_token_per_layer(model) * kv_bytes_per_element
    linear = linear_attention_layers(model)
    full_layers = model.num_layers - model.sliding_window_layers - linear
    tokens = np.asarray(context_tokens, dtype=np.float64)
    held = full_layers * tokens
    if model.sliding_window is not None and model.sliding_window_layers:
        held = held + model.sliding_window_layers * np.minimum(tokens, model.sliding_window)
    out = per_token_layer * held + linear * state_bytes_per_layer(model)
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
