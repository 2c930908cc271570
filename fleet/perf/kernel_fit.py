"""Fit kernel-level rooflines per accelerator on aiconfigurator-core's measured kernel tables.

Per accelerator with tables (``kernel_tables.SYSTEMS``), against the catalog's datasheet figures
(the same figures the performance model multiplies):
- GEMM, per dtype: latency = roof(2mnk / (peak_dtype x f_flops), bytes / (bw x f_bw)) + c, with
  the performance model's smooth roof (``ROOF_SHARPNESS``), fitted on every shape, then each rate
  in its own regime (``gemm_fits``): f_flops on the compute regime (``gemm <dtype> compute``: at
  least 2,048 tokens on weights of at least 16.8M elements, a prefill chunk through a large
  projection), the GEMM FLOP figure; f_bw on the decode regime (``gemm <dtype> decode``: at most
  64 tokens on the same weights), the weight-streaming figure;
- decode attention, per KV dtype: latency = KV bytes / (bw x f_bw) + c, on the calls that read at
  least 64 MiB of KV (``kernel_tables.DECODE_ATTENTION_MIN_KV_BYTES``), where KV reads matter;
- context (prefill) attention, BF16: latency = roof(causal FLOPs / (peak_bf16 x f_flops),
  Q/K/V/O bytes / (bw x f_bw)) + c;
- MoE (grouped GEMM of one rank's experts, balanced routing), per expert dtype: latency =
  roof(2 x pairs x expert params / (peak x f_flops), touched experts' bytes / (bw x f_bw)) + c
  (``kernel_tables.moe``); the weight-streaming fraction is what the model charges experts at;
- linear attention (Gated DeltaNet) and Mamba2's causal convolution: work / (rate x f) + c
  (``fit_gdn_state``, ``fit_gdn_prefill``, ``fit_mamba_conv``);
- all-reduce and all-to-all: latency = v (n-1)/n x bytes / (link x f_link) + 2 log2(n) x h + c,
  v = 2 for all-reduce (reduce-scatter + all-gather), 1 for all-to-all; the small-message
  latency of a call on n devices is 2 log2(n) x h + c.
Least squares on log(model / measured) with a soft-L1 loss, on the fit split of each table; the
held-out split (a seeded quarter of the shapes, ``kernel_tables.held_out_keys``) is only scored.

Re-run (prints the [accelerators.kernel] figures of fleet/data/accelerators.toml and the errors):

    python -m fleet.perf.kernel_fit --data build/aic/whl [--markdown]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from scipy.optimize import least_squares

from fleet.catalog import Accelerator, Catalog, load_catalog
from fleet.perf import kernel_parts as kp
from fleet.perf import kernel_tables as kt
from fleet.perf import mamba_tables as mt
from fleet.perf.model import ROOF_SHARPNESS
from fleet.perf.types import FloatArray

Predict = Callable[[np.ndarray, kt.Samples], FloatArray]
PEAK_COLUMN = {
    "bf16": "bf16",
    "fp8": "fp8",
    "fp8_block": "fp8",
    "fp4": "fp4",
    "mxfp4": "fp8",
    "mxfp4_weight_only": "bf16",
    "int8": "int8",
    "int4_weight_only": "bf16",
    "int8_weight_only": "bf16",
}
"""Tensor rate a kernel computes at: MXFP4 weights with MXFP8 activations run FP8 math; the
weight-only INT4/INT8 GEMMs dequantize to BF16."""
AMPERE_GEMM = ("int8", "int4_weight_only", "int8_weight_only")
"""GEMM dtypes only the A100 tables hold (TensorRT-LLM 1.0.0: SmoothQuant W8A8 and the
per-channel weight-only kernels), fitted after the others where present."""
MOE_EIGHT_SIXTEEN = ("bf16", "fp8", "fp8_block")
MOE_FP4 = "mxfp4"
"""The FP4 expert kernel whose routing the table fixes: TensorRT-LLM's TRTLLM-Gen MXFP4 x MXFP8
MoE (its CUTLASS kernel on RTX PRO 6000, SM120). The NVFP4 rows are the CUTLASS kernel
(balanced routing) and the TRTLLM-Gen min-latency kernel (DeepSeek's group-limited gate, touched
experts unknown); docs/calibration.md compares."""
INT4_MOE = f"moe int4_weight_only {kt.INT4_MOE_ENGINE}"
"""The INT4 weight-only MoE fit's kernel name (another engine's table: ``kt.INT4_MOE_TABLE``)."""


@dataclass(frozen=True, slots=True)
class KernelFit:
    """One fitted kernel on one accelerator: parameters and abs relative errors per split."""

    accelerator: str
    kernel: str
    params: dict[str, float]
    rows_fit: int
    rows_held_out: int
    fit_median: float
    fit_p90: float
    held_out_median: float
    held_out_p90: float


def _roof(a: FloatArray, b: FloatArray) -> FloatArray:
    p = ROOF_SHARPNESS
    return (a**p + b**p) ** (1.0 / p)


def _fit(
    accelerator: str,
    kernel: str,
    samples: kt.Samples,
    predict: Predict,
    names: Sequence[str],
    x0: Sequence[float],
    bounds: tuple[Sequence[float], Sequence[float]],
) -> KernelFit:
    train = samples.take(~samples.held_out)
    test = samples.take(samples.held_out)

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(predict(x, train) / train.latency_s)

    result = least_squares(residuals, x0=x0, bounds=bounds, loss="soft_l1", f_scale=0.1)
    if not result.success:
        raise RuntimeError(f"{kernel} on {accelerator}: fit did not converge: {result.message}")

    def err(s: kt.Samples) -> FloatArray:
        return np.abs(predict(result.x, s) / s.latency_s - 1.0)

    e_fit, e_test = err(train), err(test)
    return KernelFit(
        accelerator=accelerator,
        kernel=kernel,
        params={n: float(v) for n, v in zip(names, result.x, strict=True)},
        rows_fit=len(e_fit),
        rows_held_out=len(e_test),
        fit_median=float(np.median(e_fit)),
        fit_p90=float(np.quantile(e_fit, 0.9)),
        held_out_median=float(np.median(e_test)),
        held_out_p90=float(np.quantile(e_test, 0.9)),
    )


def _roofline(
    acc: Accelerator,
    kernel: str,
    samples: kt.Samples,
    peak_flops: float,
    start: tuple[float, float, float],
    most_call_us: float,
) -> KernelFit:
    """Fit time = max(flops / (peak x f), bytes / (HBM x b)) + a fixed call cost to ``samples``:
    the compute and bandwidth fractions and the call cost in microseconds."""
    bw = acc.memory_bandwidth_bytes_per_s

    def predict(x: np.ndarray, s: kt.Samples) -> FloatArray:
        return _roof(s.flops / (peak_flops * x[0]), s.bytes / (bw * x[1])) + x[2] * 1e-6

    return _fit(
        acc.id, kernel, samples, predict, ("flops_fraction", "bandwidth_fraction", "call_us"),
        start, ((0.01, 0.01, 0.0), (1.5, 1.5, most_call_us)),
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class GemmFits:
    """The fits of one GEMM table's rows of one dtype."""

    full: KernelFit
    """The roofline over every shape (``gemm <dtype>``): reported, and the starting point."""
    compute: KernelFit
    """Its compute term refitted on the compute regime (``gemm <dtype> compute``,
    ``kernel_tables.gemm_compute_rows``): the GEMM FLOP figure."""
    decode: KernelFit
    """Its bandwidth term refitted on the decode regime (``gemm <dtype> decode``,
    ``kernel_tables.gemm_decode_rows``) at the compute figure: the weight-streaming figure."""


def gemm_fits(acc: Accelerator, kernel: str, rows: pl.DataFrame, dtype: str) -> GemmFits:
    """One GEMM table's ``dtype`` rows: the roofline of every shape, then each of its two rates
    refitted in the regime the model charges it in, the other rate held (a call cost refitted
    with each). Over every shape the many small matrices set both rates; the regimes are where
    the model's FLOP and weight-streaming fractions act."""
    peak = (acc.peak_tflops.get(PEAK_COLUMN[dtype]) or 0.0) * 1e12  # type: ignore[arg-type]
    bw = acc.memory_bandwidth_bytes_per_s
    samples = kt.gemm_samples(rows, dtype)
    full = _roofline(acc, kernel, samples, peak, (0.6, 0.7, 5.0), 100.0)
    start = full.params

    def on_flops(x: np.ndarray, s: kt.Samples) -> FloatArray:
        return _roof(s.flops / (peak * x[0]), s.bytes / (bw * start["bandwidth_fraction"])) + (
            x[1] * 1e-6
        )

    compute = _fit(
        acc.id, f"{kernel} compute", samples.take(kt.gemm_compute_rows(rows)), on_flops,
        ("flops_fraction", "call_us"),
        (start["flops_fraction"], start["call_us"]), ((0.01, 0.0), (1.5, 100.0)),
    )  # fmt: skip
    rate = peak * compute.params["flops_fraction"]

    def on_bytes(x: np.ndarray, s: kt.Samples) -> FloatArray:
        return _roof(s.flops / rate, s.bytes / (bw * x[0])) + x[1] * 1e-6

    decode = _fit(
        acc.id, f"{kernel} decode", samples.take(kt.gemm_decode_rows(rows)), on_bytes,
        ("bandwidth_fraction", "call_us"),
        (start["bandwidth_fraction"], start["call_us"]), ((0.01, 0.0), (1.5, 100.0)),
    )  # fmt: skip
    return GemmFits(full, compute, decode)


def fit_gemm(data: Path, acc: Accelerator, dtype: str) -> GemmFits:
    """``gemm_fits`` of the TensorRT-LLM GEMM table."""
    rows = kt.gemm_rows(kt.table_path(data, acc.id, kt.GEMM_TABLE), dtype)
    return gemm_fits(acc, f"gemm {dtype}", rows, dtype)


def _rate_and_call(
    acc: Accelerator,
    kernel: str,
    samples: kt.Samples,
    rate: float,
    on_flops: bool,
    start: float,
    bounds: tuple[tuple[float, float], tuple[float, float]],
) -> KernelFit:
    """Fit time = work / (rate x fraction) + a call cost in microseconds; work = the samples'
    FLOPs or bytes; ``bounds`` = ((least fraction, least call), (most fraction, most call))."""

    def predict(x: np.ndarray, s: kt.Samples) -> FloatArray:
        return (s.flops if on_flops else s.bytes) / (rate * x[0]) + x[1] * 1e-6

    name = "flops_fraction" if on_flops else "bandwidth_fraction"
    return _fit(acc.id, kernel, samples, predict, (name, "call_us"), (start, 10.0), bounds)


def fit_attention(data: Path, acc: Accelerator, kv_dtype: str) -> KernelFit:
    """Decode attention's KV read on the calls that read at least
    ``kernel_tables.DECODE_ATTENTION_MIN_KV_BYTES``."""
    samples = kt.decode_attention(data, acc.id, kv_dtype)
    return fit_kv_read(acc, f"decode attention kv {kv_dtype}", samples)


def fit_kv_read(acc: Accelerator, kernel: str, samples: kt.Samples) -> KernelFit:
    """Time = KV bytes / (HBM x f) + a call cost, fitted on the rows of ``samples`` that read at
    least ``kernel_tables.DECODE_ATTENTION_MIN_KV_BYTES``."""
    samples = samples.take(samples.bytes >= kt.DECODE_ATTENTION_MIN_KV_BYTES)
    bw = acc.memory_bandwidth_bytes_per_s
    return _rate_and_call(acc, kernel, samples, bw, False, 0.6, ((0.01, 0.0), (1.5, 200.0)))


def fit_gdn_state(data: Path, acc: Accelerator) -> KernelFit:
    """Linear-attention decode: the streams' float32 state read and written back, over HBM.
    The figure can exceed 1 where the kernel keeps the state narrower than float32."""
    samples = kt.gdn_state(data, acc.id)
    bw = acc.memory_bandwidth_bytes_per_s
    bounds = ((0.001, 0.0), (4.0, 2000.0))
    return _rate_and_call(acc, "linear-attention state", samples, bw, False, 0.8, bounds)


def fit_gdn_prefill(data: Path, acc: Accelerator) -> KernelFit:
    """Linear-attention prefill: the chunked scan's FLOPs over the BF16 peak, plus a call cost."""
    peak = (acc.peak_tflops.bf16 or 0.0) * 1e12
    samples = kt.gdn_prefill(data, acc.id)
    bounds = ((0.001, 0.0), (1.0, 2000.0))
    return _rate_and_call(acc, "linear-attention prefill", samples, peak, True, 0.05, bounds)


def fit_mamba_conv(data: Path, acc: Accelerator) -> list[KernelFit]:
    """Mamba2's causal convolution, decode (window read and written back) and prefill (every
    token's channels in and out): bytes over HBM plus a call cost (``mamba_tables``)."""
    bw = acc.memory_bandwidth_bytes_per_s
    bounds = ((0.001, 0.0), (4.0, 2000.0))
    decode, prefill = mt.conv_decode(data, acc.id), mt.conv_prefill(data, acc.id)
    return [
        _rate_and_call(acc, "mamba2 conv decode", decode, bw, False, 0.5, bounds),
        _rate_and_call(acc, "mamba2 conv prefill", prefill, bw, False, 0.5, bounds),
    ]


def fit_context_attention(data: Path, acc: Accelerator) -> KernelFit:
    peak = (acc.peak_tflops.get("bf16") or 0.0) * 1e12
    samples = kt.context_attention(data, acc.id)
    return _roofline(acc, "context attention bf16", samples, peak, (0.5, 0.5, 10.0), 200.0)


@dataclass(frozen=True, slots=True)
class MoeFits:
    """The fits of one MoE table's rows of one expert dtype."""

    full: KernelFit
    """The roofline over calls of at most ``kernel_tables.MOE_MAX_TOKENS`` tokens
    (``moe <dtype>``): reported, and the FLOP fraction the decode fit holds."""
    decode: KernelFit
    """Its streaming and call terms refitted on decode-sized calls (``moe <dtype> decode``: at
    most ``kernel_tables.DECODE_MAX_TOKENS`` tokens, the regime a decode step's MoE layer runs
    in) at the full fit's FLOP fraction: the expert-streaming figure and the call's fixed
    time."""


def fit_moe(data: Path, acc: Accelerator, dtype: str) -> MoeFits:
    """One expert dtype's MoE rows: the roofline up to prefill-chunk-sized calls, then its
    weight-streaming fraction and call time refitted where the model charges them, on the
    decode-sized calls, as ``gemm_fits`` does for the GEMMs. Over 1,024-token calls the compute
    side sets the call term too: at 1-8 tokens the MXFP4 rows lie ~10 us under it."""
    peak = (acc.peak_tflops.get(PEAK_COLUMN[dtype]) or 0.0) * 1e12  # type: ignore[arg-type]
    bw = acc.memory_bandwidth_bytes_per_s
    samples = kt.moe(data, acc.id, dtype)
    full = _roofline(acc, f"moe {dtype}", samples, peak, (0.5, 0.6, 20.0), 500.0)
    start = full.params
    rate = peak * start["flops_fraction"]

    def on_bytes(x: np.ndarray, s: kt.Samples) -> FloatArray:
        return _roof(s.flops / rate, s.bytes / (bw * x[0])) + x[1] * 1e-6

    decode = _fit(
        acc.id, f"moe {dtype} decode", kt.moe(data, acc.id, dtype, max_tokens=kt.DECODE_MAX_TOKENS),
        on_bytes, ("bandwidth_fraction", "call_us"),
        (start["bandwidth_fraction"], start["call_us"]), ((0.01, 0.0), (1.5, 500.0)),
    )  # fmt: skip
    return MoeFits(full, decode)


def fit_int4_moe(data: Path, acc: Accelerator) -> KernelFit:
    """INT4 weight-only (W4A16) routed experts (``kernel_tables.int4_moe``), the same roofline
    as ``fit_moe``'s against the BF16 peak (the kernel dequantizes to BF16)."""
    peak = (acc.peak_tflops.get("bf16") or 0.0) * 1e12
    samples = kt.int4_moe(data, acc.id)
    return _roofline(acc, INT4_MOE, samples, peak, (0.5, 0.6, 20.0), 500.0)


def _fit_comm(acc: Accelerator, kernel: str, samples: kt.Samples, volume: float) -> KernelFit:
    link = acc.scale_up_bandwidth_bytes_per_s

    def predict(x: np.ndarray, s: kt.Samples) -> FloatArray:
        beta = volume * (s.n - 1.0) / s.n * s.bytes / (link * x[0])
        return beta + (2.0 * np.log2(s.n) * x[1] + x[2]) * 1e-6

    return _fit(
        acc.id, kernel, samples, predict, ("link_fraction", "hop_us", "call_us"),
        (0.5, 1.0, 3.0), ((0.01, 0.0, 0.0), (1.5, 50.0, 200.0)),
    )  # fmt: skip


def fit_all_reduce(data: Path, acc: Accelerator) -> KernelFit:
    return _fit_comm(acc, "all-reduce", kt.all_reduce(data, acc.id), 2.0)


def fit_all_to_all(data: Path, acc: Accelerator) -> KernelFit:
    return _fit_comm(acc, "all-to-all", kt.all_to_all(data, acc.id), 1.0)


def call_latency_us(fit: KernelFit, n: float) -> float:
    """Small-message latency of one collective call over ``n`` devices, us."""
    return 2.0 * np.log2(n) * fit.params["hop_us"] + fit.params["call_us"]


def fit_accelerator(data: Path, acc: Accelerator, catalog: Catalog) -> list[KernelFit]:
    """Every kernel fit of one accelerator, in a fixed order; a kernel or dtype the part's tables
    lack (``kernel_parts.available``: A100 has no FP8, no balanced MoE rows, no linear-attention
    table) is skipped, not stood in for. ``catalog`` gives the model shapes the DeepSeek Sparse
    Attention module fit weighs (``fleet.perf.kernel_dsa``)."""
    have = kp.available(data, acc.id)
    dtypes = ["bf16", "fp8", "fp8_block"] + (["fp4"] if acc.peak_tflops.fp4 else [])
    fits = []
    for d in [*dtypes, *AMPERE_GEMM]:
        if d in have["gemm"]:
            g = fit_gemm(data, acc, d)
            fits += [g.full, g.compute, g.decode]
    fits += [fit_attention(data, acc, kv) for kv in ("bfloat16", "fp8") if kv in have["attention"]]
    fits += [fit_context_attention(data, acc)]
    four_bit = ["fp4", MOE_FP4] if acc.peak_tflops.fp4 else ["mxfp4_weight_only"]
    moe = list(MOE_EIGHT_SIXTEEN) + four_bit
    for d in (d for d in moe if d in have["moe"]):
        m = fit_moe(data, acc, d)
        fits += [m.full, m.decode]
    if have["int4 moe"]:
        fits.append(fit_int4_moe(data, acc))
    fits += [fit_all_reduce(data, acc), fit_all_to_all(data, acc)]
    if have["gdn"]:
        fits += [fit_gdn_state(data, acc), fit_gdn_prefill(data, acc)]
    if have["mamba"]:
        fits += fit_mamba_conv(data, acc)
    from fleet.perf.kernel_dsa import fit_module  # imports this module

    return fits + fit_module(data, catalog, acc.id)


def figures(fits: Sequence[KernelFit]) -> dict[str, float]:
    """The catalog's [accelerators.kernel] figures from one accelerator's fits: every figure over
    the dtypes its tables hold (``kernel_parts.kernel_figures``), plus the FP4 ones."""
    by = {f.kernel: f for f in fits}
    out = kp.kernel_figures(by, MOE_EIGHT_SIXTEEN, call_latency_us)
    if "gemm fp4" in by:
        out["gemm_flops_fraction.fp4"] = by["gemm fp4 compute"].params["flops_fraction"]
        out["gemm_fp4_bandwidth_fraction"] = by["gemm fp4 decode"].params["bandwidth_fraction"]
    if f"moe {MOE_FP4} decode" in by:
        fp4 = by[f"moe {MOE_FP4} decode"].params
        out["moe_fp4_bandwidth_fraction"] = fp4["bandwidth_fraction"]
        out["moe_fp4_call_us"] = fp4["call_us"]
    if INT4_MOE in by:
        out["moe_int4_bandwidth_fraction"] = by[INT4_MOE].params["bandwidth_fraction"]
    from fleet.perf import kernel_dsa  # imports this module

    return out | kernel_dsa.figures(by)


def markdown(fits: Sequence[KernelFit]) -> str:
    lines = [
        "| accelerator | kernel | fitted | rows fit / held out | fit median / p90"
        " | held-out median / p90 |",
        "|---|---|---|---:|---:|---:|",
    ]
    for f in fits:
        params = ", ".join(f"{k} {v:.3g}" for k, v in f.params.items())
        lines.append(
            f"| {f.accelerator} | {f.kernel} | {params} | {f.rows_fit} / {f.rows_held_out} | "
            f"{f.fit_median:.1%} / {f.fit_p90:.1%} | "
            f"{f.held_out_median:.1%} / {f.held_out_p90:.1%} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the fits as markdown")
    parser.add_argument("--accelerators", nargs="*", default=list(kt.SYSTEMS))
    args, data = kt.parse_with_data(parser, argv)
    catalog = load_catalog()
    all_fits: list[KernelFit] = []
    for acc_id in args.accelerators:
        fits = fit_accelerator(data, catalog.accelerator(acc_id), catalog)
        all_fits += fits
        print(f"[accelerators.kernel]  # {acc_id}")
        for name, value in figures(fits).items():
            print(f"{name} = {value:.3g}")
    if args.markdown:
        print(markdown(all_fits))
    else:
        for f in all_fits:
            print(fit_line(f))
    return 0


def fit_line(f: KernelFit) -> str:
    """One kernel fit as a line: part, kernel, fitted parameters, fit and held-out errors."""
    return (
        f"{f.accelerator:9s} {f.kernel:30s} "
        + " ".join(f"{k}={v:.3g}" for k, v in f.params.items())
        + f"  fit {f.fit_median:.1%}/{f.fit_p90:.1%}"
        f"  held-out {f.held_out_median:.1%}/{f.held_out_p90:.1%}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
