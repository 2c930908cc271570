"""The model's expert-parallel all-to-all against three engines' measured DeepEP tables.

One MoE layer of DeepSeek's shape (hidden 7168, top-8 of 256 experts), data-parallel attention
with ep ranks each carrying T tokens: the model's dispatch + combine (``fleet.perf.comm.
StageComm`` with and without the layer, at the catalog's factors) next to the low-latency DeepEP
tables aiconfigurator-core 0.12.0 ships for SGLang 0.5.12 (``wideep_deepep_ll_perf``), vLLM
0.24.0 and TensorRT-LLM 1.3.0rc11 (``moe_a2a_perf``, BF16 rows), one node each (ep 8; GB200 ep 4,
one compute tray). Microseconds per MoE layer, dispatch + combine.

    python bench/ep_all_to_all.py [--data build/aic/whl]

Get the tables as ``fleet.perf.kernel_tables`` says. docs/known-gaps.md reads these figures.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import polars as pl

from fleet.catalog import load_catalog
from fleet.perf.arrays import build_arrays
from fleet.perf.comm import Links, StageComm
from fleet.perf.kernel_tables import SYSTEMS

PARTS = {"h100-sxm": 8, "b200": 8, "gb200": 4, "b300": 8}
"""Accelerator -> the ep size its tables were collected at."""
HIDDEN, TOPK, EXPERTS = 7168, 8, 256
TOKENS = (1, 4, 16, 32, 64, 128, 256)
ENGINE_TABLES = {
    "vllm": ("comm/vllm/0.24.0/moe_a2a_perf.parquet", "deepep_ll"),
    "trtllm": ("comm/trtllm/1.3.0rc11/moe_a2a_perf.parquet", "trtllm_deepep_ll"),
}
SGLANG_TABLE = "comm/sglang/0.5.12/wideep_deepep_ll_perf.parquet"


def model_us(links: Links, ep: int, tokens_per_rank: int) -> float:
    """The model's dispatch + combine of one MoE layer, us (a stage with and without it)."""

    def comm(moe_layers: float) -> float:
        stage = StageComm(
            tp=np.array(1.0),
            dp=np.array(float(ep)),
            ep=np.array(float(ep)),
            hidden_size=np.array(float(HIDDEN)),
            experts_per_token=np.array(float(TOPK)),
            dense_layers=np.array(0.0),
            moe_layers=np.array(moe_layers),
            domain=np.array(float(ep)),
            link=links,
        )
        return float(stage(np.array(float(tokens_per_rank * ep))))

    return (comm(1.0) - comm(0.0)) * 1e6


def engine_us(data: Path, system: str, table: str, backend: str) -> dict[int, float]:
    """Dispatch + combine per token count from a ``moe_a2a_perf`` table (BF16 rows), us."""
    d = pl.read_parquet(data / "aiconfigurator_core/systems/data" / system / table).filter(
        (pl.col("hidden_size") == HIDDEN)
        & (pl.col("topk") == TOPK)
        & (pl.col("num_experts") == EXPERTS)
        & (pl.col("comm_backend") == backend)
    )
    if d["comm_dtype"].n_unique() > 1:
        d = d.filter(pl.col("comm_dtype") == "bfloat16")
    per = d.group_by("num_tokens", "phase").agg(pl.col("latency").min())
    out: dict[int, float] = {}
    for (tokens,), rows in per.group_by("num_tokens"):
        if rows.height == 2:
            out[int(tokens)] = float(rows["latency"].sum())
    return out


def sglang_us(data: Path, system: str) -> dict[int, float]:
    d = pl.read_parquet(data / "aiconfigurator_core/systems/data" / system / SGLANG_TABLE).filter(
        (pl.col("hidden_size") == HIDDEN)
        & (pl.col("num_topk") == TOPK)
        & (pl.col("num_experts") == EXPERTS)
    )
    return {
        int(r["num_token"]): float(r["dispatch_avg_t_us"] + r["combine_avg_t_us"])
        for r in d.iter_rows(named=True)
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("build/aic/whl"))
    args = parser.parse_args()
    catalog = load_catalog()
    acc = build_arrays(catalog).accelerators
    ids = list(catalog.accelerators)
    for part, ep in PARTS.items():
        a = ids.index(part)
        links = Links(
            np.array(acc.scale_up_bytes_per_s[a] * acc.link_fraction[a]),
            np.array(acc.scale_up_latency_s[a]),
            np.array(1.0),  # one node: nothing crosses the NIC
            np.array(0.0),
            np.array(acc.collective_overhead_s[a]),
        )
        system = SYSTEMS[part]
        tables = {e: engine_us(args.data, system, *t) for e, t in ENGINE_TABLES.items()}
        tables["sglang"] = sglang_us(args.data, system)
        print(f"{part} ep{ep}, us per MoE layer (dispatch + combine)")
        print(f"  {'tokens/rank':>11} {'model':>7} {'vllm':>7} {'trtllm':>7} {'sglang':>7}")
        for t in TOKENS:
            cells = [tables[e].get(t, float("nan")) for e in ("vllm", "trtllm", "sglang")]
            row = " ".join(f"{c:7.1f}" for c in cells)
            print(f"  {t:>11} {model_us(links, ep, t):7.1f} {row}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
