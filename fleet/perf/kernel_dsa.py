"""DeepSeek Sparse Attention's decode module: its fixed time per layer, from measured tables.

A DSA layer (GLM-5, DeepSeek-V3.2) runs MLA's projections, a lightning indexer that scores
every context token (DeepGEMM's ``fp8_mqa_logits``), a top-k selection, sparse MLA over the
selected tokens and the output projection: a dozen-odd kernels per decode step. The
performance model charges their bytes and FLOPs at the part's rates (``fleet.perf.sparse``;
the indexer's at decode sizes is well under a microsecond), but the kernels' own fixed costs,
which the measured module takes tens of microseconds for, are nowhere: GLM-5 under SGLang read
37% too fast on the unseen sample, at every batch size.

aiconfigurator-core 0.12.0 times the whole module at decode (``dsa_generation_module_perf``;
SGLang 0.5.14 on every part that has it, the engine whose table covers GLM-5 and DeepSeek-V3.2
at each tensor-parallel width). ``fit_module`` fits it as a fixed call time plus the module's
weights per rank streamed at a fitted fraction of HBM bandwidth, over decode rows (one query per
stream, ``MIN_STREAMS``-``MAX_STREAMS`` streams, contexts ``MIN_CONTEXT``-``MAX_CONTEXT``
tokens, where the module's time is nearly flat in both) of GLM-5 (BF16 and FP8 checkpoints) and
DeepSeek-V3.2. GLM-5.2's rows are left out: the same shapes take about half the time there
(its indexer is shared across layers), which these weights cannot say. The call term is the
catalog's ``[accelerators.kernel] dsa_call_us``; the model adds it to every forward pass of
every DSA layer, as it adds the MoE layers' call time (``moe_call_us``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
from scipy.optimize import least_squares

from fleet.catalog import Catalog
from fleet.perf import kernel_tables as kt
from fleet.perf.kernel_fit import KernelFit
from fleet.perf.types import FloatArray

MODULE_TABLE = "sparse_attention/sglang/0.5.14/dsa_generation_module_perf.parquet"
CHECKPOINTS = {
    "zai-org/GLM-5": "glm-5",
    "zai-org/GLM-5-FP8": "glm-5",
    "deepseek-ai/DeepSeek-V3.2": "deepseek-v3.2",
}
"""The table's checkpoints fitted -> the catalog model whose shapes give their weights."""
WEIGHT_BYTES = {"bfloat16": 2.0, "fp8_block": 1.0}
"""Bytes per weight of the module's GEMMs by the table's ``gemm_type`` (FP8 scales neglected)."""
MIN_STREAMS, MAX_STREAMS = 4, 16
MIN_CONTEXT, MAX_CONTEXT = 512, 8192


def has_table(data: Path, accelerator: str) -> bool:
    return (data / kt.SYSTEMS[accelerator] / MODULE_TABLE).is_file()


def module_params(catalog: Catalog, model_id: str, heads_per_rank: FloatArray) -> FloatArray:
    """Weights of one DSA attention module on a rank holding ``heads_per_rank`` heads: the
    query and KV down-projections and the indexer's projections on every rank; the query and KV
    up-projections and the output projection split by head."""
    m = catalog.model(model_id)
    a = m.mla
    if a is None or not a.index_topk:
        raise ValueError(f"{model_id} has no DeepSeek Sparse Attention")
    hidden = m.hidden_size
    index = a.index_n_heads * a.index_head_dim
    replicated = (
        hidden * a.q_lora_rank
        + hidden * (a.kv_lora_rank + a.qk_rope_head_dim)
        + a.q_lora_rank * index
        + hidden * (a.index_head_dim + a.index_n_heads)
    )
    per_head = (
        a.q_lora_rank * (a.qk_nope_head_dim + a.qk_rope_head_dim)
        + a.kv_lora_rank * (a.qk_nope_head_dim + a.v_head_dim)
        + a.v_head_dim * hidden
    )
    return replicated + per_head * heads_per_rank


def _rows(data: Path, accelerator: str) -> pl.DataFrame:
    return pl.read_parquet(data / kt.SYSTEMS[accelerator] / MODULE_TABLE).filter(
        (pl.col("isl") == 1)
        & pl.col("batch_size").is_between(MIN_STREAMS, MAX_STREAMS)
        & pl.col("step").is_between(MIN_CONTEXT, MAX_CONTEXT)
        & pl.col("model").is_in(list(CHECKPOINTS))
        & pl.col("gemm_type").is_in(list(WEIGHT_BYTES))
        & (pl.col("latency") > 0.0)
    )


def fit_module(data: Path, catalog: Catalog, accelerator: str) -> list[KernelFit]:
    """The module fit of ``accelerator`` (none where its tables lack the module)."""
    if not has_table(data, accelerator):
        return []
    d = _rows(data, accelerator)
    bytes_ = np.zeros(d.height)
    for checkpoint, model_id in CHECKPOINTS.items():
        rows = (d["model"] == checkpoint).to_numpy()
        heads = d["num_heads"].to_numpy()[rows].astype(np.float64)
        weight = d["gemm_type"].to_numpy()[rows]
        per_byte = np.array([WEIGHT_BYTES[w] for w in weight])
        bytes_[rows] = module_params(catalog, model_id, heads) * per_byte
    latency = d["latency"].to_numpy() * 1e-3
    held_out = kt.held_out_keys(
        d.select("model", "num_heads", "gemm_type", "kv_cache_dtype", "batch_size", "step")
    )
    bw = catalog.accelerator(accelerator).memory_bandwidth_bytes_per_s

    def predict(x: np.ndarray, b: FloatArray) -> FloatArray:
        return x[0] * 1e-6 + b / (bw * x[1])

    train, test = ~held_out, held_out
    result = least_squares(
        lambda x: np.log(predict(x, bytes_[train]) / latency[train]),
        x0=(40.0, 0.5), bounds=((0.0, 0.01), (500.0, 1.5)), loss="soft_l1", f_scale=0.1,
    )  # fmt: skip
    if not result.success:
        raise RuntimeError(f"dsa module on {accelerator}: fit did not converge: {result.message}")
    err = np.abs(predict(result.x, bytes_) / latency - 1.0)
    return [
        KernelFit(
            accelerator=accelerator,
            kernel="dsa module",
            params={"call_us": float(result.x[0]), "bandwidth_fraction": float(result.x[1])},
            rows_fit=int(train.sum()),
            rows_held_out=int(test.sum()),
            fit_median=float(np.median(err[train])),
            fit_p90=float(np.quantile(err[train], 0.9)),
            held_out_median=float(np.median(err[test])),
            held_out_p90=float(np.quantile(err[test], 0.9)),
        )
    ]


def figures(by: dict[str, KernelFit]) -> dict[str, float]:
    """``dsa_call_us`` where the part has the module fit."""
    return {"dsa_call_us": by["dsa module"].params["call_us"]} if "dsa module" in by else {}
