"""Per-engine kernel efficiency (TensorRT-LLM, vLLM, SGLang) on aiconfigurator-core's tables.

A measurement for issue 9 item 5 (engine as a catalog dimension), not used by the model: per
accelerator and engine, the same roofline fits as ``fleet.perf.kernel_fit`` on each engine's GEMM,
decode-attention and all-reduce tables. Where an engine's table holds several kernels for one
shape, the fastest is kept (the engine's best choice). Prints each figure and its ratio to
TensorRT-LLM's:

    python -m fleet.perf.kernel_engines --data build/aic/whl
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from fleet.catalog import Accelerator, load_catalog
from fleet.perf import kernel_fit as kf
from fleet.perf import kernel_tables as kt

ENGINES = {"trtllm": "1.3.0rc20", "vllm": "0.24.0", "sglang": "0.5.14"}
TABLES = (
    ("gemm", "gemm_perf.parquet"),
    ("attention", "generation_attention_perf.parquet"),
    ("comm", "custom_allreduce_perf.parquet"),
)
"""The tables read per engine; a part missing any of them at ``ENGINES``' versions is skipped."""


def _fastest(d: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    return d.group_by(keys).agg(pl.col("latency").min()).sort(keys)


def gemm(data: Path, acc: Accelerator, engine: str, dtype: str) -> kf.GemmFits:
    """``kernel_fit.gemm_fits`` of an engine's GEMM table (its fastest kernel per shape)."""
    path = data / kt.SYSTEMS[acc.id] / f"gemm/{engine}/{ENGINES[engine]}/gemm_perf.parquet"
    rows = _fastest(kt.gemm_rows(path, dtype), ["m", "n", "k"])
    return kf.gemm_fits(acc, f"{engine} gemm {dtype}", rows, dtype)


def attention(data: Path, acc: Accelerator, engine: str) -> kf.KernelFit:
    path = (
        data / kt.SYSTEMS[acc.id]
        / f"attention/{engine}/{ENGINES[engine]}/generation_attention_perf.parquet"
    )  # fmt: skip
    keys = ["batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim"]
    d = _fastest(
        pl.read_parquet(path).filter(
            (pl.col("window_size") == 0) & (pl.col("kv_cache_dtype") == "fp8")
        ),
        keys,
    )
    samples = kt.attention_samples(d, kt.KV_BYTES["fp8"])
    return kf.fit_kv_read(acc, f"{engine} decode attention kv fp8", samples)


def all_reduce(data: Path, acc: Accelerator, engine: str) -> kf.KernelFit:
    path = (
        data / kt.SYSTEMS[acc.id] / f"comm/{engine}/{ENGINES[engine]}/custom_allreduce_perf.parquet"
    )
    d = _fastest(pl.read_parquet(path), ["num_gpus", "message_size"])
    return kf._fit_comm(acc, f"{engine} all-reduce", kt._comm(d), 2.0)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("build/aic/whl"))
    args = parser.parse_args(argv)
    data = kt.find_data(args.data)
    catalog = load_catalog()
    for acc_id in kt.SYSTEMS:
        tables = [
            data / kt.SYSTEMS[acc_id] / f"{kind}/{e}/{v}/{name}"
            for e, v in ENGINES.items()
            for kind, name in TABLES
        ]
        if not all(p.is_file() for p in tables):
            continue  # A100: no engine at these versions; L40S: no vLLM 0.24.0 all-reduce table
        acc = catalog.accelerator(acc_id)
        dtypes = ["bf16", "fp8"] + (["fp4"] if acc.peak_tflops.fp4 else [])
        for kernel, figure in [(f"gemm {d}", "flops_fraction") for d in dtypes] + [
            ("gemm bf16", "bandwidth_fraction"),
            ("attention", "bandwidth_fraction"),
            ("all-reduce", "link_fraction"),
            ("all-reduce", "call_us"),
        ]:
            row = {}
            for engine in ENGINES:
                if kernel.startswith("gemm"):
                    fits = gemm(data, acc, engine, kernel.split()[1])
                    fit = fits.decode if figure == "bandwidth_fraction" else fits.compute
                elif kernel == "attention":
                    fit = attention(data, acc, engine)
                else:
                    fit = all_reduce(data, acc, engine)
                row[engine] = (fit.params[figure], fit.held_out_median)
            ref = row["trtllm"][0]
            cells = "  ".join(
                f"{e} {v:.3g} (x{v / ref:.2f}, held-out {h:.0%})" for e, (v, h) in row.items()
            )
            print(f"{acc_id:9s} {kernel:11s} {figure:18s} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
