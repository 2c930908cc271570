"""Reading a checkpoint's config.json into the catalog's architecture fields
(fleet/catalog/hf_config.py), and the aliases it checks."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import msgspec
import pytest

from fleet.catalog import Catalog
from fleet.catalog.hf_config import (
    catalog_fields,
    describe,
    differences,
    main,
    match,
    toml_fields,
)
from fleet.catalog.schema import Model

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIGS = REPO_ROOT / "build" / "aic" / "whl" / "aiconfigurator_core" / "model_configs"
"""Hugging Face configs bundled in aiconfigurator-core 0.12.0 (Apache-2.0), fetched by .ci/run."""

needs_configs = pytest.mark.skipif(
    not CONFIGS.is_dir() and not os.environ.get("CI"),
    reason=f"aiconfigurator-core model configs not under {CONFIGS} (see .ci/run)",
)

LLAMA_LIKE: dict[str, Any] = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
}


def _config(repo: str) -> dict[str, Any] | None:
    path = CONFIGS / (repo.replace("/", "--") + "_config.json")
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def test_a_llama_config_is_llama_3_1_8b(catalog: Catalog) -> None:
    found = match(catalog, LLAMA_LIKE)
    assert found.model is not None and found.model.id == "llama-3.1-8b"
    wider = dict(LLAMA_LIKE, intermediate_size=13000, num_hidden_layers=30)
    near = match(catalog, wider)
    assert near.model is None and near.nearest is not None and near.nearest.id == "llama-3.1-8b"
    assert near.differences == ("intermediate_size: 14336 -> 13000", "num_layers: 32 -> 30")


def test_a_multimodal_config_is_read_from_its_text_part() -> None:
    fields = describe({"model_type": "qwen3_vl", "text_config": LLAMA_LIKE}).fields
    assert fields is not None and fields["num_layers"] == 32 and fields["head_dim"] == 128


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"layer_types": ["mamba", "full_attention"]}, "mamba"),
        ({"hybrid_override_pattern": "M-M-M*"}, "Mamba"),
        ({"index_n_heads": 64}, "an indexer without an MLA latent or compress_ratios"),
    ],
)
def test_layers_with_per_request_state_are_not_forced_into_kv_fields(
    extra: dict[str, Any], reason: str
) -> None:
    d = describe(dict(LLAMA_LIKE, **extra))
    assert d.fields is None and reason in d.reason


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"block_configs": [{"attention": {"no_op": True}}]}, "per-layer block_configs"),
        (
            {"linear_attn_config": {"kda_layers": [1, 2, 3]}, "routed_expert_hidden_size": 2048},
            "Kimi Delta Attention on 3 layers",
        ),
        ({"hidden_size_per_layer_input": 256}, "per-layer input embeddings"),
        ({"num_kv_shared_layers": 20}, "reusing an earlier layer's KV cache"),
        (
            {"attention_other_setting": {"num_attention_heads": 48, "num_attention_groups": 8}},
            "sliding-window layers of 48 query heads beside the full layers' 32",
        ),
        ({"model_type": "step3p7"}, "omits attention_other_setting"),
        (
            {
                "sparse_attention_config": {
                    "use_sparse_attention": True,
                    "sparse_attention_freq": [0, 1, 1],
                    "sparse_disable_index_value": [0, 1, 0],
                }
            },
            "indexer has a value branch of its own",
        ),
    ],
)
def test_layers_of_more_than_one_shape_are_not_forced_into_one(
    extra: dict[str, Any], reason: str
) -> None:
    """Fields the reader would otherwise skip although they change weights or KV per layer."""
    d = describe(dict(LLAMA_LIKE, **extra))
    assert d.fields is None and reason in d.reason
    # The same fields at their one-shape values keep the config describable.
    plain = describe(dict(LLAMA_LIKE, head_dim=128, global_head_dim=128))
    assert plain.fields is not None


NOT_DESCRIBABLE = {
    "moonshotai/Kimi-K3": "Kimi Delta Attention on 69 layers",
    "nvidia/Llama-3_3-Nemotron-Super-49B-v1": "per-layer block_configs",
    "stepfun-ai/Step-3.7-Flash": "96 query heads",
    "stepfun-ai/Step-3.7-Flash-FP8": "96 query heads",
}
"""Bundled configs whose layers the catalog's fields cannot hold, with the reason's key words."""


@needs_configs
@pytest.mark.parametrize(("repo", "reason"), sorted(NOT_DESCRIBABLE.items()))
def test_bundled_configs_of_other_layer_shapes_fail_with_their_reason(
    repo: str, reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(repo)
    assert config is not None, repo
    d = describe(config)
    assert d.fields is None and reason in d.reason
    path = CONFIGS / (repo.replace("/", "--") + "_config.json")
    assert main([str(path)]) == 1
    out = capsys.readouterr().out
    assert f"not describable by the catalog's fields: {d.reason}" in out
    assert out.count("\n") == 1


def test_a_config_missing_a_required_field_is_named_not_traced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = {
        "no_heads.json": ({k: v for k, v in LLAMA_LIKE.items() if k != "num_attention_heads"},
                          "field num_attention_heads is missing"),
        "null_top_k.json": (dict(LLAMA_LIKE, num_experts=8),
                            "field num_experts_per_tok is missing"),
        "bad_layers.json": (dict(LLAMA_LIKE, num_hidden_layers="32 or so"),
                            "field num_hidden_layers is '32 or so'"),
    }  # fmt: skip
    for name, (config, message) in cases.items():
        path = tmp_path / name
        path.write_text(json.dumps(config))
        assert main([str(path)]) == 1
        out = capsys.readouterr().out
        assert out == f"{path}: not a model config this reader knows: {message}\n"


@needs_configs
def test_every_catalog_name_with_a_bundled_config_has_exactly_its_architecture(
    catalog: Catalog,
) -> None:
    checked = []
    for model in catalog.models.values():
        for repo in (model.hf_repo, *model.aliases):
            config = _config(repo)
            if config is None:
                continue
            d = describe(config)
            assert d.fields is not None, (repo, d.reason)
            assert differences(model, d.fields) == [], (model.id, repo)
            checked.append(repo)
    # Not vacuous: the aliases added from these configs are among them.
    assert len(checked) >= 40
    assert {
        "MiniMaxAI/MiniMax-M2.7",
        "nvidia/GLM-5.3-NVFP4",
        "nvidia/Kimi-K2.6-NVFP4",
        "mistralai/Mixtral-8x7B-v0.1",
        "mistralai/Mixtral-8x22B-v0.1",
        "Qwen/Qwen3-0.6B",
        "Qwen/Qwen3-VL-2B-Instruct",
        "Qwen/Qwen3-VL-4B-Instruct",
    } <= set(checked)


@needs_configs
def test_the_reader_reproduces_each_entry_it_was_checked_on(catalog: Catalog) -> None:
    model = catalog.model("llama-4-maverick")
    config = _config(model.hf_repo)
    assert config is not None
    fields = describe(config).fields
    assert fields == catalog_fields(model)


def test_the_command_names_the_match_and_exits_by_outcome(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = tmp_path / "same.json"
    same.write_text(json.dumps(LLAMA_LIKE))
    hybrid = tmp_path / "hybrid.json"
    hybrid.write_text(json.dumps(dict(LLAMA_LIKE, hybrid_override_pattern="M-M*")))
    assert main([str(same)]) == 0
    assert "same architecture as llama-3.1-8b" in capsys.readouterr().out
    assert main([str(same), str(hybrid)]) == 1
    assert "not describable by the catalog's fields" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read" in err


HYBRID_MOE: dict[str, Any] = {
    "model_type": "qwen3_5_moe",
    "text_config": {
        "num_hidden_layers": 8,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "vocab_size": 1000,
        "attn_output_gate": True,
        "layer_types": ["linear_attention"] * 3
        + ["full_attention"]
        + ["linear_attention"] * 3
        + ["full_attention"],
        "linear_num_key_heads": 16,
        "linear_key_head_dim": 128,
        "linear_num_value_heads": 32,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "mamba_ssm_dtype": "bfloat16",
        "num_experts": 64,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "mtp_num_hidden_layers": 1,
    },
}


@pytest.mark.parametrize("config", [LLAMA_LIKE, HYBRID_MOE], ids=["dense", "hybrid-moe"])
def test_the_toml_stanza_loads_back_as_the_same_architecture(config: dict[str, Any]) -> None:
    fields = describe(config).fields
    assert fields is not None
    stanza = toml_fields(fields)
    head = 'id = "x"\nname = "x"\nhf_repo = "x"\npublished_total_params_b = 1\n'
    head += "published_active_params_b = 1\nquality = 1\n"
    top, _, tables = stanza.partition("\n[models.")
    text = "[[models]]\n" + head + top + ("\n[models." + tables if tables else "")
    text += "\n[models.sources]\n"
    doc = tomllib.loads(text)["models"][0]
    model = msgspec.convert(doc, Model)
    assert differences(model, fields) == []
    if config is HYBRID_MOE:
        assert model.linear_attention is not None and model.linear_attention.layers == 6
        assert model.linear_attention.state_bytes == 2  # the config pins bfloat16


def test_block_sparse_attention_is_read_from_its_config_table() -> None:
    """MiniMax Sparse Attention's fields, on the layers sparse_attention_freq marks."""
    sparse = {
        "use_sparse_attention": True,
        "sparse_attention_freq": [0] * 2 + [1] * 30,
        "sparse_disable_index_value": [0] * 2 + [1] * 30,
        "sparse_block_size": 64,
        "sparse_topk_blocks": 8,
        "sparse_local_block": 2,
        "sparse_num_index_heads": 8,
        "sparse_index_dim": 64,
    }
    fields = describe(dict(LLAMA_LIKE, sparse_attention_config=sparse)).fields
    assert fields is not None
    assert fields["block_sparse_attention"] == {
        "layers": 30,
        "block_size": 64,
        "topk_blocks": 8,
        "local_blocks": 2,
        "index_n_heads": 8,
        "index_head_dim": 64,
    }
    assert "[models.block_sparse_attention]\nlayers = 30" in toml_fields(fields)
    off = describe(dict(LLAMA_LIKE, sparse_attention_config=dict(sparse, use_sparse_attention=0)))
    assert off.fields is not None and off.fields["block_sparse_attention"] is None


def test_a_norm_over_every_heads_q_and_k_is_read_and_round_trips() -> None:
    """MiniMax-M2's ``qk_norm_type = "per_layer"``: one RMSNorm over all q heads (and one over
    all k heads), not Qwen3's per-head norm; the stanza carries it back."""
    per_layer = dict(LLAMA_LIKE, use_qk_norm=True, qk_norm_type="per_layer")
    fields = describe(per_layer).fields
    assert fields is not None and fields["qk_norm_across_heads"] is True
    per_head = describe(dict(LLAMA_LIKE, use_qk_norm=True, qk_norm_type="per_head")).fields
    assert per_head is not None and per_head["qk_norm_across_heads"] is False
    assert describe(LLAMA_LIKE).fields["qk_norm_across_heads"] is False  # type: ignore[index]
    assert "qk_norm_across_heads = true" in toml_fields(fields)
    assert "qk_norm_across_heads" not in toml_fields(describe(LLAMA_LIKE).fields)  # type: ignore[arg-type]
