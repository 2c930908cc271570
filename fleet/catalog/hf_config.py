"""A model's architecture fields from its Hugging Face ``config.json``, and whether a checkpoint is
an architecture the catalog already holds.

Serving logs name models by checkpoint (``nvidia/Kimi-K2.6-NVFP4``); a re-release or quantized
checkpoint of an architecture in ``fleet/data/models.toml`` is served exactly like it, and the
catalog resolves it through ``aliases``. This module reads a config the way the catalog's entries
were written (the fields of ``fleet.catalog.schema.ARCHITECTURE_FIELDS``), so that whether two
checkpoints share an architecture is checked field by field instead of guessed from the name:

    python -m fleet.catalog.hf_config CONFIG.json [CONFIG.json ...]

prints, per config, the catalog model it matches (an alias candidate), or the fields where it
differs from the nearest one (with ``--toml``, also the new architecture's fields in the
catalog's TOML layout, to start a ``[[models]]`` entry from), or why the model cannot be
described by the catalog's fields (state-space layers other than Nemotron-H's Mamba2 blocks, or
block-sparse attention, for instance). Exit status 0 when every
config matched.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from fleet.catalog.hf_shapes import (
    attention_shape,
    block_sparse_attention,
    block_sparse_problem,
    compressed_attention,
    moe_layout,
    sliding_layer_count,
    unsupported_gemma,
)
from fleet.catalog.load import Catalog, load_catalog
from fleet.catalog.schema import ARCHITECTURE_FIELDS, Model

Fields = dict[str, Any]

LLAMA4_GLOBAL_EVERY = 4
"""Llama 4 (``llama4_text``): every 4th layer attends globally without RoPE, the others within
chunks of ``attention_chunk_size`` tokens (Llama 4 model card and transformers' Llama4 code)."""

STEP_FLASH_MODEL_TYPES = ("step3p5", "step3p7")
"""StepFun Step 3.5 / 3.7 Flash: their published config gives the sliding-window layers a second
attention shape (``attention_other_setting``: 96 query heads against the full layers' 64);
aiconfigurator-core's curated Step-3.7-Flash config leaves it out (its own Step3p7 reader notes
that the sliding layers run 96 heads), so a config of these types without it is incomplete."""

UNSUPPORTED_LAYER_TYPES = frozenset({"mamba", "mamba2", "recurrent", "ssm"})
"""Layer kinds whose per-request state does not grow with the context: not the catalog's
attention fields, so such models are reported as not describable rather than forced in."""


@dataclass(frozen=True, slots=True)
class Described:
    fields: Fields | None
    """The catalog's architecture fields (``mla`` and ``moe`` as dicts), None when not
    describable."""
    reason: str = ""
    """Why not, when ``fields`` is None."""


def _text(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's part of a multimodal config (``text_config``), else the config."""
    inner = config.get("text_config")
    return inner if isinstance(inner, Mapping) else config


def _first(c: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if c.get(k) is not None:
            return c[k]
    return default


def _int(c: Mapping[str, Any], *keys: str) -> int:
    """The first of ``keys`` that is set, as an int; a ValueError naming the field otherwise."""
    value = _first(c, *keys)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"field {keys[0]} is {'missing' if value is None else repr(value)}")
    return int(value)


def _layer_shapes(c: Mapping[str, Any]) -> str:
    """Why the layers of ``c`` are not one shape the catalog's fields hold ("" when they are):
    fields the reader would otherwise ignore although they change the weights or the KV cache."""
    if c.get("block_configs"):
        return (
            "per-layer block_configs (layers without attention, FFN widths varying by layer): "
            "the catalog holds one layer shape"
        )
    linear = c.get("linear_attn_config")
    if isinstance(linear, Mapping):
        kda = len(linear.get("kda_layers") or [])
        return (
            f"Kimi Delta Attention on {kda} layers (linear_attn_config) beside MLA layers"
            + (
                f", and a latent MoE (routed experts work in a {c['routed_expert_hidden_size']}-"
                f"wide projection of the {c.get('hidden_size')}-wide hidden state)"
                if c.get("routed_expert_hidden_size")
                else ""
            )
            + ": not the catalog's Gated DeltaNet and MoE fields"
        )
    if gemma := unsupported_gemma(c):
        return gemma
    other = c.get("attention_other_setting")
    other_heads = other.get("num_attention_heads") if isinstance(other, Mapping) else None
    if other_heads and other_heads != c.get("num_attention_heads"):
        return (
            f"sliding-window layers of {other_heads} query heads beside the full layers' "
            f"{c.get('num_attention_heads')} (attention_other_setting): this reader does not "
            "map Step Flash's second attention shape (no config with it to check against)"
        )
    if str(c.get("model_type", "")) in STEP_FLASH_MODEL_TYPES and other is None:
        return (
            "Step Flash config that omits attention_other_setting: the published Step Flash "
            "config gives its sliding-window layers 96 query heads beside the full layers' 64, "
            "a second attention shape this config does not give"
        )
    return block_sparse_problem(c)


def describe(config: Mapping[str, Any]) -> Described:
    """The catalog's architecture fields of ``config`` (a parsed ``config.json``)."""
    c = _text(config)
    if shapes := _layer_shapes(c):
        return Described(None, shapes)
    layer_types = list(c.get("layer_types") or [])
    odd = sorted({t for t in layer_types if t in UNSUPPORTED_LAYER_TYPES})
    if odd:
        return Described(None, f"layer types {', '.join(odd)}: per-request state, not a KV cache")
    pattern = _block_pattern(c)
    if pattern is None and (
        c.get("hybrid_override_pattern") or c.get("ssm_state_size") or c.get("mamba_num_heads")
    ):
        return Described(None, "state-space (Mamba) layers: per-request state, not a KV cache")
    if c.get("index_n_heads") and not c.get("kv_lora_rank") and not c.get("compress_ratios"):
        return Described(None, "an indexer without an MLA latent or compress_ratios")
    heads = _int(c, "num_attention_heads")
    hidden = _int(c, "hidden_size")
    if pattern is not None and c.get("num_hidden_layers") is None:
        layers = len(pattern)  # Nemotron 3 Ultra: layers_block_type alone counts the blocks
    else:
        layers = _int(c, "num_hidden_layers")
    if pattern is not None and len(pattern) != layers:
        raise ValueError(f"hybrid pattern of {len(pattern)} blocks, num_hidden_layers {layers}")
    fields: Fields = {
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_kv_heads": int(_first(c, "num_key_value_heads", default=heads)),
        "vocab_size": _int(c, "vocab_size"),
        "tie_word_embeddings": bool(
            config.get("tie_word_embeddings", c.get("tie_word_embeddings", False))
        ),
        "attention_output_gate": bool(c.get("attn_output_gate", False)),
        "qk_norm_across_heads": bool(c.get("use_qk_norm")) and c.get("qk_norm_type") == "per_layer",
        "linear_attention": _linear_attention(c, layer_types),
        "block_pattern": pattern,
        "mamba": _mamba(c) if pattern is not None and "M" in pattern else None,
        "ffn_gated": str(c.get("mlp_hidden_act", "")) not in NON_GATED_ACTIVATIONS,
        "mtp_layers": int(
            _first(
                c, "num_nextn_predict_layers", "num_mtp_modules", "mtp_num_hidden_layers", default=0
            )
        ),
    }
    if c.get("kv_lora_rank"):
        nope, rope = int(c["qk_nope_head_dim"]), int(c["qk_rope_head_dim"])
        fields["attention"] = "mla"
        fields["head_dim"] = nope + rope
        fields["num_kv_heads"] = heads
        fields["mla"] = {
            "kv_lora_rank": int(c["kv_lora_rank"]),
            "q_lora_rank": int(c.get("q_lora_rank") or 0),
            "qk_rope_head_dim": rope,
            "qk_nope_head_dim": nope,
            "v_head_dim": int(c["v_head_dim"]),
            "index_n_heads": int(c.get("index_n_heads") or 0),
            "index_head_dim": int(c.get("index_head_dim") or 0),
            "index_topk": int(c.get("index_topk") or 0) if c.get("index_n_heads") else 0,
        }
        fields.update(v_head_dim=None, attention_k_eq_v=False, sliding_attention=None)
    else:
        fields["attention"] = "gqa"
        head_dim = int(_first(c, "head_dim", "attention_head_dim", default=hidden // heads))
        fields.update(attention_shape(c, heads, fields["num_kv_heads"], head_dim))
        fields["mla"] = None
    fields.update(_moe(c))
    fields["compressed_attention"] = None
    fields["block_sparse_attention"] = None
    if c.get("compress_ratios"):
        # DeepSeek-V4: every layer keeps a window of one shared key-value vector per token
        compressed = compressed_attention(c, layers)
        if isinstance(compressed, str):
            return Described(None, compressed)
        fields["compressed_attention"] = compressed
        fields["sliding_window"] = _int(c, "sliding_window")
        fields["sliding_window_layers"] = layers
        return Described(fields)
    sliding = sliding_layer_count(c, layer_types)
    window = c.get("sliding_window") if sliding else None
    fields["sliding_window"] = int(window) if window else None
    fields["sliding_window_layers"] = sliding if window else 0
    if not fields["sliding_window_layers"]:
        fields["sliding_attention"] = None
    if c.get("attention_chunk_size") and not sliding:
        # Llama 4: chunked local attention on 3 of every 4 layers (every 4th is global, NoPE);
        # the catalog holds a chunk as a sliding window of its size (an upper bound of its KV).
        fields["sliding_window"] = int(c["attention_chunk_size"])
        fields["sliding_window_layers"] = layers - layers // LLAMA4_GLOBAL_EVERY
    fields["block_sparse_attention"] = block_sparse_attention(c, layers)
    return Described(fields)


NON_GATED_ACTIVATIONS = frozenset({"relu2"})
"""``mlp_hidden_act`` values of un-gated MLPs (up, down): Nemotron's squared ReLU."""
BLOCK_TYPES = {"mamba": "M", "attention": "*", "moe": "E", "mlp": "-"}
"""Nemotron-H ``layers_block_type`` names -> ``hybrid_override_pattern`` characters."""


def _block_pattern(c: Mapping[str, Any]) -> str | None:
    """A Nemotron-H hybrid's blocks as pattern characters (``hybrid_override_pattern``, or
    ``layers_block_type`` in later configs); None for other models."""
    if str(c.get("model_type", "")) != "nemotron_h":
        return None
    if c.get("hybrid_override_pattern"):
        return str(c["hybrid_override_pattern"])
    kinds = c.get("layers_block_type")
    if not kinds:
        return None
    unknown = sorted({k for k in kinds if k not in BLOCK_TYPES})
    if unknown:
        raise ValueError(f"layers_block_type {', '.join(unknown)}")
    return "".join(BLOCK_TYPES[k] for k in kinds)


def _mamba(c: Mapping[str, Any]) -> Fields:
    return {
        "num_heads": int(c["mamba_num_heads"]),
        "head_dim": int(c["mamba_head_dim"]),
        "state_size": int(c["ssm_state_size"]),
        "n_groups": int(c["n_groups"]),
        "conv_kernel": int(c.get("conv_kernel", 4)),
        "state_bytes": SSM_DTYPE_BYTES.get(str(c.get("mamba_ssm_cache_dtype", "float32")), 4),
    }


SSM_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
"""Bytes of the recurrent state by the config's ``mamba_ssm_dtype`` (serving keeps float32
unless the config pins another: SGLang's default, which aiconfigurator-core follows)."""


def _linear_attention(c: Mapping[str, Any], layer_types: list[str]) -> Fields | None:
    linear = sum(1 for t in layer_types if t == "linear_attention")
    if not linear:
        return None
    return {
        "layers": linear,
        "num_key_heads": int(c["linear_num_key_heads"]),
        "key_head_dim": int(c["linear_key_head_dim"]),
        "num_value_heads": int(c["linear_num_value_heads"]),
        "value_head_dim": int(c["linear_value_head_dim"]),
        "conv_kernel": int(c.get("linear_conv_kernel_dim", 4)),
        "state_bytes": SSM_DTYPE_BYTES.get(str(c.get("mamba_ssm_dtype", "float32")), 4),
    }


def _moe(c: Mapping[str, Any]) -> Fields:
    experts = _first(c, "n_routed_experts", "num_local_experts", "num_experts")
    if not experts:
        return {"intermediate_size": _int(c, "intermediate_size"), "moe": None}
    expert_width = _first(c, "moe_intermediate_size")
    # MiniMax-M3 names its leading dense layers' width dense_intermediate_size
    dense_width = _first(c, "intermediate_size_mlp", "dense_intermediate_size", "intermediate_size")
    if (
        expert_width is None
    ):  # Mixtral, MiniMax, Llama 4, gpt-oss: intermediate_size is the expert's
        expert_width = c["intermediate_size"]
        dense_width = _first(
            c, "intermediate_size_mlp", "dense_intermediate_size", default=expert_width
        )
    shared = int(_first(c, "n_shared_experts", "num_shared_experts", default=0))
    if str(c.get("model_type", "")).startswith("llama4"):
        shared = 1  # every Llama 4 MoE layer adds a shared expert of the routed experts' width
    shared_width = int(
        _first(
            c,
            "shared_expert_intermediate_size",
            "shared_intermediate_size",
            "moe_shared_expert_intermediate_size",
            default=0,
        )
    )
    if shared == 0 and shared_width > 0:
        shared = 1
    moe: Fields = {
        "num_experts": int(experts),
        "experts_per_token": _int(c, "num_experts_per_tok", "experts_per_token", "top_k_experts"),
        "num_shared_experts": shared,
        "expert_intermediate_size": int(expert_width),
        "shared_expert_intermediate_size": 0 if shared_width == int(expert_width) else shared_width,
        "dense_layers": int(_first(c, "first_k_dense_replace", default=0)),
        "moe_layer_interval": int(
            _first(c, "interleave_moe_layer_step", "decoder_sparse_step", default=1)
        ),
        "latent_size": int(c.get("moe_latent_size") or 0),
    }
    moe.update(moe_layout(c))
    if moe["shared_expert_intermediate_size"] == moe["expert_intermediate_size"]:
        moe["shared_expert_intermediate_size"] = 0
    # No dense layer and no dense width in the config (Qwen3.5): the field holds the expert's.
    return {"intermediate_size": int(dense_width or expert_width), "moe": moe}


def catalog_fields(model: Model) -> Fields:
    """A catalog entry's architecture fields, in ``describe``'s form."""
    out: Fields = {name: getattr(model, name) for name in ARCHITECTURE_FIELDS}
    tables = (
        "mla",
        "moe",
        "linear_attention",
        "mamba",
        "sliding_attention",
        "compressed_attention",
        "block_sparse_attention",
    )
    for table in tables:
        value = out[table]
        out[table] = None if value is None else msgspec.structs.asdict(value)
    if out["moe"] is not None:
        del out["moe"]["routing"]  # how the router loads experts: no config field says
    return out


def differences(model: Model, fields: Fields) -> list[str]:
    """``field: catalog -> config`` for every architecture field that differs (nested tables
    field by field)."""
    mine = catalog_fields(model)
    out = []
    for name in sorted(mine):
        a, b = mine[name], fields.get(name)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{name}.{k}: {a[k]} -> {b.get(k)}" for k in sorted(a) if a[k] != b.get(k)]
        elif a != b:
            out.append(f"{name}: {a} -> {b}")
    return out


@dataclass(frozen=True, slots=True)
class Match:
    model: Model | None
    """The catalog model with exactly these fields; None when none."""
    nearest: Model | None
    differences: tuple[str, ...]
    """Against ``nearest`` when nothing matched."""
    reason: str = ""
    """Why the config is not describable (then both models are None)."""


def match(catalog: Catalog, config: Mapping[str, Any]) -> Match:
    d = describe(config)
    if d.fields is None:
        return Match(None, None, (), d.reason)
    fields = d.fields
    ranked = sorted(catalog.models.values(), key=lambda m: (len(differences(m, fields)), m.id))
    best = ranked[0] if ranked else None
    diff = tuple(differences(best, fields)) if best is not None else ()
    if best is not None and not diff:
        return Match(best, best, ())
    return Match(None, best, diff)


def toml_fields(fields: Fields) -> str:
    """The architecture fields of a new ``[[models]]`` entry as TOML, in the catalog's layout
    (``[models.linear_attention]``, ``[models.mamba]``, ``[models.mla]`` and ``[models.moe]``
    tables last); the entry's
    id, names, precision, published figures, quality and sources are the author's to add."""

    def value(v: Any) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else json.dumps(v)

    defaults: Fields = {
        "tie_word_embeddings": False,
        "attention": "gqa",
        "attention_output_gate": False,
        "qk_norm_across_heads": False,
        "mtp_layers": 0,
        "sliding_window": None,
        "sliding_window_layers": 0,
        "block_pattern": None,
        "ffn_gated": True,
        "v_head_dim": None,
        "attention_k_eq_v": False,
    }
    lines = []
    for name in (
        "num_layers", "hidden_size", "num_attention_heads", "num_kv_heads", "head_dim",
        "v_head_dim", "attention_k_eq_v", "intermediate_size", "vocab_size",
        "tie_word_embeddings", "attention",
        "attention_output_gate", "qk_norm_across_heads", "sliding_window",
        "sliding_window_layers", "mtp_layers",
        "block_pattern", "ffn_gated",
    ):  # fmt: skip
        if name in defaults and fields.get(name) == defaults[name]:
            continue
        lines.append(f"{name} = {value(fields[name])}")
    for table in (
        "sliding_attention", "linear_attention", "mamba", "mla", "compressed_attention", "moe",
        "block_sparse_attention",
    ):  # fmt: skip
        sub = fields.get(table)
        if sub:
            lines.append(f"[models.{table}]")
            lines += [
                f"{k} = {value(v)}"
                for k, v in sub.items()
                if (v or k == "q_lora_rank") and not (k == "moe_layer_interval" and v == 1)
            ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", type=Path, help="Hugging Face config.json files")
    parser.add_argument(
        "--toml", action="store_true", help="also print a new architecture's fields as TOML"
    )
    args = parser.parse_args(argv)
    catalog = load_catalog()
    matched = 0
    for path in args.configs:
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            print(f"{path}: cannot read: {err}", file=sys.stderr)
            return 2
        try:
            found = match(catalog, config)
        except KeyError as err:
            print(f"{path}: not a model config this reader knows: field {err} is missing")
            continue
        except (TypeError, ValueError) as err:
            print(f"{path}: not a model config this reader knows: {err}")
            continue
        if found.model is not None:
            matched += 1
            print(f"{path}: same architecture as {found.model.id}")
        elif found.reason:
            print(f"{path}: not describable by the catalog's fields: {found.reason}")
        else:
            near = found.nearest.id if found.nearest is not None else "-"
            print(f"{path}: new architecture; nearest {near}: {'; '.join(found.differences)}")
            fields = describe(config).fields
            if args.toml and fields is not None:
                print(toml_fields(fields))
    return 0 if matched == len(args.configs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
