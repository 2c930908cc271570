"""Mamba2 rows of aiconfigurator-core's measured kernel tables, for the kernel fit.

``linear_attention/trtllm/1.3.0rc20/mamba2_perf.parquet`` (per part, ``kernel_tables.SYSTEMS``)
holds TensorRT-LLM's Mamba2 causal-convolution kernels only: ``causal_conv1d_fn`` over a
prefill's tokens (context rows) and ``causal_conv1d_update`` of one token per stream (generation
rows), for the Nemotron-H shapes (Nano 30B-A3B, Super 120B-A12B, Ultra 550B-A55B, H 56B) and two
generic ones, each at the model's full head count (one rank). The state-space scan
(``mamba_chunk_scan_combined``) and its decode update (``selective_state_update``) are not in
the table, so the recurrent state's rates are not measured here (the model takes the Gated
DeltaNet kernels' for them: docs/performance-model.md).

Held out: the table has six shapes, too few for the shared seeded quarter
(``kernel_tables.held_out_keys``) to draw any, so rows are held out by shape and stream count
(decode) or shape and sequence length (prefill).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from fleet.perf.kernel_tables import ENGINE, ENGINE_VERSION, Samples, held_out_keys, table_path

MAMBA2_TABLE = f"linear_attention/{ENGINE}/{ENGINE_VERSION}/mamba2_perf.parquet"
CONV_MIN_BATCH = 64
"""Decode rows of at least this many streams: the per-stream window traffic is largest there
(below, the call cost of ~4 us is all that is measured)."""
CONV_PREFILL_MIN_SEQ = 2048
"""Prefill rows whose sequences are at least this long: a prompt chunk as the model prefills it
(short sequences carry a per-sequence cost of a few microseconds each)."""
BF16_BYTES = 2.0


def _rows(data: Path, accelerator: str, phase: str) -> pl.DataFrame:
    return pl.read_parquet(table_path(data, accelerator, MAMBA2_TABLE)).filter(
        pl.col("phase") == phase
    )


def _channels(d: pl.DataFrame) -> np.ndarray:
    """The convolution's channels: x (heads x head_dim) and B and C (groups x state each)."""
    heads, head_dim, groups, state = (
        d[c].to_numpy().astype(np.float64) for c in ("nheads", "head_dim", "n_groups", "d_state")
    )
    return heads * head_dim + 2.0 * groups * state


def conv_decode(data: Path, accelerator: str) -> Samples:
    """Mamba2 decode's causal-conv update (generation rows, one token per stream): bytes = each
    stream's window (d_conv - 1 inputs of every channel, BF16) read and written back; the
    token's own input and output ride in the fitted fraction."""
    d = _rows(data, accelerator, "generation").filter(pl.col("batch_size") >= CONV_MIN_BATCH)
    d = d.group_by(["model_name", "batch_size", "nheads", "head_dim", "n_groups", "d_state",
                    "d_conv"]).agg(pl.col("latency").min())  # fmt: skip
    batch, width = (d[c].to_numpy().astype(np.float64) for c in ("batch_size", "d_conv"))
    window = (width - 1.0) * _channels(d) * BF16_BYTES
    return Samples(
        flops=np.zeros_like(batch),
        bytes=2.0 * batch * window,
        n=np.ones_like(batch),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=held_out_keys(d.select("model_name", "batch_size")),
    )


def conv_prefill(data: Path, accelerator: str) -> Samples:
    """Mamba2 prefill's causal convolution (context rows): bytes = every token's channels read
    and written once, BF16."""
    d = _rows(data, accelerator, "context").filter(pl.col("seq_len") >= CONV_PREFILL_MIN_SEQ)
    d = d.group_by(["model_name", "batch_size", "seq_len", "num_tokens", "nheads", "head_dim",
                    "n_groups", "d_state"]).agg(pl.col("latency").min())  # fmt: skip
    tokens = d["num_tokens"].to_numpy().astype(np.float64)
    return Samples(
        flops=np.zeros_like(tokens),
        bytes=2.0 * tokens * _channels(d) * BF16_BYTES,
        n=np.ones_like(tokens),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=held_out_keys(d.select("model_name", "seq_len")),
    )
