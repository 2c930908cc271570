"""Routed experts' compute by tokens per expert and expert width: the catalog's ``moe_compute``.

aiconfigurator-core 0.12.0's TensorRT-LLM MoE tables (``moe_perf.parquet``: one rank's routed
experts, balanced routing, the gated kernels of ``kernel_tables.MOE_KERNELS``) time calls of 1 to
16,384 tokens. One FLOP fraction cannot follow them across that range (``kernel_moe_prefill``:
held-out errors of 23-51% at prefill sizes): a grouped GEMM works on each expert's rows
separately, so it runs far below the dense rate while an expert gets few tokens and while the
expert's matrices are narrow (the expert's intermediate width over the MoE tensor-parallel
degree), and near it only when both are large.

``fit`` sets two forms against every call of one expert dtype on one part, each the smooth
roofline of ``kernel_fit`` plus a fixed call time, fitted on the seeded three quarters of shapes
(``kernel_tables.held_out_keys``) and scored on the rest:

- ``flat``: compute = FLOPs / (peak x f);
- ``efficiency``: compute = FLOPs / (peak x f) x (1 + m0 / m) x (1 + n0 / n), with m the
  (token, expert) pairs per expert the rank touches and n the expert's intermediate width on
  the rank; m0 and n0 are where each halves the rate.

Both forms' medians are reported per token band, since the bands are where they differ.

The performance model charges routed experts with the decode regime's streaming and call terms
(``kernel_fit.fit_moe``) and, on prefill tokens, their FLOPs with each part's efficiency form per
expert kind (fleet/data/accelerators.toml ``[accelerators.kernel.moe_compute.<kind>]``;
``fleet.perf.model``; docs/calibration.md, "MoE compute by tokens per expert and expert width").

vLLM and SGLang run grouped GEMMs of their own, and the package times them at the same shapes
(``moe/<engine>/<version>/moe_perf.parquet``, the versions of ``kernel_engines.ENGINES``). Their
forms are fitted the same way on their own tables (``engine``; the fastest kernel per shape, as
the engine picks it) and carried by the engine's entries (fleet/data/engines.toml
``moe_compute``, ``engine_forms``): the rate falls with the expert's width far less under vLLM
than under TensorRT-LLM (on B200, block-scaled FP8: half rate at 36 elements against 1,352), so
one ratio of the two engines' times cannot follow the shapes (docs/calibration.md, "Each
engine's own MoE compute form").

    python -m fleet.perf.kernel_moe_efficiency [--data build/aic/whl] [--engine E] [--toml]

prints both forms per part and expert dtype (with another engine than TensorRT-LLM, also which of
its form and its time ratio, ``kernel_moe_engines``, its entries carry: ``chosen_forms``), or with
``--toml`` the parts' accelerators.toml tables (engines.toml is written by ``engine_fit --toml``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from scipy.optimize import least_squares

from fleet.catalog import Accelerator, Catalog, load_catalog
from fleet.catalog.engines import MoeForm
from fleet.perf import kernel_fit as kf
from fleet.perf import kernel_moe_engines
from fleet.perf import kernel_tables as kt
from fleet.perf.kernel_engines import ENGINES
from fleet.perf.types import FloatArray

PARTS = ("h100-sxm", "h200-sxm", "b200", "gb200", "b300", "gb300")
DTYPES = ("bf16", "fp8", "fp8_block", "fp4", "int4")
"""The expert dtypes both forms are fitted on (NVFP4 for 4-bit: the MXFP4 x MXFP8 rows, a handful
of shapes, fit neither form: held-out errors of 28-42% either way; INT4 weight-only, against the
BF16 peak: the kernel dequantizes)."""
OWN_TABLE = {"int4": kt.INT4_MOE_ENGINE}
"""Kinds whose parts' own form comes from another engine's table than TensorRT-LLM's, which holds
no such rows: INT4 weight-only (W4A16) experts from vLLM's, the kernel the INT4 checkpoints (Kimi
K2) are served with (as the parts' ``moe_int4_bandwidth_fraction``)."""
ENGINE_DTYPES = tuple(d for d in DTYPES if d not in OWN_TABLE)
"""The kinds an engine's own forms are fitted on (the others' part forms are already one
engine's)."""
_TABLE_DTYPE = {"int4": ("int4_wo", "int4_weight_only")}
"""Kind -> (the MoE table's dtype, ``kernel_tables``' name of it) where it is not in
``kernel_tables.MOE_DTYPES``."""
PREFILL_TOKENS = 1024
"""Calls of at least this many tokens are prefill chunks (as ``kernel_moe_engines`` counts them)."""
REFERENCE = "trtllm"
"""The engine whose tables the parts' own figures (accelerators.toml) are fitted on."""
SHAPE_KEYS = (
    "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size",
)  # fmt: skip
BANDS: tuple[tuple[int, int], ...] = ((1, 64), (65, 512), (513, 2048), (2049, 16384))
"""Token bands of a call: decode steps, large decode batches, prefill chunks, long chunks."""


@dataclass(frozen=True, slots=True)
class Calls:
    """One dtype's MoE rows on one part with what the efficiency form reads."""

    samples: kt.Samples
    tokens: FloatArray
    pairs_per_expert: FloatArray
    """(Token, expert) pairs per expert the rank touches."""
    width: FloatArray
    """Expert intermediate width on the rank."""


def table_path(data: Path, accelerator: str, engine: str) -> Path:
    """``engine``'s MoE table on ``accelerator`` (TensorRT-LLM's at the part's measured version)."""
    if engine == REFERENCE:
        return kt.table_path(data, accelerator, kt.MOE_TABLE)
    return data / kt.SYSTEMS[accelerator] / "moe" / engine / ENGINES[engine] / "moe_perf.parquet"


def _dtypes(dtype: str) -> tuple[str, str]:
    """(the MoE table's dtype, ``kernel_tables``' name of it) of an expert kind."""
    if dtype in _TABLE_DTYPE:
        return _TABLE_DTYPE[dtype]
    return next(k for k, v in kt.MOE_DTYPES.items() if v == dtype), dtype


def calls(data: Path, accelerator: str, dtype: str, engine: str = REFERENCE) -> Calls | None:
    """Every balanced-routing call of ``dtype`` on ``accelerator``, counted as ``kernel_tables.moe``
    counts them (no token bound): TensorRT-LLM's gated kernels (the rows the parts' figures read),
    another engine's fastest kernel per shape (a kind of ``OWN_TABLE``: that engine's table for
    the part's own form). None where the engine has no table there."""
    table_dtype, sample_dtype = _dtypes(dtype)
    if engine == REFERENCE:
        engine = OWN_TABLE.get(dtype, REFERENCE)
    path = table_path(data, accelerator, engine)
    if not path.is_file():
        return None
    d = pl.read_parquet(path)
    if engine == REFERENCE:
        d = d.filter(
            (pl.col("moe_dtype") == table_dtype)
            & (pl.col("distribution") == "balanced")
            & pl.col("kernel_source").is_in(kt.MOE_KERNELS)
        )
    else:
        d = (
            d.filter((pl.col("moe_dtype") == table_dtype) & (pl.col("distribution") == "balanced"))
            .group_by(SHAPE_KEYS)
            .agg(pl.col("latency").min())
            .sort(SHAPE_KEYS)
        )
    t, inter, topk, e, tp, ep = (
        d[c].to_numpy().astype(np.float64)
        for c in ("num_tokens", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")
    )
    pairs = np.maximum(t * topk / ep, 1.0)
    touched = np.maximum(1.0, np.minimum(e / ep, t * topk / ep))
    return Calls(kt.moe_samples(d, sample_dtype), t, pairs / touched, inter / tp)


@dataclass(frozen=True, slots=True)
class FormFit:
    params: dict[str, float]
    held_out_median: float
    """Median absolute error of the held-out quarter's calls."""
    held_out_p90: float
    band_signed: tuple[float, ...]
    """Median predicted / measured - 1 of the held-out calls in each of ``BANDS`` (NaN where a
    band has none)."""
    held_out_prefill_median: float
    """Median absolute error of the held-out calls of at least ``PREFILL_TOKENS`` tokens (the
    prefill chunks the form is charged on; NaN where there are none)."""


@dataclass(frozen=True, slots=True)
class EfficiencyFit:
    accelerator: str
    dtype: str
    calls: int
    flat: FormFit
    efficiency: FormFit


Form = Callable[[np.ndarray, np.ndarray], FloatArray]
"""Predicted seconds of the calls selected by a boolean mask, at parameters x."""


def _fit_form(
    c: Calls, predict: Form, names: Sequence[str], x0: Sequence[float],
    bounds: tuple[Sequence[float], Sequence[float]],
) -> FormFit:  # fmt: skip
    """Least squares on the log ratio (soft L1, as ``kernel_fit`` fits), on the calls of the
    shapes not held out; scored on the held-out ones."""
    latency, held = c.samples.latency_s, c.samples.held_out
    train = ~held
    result = least_squares(
        lambda x: np.log(predict(x, train) / latency[train]), x0=x0, bounds=bounds,
        loss="soft_l1", f_scale=0.1,
    )  # fmt: skip
    r = predict(result.x, np.ones_like(held)) / latency - 1.0
    in_band = [held & (c.tokens >= lo) & (c.tokens <= hi) for lo, hi in BANDS]
    bands = tuple(float(np.median(r[b])) if b.any() else float("nan") for b in in_band)
    prefill = held & (c.tokens >= PREFILL_TOKENS)
    return FormFit(
        {n: float(v) for n, v in zip(names, result.x, strict=True)},
        float(np.median(np.abs(r[held]))), float(np.quantile(np.abs(r[held]), 0.9)), bands,
        float(np.median(np.abs(r[prefill]))) if prefill.any() else float("nan"),
    )  # fmt: skip


def fit(data: Path, acc: Accelerator, dtype: str, engine: str = REFERENCE) -> EfficiencyFit | None:
    """Both forms on ``acc``'s ``dtype`` calls of ``engine``'s table; None where the part has no
    such rows or peak."""
    peak_tflops = acc.peak_tflops.get(kf.PEAK_COLUMN[_dtypes(dtype)[1]])  # type: ignore[arg-type]
    if peak_tflops is None:
        return None
    c = calls(data, acc.id, dtype, engine)
    if c is None or c.tokens.size == 0 or not c.samples.held_out.any():
        return None
    peak, bw = peak_tflops * 1e12, acc.memory_bandwidth_bytes_per_s
    s = c.samples

    def flat(x: np.ndarray, m: np.ndarray) -> FloatArray:
        return kf._roof(s.flops[m] / (peak * x[0]), s.bytes[m] / (bw * x[1])) + x[2] * 1e-6

    def efficiency(x: np.ndarray, m: np.ndarray) -> FloatArray:
        slow = (1.0 + x[3] / c.pairs_per_expert[m]) * (1.0 + x[4] / c.width[m])
        compute = s.flops[m] * slow / (peak * x[0])
        return kf._roof(compute, s.bytes[m] / (bw * x[1])) + x[2] * 1e-6

    names = ("flops_fraction", "bandwidth_fraction", "call_us")
    return EfficiencyFit(
        acc.id, dtype, int(c.tokens.size),
        _fit_form(c, flat, names, (0.4, 0.7, 20.0), ((0.01, 0.01, 0.0), (1.5, 1.5, 500.0))),
        _fit_form(
            c, efficiency, (*names, "tokens_half", "width_half"), (0.6, 0.7, 20.0, 16.0, 256.0),
            ((0.01, 0.01, 0.0, 0.0, 0.0), (1.5, 1.5, 500.0, 4096.0, 8192.0)),
        ),
    )  # fmt: skip


def markdown(fits: Sequence[EfficiencyFit]) -> str:
    bands = " / ".join(f"{lo}-{hi}" for lo, hi in BANDS)
    lines = [
        f"| part | dtype | calls | form | f | m0 | n0 | held-out median / p90 | held-out median, "
        f">= {PREFILL_TOKENS:,} tokens | signed by band ({bands} tokens) |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for f in fits:
        for name, form in (("flat", f.flat), ("efficiency", f.efficiency)):
            p = form.params
            m0 = f"{p['tokens_half']:.1f}" if "tokens_half" in p else "-"
            n0 = f"{p['width_half']:.0f}" if "width_half" in p else "-"
            signed = " / ".join(f"{b:+.0%}" for b in form.band_signed)
            lines.append(
                f"| {f.accelerator} | {f.dtype} | {f.calls} | {name} | "
                f"{p['flops_fraction']:.3f} | {m0} | {n0} | "
                f"{form.held_out_median:.1%} / {form.held_out_p90:.1%} | "
                f"{form.held_out_prefill_median:.1%} | {signed} |"
            )
    return "\n".join(lines)


def toml(fits: Sequence[EfficiencyFit]) -> str:
    """The efficiency forms as fleet/data/accelerators.toml's ``[accelerators.kernel.moe_compute]``
    tables, per part and expert dtype."""
    lines = []
    for f in fits:
        p = f.efficiency.params
        lines += [
            f"[accelerators.kernel.moe_compute.{f.dtype}]  # {f.accelerator}",
            f"flops_fraction = {p['flops_fraction']:.3g}",
            f"half_rate_pairs_per_expert = {p['tokens_half']:.3g}",
            f"half_rate_width = {p['width_half']:.4g}",
        ]
    return "\n".join(lines)


def fits_of(data: Path, catalog: Catalog, engine: str = REFERENCE) -> list[EfficiencyFit]:
    """Both forms for every part of ``PARTS`` and dtype ``engine``'s tables hold: of ``DTYPES``
    for the parts' own forms (TensorRT-LLM's, ``REFERENCE``), of ``ENGINE_DTYPES`` for
    another engine's."""
    dtypes = DTYPES if engine == REFERENCE else ENGINE_DTYPES
    return [
        f
        for part in PARTS
        for dtype in dtypes
        if (f := fit(data, catalog.accelerator(part), dtype, engine)) is not None
    ]


def form3(form: FormFit) -> MoeForm:
    """The three figures of a fitted efficiency form the model reads."""
    p = form.params
    return p["flops_fraction"], p["tokens_half"], p["width_half"]


def _by_part(fits: Sequence[EfficiencyFit]) -> dict[str, dict[str, FormFit]]:
    """Accelerator id -> expert kind -> the efficiency form of ``fits``."""
    out: dict[str, dict[str, FormFit]] = {}
    for f in fits:
        out.setdefault(f.accelerator, {})[f.dtype] = f.efficiency
    return out


def engine_forms(data: Path, catalog: Catalog, engine: str) -> dict[str, dict[str, FormFit]]:
    """Accelerator id -> expert kind -> ``engine``'s efficiency form there, fitted and scored."""
    return _by_part(fits_of(data, catalog, engine))


def _choose(
    forms: dict[str, dict[str, FormFit]], ratio_err: dict[str, dict[str, float]]
) -> dict[str, dict[str, MoeForm]]:
    """``chosen_forms`` from the engine's fitted forms and its time ratios' held-out errors."""
    out: dict[str, dict[str, MoeForm]] = {}
    for acc, kinds in forms.items():
        for kind, form in kinds.items():
            err = ratio_err.get(acc, {}).get(kind, math.nan)
            if form.held_out_prefill_median < (math.inf if math.isnan(err) else err):
                out.setdefault(acc, {})[kind] = form3(form)
    return out


def chosen_forms(data: Path, catalog: Catalog, engine: str) -> dict[str, dict[str, MoeForm]]:
    """Accelerator id -> expert kind -> the ``engine``'s own form its engines.toml entry carries:
    where it predicts the engine's held-out calls of at least ``PREFILL_TOKENS`` tokens better
    than TensorRT-LLM's calls x the engine's median time ratio does (``kernel_moe_engines``'
    held-out error; a kind with no ratio takes its form). Empty for TensorRT-LLM, whose forms
    are the parts' own."""
    if engine == REFERENCE:
        return {}
    return _choose(engine_forms(data, catalog, engine), kernel_moe_engines.held_out(data, engine))


def choice_markdown(data: Path, fits: Sequence[EfficiencyFit], engine: str) -> str:
    """Per part and expert kind: ``engine``'s own form (of ``fits``, its ``fits_of``) and its
    held-out error at prefill sizes, the median time ratio to TensorRT-LLM and its held-out
    error, and which one the engine's entry carries (``chosen_forms``)."""
    forms = _by_part(fits)
    ratio = kernel_moe_engines.terms(data, engine)
    ratio_err = kernel_moe_engines.held_out(data, engine)
    chosen = _choose(forms, ratio_err)
    lines = [
        f"| part | kind | form: f / m0 / n0 | form held-out, >= {PREFILL_TOKENS:,} tokens | "
        "ratio | ratio held-out | carried |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for acc in PARTS:
        for kind in DTYPES:
            form, r = forms.get(acc, {}).get(kind), ratio.get(acc, {}).get(kind)
            if form is None and r is None:
                continue
            f = "-" if form is None else " / ".join(f"{v:.3g}" for v in form3(form))
            f_err = "-" if form is None else f"{form.held_out_prefill_median:.1%}"
            err = ratio_err.get(acc, {}).get(kind, math.nan)
            r_text = "-" if r is None else f"{r:.3g}"
            r_err = "-" if math.isnan(err) else f"{err:.1%}"
            carried = "form" if kind in chosen.get(acc, {}) else "ratio"
            lines.append(f"| {acc} | {kind} | {f} | {f_err} | {r_text} | {r_err} | {carried} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        default=REFERENCE,
        help="whose MoE tables to fit (default: TensorRT-LLM's, the parts' own figures)",
    )
    parser.add_argument(
        "--toml", action="store_true", help="print the forms as accelerators.toml tables"
    )
    args, data = kt.parse_with_data(parser, argv)
    catalog = load_catalog()
    fits = fits_of(data, catalog, args.engine)
    print(toml(fits) if args.toml else markdown(fits))
    if args.engine != REFERENCE and not args.toml:
        print()
        print(choice_markdown(data, fits, args.engine))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
