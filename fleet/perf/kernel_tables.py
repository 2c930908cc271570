"""Measured per-kernel tables of aiconfigurator-core, read into numpy arrays for the kernel fit.

The PyPI package ``aiconfigurator-core`` (Apache-2.0, NVIDIA) ships kernel timings collected on
each GPU under ``aiconfigurator_core/systems/data/<system>/<kernel>/<engine>/<version>/``. We read
the TensorRT-LLM tables (the most complete engine: every kernel below exists for the Hopper and
Blackwell parts; A100, L40S and RTX PRO 6000 lack some, ``kernel_parts.available``) and NCCL for
all-to-all. Latencies in
the tables are milliseconds; message sizes are elements.

Get the data (81 MB):

    pip download --no-deps aiconfigurator-core==0.12.0 -d build/aic
    python -m zipfile -e build/aic/aiconfigurator_core-0.12.0-*.whl build/aic/whl

Only the kernel tables are read; the package's end-to-end sample runs are not.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fleet.perf.types import FloatArray

PACKAGE = "aiconfigurator-core 0.12.0 (Apache-2.0)"
SYSTEMS = {
    "h100-sxm": "h100_sxm",
    "h200-sxm": "h200_sxm",
    "b200": "b200_sxm",
    "gb200": "gb200",
    "b300": "b300_sxm",
    "gb300": "gb300",
    "a100-sxm": "a100_sxm",
    "l40s": "l40s",
    "rtx-pro-6000-server": "rtx_pro_6000_server",
}
"""Catalog accelerator id -> the package's system directory. RTX PRO 6000 Blackwell Server
Edition's tables are at the Hopper/Blackwell versions (TensorRT-LLM 1.3.0rc20, NCCL 2.29.2)."""
ENGINE = "trtllm"
ENGINE_VERSION = "1.3.0rc20"
NCCL_VERSION = "2.29.2"
ENGINE_VERSIONS = {"a100-sxm": "1.0.0"}
"""Parts whose TensorRT-LLM tables were measured at another version than ``ENGINE_VERSION``:
the package holds A100 SXM's only at TensorRT-LLM 1.0.0."""
NCCL_VERSIONS = {"a100-sxm": "2.27.3", "l40s": "2.27.3"}
"""Parts whose NCCL table is of another version than ``NCCL_VERSION``."""
GEMM_TABLE = f"gemm/{ENGINE}/{ENGINE_VERSION}/gemm_perf.parquet"
ATTENTION_TABLE = f"attention/{ENGINE}/{ENGINE_VERSION}/generation_attention_perf.parquet"
CONTEXT_ATTENTION_TABLE = f"attention/{ENGINE}/{ENGINE_VERSION}/context_attention_perf.parquet"
ALLREDUCE_TABLE = f"comm/{ENGINE}/{ENGINE_VERSION}/custom_allreduce_perf.parquet"
NCCL_TABLE = f"comm/nccl/{NCCL_VERSION}/nccl_perf.parquet"
MOE_TABLE = f"moe/{ENGINE}/{ENGINE_VERSION}/moe_perf.parquet"
MOE_DTYPES = {
    "bfloat16": "bf16",
    "fp8": "fp8",
    "fp8_block": "fp8_block",
    "nvfp4": "fp4",
    "w4a8_mxfp4_mxfp8": "mxfp4",
    "w4a16_mxfp4": "mxfp4_weight_only",
}
"""MoE table dtype -> our name. mxfp4 = MXFP4 weights with MXFP8 activations (FP8 math);
mxfp4_weight_only = MXFP4 weights dequantized to BF16 (the Hopper path)."""
MOE_WEIGHT_BYTES = {
    "bf16": 2.0,
    "fp8": 1.0,
    "fp8_block": 1.0,
    "fp4": 0.5 + 1.0 / 16.0,
    "mxfp4": 0.5 + 1.0 / 32.0,
    "mxfp4_weight_only": 0.5 + 1.0 / 32.0,
    "int4_weight_only": 0.5,
}
"""Bytes per expert weight incl. block scales (MXFP4: one E8M0 scale per 32 elements; INT4
weight-only: half a byte, as aiconfigurator-core's own ``int4_wo`` quant mapping counts it)."""
MOE_ACTIVATION_BYTES = {"bf16": 2.0, "mxfp4_weight_only": 2.0, "int4_weight_only": 2.0}
"""Bytes per activation element into the experts (1 unless listed: FP8/FP4-math kernels)."""
INT4_MOE_ENGINE = "vllm"
INT4_MOE_VERSION = "0.24.0"
INT4_MOE_TABLE = f"moe/{INT4_MOE_ENGINE}/{INT4_MOE_VERSION}/moe_perf.parquet"
"""The INT4 weight-only (W4A16) MoE kernel's table: TensorRT-LLM's holds no such rows; vLLM's
``int4_wo`` rows are the kernel INT4 checkpoints (Kimi K2.5) are served with. SGLang 0.5.14's
rows of the same kernel fit worse on Hopper (held-out median 32-34% against vLLM's 14-17%)."""
MOE_MAX_TOKENS = 1024
"""Tokens per MoE call read: decode-sized steps, where expert weight streaming is what the model
takes from this table (prefill-sized calls are compute bound and charged at the GEMM figures)."""
MOE_KERNELS = ("moe_torch_flow_cutlass", "moe_torch_flow", "deepgemm")
"""Gated (SwiGLU) kernels read with the table's balanced routing. The min-latency NVFP4 rows
route through DeepSeek's group-limited gate (8 groups, 4 kept), so the experts they touch are not
the balanced logits' and their bytes are unknown; the non-gated rows are one model's shape. RTX
PRO 6000's block-scaled FP8 rows are a Triton kernel (``moe_torch_flow_triton_fp8_block``), 1.8x
the per-tensor FP8 CUTLASS kernel's latency at the same shapes (median): not read, a caveat of
that part instead (its figure would not be the family's kernel of that dtype)."""
DECODE_ATTENTION_MIN_KV_BYTES = 2.0**26
"""Decode-attention rows whose call reads at least this much KV cache (64 MiB: a layer's KV of
16 streams at 1k context for a model with 8 KV heads of 128 in BF16): at HBM speed the read
then takes as long as the per-call cost (~10-30 us) or longer on every part, the regime where
the model's KV-read fraction matters. Over every row the fit is set by small reads (a few MB,
where the call cost dominates): on Hopper it read 0.52-0.71 of HBM where the large reads run at
0.70-0.90, held-out median 17-27% on them."""
GEMM_DTYPES = {
    "bfloat16": "bf16",
    "fp8": "fp8",
    "fp8_block": "fp8_block",
    "nvfp4": "fp4",
    "sq": "int8",
    "int4_wo": "int4_weight_only",
    "int8_wo": "int8_weight_only",
}
"""Table dtype -> our name; fp8 (per-tensor scale) and fp8_block are both served as fp8. sq =
SmoothQuant W8A8 (INT8 weights and activations, INT8 math); int4_wo / int8_wo = INT4 / INT8
weights dequantized to BF16 in TensorRT-LLM's per-channel weight-only GEMM (BF16 math)."""
WEIGHT_BYTES = {
    "bf16": 2.0,
    "fp8": 1.0,
    "fp8_block": 1.0,
    "fp4": 0.5 + 1.0 / 16.0,
    "int8": 1.0,
    "int4_weight_only": 0.5,
    "int8_weight_only": 1.0,
}
"""Bytes per weight element incl. block scales (NVFP4: one FP8 scale per 16 elements; the
per-channel INT8/INT4 scales are one per output column, negligible)."""
GEMM_ACTIVATION_BYTES = {"bf16": 2.0, "int4_weight_only": 2.0, "int8_weight_only": 2.0}
"""Bytes per activation element into a GEMM (1 unless listed: 8-bit-math kernels)."""
DECODE_MAX_TOKENS = 64
"""GEMM rows of at most this many tokens (m) ..."""
DECODE_MIN_WEIGHTS = 2.0**24
"""... and weight matrices of at least this many elements (16.8M: every projection of a dense
model of ~8B parameters and up): the regime in which a decode step streams its weights, and in
which the model charges weights at the weight-streaming fraction. Fitted on all shapes at once,
the roofline's bandwidth term is set by the many small matrices (a few MB, a call cost and a
memory term of the same size); on the large ones it is off by 2-44% (median, held out)."""
COMPUTE_MIN_TOKENS = 2048
"""GEMM rows of at least this many tokens on weights of at least ``DECODE_MIN_WEIGHTS``: a
prefill chunk through a large projection, where the model's FLOP fraction sets the time. Over
every shape the FP8 fits read 2-23% below what these rows run at (block-scaled FP8 on Hopper
most)."""
KV_BYTES = {"bfloat16": 2.0, "fp8": 1.0}
HELD_OUT_FRACTION = 0.25
SEED = 20260
BF16_BYTES = 2.0


def table_path(data: Path, accelerator: str, table: str) -> Path:
    """One of the ``*_TABLE`` paths on ``accelerator``, at the versions the package measured it
    with (``ENGINE_VERSIONS``, ``NCCL_VERSIONS``)."""
    engine = ENGINE_VERSIONS.get(accelerator, ENGINE_VERSION)
    nccl = NCCL_VERSIONS.get(accelerator, NCCL_VERSION)
    rel = table.replace(f"{ENGINE}/{ENGINE_VERSION}/", f"{ENGINE}/{engine}/").replace(
        f"nccl/{NCCL_VERSION}/", f"nccl/{nccl}/"
    )
    return data / SYSTEMS[accelerator] / rel


def find_data(root: Path) -> Path:
    """The ``systems/data`` directory under ``root`` (an unzipped wheel, or that directory)."""
    for candidate in (root, root / "aiconfigurator_core" / "systems" / "data"):
        if (candidate / SYSTEMS["h100-sxm"]).is_dir():
            return candidate
    raise FileNotFoundError(
        f"no aiconfigurator-core kernel tables under {root}; see fleet/perf/kernel_tables.py"
    )


DEFAULT_WHEEL = Path("build/aic/whl")


def parse_with_data(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> tuple[argparse.Namespace, Path]:
    """``parser``'s arguments plus ``--data`` (where the wheel is unpacked) and the tables'
    directory under it; exits 2 with a one-line message when they are not there."""
    parser.add_argument("--data", type=Path, default=DEFAULT_WHEEL)
    args = parser.parse_args(argv)
    try:
        return args, find_data(args.data)
    except FileNotFoundError as err:
        parser.exit(2, f"{err}\n")


@dataclass(frozen=True, slots=True)
class Samples:
    """One kernel's measurements on one part: what the roofline sees and the latency, seconds."""

    flops: FloatArray
    bytes: FloatArray
    n: FloatArray
    """Devices of a collective (1 for single-device kernels)."""
    latency_s: FloatArray
    held_out: np.ndarray
    """Boolean: the row's shape is in the held-out set (never seen by the fit)."""

    def take(self, mask: np.ndarray) -> Samples:
        return Samples(
            self.flops[mask], self.bytes[mask], self.n[mask], self.latency_s[mask],
            self.held_out[mask],
        )  # fmt: skip


def held_out_keys(keys: pl.DataFrame) -> np.ndarray:
    """Boolean per row: its shape key is among a seeded HELD_OUT_FRACTION of the distinct keys.

    Stratified by shape: all rows of one shape fall on the same side, so held-out shapes are
    unseen by the fit. The draw depends only on the sorted distinct keys and SEED.
    """
    distinct = keys.unique().sort(keys.columns)
    rng = np.random.default_rng(SEED)
    pick = rng.random(distinct.height) < HELD_OUT_FRACTION
    marked = distinct.with_columns(pl.Series("_held_out", pick))
    return keys.join(marked, on=keys.columns, how="left", maintain_order="left")[
        "_held_out"
    ].to_numpy()


def gemm(data: Path, accelerator: str, dtype: str) -> Samples:
    """The TensorRT-LLM GEMM table's rows of ``dtype`` (``gemm_samples``)."""
    return gemm_samples(gemm_rows(table_path(data, accelerator, GEMM_TABLE), dtype), dtype)


def gemm_rows(path: Path, dtype: str) -> pl.DataFrame:
    """The rows of one GEMM table (m, n, k, latency, ...) of our ``dtype``."""
    table_dtype = next(k for k, v in GEMM_DTYPES.items() if v == dtype)
    return pl.read_parquet(path).filter(pl.col("gemm_dtype") == table_dtype)


def gemm_samples(d: pl.DataFrame, dtype: str) -> Samples:
    """GEMM (m x k) @ (k x n): 2mnk FLOPs; bytes = weights + activations in + BF16 out."""
    m, n, k = (d[c].to_numpy().astype(np.float64) for c in ("m", "n", "k"))
    act = GEMM_ACTIVATION_BYTES.get(dtype, 1.0)
    return Samples(
        flops=2.0 * m * n * k,
        bytes=n * k * WEIGHT_BYTES[dtype] + m * k * act + m * n * BF16_BYTES,
        n=np.ones_like(m),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=held_out_keys(d.select("n", "k")),
    )


def _large_weights(d: pl.DataFrame) -> pl.Series:
    return d["n"].cast(pl.Float64) * d["k"] >= DECODE_MIN_WEIGHTS


def gemm_compute_rows(d: pl.DataFrame) -> np.ndarray:
    """Boolean per row of a GEMM table: the compute regime a prefill chunk runs in
    (``COMPUTE_MIN_TOKENS`` on weights of at least ``DECODE_MIN_WEIGHTS``)."""
    return ((d["m"] >= COMPUTE_MIN_TOKENS) & _large_weights(d)).to_numpy()


def gemm_decode_rows(d: pl.DataFrame) -> np.ndarray:
    """Boolean per row of a GEMM table: the weight-streaming regime a decode step runs in
    (``DECODE_MAX_TOKENS``, ``DECODE_MIN_WEIGHTS``)."""
    return ((d["m"] <= DECODE_MAX_TOKENS) & _large_weights(d)).to_numpy()


GDN_TABLE = f"linear_attention/{ENGINE}/{ENGINE_VERSION}/gdn_perf.parquet"
GDN_MIN_BATCH = 64
"""Decode rows of at least this many streams: the per-stream state traffic dominates there."""


def gdn_state(data: Path, accelerator: str) -> Samples:
    """Gated DeltaNet decode (``fused_recurrent`` kernels, generation phase, one token per
    stream): bytes = read and write of every stream's float32 recurrent state (value heads x key
    dim x value dim x 4 bytes), the width serving keeps it at unless a config pins another."""
    d = pl.read_parquet(table_path(data, accelerator, GDN_TABLE)).filter(
        (pl.col("phase") == "generation")
        & pl.col("kernel_source").str.starts_with("fused_recurrent")
        & (pl.col("batch_size") >= GDN_MIN_BATCH)
    )
    d = d.group_by(["model_name", "batch_size", "num_v_heads", "head_k_dim", "head_v_dim"]).agg(
        pl.col("latency").min()
    )
    b, hv, dk, dv = (
        d[c].to_numpy().astype(np.float64)
        for c in ("batch_size", "num_v_heads", "head_k_dim", "head_v_dim")
    )
    state = hv * dk * dv * 4.0
    return Samples(
        flops=4.0 * b * hv * dk * dv,
        bytes=2.0 * b * state,
        n=np.ones_like(b),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=held_out_keys(d.select("model_name")),
    )


GDN_PREFILL_MIN_TOKENS = 2048
"""Prefill rows of at least this many tokens: the per-token scan dominates the call cost."""


def gdn_prefill(data: Path, accelerator: str) -> Samples:
    """Gated DeltaNet prefill (context phase: the causal conv and the chunked delta-rule scan of
    one call, summed): FLOPs = 4 x value heads x key dim x value dim per token, the state
    update and read-out the scan performs per token."""
    d = pl.read_parquet(table_path(data, accelerator, GDN_TABLE)).filter(
        (pl.col("phase") == "context") & (pl.col("num_tokens") >= GDN_PREFILL_MIN_TOKENS)
    )
    keys = ["model_name", "batch_size", "seq_len", "num_tokens", "num_v_heads", "head_k_dim",
            "head_v_dim"]  # fmt: skip
    fastest = d.group_by([*keys, "kernel_source"]).agg(pl.col("latency").min())
    d = fastest.group_by(keys).agg(pl.col("latency").sum(), pl.len().alias("kernels"))
    d = d.filter(pl.col("kernels") == fastest["kernel_source"].n_unique())
    t, hv, dk, dv = (
        d[c].to_numpy().astype(np.float64)
        for c in ("num_tokens", "num_v_heads", "head_k_dim", "head_v_dim")
    )
    return Samples(
        flops=4.0 * t * hv * dk * dv,
        bytes=np.zeros_like(t),
        n=np.ones_like(t),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=held_out_keys(d.select("model_name")),
    )


def decode_attention(data: Path, accelerator: str, kv_dtype: str) -> Samples:
    """Decode (generation) attention, full-context layers, TensorRT-LLM's torch-flow kernel
    (``attention_samples``). Every row; the fit takes those of at least
    ``DECODE_ATTENTION_MIN_KV_BYTES``."""
    d = pl.read_parquet(table_path(data, accelerator, ATTENTION_TABLE)).filter(
        (pl.col("window_size") == 0)
        & (pl.col("kernel_source") == "torch_flow")
        & (pl.col("kv_cache_dtype") == kv_dtype)
    )
    return attention_samples(d, KV_BYTES[kv_dtype])


def attention_samples(d: pl.DataFrame, kv_bytes: float) -> Samples:
    """Rows of a generation-attention table: bytes = the KV cache read. KV length per stream =
    isl + step; K and V, kv heads x head_dim each, ``kv_bytes`` per element. FLOPs: q.k and
    p.v."""
    b, isl, step = (d[c].to_numpy().astype(np.float64) for c in ("batch_size", "isl", "step"))
    heads, kvh, hd = (
        d[c].to_numpy().astype(np.float64) for c in ("num_heads", "num_key_value_heads", "head_dim")
    )
    ctx = isl + step
    return Samples(
        flops=4.0 * b * heads * hd * ctx,
        bytes=b * ctx * kvh * hd * 2.0 * kv_bytes,
        n=np.ones_like(b),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=held_out_keys(d.select("num_heads", "num_key_value_heads", "head_dim")),
    )


def context_attention(data: Path, accelerator: str) -> Samples:
    """Prefill (context) attention, full-context layers, BF16 math and KV: causal FLOPs.

    A prompt of isl tokens: q.k and p.v over the causal half, 2 x isl^2 x heads x head_dim FLOPs
    per sequence; bytes = Q, K, V in and O out once (the flash-attention kernel keeps the rest
    on chip).
    """
    d = pl.read_parquet(table_path(data, accelerator, CONTEXT_ATTENTION_TABLE)).filter(
        (pl.col("window_size") == 0)
        & (pl.col("attn_dtype") == "bfloat16")
        & (pl.col("kv_cache_dtype") == "bfloat16")
    )
    b, isl = (d[c].to_numpy().astype(np.float64) for c in ("batch_size", "isl"))
    heads, kvh, hd = (
        d[c].to_numpy().astype(np.float64) for c in ("num_heads", "num_key_value_heads", "head_dim")
    )
    return Samples(
        flops=2.0 * b * heads * hd * isl**2,
        bytes=b * isl * (2.0 * heads + 2.0 * kvh) * hd * BF16_BYTES,
        n=np.ones_like(b),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=held_out_keys(d.select("num_heads", "num_key_value_heads", "head_dim")),
    )


def all_reduce(data: Path, accelerator: str) -> Samples:
    """TensorRT-LLM's all-reduce (custom kernel, NCCL for large messages), BF16 messages."""
    d = pl.read_parquet(table_path(data, accelerator, ALLREDUCE_TABLE))
    return _comm(d)


def all_to_all(data: Path, accelerator: str) -> Samples:
    """NCCL all-to-all, FP16 messages."""
    d = pl.read_parquet(table_path(data, accelerator, NCCL_TABLE)).filter(
        (pl.col("op_name") == "alltoall") & (pl.col("nccl_dtype") == "half")
    )
    return _comm(d)


def _comm(d: pl.DataFrame) -> Samples:
    size = d["message_size"].to_numpy().astype(np.float64) * BF16_BYTES
    return Samples(
        flops=np.zeros_like(size),
        bytes=size,
        n=d["num_gpus"].to_numpy().astype(np.float64),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=held_out_keys(d.select("message_size")),
    )


def moe(
    data: Path,
    accelerator: str,
    dtype: str,
    *,
    min_tokens: int = 1,
    max_tokens: int | None = MOE_MAX_TOKENS,
) -> Samples:
    """Grouped-GEMM MoE of one rank, balanced routing: the rank's touched experts' weights, on
    calls of ``min_tokens`` to ``max_tokens`` tokens (None: no upper bound).

    The collector's balanced logits route T tokens to min(E, T x topk) distinct experts spread
    evenly over all E, so a rank holding E / ep experts computes T x topk / ep (token, expert)
    pairs and reads the weights of max(1, min(E / ep, T x topk / ep)) of its experts (the first
    rank always holds a selected expert). Gated experts: three matrices of hidden x inter / tp.
    FLOPs = 2 x pairs x 3 x hidden x inter / tp; bytes = touched experts' weights (scales
    included) + the pairs' activations in and BF16 out.
    """
    table_dtype = next(k for k, v in MOE_DTYPES.items() if v == dtype)
    rows = (
        (pl.col("moe_dtype") == table_dtype)
        & (pl.col("distribution") == "balanced")
        & pl.col("kernel_source").is_in(MOE_KERNELS)
        & (pl.col("num_tokens") >= min_tokens)
    )
    if max_tokens is not None:
        rows = rows & (pl.col("num_tokens") <= max_tokens)
    d = pl.read_parquet(table_path(data, accelerator, MOE_TABLE)).filter(rows)
    return moe_samples(d, dtype)


def int4_moe(data: Path, accelerator: str) -> Samples:
    """INT4 weight-only (W4A16) routed experts of one rank, balanced routing, calls of at most
    ``MOE_MAX_TOKENS`` tokens, from ``INT4_MOE_TABLE`` (the fastest kernel per shape), counted as
    ``moe`` counts them."""
    keys = [
        "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
        "moe_ep_size",
    ]  # fmt: skip
    d = (
        pl.read_parquet(table_path(data, accelerator, INT4_MOE_TABLE))
        .filter(
            (pl.col("moe_dtype") == "int4_wo")
            & (pl.col("distribution") == "balanced")
            & (pl.col("num_tokens") <= MOE_MAX_TOKENS)
        )
        .group_by(keys)
        .agg(pl.col("latency").min())
        .sort(keys)
    )
    return moe_samples(d, "int4_weight_only")


def moe_samples(d: pl.DataFrame, dtype: str) -> Samples:
    """``moe``'s counts for rows of an MoE table already filtered to one ``dtype`` (our name)."""
    t, h, inter, topk, e, tp, ep = (
        d[c].to_numpy().astype(np.float64)
        for c in (
            "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
            "moe_ep_size",
        )
    )  # fmt: skip
    pairs = np.maximum(t * topk / ep, 1.0)
    touched = np.maximum(1.0, np.minimum(e / ep, t * topk / ep))
    expert_params = 3.0 * h * inter / tp
    act = MOE_ACTIVATION_BYTES.get(dtype, 1.0)
    return Samples(
        flops=2.0 * pairs * expert_params,
        bytes=touched * expert_params * MOE_WEIGHT_BYTES[dtype] + pairs * h * (act + BF16_BYTES),
        n=np.ones_like(t),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=held_out_keys(
            d.select(
                "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"
            )
        ),
    )
