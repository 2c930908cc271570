"""Reading a checkpoint's config.json into the catalog's architecture fields
(fleet/catalog/hf_config.py), and the aliases it checks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from fleet.catalog import Catalog
from fleet.catalog.hf_config import catalog_fields, describe, differences, main, match

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
    wider = dict(LLAMA_LIKE, intermediate_size=12288, num_hidden_layers=36)
    near = match(catalog, wider)
    assert near.model is None and near.nearest is not None and near.nearest.id == "llama-3.1-8b"
    assert near.differences == ("intermediate_size: 14336 -> 12288", "num_layers: 32 -> 36")


def test_a_multimodal_config_is_read_from_its_text_part() -> None:
    fields = describe({"model_type": "qwen3_vl", "text_config": LLAMA_LIKE}).fields
    assert fields is not None and fields["num_layers"] == 32 and fields["head_dim"] == 128


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"layer_types": ["mamba", "full_attention"]}, "mamba"),
        ({"hybrid_override_pattern": "M-M-M*"}, "Mamba"),
    ],
)
def test_layers_with_per_request_state_are_not_forced_into_kv_fields(
    extra: dict[str, Any], reason: str
) -> None:
    d = describe(dict(LLAMA_LIKE, **extra))
    assert d.fields is None and reason in d.reason


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
    assert {"MiniMaxAI/MiniMax-M2.7", "nvidia/GLM-5.3-NVFP4", "nvidia/Kimi-K2.6-NVFP4"} <= set(
        checked
    )


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
