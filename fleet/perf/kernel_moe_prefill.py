"""Routed experts at prefill sizes: the MoE kernels' own compute rate, measured (not adopted).

The model charges a prefill's routed-expert FLOPs at the part's dense GEMM FLOP fraction of the
weight precision. aiconfigurator-core 0.12.0's TensorRT-LLM MoE tables (``moe_perf.parquet``: one
rank's routed experts, balanced routing, the gated kernels of ``kernel_tables.MOE_KERNELS``) time
the grouped GEMMs at prefill sizes, where they run well below the dense rate: tens to hundreds of
tokens per expert, not thousands (``check``: the model's rates against the tables, three ways of
composing compute and memory, all too fast).

``fit`` measures the rate instead: per part and expert kind (``KIND_DTYPES``: the kinds of
``fleet.catalog.engines.EXPERT_KINDS`` that TensorRT-LLM's tables hold), on calls of at least
``PREFILL_TOKENS`` tokens (a prefill chunk's, the calls ``fleet.perf.kernel_moe_engines``
compares engines on), the FLOP fraction of the peak the model
charges the kind at (BF16; FP8 for per-tensor and block-scaled FP8; FP4 for 4-bit floating point)
that the model's smooth roofline reaches the measured latency with, its memory term at the
part's measured MoE streaming figure and its call term the measured MoE call time (both from the
catalog's ``[accelerators.kernel]``, kernel figures only, so the fit does not move with the
run-fitted factors). Fitted on the seeded three quarters of shapes (``kernel_tables
.held_out_keys``), reported on the rest. The 4-bit kind is the geometric mean of the NVFP4 and
MXFP4 x MXFP8 tables' fractions (both against the FP4 peak). A measurement the model does not
use: charged on every prefill token, with the run-fitted factors and request overheads re-fitted,
it made the unseen sample read worse (docs/calibration.md, "MoE grouped GEMMs at prefill
sizes"); ``terms`` gives the figures such a change would store.

    python -m fleet.perf.kernel_moe_prefill [--data build/aic/whl] [--toml] [--check]

prints the fitted fractions and their held-out errors (``--toml``: as catalog tables;
``--check``: the model's rates against the tables); docs/calibration.md reads them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleet.catalog import Accelerator, Catalog, Precision, load_catalog
from fleet.perf import kernel_fit as kf
from fleet.perf import kernel_tables as kt
from fleet.perf.model import _roof
from fleet.perf.transfer import ResolvedEfficiency, resolve_efficiency

PREFILL_TOKENS = 1024
"""Calls of at least this many tokens: a prefill chunk (1k-8k tokens), far above a decode step."""
CHECK_TOKENS = 256
"""``check``'s calls: at least this many tokens (decode steps carry <= 64)."""
PRECISION: dict[str, Precision] = {
    "bf16": "bf16", "fp8": "fp8", "fp8_block": "fp8", "fp4": "fp4", "mxfp4": "fp4",
}  # fmt: skip
"""MoE table dtype (our name) or expert kind -> the precision whose peak the model charges it at
(MXFP4 x MXFP8 experts: the 4-bit kind's, FP4)."""
KIND_DTYPES: dict[str, tuple[str, ...]] = {
    "bf16": ("bf16",),
    "fp8": ("fp8",),
    "fp8_block": ("fp8_block",),
    "fp4": ("fp4", "mxfp4"),
}
"""Expert kind -> the MoE table dtypes (``kernel_tables.MOE_DTYPES`` names) that measure it."""
PARTS = ("h100-sxm", "h200-sxm", "b200", "gb200", "b300", "gb300", "l40s", "rtx-pro-6000-server")
FORMS = ("max", "roof", "sum")


@dataclass(frozen=True, slots=True)
class PrefillFit:
    """One part's MoE compute fraction at prefill sizes for one expert kind."""

    accelerator: str
    kind: str
    fraction: float
    calls: int
    fit_median: float
    held_out_median: float
    """Median |predicted / measured - 1| on the held-out quarter of shapes."""
    dense_held_out_median: float
    """The same at the dense GEMM FLOP fraction the model charged before."""


def _streaming(acc: Accelerator, dtype: str) -> tuple[float, float] | None:
    """(MoE streaming fraction, call time in us) of the part's kernel figures for ``dtype``."""
    k = acc.kernel
    if k is None or k.moe_bandwidth_fraction is None or k.moe_call_us is None:
        return None
    if dtype in ("fp4", "mxfp4") and k.moe_fp4_bandwidth_fraction is not None:
        return k.moe_fp4_bandwidth_fraction, k.moe_fp4_call_us or k.moe_call_us
    return k.moe_bandwidth_fraction, k.moe_call_us


def _fit_dtype(
    data: Path, acc: Accelerator, dtype: str, dense: float
) -> tuple[kf.KernelFit, float] | None:
    """The fitted fraction's fit and the dense fraction's held-out median error on ``dtype``'s
    prefill calls."""
    peak_tflops = acc.peak_tflops.get(PRECISION[dtype])
    streaming = _streaming(acc, dtype)
    if peak_tflops is None or streaming is None:
        return None
    s = kt.moe(data, acc.id, dtype, min_tokens=PREFILL_TOKENS, max_tokens=None)
    if s.latency_s.size == 0 or not s.held_out.any() or s.held_out.all():
        return None
    peak = peak_tflops * 1e12
    bw = acc.memory_bandwidth_bytes_per_s * streaming[0]
    call_s = streaming[1] * 1e-6

    def predict(x: np.ndarray, t: kt.Samples) -> np.ndarray:
        return _roof(t.flops / (peak * x[0]), t.bytes / bw) + call_s

    name = f"moe prefill {dtype}"
    fitted = kf._fit(acc.id, name, s, predict, ("flops_fraction",), (0.4,), ((0.01,), (1.5,)))
    test = s.take(s.held_out)
    at_dense = np.abs(predict(np.asarray([dense]), test) / test.latency_s - 1.0)
    return fitted, float(np.median(at_dense))


def fit(
    data: Path, acc: Accelerator, kind: str, efficiency: ResolvedEfficiency
) -> PrefillFit | None:
    """``kind``'s fraction on ``acc`` (None where no table of the kind has prefill-sized rows);
    ``efficiency``: the part's resolved factors, whose dense fraction ``dense_held_out_median``
    is taken at."""
    dense = efficiency.flops_fraction[PRECISION[kind]]
    fits = [f for f in (_fit_dtype(data, acc, d, dense) for d in KIND_DTYPES[kind]) if f]
    if not fits:
        return None
    fraction = math.exp(sum(math.log(f.params["flops_fraction"]) for f, _ in fits) / len(fits))
    return PrefillFit(
        accelerator=acc.id,
        kind=kind,
        fraction=fraction,
        calls=sum(f.rows_fit + f.rows_held_out for f, _ in fits),
        fit_median=max(f.fit_median for f, _ in fits),
        held_out_median=max(f.held_out_median for f, _ in fits),
        dense_held_out_median=max(d for _, d in fits),
    )


def terms(data: Path, catalog: Catalog) -> dict[str, dict[str, float]]:
    """Per part of ``PARTS`` with tables: kind -> its fraction (the catalog's figures)."""
    efficiency = resolve_efficiency(catalog)
    out: dict[str, dict[str, float]] = {}
    for part in PARTS:
        acc = catalog.accelerator(part)
        got = {k: f for k in KIND_DTYPES if (f := fit(data, acc, k, efficiency[part]))}
        if got:
            out[part] = {k: f.fraction for k, f in got.items()}
    return out


@dataclass(frozen=True, slots=True)
class FormError:
    signed: float
    """Median of predicted / measured - 1 over every call."""
    absolute: float
    held_out: float
    """Median absolute error over the held-out quarter's calls."""


@dataclass(frozen=True, slots=True)
class PrefillCheck:
    accelerator: str
    dtype: str
    calls: int
    forms: dict[str, FormError]


def check(
    data: Path,
    catalog: Catalog,
    accelerator: str,
    dtype: str,
    efficiency: Mapping[str, ResolvedEfficiency] | None = None,
) -> PrefillCheck | None:
    """The dense GEMM rates against ``accelerator``'s ``dtype`` calls of >= ``CHECK_TOKENS``
    tokens, three ways: ``max`` (max(compute, memory) + call), ``roof`` (the model's smooth
    roofline + call), ``sum`` (compute + memory + call). None where the table holds none or the
    part has no peak for the dtype's precision."""
    acc = catalog.accelerator(accelerator)
    precision = PRECISION[dtype]
    peak_tflops = acc.peak_tflops.get(precision)
    if peak_tflops is None:
        return None
    s = kt.moe(data, accelerator, dtype, min_tokens=CHECK_TOKENS, max_tokens=None)
    if s.latency_s.size == 0:
        return None
    eff = (efficiency or resolve_efficiency(catalog))[accelerator]
    compute = s.flops / (peak_tflops * 1e12 * eff.flops_fraction[precision])
    memory = s.bytes / (acc.memory_bandwidth_bytes_per_s * eff.expert_bandwidth[precision])
    call = (eff.moe_fp4_call_us if precision == "fp4" else eff.moe_call_us) * 1e-6
    predicted = {
        "max": np.maximum(compute, memory) + call,
        "roof": _roof(compute, memory) + call,
        "sum": compute + memory + call,
    }
    out = {}
    for form, t in predicted.items():
        r = t / s.latency_s - 1.0
        out[form] = FormError(
            signed=float(np.median(r)),
            absolute=float(np.median(np.abs(r))),
            held_out=float(np.median(np.abs(r[s.held_out]))),
        )
    return PrefillCheck(accelerator, dtype, int(s.latency_s.size), out)


def toml_lines(part: str, fractions: Mapping[str, float]) -> list[str]:
    """One part's ``[accelerators.kernel.moe_prefill_flops_fraction]`` table."""
    lines = [f"# {part}", "[accelerators.kernel.moe_prefill_flops_fraction]"]
    return lines + [f"{k} = {v:.3g}" for k, v in fractions.items()]


def _print_check(data: Path, catalog: Catalog) -> None:
    efficiency = resolve_efficiency(catalog)
    print(f"MoE calls of >= {CHECK_TOKENS} tokens; per form: signed / absolute / held-out")
    print("| part | dtype | calls | " + " | ".join(FORMS) + " |")
    print("|---|---|---:|" + "---:|" * len(FORMS))
    for part in PARTS:
        for dtype in ("bf16", "fp8", "fp8_block", "fp4"):
            c = check(data, catalog, part, dtype, efficiency)
            if c is None:
                continue
            cells = " | ".join(
                f"{e.signed:+.0%} / {e.absolute:.1%} / {e.held_out:.1%}"
                for e in (c.forms[f] for f in FORMS)
            )
            print(f"| {part} | {dtype} | {c.calls} | {cells} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toml", action="store_true", help="print each part's catalog table")
    parser.add_argument("--check", action="store_true", help="the dense rates against the tables")
    args, data = kt.parse_with_data(parser, argv)
    catalog = load_catalog()
    if args.check:
        _print_check(data, catalog)
        return 0
    if args.toml:
        for part, fractions in terms(data, catalog).items():
            print("\n".join(toml_lines(part, fractions)))
        return 0
    efficiency = resolve_efficiency(catalog)
    print(f"MoE calls of >= {PREFILL_TOKENS:,} tokens: fitted compute fraction (held-out error;")
    print("the dense GEMM fraction's held-out error)")
    print("| part | kind | calls | fraction | dense | held-out | held-out at dense |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for part in PARTS:
        acc = catalog.accelerator(part)
        for kind in KIND_DTYPES:
            f = fit(data, acc, kind, efficiency[part])
            if f is None:
                continue
            dense = efficiency[part].flops_fraction[PRECISION[kind]]
            print(
                f"| {part} | {kind} | {f.calls} | {f.fraction:.3f} | {dense:.3f} | "
                f"{f.held_out_median:.1%} | {f.dense_held_out_median:.1%} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
