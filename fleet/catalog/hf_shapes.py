"""Attention shapes per layer type in Hugging Face configs, as the catalog's fields hold them.

Two config families give their sliding-window and full-attention layers different shapes:

- Gemma 4 (``gemma4_text``): ``layer_types`` marks the sliding layers; the full layers have
  ``global_head_dim`` wide heads and, with ``attention_k_eq_v``, ``num_global_key_value_heads``
  KV heads and no value projection (transformers' and vLLM's Gemma 4 code: the key projection's
  output is also the value, normalised without rotation, so the cache holds keys and values
  both); the sliding layers keep ``head_dim`` and ``num_key_value_heads``.
- MiMo-V2-Flash (``mimo_v2_flash``): ``hybrid_layer_pattern`` marks the sliding layers with 1
  (the released modelling code and vLLM/SGLang read it so); the full layers have ``head_dim``
  wide queries and keys and ``v_head_dim`` wide values, the sliding ones their own ``swa_*``
  heads and widths.

The catalog's own fields hold the full layers' shape and ``sliding_attention`` the sliding
layers' where it differs (``fleet.catalog.schema``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Fields = dict[str, Any]


def sliding_layer_count(c: Mapping[str, Any], layer_types: list[str]) -> int:
    """Sliding-window layers: ``layer_types`` entries, or MiMo-V2-Flash's pattern ones."""
    pattern = c.get("hybrid_layer_pattern")
    if isinstance(pattern, list):
        if any(p not in (0, 1) for p in pattern):
            raise ValueError("field hybrid_layer_pattern holds values other than 0 and 1")
        return sum(pattern)
    return sum(1 for t in layer_types if t == "sliding_attention")


def unsupported_gemma(c: Mapping[str, Any]) -> str:
    """Why a Gemma 4 config is beyond the catalog's fields ("" when it is not): per-layer
    embeddings and KV shared across layers (the small E2B/E4B models)."""
    if c.get("hidden_size_per_layer_input"):
        return "per-layer input embeddings (hidden_size_per_layer_input): not the catalog's fields"
    if c.get("num_kv_shared_layers"):
        return "layers reusing an earlier layer's KV cache (num_kv_shared_layers)"
    return ""


def attention_shape(c: Mapping[str, Any], heads: int, kv_heads: int, head_dim: int) -> Fields:
    """``num_kv_heads``, ``head_dim``, ``v_head_dim``, ``attention_k_eq_v`` and
    ``sliding_attention`` of a GQA config, from the generic ``heads``, ``kv_heads`` and
    ``head_dim`` the caller read; ``sliding_attention`` as a dict, None when the sliding
    layers' shape is the full layers'."""
    value = c.get("v_head_dim")
    v_dim = int(value) if value else head_dim
    out: Fields = {
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "v_head_dim": v_dim,
        "attention_k_eq_v": False,
    }
    sliding: Fields = {
        "num_attention_heads": heads,
        "num_kv_heads": kv_heads,
        "head_dim": head_dim,
        "v_head_dim": v_dim,
    }
    if c.get("swa_num_key_value_heads") or c.get("swa_head_dim"):  # MiMo-V2-Flash
        swa_dim = int(c.get("swa_head_dim") or head_dim)
        sliding = {
            "num_attention_heads": int(c.get("swa_num_attention_heads") or heads),
            "num_kv_heads": int(c.get("swa_num_key_value_heads") or kv_heads),
            "head_dim": swa_dim,
            "v_head_dim": int(c.get("swa_v_head_dim") or swa_dim),
        }
    elif c.get("global_head_dim") or c.get("num_global_key_value_heads"):  # Gemma 4
        k_eq_v = bool(c.get("attention_k_eq_v"))
        global_kv = c.get("num_global_key_value_heads") if k_eq_v else None
        full_dim = int(c.get("global_head_dim") or head_dim)
        out = {
            "num_kv_heads": int(global_kv or kv_heads),
            "head_dim": full_dim,
            "v_head_dim": full_dim,
            "attention_k_eq_v": k_eq_v,
        }
    main = (heads, out["num_kv_heads"], out["head_dim"], out["v_head_dim"])
    same = main == tuple(sliding[k] for k in sliding)
    if sliding["v_head_dim"] == sliding["head_dim"]:
        sliding["v_head_dim"] = None
    if out["v_head_dim"] == out["head_dim"]:
        out["v_head_dim"] = None
    out["sliding_attention"] = None if same else sliding
    return out


def moe_layout(c: Mapping[str, Any]) -> Fields:
    """MoE fields these families spell their own way: MiMo-V2-Flash's leading dense layers in
    ``moe_layer_freq`` (a list, 1 = MoE), Gemma 4's dense MLP running beside the routed
    experts in every layer (``enable_moe_block``: both read the layer's input and their outputs
    are summed, as a shared expert's; transformers' Gemma4TextDecoderLayer)."""
    out: Fields = {}
    freq = c.get("moe_layer_freq")
    if isinstance(freq, list) and 1 in freq:
        lead = freq.index(1)
        if any(f != 1 for f in freq[lead:]):
            raise ValueError("field moe_layer_freq is not leading dense layers then MoE layers")
        out["dense_layers"] = lead
    if c.get("enable_moe_block"):
        out["num_shared_experts"] = 1
        out["shared_expert_intermediate_size"] = int(c["intermediate_size"])
    return out


def block_sparse_problem(c: Mapping[str, Any]) -> str:
    """Why ``c``'s block-sparse attention is beyond the catalog's fields ("" when it is not, or
    when it has none): an indexer branch with values and an output of its own (MiniMax-M3
    disables it on every sparse layer, ``sparse_disable_index_value``) adds weights the catalog
    does not count."""
    sparse = c.get("sparse_attention_config")
    if not isinstance(sparse, Mapping) or not sparse.get("use_sparse_attention"):
        return ""
    freq = list(sparse.get("sparse_attention_freq") or [])
    disabled = list(sparse.get("sparse_disable_index_value") or [])
    if any(f and not (i < len(disabled) and disabled[i]) for i, f in enumerate(freq)):
        return (
            "block-sparse attention whose indexer has a value branch of its own on some "
            "layers (sparse_disable_index_value): weights the catalog does not count"
        )
    return ""


def block_sparse_attention(c: Mapping[str, Any], layers: int) -> Fields | None:
    """The ``block_sparse_attention`` table of a config with MiniMax Sparse Attention
    (``sparse_attention_config``), None without: the layers ``sparse_attention_freq`` marks
    (every layer when it is absent), the block size, the top-k blocks (the local ones among
    them, as MiniMax's MSA kernels return them), the indexer's heads and key width."""
    sparse = c.get("sparse_attention_config")
    if not isinstance(sparse, Mapping) or not sparse.get("use_sparse_attention"):
        return None
    freq = sparse.get("sparse_attention_freq")
    count = layers if freq is None else sum(1 for f in list(freq)[:layers] if f)
    if not count:
        return None
    return {
        "layers": count,
        "block_size": int(sparse["sparse_block_size"]),
        "topk_blocks": int(sparse["sparse_topk_blocks"]),
        "local_blocks": int(sparse.get("sparse_local_block", 1)),
        "index_n_heads": int(sparse["sparse_num_index_heads"]),
        "index_head_dim": int(sparse["sparse_index_dim"]),
    }


CSA_RATIO = 4
"""The compression ratio of DeepSeek-V4's compressed sparse attention layers, the ones with a
lightning indexer (the reference code builds the indexer where ``compress_ratio == 4``)."""


def compressed_attention(c: Mapping[str, Any], layers: int) -> Fields | str:
    """DeepSeek-V4's ``compress_ratios`` over the ``layers`` main layers (entries beyond them
    belong to the MTP modules, which the catalog does not count) as the catalog's
    ``compressed_attention`` fields, or why they are not: ratios other than 0, 4 and one
    heavier ratio."""
    ratios = list(c.get("compress_ratios") or [])
    if len(ratios) < layers:
        raise ValueError(f"field compress_ratios has {len(ratios)} entries for {layers} layers")
    main = ratios[:layers]
    heavy = sorted({r for r in main if r not in (0, CSA_RATIO)})
    if len(heavy) > 1 or any(not isinstance(r, int) or r < 0 for r in main):
        return f"compress_ratios {sorted(set(main))}: more than one ratio besides 0 and 4"
    return {
        "q_lora_rank": int(c["q_lora_rank"]),
        "o_lora_rank": int(c["o_lora_rank"]),
        "o_groups": int(c["o_groups"]),
        "qk_rope_head_dim": int(c["qk_rope_head_dim"]),
        "csa_layers": main.count(CSA_RATIO),
        "csa_ratio": CSA_RATIO,
        "hca_layers": sum(1 for r in main if heavy and r == heavy[0]),
        "hca_ratio": heavy[0] if heavy else 128,
        "index_n_heads": int(c["index_n_heads"]),
        "index_head_dim": int(c["index_head_dim"]),
        "index_topk": int(c["index_topk"]),
        "hc_mult": int(c.get("hc_mult") or 1),
        "hash_layers": int(c.get("num_hash_layers") or 0),
    }
