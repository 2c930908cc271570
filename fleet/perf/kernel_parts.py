"""Parts whose kernel tables lack some kernels (A100, L40S, RTX PRO 6000): what each table
holds, and the catalog's [accelerators.kernel] figures from the fits that exist.

The Hopper and Blackwell parts have every table ``fleet.perf.kernel_fit`` reads, at TensorRT-LLM
1.3.0rc20. A100's are TensorRT-LLM 1.0.0's (``kernel_tables.ENGINE_VERSIONS``): BF16, SmoothQuant
W8A8 and weight-only INT4/INT8 GEMMs, BF16 attention, power-law routed BF16 MoE only, no
linear-attention table. L40S's lack the block-scaled FP8 MoE rows and every FP4 kernel. RTX PRO
6000 Blackwell Server Edition (SM120) has every table, FP4 included, but its block-scaled FP8 MoE
rows are a Triton kernel, not one of ``kernel_tables.MOE_KERNELS``, so they are not read. A kernel
or dtype a part lacks is skipped and its figure left out, never stood in for: the efficiency
transfer (``fleet.perf.transfer``) then says what replaces it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np
import polars as pl

from fleet.perf import kernel_tables as kt
from fleet.perf.mamba_tables import MAMBA2_TABLE


class Fitted(Protocol):
    """A fitted kernel (``kernel_fit.KernelFit``): its parameters by name."""

    @property
    def params(self) -> dict[str, float]: ...


F = TypeVar("F", bound=Fitted)


KV_READ_UNPHYSICAL = frozenset({"a100-sxm"})
"""Parts whose decode-attention table is not read: on A100 (TensorRT-LLM 1.0.0) the calls that
read at least ``kernel_tables.DECODE_ATTENTION_MIN_KV_BYTES`` of BF16 KV would move it at a
median 0.74 of the 2,039 GB/s HBM, above 1 on 22% of them and up to 1.69 (8 streams x 64k
tokens x 8 KV heads of 128: 2.1 GB in 0.65 ms), so the rows do not time the bytes the table's
shape columns describe; the part's KV-read figure is left unmeasured."""


def available(data: Path, accelerator: str) -> dict[str, frozenset[str]]:
    """What the part's tables hold, by kernel: our dtype names of the GEMM (``"gemm"``), MoE
    (``"moe"``: balanced rows of ``kernel_tables.MOE_KERNELS``) and decode-attention
    (``"attention"``: KV dtypes of the full-context torch-flow rows) tables, and ``{"present"}``
    for the context attention, all-reduce, all-to-all, INT4 weight-only MoE (``"int4 moe"``:
    ``kernel_tables.INT4_MOE_TABLE``'s balanced ``int4_wo`` rows), linear-attention (``"gdn"``)
    and Mamba2 (``"mamba"``) tables that exist. A table the package lacks on a part (A100: no
    balanced MoE rows, no FP8 of any kernel, no linear-attention or Mamba2 table at TensorRT-LLM
    1.0.0) is empty here, so the fit skips it."""

    def read(table: str, column: str, keep: pl.Expr | None = None) -> frozenset[str]:
        path = kt.table_path(data, accelerator, table)
        if not path.is_file():
            return frozenset()
        d = pl.read_parquet(path)
        if keep is not None:
            d = d.filter(keep)
        return frozenset(d[column].unique().to_list())

    def present(table: str) -> frozenset[str]:
        exists = kt.table_path(data, accelerator, table).is_file()
        return frozenset({"present"}) if exists else frozenset()

    gemm = read(kt.GEMM_TABLE, "gemm_dtype")
    moe = read(
        kt.MOE_TABLE, "moe_dtype",
        (pl.col("distribution") == "balanced") & pl.col("kernel_source").is_in(kt.MOE_KERNELS)
        & (pl.col("num_tokens") <= kt.MOE_MAX_TOKENS),
    )  # fmt: skip
    int4_moe = frozenset(
        {"present"}
        if "int4_wo" in read(kt.INT4_MOE_TABLE, "moe_dtype", pl.col("distribution") == "balanced")
        else ()
    )
    attention = frozenset() if accelerator in KV_READ_UNPHYSICAL else read(
        kt.ATTENTION_TABLE, "kv_cache_dtype",
        (pl.col("window_size") == 0) & (pl.col("kernel_source") == "torch_flow"),
    )  # fmt: skip
    return {
        "gemm": frozenset(kt.GEMM_DTYPES[d] for d in gemm if d in kt.GEMM_DTYPES),
        "moe": frozenset(kt.MOE_DTYPES[d] for d in moe if d in kt.MOE_DTYPES),
        "attention": frozenset(d for d in attention if d in kt.KV_BYTES),
        "context": present(kt.CONTEXT_ATTENTION_TABLE),
        "all-reduce": present(kt.ALLREDUCE_TABLE),
        "all-to-all": present(kt.NCCL_TABLE),
        "int4 moe": int4_moe,
        "gdn": present(kt.GDN_TABLE),
        "mamba": present(MAMBA2_TABLE),
    }


def _geomean(values: Sequence[float]) -> float:
    return float(np.exp(np.mean(np.log(values))))


def kernel_figures(
    by: Mapping[str, F],
    moe_dtypes: Sequence[str],
    call_latency_us: Callable[[F, float], float],
) -> dict[str, float]:
    """The [accelerators.kernel] figures but FP4's (``kernel_fit.figures`` adds those), each over
    the dtypes the part's tables hold, none for a kernel with no rows (A100, L40S lack some):
    FLOP fractions from the compute-regime fits, weight streaming from the decode-regime ones
    (geometric mean of BF16 and the 8-bit format); 8-bit: FP8 (geometric mean of per-tensor and
    block-scaled) where measured, else INT8 (SmoothQuant W8A8); decode-attention KV reads over
    the KV dtypes measured; MoE streaming and call time from the decode-regime MoE fits, over
    the 8/16-bit expert dtypes measured (of ``moe_dtypes``); linear attention and Mamba2 only
    where their tables exist."""

    def gemm(dtype: str, regime: str, param: str) -> float:
        return by[f"gemm {dtype} {regime}"].params[param]

    eight = "fp8" if "gemm fp8" in by else "int8"
    out = {"gemm_flops_fraction.bf16": gemm("bf16", "compute", "flops_fraction")}
    if eight == "fp8":
        out["gemm_flops_fraction.fp8"] = _geomean(
            [gemm(d, "compute", "flops_fraction") for d in ("fp8", "fp8_block")]
        )
    else:
        out["gemm_flops_fraction.int8"] = gemm("int8", "compute", "flops_fraction")
    out["gemm_bandwidth_fraction"] = _geomean(
        [gemm(d, "decode", "bandwidth_fraction") for d in ("bf16", eight)]
    )
    if "gemm int4_weight_only" in by:
        out["gemm_int4_bandwidth_fraction"] = gemm(
            "int4_weight_only", "decode", "bandwidth_fraction"
        )
    kv = [f.params["bandwidth_fraction"] for k, f in by.items() if k.startswith("decode attention")]
    if kv:
        out["attention_bandwidth_fraction"] = _geomean(kv)
    out["context_attention_flops_fraction"] = by["context attention bf16"].params["flops_fraction"]
    moe = [by[f"moe {d} decode"].params for d in moe_dtypes if f"moe {d} decode" in by]
    if moe:
        out["moe_bandwidth_fraction"] = _geomean([m["bandwidth_fraction"] for m in moe])
        out["moe_call_us"] = _geomean([m["call_us"] for m in moe])
    out["all_reduce_link_fraction"] = by["all-reduce"].params["link_fraction"]
    out["all_reduce_call_us_2"] = call_latency_us(by["all-reduce"], 2.0)
    out["all_reduce_call_us_4"] = call_latency_us(by["all-reduce"], 4.0)
    if "linear-attention state" in by:
        out["state_bandwidth_fraction"] = by["linear-attention state"].params["bandwidth_fraction"]
        out["state_prefill_flops_fraction"] = by["linear-attention prefill"].params[
            "flops_fraction"
        ]
    if "mamba2 conv decode" in by:
        out["mamba_conv_bandwidth_fraction"] = by["mamba2 conv decode"].params["bandwidth_fraction"]
        out["mamba_conv_prefill_bandwidth_fraction"] = by["mamba2 conv prefill"].params[
            "bandwidth_fraction"
        ]
    return out
