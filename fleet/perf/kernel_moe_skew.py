"""Routing skew of MoE layers: how much longer the most-loaded rank's experts take than balanced.

The model counts an MoE layer's routed-expert FLOPs as if every rank of an expert-parallel group
computed the same share (``T x topk / ep`` token-expert pairs). Real routers are not balanced:
a few experts draw most tokens, so one rank holds more pairs than the mean and the layer waits
for it. aiconfigurator-core 0.12.0 (PyPI, Apache-2.0) measures TensorRT-LLM's MoE kernels under
balanced routing and under power-law expert loads (``moe_perf.parquet``, ``distribution`` =
``balanced``, ``power_law_1.01``, ``power_law_1.2``; the measured rank is the loaded one), and
its own model builders serve every MoE family with one of the two power laws (``sdk/config.py``
``workload_distribution = "power_law"``; ``sdk/models/deepseek.py`` alpha 1.01 for DeepSeek-V3/R1
and Kimi K2.5, ``sdk/models/moe.py`` 1.2 for Qwen3 MoE, gpt-oss, MiniMax-M2 and Mixtral; the
catalog's ``[models.moe] routing`` names each model's, with its source).

Here, per part and power law, the skew at each expert-parallel width of ``EP_GRID``: the median
over the table's gated-kernel shapes and expert dtypes (``kernel_tables.MOE_KERNELS``, the
fastest kernel per key) of power-law latency / balanced latency, on calls of at least
``MIN_TOKENS`` tokens, where the grouped GEMMs are compute bound and the ratio is the loaded
rank's extra work (plus the kernels' loss on its uneven per-expert sizes: 1.03-1.06 at ep 1,
where every rank holds every expert). Fitted on the seeded three quarters of shapes
(``kernel_tables.held_out_keys``); the held-out quarter's power-law latencies are then predicted
as balanced x skew and, for comparison, as balanced alone. The model multiplies the routed
experts' compute (decode and prefill tokens) by the row's skew at its ep (interpolated in log2
ep); their bytes stay the balanced router's touched experts.

    python -m fleet.perf.kernel_moe_skew [--data build/aic/whl] [--toml]

prints the curves and held-out errors (docs/calibration.md reads them); ``--toml`` prints each
part's ``[accelerators.kernel.moe_routing_skew]`` table as fleet/data/accelerators.toml holds it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fleet.catalog import MOE_ROUTINGS, MOE_SKEW_EP
from fleet.perf import kernel_tables as kt

MIN_TOKENS = 8192
"""Calls of at least this many tokens (before dispatch): compute bound on every part's table."""
PARTS = ("h100-sxm", "h200-sxm", "b200", "gb200", "b300", "gb300")
"""Parts whose TensorRT-LLM MoE table holds balanced and power-law rows of the gated kernels."""
KEYS = (
    "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts",
    "moe_tp_size", "moe_ep_size",
)  # fmt: skip
SHAPE = ("hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")


@dataclass(frozen=True, slots=True)
class SkewCurve:
    """One part's skew per routing (``MOE_ROUTINGS``) at each width of ``MOE_SKEW_EP``."""

    accelerator: str
    skew: dict[str, tuple[float, ...]]
    calls: dict[str, int]
    held_out_error: dict[str, float]
    """Median |predicted / measured - 1| of the held-out shapes' power-law latency, balanced x
    skew."""
    balanced_error: dict[str, float]
    """The same with balanced latency alone (no skew)."""


def ratios(data: Path, accelerator: str) -> pl.DataFrame:
    """Per key of ``KEYS`` at ``MIN_TOKENS`` or more: the routing, power-law / balanced latency
    (fastest gated kernel each) and whether the shape is held out."""
    d = pl.read_parquet(kt.table_path(data, accelerator, kt.MOE_TABLE)).filter(
        pl.col("kernel_source").is_in(kt.MOE_KERNELS) & (pl.col("num_tokens") >= MIN_TOKENS)
    )
    fastest = d.group_by([*KEYS, "distribution"]).agg(pl.col("latency").min())
    balanced = fastest.filter(pl.col("distribution") == "balanced").select(
        *KEYS, pl.col("latency").alias("balanced")
    )
    out = (
        fastest.filter(pl.col("distribution").is_in(MOE_ROUTINGS))
        .join(balanced, on=KEYS)
        .with_columns((pl.col("latency") / pl.col("balanced")).alias("ratio"))
        .sort([*KEYS, "distribution"])
    )
    return out.with_columns(pl.Series("held_out", kt.held_out_keys(out.select(SHAPE))))


def interpolate(curve: Sequence[float], ep: np.ndarray) -> np.ndarray:
    """A skew curve over ``MOE_SKEW_EP`` at widths ``ep`` (log2-linear, held flat outside)."""
    return np.interp(np.log2(np.maximum(ep, 1.0)), np.log2(MOE_SKEW_EP), np.asarray(curve))


def measure(data: Path, accelerator: str) -> SkewCurve | None:
    """The part's curves; None where its table has no power-law rows at a width of the grid."""
    path = kt.table_path(data, accelerator, kt.MOE_TABLE)
    if not path.is_file():
        return None
    r = ratios(data, accelerator)
    skew: dict[str, tuple[float, ...]] = {}
    calls: dict[str, int] = {}
    held: dict[str, float] = {}
    none: dict[str, float] = {}
    for routing in MOE_ROUTINGS:
        rows = r.filter(pl.col("distribution") == routing)
        fit = rows.filter(~pl.col("held_out"))
        by_ep = dict(fit.group_by("moe_ep_size").agg(pl.col("ratio").median()).iter_rows())
        if any(ep not in by_ep for ep in MOE_SKEW_EP):
            return None
        curve = tuple(float(by_ep[ep]) for ep in MOE_SKEW_EP)
        test = rows.filter(pl.col("held_out"))
        ep = test["moe_ep_size"].to_numpy().astype(np.float64)
        predicted = interpolate(curve, ep)
        measured = test["ratio"].to_numpy()
        skew[routing] = curve
        calls[routing] = fit.height
        held[routing] = float(np.median(np.abs(predicted / measured - 1.0)))
        none[routing] = float(np.median(np.abs(1.0 / measured - 1.0)))
    return SkewCurve(accelerator, skew, calls, held, none)


def toml_lines(c: SkewCurve) -> list[str]:
    """``c`` as the accelerator entry's ``[accelerators.kernel.moe_routing_skew]`` table."""
    lines = ["[accelerators.kernel.moe_routing_skew]"]
    for routing in MOE_ROUTINGS:
        values = ", ".join(f"{v:.3g}" for v in c.skew[routing])
        lines.append(f"{routing.replace('.', '_')} = [{values}]")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toml", action="store_true", help="print each part's catalog table")
    args, data = kt.parse_with_data(parser, argv)
    curves = [c for c in (measure(data, p) for p in PARTS) if c is not None]
    if args.toml:
        for c in curves:
            print(f"# {c.accelerator}")
            print("\n".join(toml_lines(c)))
        return 0
    widths = " | ".join(f"ep {e}" for e in MOE_SKEW_EP)
    print(f"MoE calls of >= {MIN_TOKENS:,} tokens: power-law / balanced latency (median)")
    print(f"| part | routing | calls | {widths} | held-out, skew | held-out, none |")
    print("|---|---|---:|" + "---:|" * len(MOE_SKEW_EP) + "---:|---:|")
    for c in curves:
        for routing in MOE_ROUTINGS:
            cells = " | ".join(f"{v:.2f}" for v in c.skew[routing])
            print(
                f"| {c.accelerator} | {routing} | {c.calls[routing]} | {cells} | "
                f"{c.held_out_error[routing]:.1%} | {c.balanced_error[routing]:.1%} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
