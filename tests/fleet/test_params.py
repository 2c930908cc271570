"""Parameter counts and KV-cache sizes derived from the catalog's architecture fields, checked
against published figures (each cited in models.toml or below) and by hand-worked cases."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.catalog import Catalog, Model, load_catalog
from fleet.catalog.compressed import compressor_state_bytes
from fleet.catalog.params import (
    active_params,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    kv_elements_per_token_per_layer,
    moe_layer_count,
    param_breakdown,
    sliding_kv_elements_per_token_per_layer,
    state_bytes_per_layer,
    state_layers,
    total_params,
)

CATALOG: Catalog = load_catalog()
MODEL_IDS = list(CATALOG.models)
TOLERANCE = 0.02


def _norm_params(model: Model) -> int:
    """RMSNorm weights (two per layer plus the final one), which params.py leaves out."""
    return (2 * model.num_layers + 1) * model.hidden_size


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_total_matches_the_published_figure(model_id: str) -> None:
    model = CATALOG.model(model_id)
    derived_b = total_params(model) / 1e9
    assert derived_b == pytest.approx(model.published_total_params_b, rel=TOLERANCE)


ROUNDED_B = 0.5
"""A figure its publisher gives only to whole billions (its source says "rounded") means
published +- 0.5B; a tighter bound would test digits nobody published."""


@pytest.mark.parametrize("model_id", MODEL_IDS)
def test_active_matches_the_published_figure_as_counted_by_its_publisher(model_id: str) -> None:
    model = CATALOG.model(model_id)
    derived_b = active_params(model, model.published_active_embeddings) / 1e9
    published = model.published_active_params_b
    bound = TOLERANCE * published
    if "rounded" in model.sources["published_active_params_b"]:
        assert published == round(published)
        bound = max(bound, ROUNDED_B)
    assert abs(derived_b - published) <= bound


@pytest.mark.parametrize(
    ("model_id", "safetensors_count"),
    [
        # HF safetensors metadata of meta-llama/Llama-3.1-8B-Instruct and -70B-Instruct.
        ("llama-3.1-8b", 8_030_261_248),
        ("llama-3.1-70b", 70_553_706_496),
    ],
)
def test_dense_counts_are_exact_up_to_norms(model_id: str, safetensors_count: int) -> None:
    model = CATALOG.model(model_id)
    assert total_params(model) + _norm_params(model) == safetensors_count


@pytest.mark.parametrize(
    ("model_id", "non_embedding_b"),
    [
        # Qwen3 HF model cards list "Number of Parameters (Non-Embedding)".
        ("qwen3-32b", 31.2),
        ("qwen3-30b-a3b", 29.9),
        ("qwen3-235b-a22b", 234),
        ("qwen3-0.6b", 0.44),
    ],
)
def test_non_embedding_counts_match_the_qwen3_cards(model_id: str, non_embedding_b: float) -> None:
    b = param_breakdown(CATALOG.model(model_id))
    derived_b = (b.total - b.embedding - b.lm_head) / 1e9
    assert derived_b == pytest.approx(non_embedding_b, rel=0.005)


@pytest.mark.parametrize(
    ("model_id", "mlp_b", "attention_b", "embeddings_b"),
    [
        # gpt-oss model card (OpenAI, Aug 2025), table 1: MLP / attention / embed + unembed.
        ("gpt-oss-120b", 114.71, 0.96, 1.16),
        ("gpt-oss-20b", 19.12, 0.64, 1.16),
    ],
)
def test_components_match_the_gpt_oss_card(
    model_id: str, mlp_b: float, attention_b: float, embeddings_b: float
) -> None:
    b = param_breakdown(CATALOG.model(model_id))
    assert (b.routed_experts + b.router) / 1e9 == pytest.approx(mlp_b, rel=0.005)
    assert b.attention / 1e9 == pytest.approx(attention_b, rel=0.01)
    assert (b.embedding + b.lm_head) / 1e9 == pytest.approx(embeddings_b, rel=0.005)


def test_deepseek_v3_by_hand() -> None:
    """MLA attention, 3 dense + 58 MoE layers of 256 routed + 1 shared expert, worked out."""
    model = CATALOG.model("deepseek-v3")
    h, heads = 7168, 128
    attention = (
        h * 1536 + 1536 * heads * (128 + 64)  # q down, q up (nope + rope)
        + h * (512 + 64)  # joint kv down + decoupled rope key
        + 512 * heads * (128 + 128)  # kv up: k nope + v
        + heads * 128 * h  # o
    )  # fmt: skip
    expert = 3 * h * 2048
    b = param_breakdown(model)
    assert moe_layer_count(model) == 58
    assert b.attention == 61 * attention
    assert b.dense_ffn == 3 * 3 * h * 18432
    assert b.routed_experts == 58 * 256 * expert
    assert b.shared_experts == 58 * expert
    assert b.routed_experts_active == 58 * 8 * expert
    assert b.router == 58 * h * 256
    assert b.embedding == b.lm_head == 129280 * h


def test_llama4_interleaves_moe_and_dense_layers() -> None:
    model = CATALOG.model("llama-4-maverick")
    b = param_breakdown(model)
    assert moe_layer_count(model) == 24
    assert b.dense_ffn == 24 * 3 * 5120 * 16384
    assert b.shared_experts == 24 * 3 * 5120 * 8192
    assert b.routed_experts_active == b.shared_experts  # 1 routed + 1 shared, same width


def test_dense_models_are_fully_active_and_moe_models_are_not() -> None:
    for model in CATALOG.models.values():
        b = param_breakdown(model)
        if model.moe is None:
            assert b.active == b.total == total_params(model)
        else:
            # A token uses experts_per_token of num_experts routed experts, nothing less or more.
            routed_share = model.moe.experts_per_token / model.moe.num_experts
            assert b.routed_experts_active == pytest.approx(routed_share * b.routed_experts)
            assert b.total - b.active == pytest.approx((1 - routed_share) * b.routed_experts)
            # Fine-grained MoE (at most 1 in 8 experts routed) leaves under a quarter active;
            # Mixtral's 2 of 8 experts leave ~28% active (12.9B of 46.7B, as Mistral publishes).
            if routed_share <= 1 / 8:
                assert b.active < 0.25 * b.total, model.id
        output_only = active_params(model, "output_only")
        assert active_params(model, "none") < output_only <= b.active
        # Tied embeddings: the shared table is the output projection, counted under output_only.
        assert (output_only == b.active) == model.tie_word_embeddings, model.id


def test_tied_embeddings_count_once() -> None:
    model = CATALOG.model("llama-3.1-8b")
    tied = msgspec.structs.replace(model, tie_word_embeddings=True)
    assert total_params(model) - total_params(tied) == 128256 * 4096
    assert param_breakdown(tied).lm_head == 0
    # The one table is read as the output projection: "output only" keeps it, "none" drops it.
    assert active_params(tied, "output_only") == total_params(tied)
    assert active_params(tied, "none") == total_params(tied) - 128256 * 4096


@pytest.mark.parametrize(
    ("model_id", "bytes_per_token"),
    [
        # GQA: 2 (K, V) x 8 KV heads x 128 x 32 layers x 2 bytes = 128 KiB per token.
        ("llama-3.1-8b", 131_072),
        ("llama-3.1-70b", 2 * 8 * 128 * 80 * 2),
        # MLA: (512 latent + 64 rope) x 61 layers x 2 bytes ~ 70 KB per token.
        ("deepseek-v3", 70_272),
        ("kimi-k2.5", 70_272),
        # GLM-5: MLA latent + rope + the 128-wide DSA indexer key, 78 layers.
        ("glm-5", (512 + 64 + 128) * 78 * 2),
    ],
)
def test_kv_bytes_per_token_bf16(model_id: str, bytes_per_token: int) -> None:
    model = CATALOG.model(model_id)
    assert kv_bytes_per_token(model, 2.0, 4096) == bytes_per_token
    assert kv_bytes_per_sequence(model, 1.0, 4096) == bytes_per_token / 2 * 4096


def test_sliding_window_layers_hold_at_most_the_window() -> None:
    model = CATALOG.model("gpt-oss-120b")
    per_layer = kv_elements_per_token_per_layer(model)
    assert per_layer == 2 * 8 * 64
    # 18 full-attention layers hold all 10,000 tokens; 18 sliding layers hold the last 128.
    assert kv_bytes_per_sequence(model, 1.0, 10_000) == per_layer * (18 * 10_000 + 18 * 128)
    # Within the window every layer holds every token.
    assert kv_bytes_per_sequence(model, 1.0, 100) == per_layer * 36 * 100
    assert kv_bytes_per_token(model, 1.0, 10_000) < kv_bytes_per_token(model, 1.0, 100)


def test_kv_is_vectorized_over_context() -> None:
    model = CATALOG.model("llama-4-maverick")
    contexts = np.array([1.0, 128.0, 8192.0, 8193.0, 131_072.0])
    vector = kv_bytes_per_sequence(model, 1.0, contexts)
    assert isinstance(vector, np.ndarray)
    assert vector.shape == contexts.shape
    assert list(vector) == [kv_bytes_per_sequence(model, 1.0, float(c)) for c in contexts]


@given(
    model_id=st.sampled_from(MODEL_IDS),
    context=st.integers(min_value=1, max_value=1_000_000),
    extra=st.integers(min_value=0, max_value=100_000),
)
def test_kv_grows_with_context_and_at_most_linearly(
    model_id: str, context: int, extra: int
) -> None:
    model = CATALOG.model(model_id)
    shorter = kv_bytes_per_sequence(model, 1.0, context)
    longer = kv_bytes_per_sequence(model, 1.0, context + extra)
    # every layer holding every token, sliding layers at their own shape's size
    sliding = model.sliding_window_layers
    full_per_token = (model.num_layers - sliding) * kv_elements_per_token_per_layer(
        model
    ) + sliding * sliding_kv_elements_per_token_per_layer(model)
    # A linear-attention layer's or Mamba2 mixer's state is fixed: held from the first token,
    # never growing.
    state = state_layers(model) * state_bytes_per_layer(model)
    # DeepSeek-V4's compressed entries: per token 1/ratio of an entry (and of an indexer key on
    # CSA layers), added a whole entry at a time; its compressor states fixed like a state
    per_token, step = 0.0, 0.0
    ca = model.compressed_attention
    if ca is not None:
        entry, csa_entry = model.head_dim, model.head_dim + 0.5 * ca.index_head_dim
        per_token = ca.csa_layers * csa_entry / ca.csa_ratio + ca.hca_layers * entry / ca.hca_ratio
        step = ca.csa_layers * csa_entry + ca.hca_layers * entry
        state += compressor_state_bytes(model)
    assert shorter <= longer <= shorter + extra * (full_per_token + per_token) + step
    assert shorter <= context * (full_per_token + per_token) + state
