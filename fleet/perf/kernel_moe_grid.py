"""Block-scaled FP8 MoE kernels: a fixed cost per expert the rank holds, measured per engine.

TensorRT-LLM's block-scaled FP8 MoE kernel (128 x 128 weight scales, DeepSeek-style checkpoints)
takes time in proportion to the experts held on the rank, touched or not: at one or two tokens
per call, with the same bytes read, DeepSeek's 256 experts sliced over 8 ranks (tp 8, ep 1: 256
experts held) take ~3x the time of the same experts split over them (ep 8: 32 held). The other
kernels do not: SGLang's and vLLM's block-scaled FP8 MoE (Triton fused MoE) and TensorRT-LLM's
per-tensor FP8, BF16 and MXFP4 kernels show no such term.

Measured on aiconfigurator-core 0.12.0's MoE tables (``moe_perf.parquet``: one rank's routed
experts, balanced routing; its gated kernels, ``kernel_tables.MOE_KERNELS``, for TensorRT-LLM;
the fastest kernel per shape for the other engines), block-scaled FP8 rows of decode-sized calls
(at most ``DECODE_TOKENS`` tokens). Fit, least squares on log errors with a soft-L1 loss, seeded
held-out quarter of the shapes (``kernel_tables.held_out_keys``):

    latency = roof(FLOPs / (peak x f), bytes / (HBM x b)) + call + local x (E / ep)

with FLOPs and bytes as ``kernel_tables.moe`` counts them. ``local_expert_us`` is the figure the
performance model charges per MoE layer and forward pass of a block-scaled FP8 model served by
TensorRT-LLM (``fleet/data/engines.toml``, ``block_fp8_moe_local_expert_us``); the same fit
without the term is printed beside it, so the gain on held-out shapes shows.

    python -m fleet.perf.kernel_moe_grid [--data build/aic/whl]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fleet.catalog import Accelerator, load_catalog
from fleet.perf import kernel_fit as kf
from fleet.perf import kernel_tables as kt
from fleet.perf.types import FloatArray

DTYPE = "fp8_block"
DECODE_TOKENS = 64
"""Calls of at most this many tokens: a decode step's tokens on one rank."""
ENGINES = {"trtllm": kt.ENGINE_VERSION, "sglang": "0.5.14", "vllm": "0.24.0"}
"""Engine -> the version of its MoE table read (TensorRT-LLM's is the one the kernel figures
of ``fleet.perf.kernel_fit`` come from)."""
PARTS = ("h100-sxm", "h200-sxm", "b200", "gb200", "b300", "gb300")
"""Parts whose TensorRT-LLM MoE table holds block-scaled FP8 rows of the gated kernels."""


@dataclass(frozen=True, slots=True)
class GridFit:
    """One engine's block-scaled FP8 MoE table on one part, fitted with and without the term."""

    accelerator: str
    engine: str
    with_term: kf.KernelFit
    without_term: kf.KernelFit

    @property
    def local_expert_us(self) -> float:
        return self.with_term.params["local_expert_us"]


def table(data: Path, accelerator: str, engine: str) -> Path:
    return data / kt.SYSTEMS[accelerator] / f"moe/{engine}/{ENGINES[engine]}/moe_perf.parquet"


def samples(data: Path, accelerator: str, engine: str) -> tuple[kt.Samples, FloatArray]:
    """The decode-sized block-scaled FP8 rows (``kernel_tables.moe`` counts) and each row's
    experts held on the rank (E / ep)."""
    d = pl.read_parquet(table(data, accelerator, engine)).filter(
        (pl.col("moe_dtype") == DTYPE)
        & (pl.col("distribution") == "balanced")
        & (pl.col("num_tokens") <= DECODE_TOKENS)
    )
    if engine == kt.ENGINE:
        d = d.filter(pl.col("kernel_source").is_in(kt.MOE_KERNELS))
    keys = [
        "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
        "moe_ep_size",
    ]  # fmt: skip
    d = d.group_by(keys).agg(pl.col("latency").min()).sort(keys)
    if d.height == 0:
        raise ValueError(f"no {DTYPE} MoE rows of {engine} on {accelerator}")
    s = kt.moe_samples(d, DTYPE)
    local = (d["num_experts"] / d["moe_ep_size"]).to_numpy().astype(np.float64)
    return s, local


def fit(data: Path, acc: Accelerator, engine: str) -> GridFit:
    """The roofline MoE fit of one engine's table on ``acc``, with and without the per-expert
    term."""
    s, local = samples(data, acc.id, engine)
    peak = (acc.peak_tflops.fp8 or 0.0) * 1e12
    bw = acc.memory_bandwidth_bytes_per_s
    # the held-out split is over shapes; the term's regressor rides in the samples' n column
    # (unused by the MoE roofline), so it follows every take()
    s = kt.Samples(s.flops, s.bytes, local, s.latency_s, s.held_out)

    def base(x: np.ndarray, t: kt.Samples) -> FloatArray:
        return kf._roof(t.flops / (peak * x[0]), t.bytes / (bw * x[1])) + x[2] * 1e-6

    def grid(x: np.ndarray, t: kt.Samples) -> FloatArray:
        return base(x, t) + x[3] * 1e-6 * t.n

    names = ("flops_fraction", "bandwidth_fraction", "call_us")
    lo, hi = (0.01, 0.01, 0.0), (1.5, 1.5, 500.0)
    kernel = f"{engine} moe {DTYPE} decode"
    without = kf._fit(acc.id, kernel, s, base, names, (0.5, 0.6, 20.0), (lo, hi))
    with_term = kf._fit(
        acc.id, f"{kernel} + per expert held", s, grid, (*names, "local_expert_us"),
        (0.5, 0.6, 20.0, 0.1), ((*lo, 0.0), (*hi, 10.0)),
    )  # fmt: skip
    return GridFit(acc.id, engine, with_term, without)


def trtllm_figures(data: Path, catalog_accelerators: Sequence[Accelerator]) -> dict[str, float]:
    """Accelerator id -> TensorRT-LLM's ``local_expert_us`` (us per expert held, per call)."""
    return {a.id: fit(data, a, kt.ENGINE).local_expert_us for a in catalog_accelerators}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _, data = kt.parse_with_data(parser, argv)
    catalog = load_catalog()
    print(
        "| part | engine | us per expert held | held-out median / p90 with it "
        "| without it | rows fit / held out |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for acc_id in PARTS:
        acc = catalog.accelerator(acc_id)
        for engine in ENGINES:
            if not table(data, acc_id, engine).is_file():
                continue
            g = fit(data, acc, engine)
            w, wo = g.with_term, g.without_term
            print(
                f"| {acc_id} | {engine} | {g.local_expert_us:.3f} "
                f"| {w.held_out_median:.1%} / {w.held_out_p90:.1%} "
                f"| {wo.held_out_median:.1%} / {wo.held_out_p90:.1%} "
                f"| {w.rows_fit} / {w.rows_held_out} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
