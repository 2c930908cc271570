"""Each engine's MoE kernels at prefill sizes against TensorRT-LLM's: ``expert_prefill_time``.

The parts' routed-expert figures are fitted on TensorRT-LLM's MoE tables
(``fleet.perf.kernel_fit``), and a prefill step charges the experts' FLOPs at the part's FLOP
fraction. vLLM and SGLang run
their own grouped GEMMs, which aiconfigurator-core's tables time at the same shapes: at decode
sizes they are within ~20% of TensorRT-LLM's, at prefill sizes some are several times slower
(block-scaled FP8 on Blackwell: vLLM 0.24.0 and SGLang 0.5.14 ~2x TensorRT-LLM 1.3.0rc20).

Per part, engine and expert kind (``fleet.catalog.engines.EXPERT_KINDS``): the median, over the
MoE shapes both tables hold (hidden and expert widths, top-k, experts, moe tp and ep; balanced
routing; the fastest kernel per shape; TensorRT-LLM's gated kernels only,
``kernel_tables.MOE_KERNELS``, as the parts' figures read them), of the engine's latency over
TensorRT-LLM's on calls of at least ``PREFILL_TOKENS`` tokens. Block-scaled FP8 is its own kind
(``Model.fp8_block_scaled``); the 4-bit floating-point kind is the geometric mean of the NVFP4 and
MXFP4 x MXFP8 tables' ratios where both exist. The held-out figure is the median absolute error
of the fit-side ratio on the seeded held-out quarter of shapes (``kernel_tables.held_out_keys``).

    python -m fleet.perf.kernel_moe_engines [--data build/aic/whl]
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fleet.perf import kernel_tables as kt
from fleet.perf.kernel_engines import ENGINES

PREFILL_TOKENS = 1024
"""Calls of at least this many tokens: a prefill chunk of the prompts served runs see (1k-8k;
chunks of at most 8,192), far above any decode step's."""
KIND_DTYPES: dict[str, tuple[str, ...]] = {
    "bf16": ("bfloat16",),
    "fp8": ("fp8",),
    "fp8_block": ("fp8_block",),
    "fp4": ("nvfp4", "w4a8_mxfp4_mxfp8"),
}
"""Expert kind -> the MoE table dtypes that serve it."""
SHAPE = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]
KEYS = ["moe_dtype", "num_tokens", *SHAPE]
REFERENCE = "trtllm"
MOE_TABLE = "moe_perf.parquet"


@dataclass(frozen=True, slots=True)
class PrefillRatio:
    """One engine's prefill MoE time over TensorRT-LLM's, for one part and expert kind."""

    accelerator: str
    engine: str
    kind: str
    ratio: float
    calls: int
    held_out_median: float


def _table(data: Path, accelerator: str, engine: str) -> pl.DataFrame | None:
    path = data / kt.SYSTEMS[accelerator] / "moe" / engine / ENGINES[engine] / MOE_TABLE
    if not path.is_file():
        return None
    rows = pl.read_parquet(path).filter(
        (pl.col("distribution") == "balanced") & (pl.col("num_tokens") >= PREFILL_TOKENS)
    )
    if engine == REFERENCE:
        # the gated kernels the parts' figures are fitted on: the table's non-gated rows are
        # another layer's work at the same keys, its min-latency NVFP4 rows route other experts
        rows = rows.filter(pl.col("kernel_source").is_in(kt.MOE_KERNELS))
    return rows.group_by(KEYS).agg(pl.col("latency").min())


def _ratio(
    engine_rows: pl.DataFrame, reference: pl.DataFrame, dtype: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per shared call: engine / reference latency, and whether its shape is held out."""
    joined = engine_rows.filter(pl.col("moe_dtype") == dtype).join(
        reference.filter(pl.col("moe_dtype") == dtype), on=KEYS, suffix="_ref"
    )
    ratio = (joined["latency"] / joined["latency_ref"]).to_numpy()
    return ratio, kt.held_out_keys(joined.select(SHAPE)).astype(bool)


def measure(data: Path, accelerator: str, engine: str) -> list[PrefillRatio]:
    """The engine's ratios on ``accelerator`` per expert kind both tables time ([] if either
    table is missing)."""
    reference = _table(data, accelerator, REFERENCE)
    rows = _table(data, accelerator, engine)
    if reference is None or rows is None:
        return []
    out = []
    for kind, dtypes in KIND_DTYPES.items():
        logs, calls, errs = [], 0, []
        for dtype in dtypes:
            ratio, held = _ratio(rows, reference, dtype)
            if ratio.size == 0 or held.all():
                continue
            fit = float(np.median(ratio[~held]))
            if held.any():
                errs.append(np.abs(ratio[held] / fit - 1.0))
            logs.append(math.log(float(np.median(ratio))))
            calls += ratio.size
        if logs:
            held_out = float(np.median(np.concatenate(errs))) if errs else float("nan")
            out.append(
                PrefillRatio(
                    accelerator, engine, kind, math.exp(sum(logs) / len(logs)), calls, held_out
                )
            )
    return out


def _by_part(data: Path, engine: str, field: str) -> dict[str, dict[str, float]]:
    """One ``PrefillRatio`` field of ``engine`` per part and kind (TensorRT-LLM: none, it is the
    reference)."""
    if engine == REFERENCE:
        return {}
    out: dict[str, dict[str, float]] = {}
    for acc in kt.SYSTEMS:
        for r in measure(data, acc, engine):
            out.setdefault(acc, {})[r.kind] = getattr(r, field)
    return out


def terms(data: Path, engine: str) -> dict[str, dict[str, float]]:
    """``expert_prefill_time`` of ``engine`` per part and kind (TensorRT-LLM: none, it is the
    reference)."""
    return _by_part(data, engine, "ratio")


def held_out(data: Path, engine: str) -> dict[str, dict[str, float]]:
    """The held-out error of each of ``terms``' ratios, per part and kind (NaN where no shape of
    the kind is held out)."""
    return _by_part(data, engine, "held_out_median")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=kt.DEFAULT_WHEEL)
    args = parser.parse_args(argv)
    data = kt.find_data(args.data)
    print(f"MoE calls of >= {PREFILL_TOKENS} tokens: engine latency / TensorRT-LLM's (median)")
    print("| part | engine | kind | ratio | calls | held-out |")
    print("|---|---|---|---:|---:|---:|")
    for acc in kt.SYSTEMS:
        for engine in ENGINES:
            if engine == REFERENCE:
                continue
            for r in measure(data, acc, engine):
                print(
                    f"| {acc} | {engine} {ENGINES[engine]} | {r.kind} | {r.ratio:.3g} "
                    f"| {r.calls} | {r.held_out_median:.1%} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
