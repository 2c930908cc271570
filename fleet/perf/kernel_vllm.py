"""Kernel figures of a part whose tables are vLLM's only (Intel Arc Pro B60), and the Hopper
reference measured with the same engine.

aiconfigurator-core 0.12.0 measured Intel Arc Pro B60 with vLLM alone (0.20.0 and 0.26.0, its XPU
kernels; oneCCL for collectives): no TensorRT-LLM table, so its figures cannot be set against
Hopper's [accelerators.kernel] figures, which are TensorRT-LLM's. Both sides are fitted here on
vLLM tables instead: the part's at ``VLLM_PARTS``' version, Hopper's at vLLM 0.24.0 (the only
vLLM version the package measured H100 and H200 with, the nearest to B60's 0.26.0). The part's
figures go to its [accelerators.kernel] block, Hopper's (geometric mean of H100 and H200) to the
part's [accelerators.family_kernel] block, which ``fleet.perf.transfer`` takes as the reference
in place of the family's TensorRT-LLM figures; no existing entry's figures change.

Same fits as ``fleet.perf.kernel_fit`` (regime GEMM fits, decode attention on calls reading at
least 64 MiB of KV, context attention, all-reduce), each on the fastest kernel per shape (the
engine's best choice, as ``fleet.perf.kernel_engines``):
- GEMM: BF16, and the 8-bit weights: FP8 math on Hopper; on B60, which has no FP8 math, FP8
  weights dequantized to BF16 (its table's ``fp8`` rows run at 0.97 of the BF16 peak), charged
  as 8-bit weights with BF16 activations and BF16 math;
- decode attention with a BF16 KV cache only (B60 has no native FP8 for an FP8 KV cache);
- MoE: none (B60's MoE tables hold only power-law routed rows, whose touched experts are
  unknown), nor linear attention or Mamba2 (no tables).

    python -m fleet.perf.kernel_vllm --data build/aic/whl
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from fleet.catalog import Accelerator, load_catalog
from fleet.perf import kernel_fit as kf
from fleet.perf import kernel_tables as kt

VLLM_PARTS = {"b60": ("b60", "0.26.0")}
"""Catalog id -> (the package's system directory, the vLLM version of the tables read): B60's
later of 0.20.0 / 0.26.0, the nearer to Hopper's 0.24.0."""
REFERENCE = {"h100-sxm": ("h100_sxm", "0.24.0"), "h200-sxm": ("h200_sxm", "0.24.0")}
"""The family members' vLLM tables: 0.24.0 is the only version the package holds for Hopper."""
EIGHT_BIT = {True: "fp8", False: "int8_weight_only"}
"""Native FP8 math -> the dtype whose byte accounting and peak the 8-bit rows are fitted at:
FP8 (8-bit weights and activations, FP8 peak), else 8-bit weights dequantized to BF16 (BF16
activations and peak)."""


def _fastest(d: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    return d.group_by(keys).agg(pl.col("latency").min()).sort(keys)


def _table(data: Path, system: str, kind: str, version: str, name: str) -> pl.DataFrame:
    return pl.read_parquet(data / system / kind / "vllm" / version / name)


def fit_part(data: Path, acc: Accelerator, system: str, version: str) -> list[kf.KernelFit]:
    """Every vLLM kernel fit of one part, in a fixed order (module docstring)."""
    gemm = _table(data, system, "gemm", version, "gemm_perf.parquet")
    fits: list[kf.KernelFit] = []
    for table_dtype, dtype in (("bfloat16", "bf16"), ("fp8", EIGHT_BIT[bool(acc.peak_tflops.fp8)])):
        rows = _fastest(gemm.filter(pl.col("gemm_dtype") == table_dtype), ["m", "n", "k"])
        g = kf.gemm_fits(acc, f"gemm {table_dtype}", rows, dtype)
        fits += [g.full, g.compute, g.decode]
    keys = ["batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim"]
    decode = _table(data, system, "attention", version, "generation_attention_perf.parquet")
    decode = _fastest(
        decode.filter((pl.col("window_size") == 0) & (pl.col("kv_cache_dtype") == "bfloat16")),
        keys,
    )
    samples = kt.attention_samples(decode, kt.KV_BYTES["bfloat16"])
    fits.append(kf.fit_kv_read(acc, "decode attention kv bfloat16", samples))
    context = _table(data, system, "attention", version, "context_attention_perf.parquet")
    fits.append(_context(acc, context))
    comm = _table(data, system, "comm", version, "custom_allreduce_perf.parquet")
    comm = _fastest(comm, ["num_gpus", "message_size"])
    fits.append(kf._fit_comm(acc, "all-reduce", kt._comm(comm), 2.0))
    return fits


def _context(acc: Accelerator, d: pl.DataFrame) -> kf.KernelFit:
    """Prefill attention, BF16 math and KV, full-context layers (``kernel_tables
    .context_attention``'s FLOPs and bytes), fastest kernel per shape."""
    keys = ["batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim"]
    d = _fastest(
        d.filter(
            (pl.col("window_size") == 0)
            & (pl.col("attn_dtype") == "bfloat16")
            & (pl.col("kv_cache_dtype") == "bfloat16")
        ),
        keys,
    )
    b, isl = (d[c].to_numpy().astype(np.float64) for c in ("batch_size", "isl"))
    heads, kvh, hd = (
        d[c].to_numpy().astype(np.float64) for c in ("num_heads", "num_key_value_heads", "head_dim")
    )
    samples = kt.Samples(
        flops=2.0 * b * heads * hd * isl**2,
        bytes=b * isl * (2.0 * heads + 2.0 * kvh) * hd * kt.BF16_BYTES,
        n=np.ones_like(b),
        latency_s=d["latency"].to_numpy() * 1e-3,
        held_out=kt.held_out_keys(d.select("num_heads", "num_key_value_heads", "head_dim")),
    )
    peak = (acc.peak_tflops.bf16 or 0.0) * 1e12
    return kf._roofline(acc, "context attention bf16", samples, peak, (0.5, 0.5, 10.0), 200.0)


def figures(fits: Sequence[kf.KernelFit], fp8_math: bool) -> dict[str, float]:
    """The [accelerators.kernel] figures of one part's vLLM fits: as ``kernel_fit.figures``
    over what these tables hold; an FP8 FLOP figure only where the part has FP8 math."""
    by = {f.kernel: f for f in fits}
    out = {"gemm_flops_fraction.bf16": by["gemm bfloat16 compute"].params["flops_fraction"]}
    if fp8_math:
        out["gemm_flops_fraction.fp8"] = by["gemm fp8 compute"].params["flops_fraction"]
    out["gemm_bandwidth_fraction"] = float(
        np.sqrt(
            by["gemm bfloat16 decode"].params["bandwidth_fraction"]
            * by["gemm fp8 decode"].params["bandwidth_fraction"]
        )
    )
    out["attention_bandwidth_fraction"] = by["decode attention kv bfloat16"].params[
        "bandwidth_fraction"
    ]
    out["context_attention_flops_fraction"] = by["context attention bf16"].params["flops_fraction"]
    ar = by["all-reduce"]
    out["all_reduce_link_fraction"] = ar.params["link_fraction"]
    out["all_reduce_call_us_2"] = kf.call_latency_us(ar, 2.0)
    out["all_reduce_call_us_4"] = kf.call_latency_us(ar, 4.0)
    return out


def reference(data: Path, members: dict[str, Accelerator]) -> dict[str, float]:
    """The family's vLLM figures: each the geometric mean over ``REFERENCE``'s members."""
    per = [
        figures(fit_part(data, acc, *REFERENCE[acc_id]), fp8_math=True)
        for acc_id, acc in members.items()
    ]
    return {k: float(np.exp(np.mean([np.log(p[k]) for p in per]))) for k in per[0]}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _, data = kt.parse_with_data(parser, argv)
    catalog = load_catalog()
    for acc_id, (system, version) in VLLM_PARTS.items():
        acc = catalog.accelerator(acc_id)
        fits = fit_part(data, acc, system, version)
        print(f"[accelerators.kernel]  # {acc_id}, vLLM {version}")
        for name, value in figures(fits, fp8_math=bool(acc.peak_tflops.fp8)).items():
            print(f"{name} = {value:.3g}")
        family = {a: catalog.accelerator(a) for a in acc.efficiency.transfer_from}
        print(f"[accelerators.family_kernel]  # {'/'.join(family)}, vLLM 0.24.0")
        for name, value in reference(data, family).items():
            print(f"{name} = {value:.3g}")
        for f in fits:
            print(kf.fit_line(f))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
