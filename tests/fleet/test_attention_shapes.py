"""Attention layers of two shapes: sliding-window layers with their own heads and widths beside
the full-attention layers (Gemma 4, MiMo-V2-Flash), value heads narrower than keys, and keys that
double as values. KV sizes and weights by hand from the configs; the estimate reads the sliding
layers' shape; models whose layers share one shape keep exactly their former figures."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import msgspec
import numpy as np
import pytest

from fleet.catalog import PRECISIONS, Catalog, CatalogError, load_catalog
from fleet.catalog.hf_config import describe, match
from fleet.catalog.params import (
    active_params,
    attention_layers,
    attention_params_per_layer,
    kv_bytes_per_sequence,
    kv_elements_per_token_per_layer,
    linear_attention_params_per_layer,
    param_breakdown,
    sliding_attention_params_per_layer,
    sliding_kv_elements_per_token_per_layer,
    state_bytes_per_layer,
    state_layers,
    total_params,
)
from fleet.catalog.schema import SlidingAttention
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.disagg import kv_transfer_bytes
from fleet.perf.explain import describe_problem
from fleet.perf.grid import layouts
from fleet.perf.model import estimate
from fleet.perf.types import Problem

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIGS = REPO_ROOT / "build" / "aic" / "whl" / "aiconfigurator_core" / "model_configs"
DATA_DIR = REPO_ROOT / "fleet" / "data"
needs_configs = pytest.mark.skipif(
    not CONFIGS.is_dir() and not os.environ.get("CI"),
    reason=f"aiconfigurator-core model configs not under {CONFIGS} (see .ci/run)",
)
SHAPED = {"gemma-4-26b-a4b", "gemma-4-31b", "mimo-v2-flash"}
"""Catalog models whose sliding layers have their own attention shape."""


def _text(repo: str) -> dict:
    config = json.loads((CONFIGS / (repo.replace("/", "--") + "_config.json")).read_text())
    return config.get("text_config", config)


# KV elements per token, all layers, by hand: (full layers x elements, sliding layers x elements)
# - Gemma 4 26B-A4B: 5 full layers, K and V of 2 global KV heads of 512; 25 sliding layers, K
#   and V of 8 KV heads of 256.
# - Gemma 4 31B: 10 full layers of 2 x 4 x 512; 50 sliding layers of 2 x 16 x 256.
# - MiMo-V2-Flash: 9 full layers, 4 KV heads of a 192-wide key and a 128-wide value; 39 sliding
#   layers, 8 KV heads of 192 + 128.
BY_HAND = {
    "gemma-4-26b-a4b": (5 * 2 * 2 * 512, 25 * 2 * 8 * 256, 1024),
    "gemma-4-31b": (10 * 2 * 4 * 512, 50 * 2 * 16 * 256, 1024),
    "mimo-v2-flash": (9 * 4 * (192 + 128), 39 * 8 * (192 + 128), 128),
}
CONFIG_OF = {
    "gemma-4-26b-a4b": "google/gemma-4-26B-A4B",
    "gemma-4-31b": "nvidia/Gemma-4-31B-IT-NVFP4",
    "mimo-v2-flash": "XiaomiMiMo/MiMo-V2-Flash",
}


@needs_configs
@pytest.mark.parametrize("model_id", sorted(BY_HAND))
def test_the_by_hand_figures_are_the_configs(model_id: str, catalog: Catalog) -> None:
    """The hand figures above read off each bundled config's raw fields, and the config is
    exactly the catalog entry."""
    c = _text(CONFIG_OF[model_id])
    if "hybrid_layer_pattern" in c:  # MiMo: 1 = sliding-window layer
        n_sliding = sum(c["hybrid_layer_pattern"])
        per_full = c["num_key_value_heads"] * (c["head_dim"] + c["v_head_dim"])
        per_sliding = c["swa_num_key_value_heads"] * (c["swa_head_dim"] + c["swa_v_head_dim"])
    else:  # Gemma 4: keys double as values on the full layers, which are still cached apart
        n_sliding = c["layer_types"].count("sliding_attention")
        per_full = 2 * c["num_global_key_value_heads"] * c["global_head_dim"]
        per_sliding = 2 * c["num_key_value_heads"] * c["head_dim"]
    n_full = c["num_hidden_layers"] - n_sliding
    assert (n_full * per_full, n_sliding * per_sliding, c["sliding_window"]) == BY_HAND[model_id]
    found = match(catalog, json.loads(json.dumps(c)))
    assert found.model is not None and found.model.id == model_id


@pytest.mark.parametrize("model_id", sorted(BY_HAND))
def test_kv_bytes_per_sequence_by_hand(model_id: str, catalog: Catalog) -> None:
    model = catalog.model(model_id)
    full, sliding, window = BY_HAND[model_id]
    n_full = model.num_layers - model.sliding_window_layers
    assert kv_elements_per_token_per_layer(model) * n_full == full
    assert sliding_kv_elements_per_token_per_layer(model) * model.sliding_window_layers == sliding
    for context, kv_bytes in ((100, 2.0), (100_000, 2.0), (100_000, 1.0)):
        expected = kv_bytes * (full * context + sliding * min(context, window))
        assert kv_bytes_per_sequence(model, kv_bytes, context) == expected
    # Gemma 4 26B-A4B at 100k tokens in BF16: 2 x (10,240 x 100,000 + 102,400 x 1,024) bytes
    if model_id == "gemma-4-26b-a4b":
        assert kv_bytes_per_sequence(model, 2.0, 100_000) == 2_257_715_200


def test_weights_per_layer_by_hand(catalog: Catalog) -> None:
    g26, g31, mimo = (catalog.model(i) for i in ("gemma-4-26b-a4b", "gemma-4-31b", "mimo-v2-flash"))
    h = 2816  # Gemma 4 26B-A4B: sliding q, k, v, o; full q, k (no v: keys double as values), o
    assert sliding_attention_params_per_layer(g26) == h * 16 * 256 + 2 * h * 8 * 256 + 16 * 256 * h
    assert attention_params_per_layer(g26) == h * 16 * 512 + h * 2 * 512 + 16 * 512 * h
    assert attention_params_per_layer(g26) == 49_020_928
    h = 5376
    assert sliding_attention_params_per_layer(g31) == 132_120_576
    assert attention_params_per_layer(g31) == h * 32 * 512 * 2 + h * 4 * 512
    h = 4096  # MiMo: q and k of 192 per head, v and o's input of 128
    assert attention_params_per_layer(mimo) == h * 64 * 192 + h * 4 * 192 + h * 4 * 128 + (
        64 * 128 * h
    )
    assert sliding_attention_params_per_layer(mimo) == 94_371_840


@pytest.mark.parametrize(
    ("model_id", "total", "active"),
    [
        # embedding (tied) + 25 sliding and 5 full attention blocks + 30 x (dense MLP 2112 as the
        # shared expert, 128 experts of 704, router): 25,232,441,344; active with 8 experts
        ("gemma-4-26b-a4b", 25_232_441_344, 3_821_830_144),
        ("gemma-4-31b", 30_696_013_824, 30_696_013_824),
        # both embedding tables, 39 + 9 attention blocks, 1 dense layer, 47 MoE layers
        ("mimo-v2-flash", 308_778_369_024, 15_445_524_480),
    ],
)
def test_parameter_counts_by_hand(catalog: Catalog, model_id: str, total: int, active: int) -> None:
    model = catalog.model(model_id)
    assert total_params(model) == total
    assert active_params(model) == active


def test_models_of_one_shape_keep_their_former_figures(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Bit for bit: the sliding columns equal the full ones (their differences are exactly 0),
    the KV and attention weights are the one-shape formulas'."""
    m = arrays.models
    for i, model in enumerate(catalog.models.values()):
        if model.id in SHAPED:
            assert model.sliding_attention is not None
            continue
        if model.compressed_attention is not None:
            continue  # one shared key-value vector: tests/fleet/test_compressed_attention.py
        assert model.sliding_attention is None and model.v_head_dim is None
        assert not model.attention_k_eq_v
        assert m.sliding_num_heads[i] == m.num_heads[i]
        assert m.sliding_num_kv_heads[i] == m.num_kv_heads[i]
        assert m.sliding_kv_elements_per_token_layer[i] == m.kv_elements_per_token_layer[i]
        assert (
            m.sliding_attention_flops_per_token_ctx_layer[i]
            == m.attention_flops_per_token_ctx_layer[i]
        )
        if model.mla is None:
            assert m.attention_flops_per_token_ctx_layer[i] == 2.0 * model.num_attention_heads * (
                2 * model.head_dim
            )
            assert kv_elements_per_token_per_layer(model) == 2 * model.num_kv_heads * model.head_dim
        tokens = np.array([1.0, 100.0, 5000.0, 300_000.0])
        full = attention_layers(model) - model.sliding_window_layers
        held = full * tokens
        if model.sliding_window_layers:
            held = held + model.sliding_window_layers * np.minimum(tokens, model.sliding_window)
        former = kv_elements_per_token_per_layer(model) * 1.0 * held + state_layers(
            model
        ) * state_bytes_per_layer(model)
        assert np.array_equal(kv_bytes_per_sequence(model, 1.0, tokens), former)
        attention = attention_layers(model) * attention_params_per_layer(model)
        attention += (model.linear_attention.layers if model.linear_attention else 0) * (
            linear_attention_params_per_layer(model)
        )
        if model.mamba is None:
            assert param_breakdown(model).attention == attention


GEMMA = "gemma-4-26b-a4b"


def _estimate(catalog: Catalog, arrays: CatalogArrays, **kw: object):
    params: dict = {"model": GEMMA, "accelerator": "b200", "precision": "fp8"}
    params.update(kv_precision="fp8", batch=8, isl=8192, osl=1024)
    params.update(kw)
    configs = make_configs(catalog, **params)  # type: ignore[arg-type]
    return configs, estimate(arrays, configs)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_kv_held_per_device_counts_each_shape_and_its_tp_share(
    catalog: Catalog, arrays: CatalogArrays, tp: int
) -> None:
    """5 full layers of 2 KV heads x 1024 elements (replicated once tp exceeds 2) and 25
    sliding layers of 8 KV heads x 512 (replicated past 8), FP8, over the whole context
    (isl + osl) or the 1024-token window."""
    _, est = _estimate(catalog, arrays, tp=tp)
    assert est.problem[0] == Problem.OK
    context = 8192 + 1024
    full = 5 * context * 2 * 1024 / min(tp, 2)
    sliding = 25 * 1024 * 8 * 512 / min(tp, 8)
    np.testing.assert_allclose(est.kv_bytes_per_device[0], 8 * (full + sliding), rtol=1e-12)


def _as_one_shape(arrays: CatalogArrays) -> CatalogArrays:
    """Gemma's sliding layers read as if they had the full layers' shape (KV and FLOPs)."""
    m = arrays.models
    i = m.ids.index(GEMMA)
    kv, flops = (
        m.sliding_kv_elements_per_token_layer.copy(),
        (m.sliding_attention_flops_per_token_ctx_layer.copy()),
    )
    heads, kv_heads = m.sliding_num_heads.copy(), m.sliding_num_kv_heads.copy()
    kv[i], flops[i] = m.kv_elements_per_token_layer[i], m.attention_flops_per_token_ctx_layer[i]
    heads[i], kv_heads[i] = m.num_heads[i], m.num_kv_heads[i]
    models = dataclasses.replace(
        m, sliding_kv_elements_per_token_layer=kv,
        sliding_attention_flops_per_token_ctx_layer=flops,
        sliding_num_heads=heads, sliding_num_kv_heads=kv_heads,
    )  # fmt: skip
    return dataclasses.replace(arrays, models=models)


def test_decode_reads_and_scores_the_sliding_layers_at_their_own_shape(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """At tp 1 a sliding layer's token is 4,096 KV elements (a full layer's 2,048) and 16 heads
    x (256 + 256) x 2 FLOPs per context token (a full layer's 16 x (512 + 512) x 2)."""
    configs, est = _estimate(catalog, arrays, tp=1)
    _, one = _estimate(catalog, _as_one_shape(arrays), tp=1)
    a = arrays.systems.accelerator[configs.system[0]]
    acc = arrays.accelerators
    window_tokens = 25 * min(8192 + 1024 / 2, 1024)  # sliding layer-tokens at the mean context
    bw_kv = acc.memory_bandwidth_bytes_per_s[a] * acc.kv_bandwidth_fraction[a]
    read = 8 * window_tokens * (4096 - 2048) * 1.0 / bw_kv  # 8 streams, FP8
    np.testing.assert_allclose(est.step_memory_s - one.step_memory_s, read, rtol=1e-9)
    rate = acc.peak_flops[a, PRECISIONS.index("bf16")] * acc.flops_fraction[a]
    flops = 8 * window_tokens * 2.0 * 16 * ((256 + 256) - (512 + 512)) / rate
    np.testing.assert_allclose(est.step_compute_s - one.step_compute_s, flops, rtol=1e-9)
    # the prefill scores the prompt's sliding layer-tokens at the sliding shape too
    assert est.prefill_s[0] < one.prefill_s[0]


def test_a_prompts_kv_transfer_counts_each_shape(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs, _ = _estimate(catalog, arrays)
    # 5 full layers x 8192 tokens x 2048 + 25 sliding layers x 1024 tokens x 4096, FP8
    expected = 5 * 8192 * 2048 + 25 * 1024 * 4096
    assert kv_transfer_bytes(arrays, configs)[0] == expected == 188_743_680


def _with_sliding(catalog: Catalog, sliding: SlidingAttention) -> Catalog:
    model = msgspec.structs.replace(catalog.model(GEMMA), sliding_attention=sliding)
    return dataclasses.replace(catalog, models={**catalog.models, GEMMA: model})


def test_tp_must_split_the_sliding_layers_heads_too(catalog: Catalog) -> None:
    """12 sliding heads split over 4 ranks, not 8 (the full layers' 16 heads split over 8)."""
    odd = _with_sliding(
        catalog, SlidingAttention(num_attention_heads=12, num_kv_heads=4, head_dim=256)
    )
    arrays = build_arrays(odd)
    configs, est = _estimate(odd, arrays, tp=np.array([4, 8]))
    assert list(est.problem) == [Problem.OK, Problem.BAD_LAYOUT]
    why = describe_problem(odd, configs, est, 1)
    assert why is not None and "12 heads" in why and "sliding layers" in why
    assert 8 not in layouts(odd, GEMMA, "hgx-b200-8").tp
    assert 8 in layouts(catalog, GEMMA, "hgx-b200-8").tp
    # sliding KV heads that neither divide tp nor are divided by it
    six = _with_sliding(
        catalog, SlidingAttention(num_attention_heads=12, num_kv_heads=6, head_dim=256)
    )
    _, est = _estimate(six, build_arrays(six), tp=np.array([2, 4]))
    assert list(est.problem) == [Problem.OK, Problem.BAD_LAYOUT]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("v_head_dim = 128\nintermediate_size = 16384",
         "v_head_dim = 192\nintermediate_size = 16384",
         "v_head_dim (id 'mimo-v2-flash'): leave unset when equal to head_dim"),
        ("sliding_window = 128\nsliding_window_layers = 39\n", "",
         "sliding_attention (id 'mimo-v2-flash'): needs sliding_window_layers"),
        ("num_kv_heads = 8\nhead_dim = 192\nv_head_dim = 128\n[models.moe]",
         "num_kv_heads = 4\nhead_dim = 192\nv_head_dim = 128\n[models.moe]",
         "sliding_attention (id 'mimo-v2-flash'): equals the full layers' shape"),
        ("num_kv_heads = 8\nhead_dim = 192\nv_head_dim = 128\n[models.moe]",
         "num_kv_heads = 5\nhead_dim = 192\nv_head_dim = 128\n[models.moe]",
         "sliding_attention.num_kv_heads (id 'mimo-v2-flash'): must divide num_attention_heads"),
    ],
)  # fmt: skip
def test_contradicting_shape_fields_are_named(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    for name in ("accelerators.toml", "systems.toml", "models.toml"):
        (tmp_path / name).write_text((DATA_DIR / name).read_text())
    text = (tmp_path / "models.toml").read_text()
    assert text.count(old) == 1
    (tmp_path / "models.toml").write_text(text.replace(old, new))
    with pytest.raises(CatalogError) as err:
        load_catalog(tmp_path)
    assert expected in str(err.value)


@needs_configs
def test_mimo_layers_follow_its_hybrid_pattern_not_a_chunk_rule() -> None:
    """MiMo-V2-Flash also sets attention_chunk_size 128: its pattern, not Llama 4's 3-in-4
    chunked layers, says which layers slide (39 of 48); layer 0 is its one dense layer."""
    fields = describe(_text("XiaomiMiMo/MiMo-V2-Flash")).fields
    assert fields is not None
    assert fields["sliding_window_layers"] == 39 and fields["moe"]["dense_layers"] == 1
    gemma = describe(_text("google/gemma-4-26B-A4B")).fields
    assert gemma is not None and gemma["moe"]["shared_expert_intermediate_size"] == 2112
