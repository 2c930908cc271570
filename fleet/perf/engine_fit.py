"""Fit each serving engine's multipliers on the pooled Hopper factors, on the measured runs.

The catalog's Hopper factors are one pooled fit over runs of TensorRT-LLM, vLLM and SGLang
(``fleet.perf.calibrate``). Here each engine gets multipliers on those factors (``bandwidth``,
``flops`` per precision the engine's runs exercise, ``link``, ``step_overhead``,
``collective_overhead``), fitted on that engine's runs only, with the same objective as the pooled
fit (log errors of TPOT and tokens/s per GPU, soft-L1) plus a weak prior pulling each log
multiplier to 0 (``PRIOR_SD``), so a multiplier the runs barely see stays near 1. TPOT is the
closed-loop benchmark's (``tpot_burst_s``) at the engine's documented scheduler (``SCHEDULERS``):
under SGLang's prefill-first one a request's decode window holds half its wave's prefill. No
per-model or per-row factor. ``layer_overhead`` is not fitted: the pooled value is 0, a
multiplier cannot move it. Where an engine's runs serve weight-only 4-bit experts (gpt-oss-120b's
MXFP4 on Hopper), one additive term is fitted beside the multipliers: ``moe_w4a16_call_us``, a
fixed time per MoE layer and step (prior 0 +- ``W4A16_PRIOR_US``). The pooled fit charges those
experts no call time and fits their streaming figure over every engine's runs; an engine whose
W4A16 kernel has a higher floor carries the difference (TensorRT-LLM's Hopper MXFP4 MoE table
times a one-token call at ~72-79 us at every expert-parallel width, vLLM's at ~40-61 us).

Held-out split: a seeded quarter (``SEED``) of each engine's run series — a series is one
(model, GPU, precision, layout, input and output length), all its concurrencies together — is
never seen by the fit and only scored. Rows the model rejects and the rows labelled multi-node
(which repeat single-node runs, docs/calibration.md) are left out.

Blackwell (b200, gb200, and the PCIe RTX PRO 6000 Server Edition) and Blackwell Ultra (b300,
gb300) have per-engine kernel tables but no runs: each kernel part of an engine's Hopper
multiplier is moved by how that engine's kernels compare with TensorRT-LLM's on the part,
against the same comparison on Hopper (``fleet.perf.kernel_engines``):
    m_blackwell = m_hopper x (e / trtllm on the part) / (e / trtllm on Hopper),
for bandwidth (GEMM BF16 weight streaming in the decode regime), flops per precision (GEMM of
that precision in the compute regime), link
(all-reduce link fraction) and collective overhead (all-reduce call latency); the step overhead
(serving software) carries over as it is. FP4 compute, which no Hopper run exercises, takes the
engine's FP4 kernel ratio to TensorRT-LLM on the part alone.

    python -m fleet.perf.engine_fit [--csv PATH] [--data build/aic/whl] [--toml]
                                    [--leave-one-model-out]

prints the error tables (pooled vs per-engine, fit and held-out; with
``--leave-one-model-out`` also per model left out of every fit) and, with ``--toml``, the
contents of fleet/data/engines.toml (with each engine's closed-loop TTFT terms,
``fleet.perf.ttft_fit``, and its kernel terms: TensorRT-LLM's block-scaled FP8 MoE time per
expert held, ``fleet.perf.kernel_moe_grid``, and vLLM's and SGLang's MoE prefill times,
``fleet.perf.kernel_moe_engines``). The fit reads the kernel terms the catalog carries, so after
they change run ``--toml`` twice: the second run fits with them in place.
"""

from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from fleet.catalog import FOUR_BIT, PRECISIONS, Catalog, load_catalog
from fleet.catalog.engines import W4A16_CALL_MAX_US, MoeForm
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.calibrate import HOPPER, REPO_ROOT, errors, fit, relative_errors, with_factors
from fleet.perf.closed_loop import REQUEST_OVERHEAD_S
from fleet.perf.engines import (
    W4A16_CALL,
    apply,
    block_fp8_moe_terms,
    expert_prefill_terms,
    moe_compute_terms,
)
from fleet.perf.measured import MeasuredRuns, load_measured, reference_csv
from fleet.perf.model import estimate
from fleet.perf.transfer import mean_moe_form

ENGINES = {"trtllm": "TensorRT-LLM", "vllm": "vLLM", "sglang": "SGLang"}
"""Engine id (the CSV's ``backend``) -> name."""
SEED = 20260
HELD_OUT_FRACTION = 0.25
PRIOR_SD = 0.1
"""Standard deviation of the prior on each log multiplier: a multiplier moves only as far as
many rows agree. Measured on the reference runs' held-out quarters (``python -m
fleet.perf.held_out_spread --seeds 12``, each run at its engine, 2026-11-25, with the W4A16 call
term in): 0.25 reads 8.4% / 7.9% / 22.7% against 0.1's 8.7% / 8.3% / 24.1%, but fits vLLM's FP8
compute fraction on Hopper to 0.85 of the peak (above any FP8 GEMM kernel's, multiplier 1.86)
and pushes it to the peak on B300; 0.25 on the step and collective costs alone, 8.6% / 8.2% /
24.1% (docs/calibration.md, "Engines")."""
BOUNDS = (0.25, 4.0)
W4A16_PRIOR_US = 50.0
"""Prior on an engine's W4A16 call term (``W4A16_CALL``): 0 +- this many microseconds (the
engines' W4A16 MoE kernels' one-token calls take 40-80 us on Hopper)."""
NODE_GPUS = 8
BLACKWELL = ("b200", "gb200", "b300", "gb300", "rtx-pro-6000-server")
"""Parts with every engine's kernel tables at ``kernel_engines.ENGINES``' versions (RTX PRO 6000
Blackwell Server Edition, SM120, included) and no runs: their multipliers move by kernel ratio."""
MIN_CALL_US = 0.5
"""A fitted all-reduce call latency below this is no measurement (one NVLink hop alone takes
~1-2 us): the fit put the table's small messages on the bandwidth term. SGLang's GB300 table
fits to 0 us (held-out error 37%); that engine's collective overhead there is left unmeasured."""
SCHEDULERS = {
    "trtllm": (
        False,
        "TensorRT-LLM in-flight batching: context chunks (max_num_tokens budget) ride in the same "
        "step as the running generation requests (TensorRT-LLM docs, in-flight batching and "
        "chunked context)",
    ),
    "vllm": (
        False,
        "vLLM V1 scheduler: one token budget per step (max_num_batched_tokens), running decode "
        "requests scheduled first, waiting prompts fill the rest in chunks (vLLM docs, "
        "optimization and tuning: chunked prefill)",
    ),
    "sglang": (
        True,
        "SGLang scheduler: a new prefill batch runs before decode whenever requests wait; "
        "prefill and decode mix only with --enable-mixed-chunk, off by default (SGLang docs, "
        "server arguments)",
    ),
}
"""Engine id -> (prefill_first, source)."""

KV_OF_FREE_MEMORY = {
    "trtllm": "TensorRT-LLM sizes its KV pool as KvCacheConfig.free_gpu_memory_fraction (default "
    "0.9) of the memory free after the weights load and a warm-up forward pass of max_num_tokens "
    "(TensorRT-LLM docs, KV cache configuration; tensorrt_llm/_torch/pyexecutor/_util.py); vLLM "
    "and SGLang take a fraction of the device's memory, the weights inside it",
}
"""Engines whose KV pool is a fraction of the memory free after the weights
(``kv_cache_of_free_memory``) -> the source."""


@dataclass(frozen=True, slots=True)
class Split:
    rows: np.ndarray
    """Evaluated single-node rows (indices into the runs)."""
    held_out: np.ndarray
    """Boolean per entry of ``rows``."""
    engine: np.ndarray
    """Engine id per entry of ``rows``."""


def split(arrays: CatalogArrays, runs: MeasuredRuns) -> Split:
    """The rows the fit may use, and the seeded held-out quarter of each engine's series.

    The quarter is drawn from the series of every single-node run in the file, not only of those
    the model evaluates, so a change to what the model evaluates leaves the draw as it was.
    """
    c = runs.configs
    single = np.flatnonzero((c.tp * c.dp * c.pp) <= NODE_GPUS)
    backend = np.asarray(runs.backend)
    series = {
        int(i): (runs.model_ids[i], runs.system_ids[i], int(c.weight_precision[i]), int(c.tp[i]),
                 int(c.pp[i]), int(c.dp[i]), int(c.ep[i]), *map(int, runs.logged_lengths[i]))
        for i in single
    }  # fmt: skip
    picked: set[tuple[str, tuple[object, ...]]] = set()
    for e in sorted(set(backend[single].tolist())):
        mine = sorted({series[int(i)] for i in single if backend[i] == e})
        draw = np.random.default_rng(SEED).random(len(mine)) < HELD_OUT_FRACTION
        picked |= {(e, s) for s, p in zip(mine, draw, strict=True) if p}
    rows = errors(arrays, runs, load_catalog()).rows
    rows = rows[(c.tp * c.dp * c.pp)[rows] <= NODE_GPUS]
    held = np.asarray([(backend[i], series[int(i)]) in picked for i in rows], dtype=bool)
    return Split(rows=rows, held_out=held, engine=backend[rows])


def compute_precisions(runs: MeasuredRuns, arrays: CatalogArrays, rows: np.ndarray) -> list[str]:
    """Precisions whose tensor-core rate the rows' GEMMs run at (weight-only -> BF16)."""
    acc = arrays.accelerators
    a = arrays.systems.accelerator[runs.configs.system[rows]]
    wp = runs.configs.weight_precision[rows]
    col = np.where(acc.native[a, wp], wp, PRECISIONS.index("bf16"))
    return [PRECISIONS[p] for p in sorted(set(col.tolist()))]


def weight_only_4bit_moe(runs: MeasuredRuns, arrays: CatalogArrays, rows: np.ndarray) -> bool:
    """Whether any of the rows serves an MoE model with weight-only 4-bit experts."""
    c = runs.configs
    a = arrays.systems.accelerator[c.system[rows]]
    wp = c.weight_precision[rows]
    four = np.isin(wp, [PRECISIONS.index(p) for p in FOUR_BIT])
    moe = arrays.models.moe_layers[c.model[rows]] > 0
    return bool(np.any(arrays.accelerators.weight_only[a, wp] & four & moe))


def parameter_names(runs: MeasuredRuns, arrays: CatalogArrays, rows: np.ndarray) -> list[str]:
    names = ["bandwidth"] + [f"flops.{p}" for p in compute_precisions(runs, arrays, rows)]
    if np.any((runs.configs.tp * runs.configs.dp)[rows] > 1):
        names += ["link", "collective_overhead"]
    names.append("step_overhead")
    if weight_only_4bit_moe(runs, arrays, rows):
        names.append(W4A16_CALL)
    return names


def with_scheduler(
    arrays: CatalogArrays, engine: str, request_overhead_s: float = REQUEST_OVERHEAD_S
) -> CatalogArrays:
    """``arrays`` with ``engine``'s documented scheduler (``SCHEDULERS``; a mixed one for an
    engine not listed), which sets the share of prefill a request's TPOT sees
    (``fleet.perf.closed_loop``), its KV budget rule (``KV_OF_FREE_MEMORY``) and a request
    overhead (TTFT only; default the pooled one)."""
    prefill_first = SCHEDULERS[engine][0] if engine in SCHEDULERS else False
    return (
        arrays.with_scheduling(
            request_overhead_s=request_overhead_s,
            prefill_first=prefill_first,
            kv_of_free_memory=engine in KV_OF_FREE_MEMORY,
        )
        .with_block_fp8_moe(block_fp8_moe_s(engine))
        .with_expert_prefill(expert_prefill(engine))
        .with_moe_compute(moe_compute(engine))
    )


@functools.cache
def expert_prefill(engine: str) -> dict[str, dict[str, float]]:
    """``engine``'s routed-expert prefill time per accelerator and expert kind, as the catalog
    carries it (a kernel measurement, ``fleet.perf.kernel_moe_engines``; not fitted here)."""
    return expert_prefill_terms(load_catalog(), engine)


@functools.cache
def moe_compute(engine: str) -> dict[str, dict[str, MoeForm]]:
    """``engine``'s own routed-expert compute forms per accelerator and expert kind, as the
    catalog carries them (a kernel measurement, ``fleet.perf.kernel_moe_efficiency``; not fitted
    here)."""
    return moe_compute_terms(load_catalog(), engine)


@functools.cache
def block_fp8_moe_s(engine: str) -> dict[str, float]:
    """``engine``'s block-scaled FP8 MoE time per expert held, per accelerator, seconds, as the
    catalog carries it (a kernel measurement, ``fleet.perf.kernel_moe_grid``; not fitted here)."""
    return block_fp8_moe_terms(load_catalog(), engine)


def fit_engine(
    arrays: CatalogArrays, runs: MeasuredRuns, rows: np.ndarray, engine: str
) -> dict[str, float]:
    """One engine's multipliers on the pooled factors, fitted on ``rows`` at the engine's
    scheduler; with them, where the rows serve weight-only 4-bit experts, its W4A16 call term
    (``W4A16_CALL``, microseconds: additive, so fitted in units of its prior's width)."""
    names = parameter_names(runs, arrays, rows)
    arrays = with_scheduler(arrays, engine)
    configs = runs.configs.take(rows)
    tpot, tput = runs.tpot_s[rows], runs.tokens_per_s_per_gpu[rows]
    additive = np.asarray([n == W4A16_CALL for n in names])

    def values(x: np.ndarray) -> dict[str, float]:
        v = np.where(additive, x * W4A16_PRIOR_US, np.exp(x))
        return {n: float(f) for n, f in zip(names, v, strict=True)}

    def residuals(x: np.ndarray) -> np.ndarray:
        est = estimate(apply(arrays, HOPPER, values(x)), configs)
        return np.concatenate(
            [
                np.log(est.tpot_burst_s / tpot),
                np.log(est.tokens_per_s_per_device / tput),
                np.where(additive, x, x / PRIOR_SD),
            ]
        )

    lo = np.where(additive, 0.0, math.log(BOUNDS[0]))
    hi = np.where(additive, W4A16_CALL_MAX_US / W4A16_PRIOR_US, math.log(BOUNDS[1]))
    result = least_squares(
        residuals, x0=np.where(additive, 0.1, 0.0), bounds=(lo, hi), loss="soft_l1", f_scale=0.2
    )
    if not result.success:
        raise RuntimeError(f"engine fit did not converge: {result.message}")
    return values(result.x)


@dataclass(frozen=True, slots=True)
class EngineErrors:
    """Median absolute errors of one engine's rows on one side of the split."""

    engine: str
    side: str
    rows: int
    pooled: tuple[float, float, float]
    """TPOT, tokens/s per GPU, TTFT with the pooled factors."""
    engine_factors: tuple[float, float, float]
    """The same with the engine's multipliers."""


def _medians(
    arrays: CatalogArrays, runs: MeasuredRuns, rows: np.ndarray, engine: str | None = None
) -> tuple[float, ...]:
    """TPOT and tokens/s per GPU at ``engine``'s scheduler (pooled when None); TTFT at the pooled
    closed-loop terms, so that its column shows the multipliers alone."""
    configs = runs.configs.take(rows)
    est = estimate(arrays, configs)
    sched = est if engine is None else estimate(with_scheduler(arrays, engine), configs)
    tpot, tput, _ = relative_errors(sched, runs, rows)
    ttft = relative_errors(est, runs, rows)[2]
    return tuple(float(np.median(np.abs(e))) for e in (tpot, tput, ttft))


def fit_all(
    arrays: CatalogArrays, runs: MeasuredRuns
) -> tuple[dict[str, dict[str, float]], list[EngineErrors]]:
    """Every engine's Hopper multipliers (fitted on its fit split) and the error table."""
    s = split(arrays, runs)
    fitted: dict[str, dict[str, float]] = {}
    table: list[EngineErrors] = []
    for e in ENGINES:
        mine = s.engine == e
        fitted[e] = fit_engine(arrays, runs, s.rows[mine & ~s.held_out], e)
        engine_arrays = apply(arrays, HOPPER, fitted[e])
        for side, mask in (("fit", mine & ~s.held_out), ("held-out", mine & s.held_out)):
            rows = s.rows[mask]
            table.append(
                EngineErrors(
                    e,
                    side,
                    len(rows),
                    _medians(arrays, runs, rows),  # type: ignore[arg-type]
                    _medians(engine_arrays, runs, rows, e),  # type: ignore[arg-type]
                )
            )
    return fitted, table


def leave_one_model_out(arrays: CatalogArrays, runs: MeasuredRuns) -> list[EngineErrors]:
    """Per model: the pooled factors re-fitted without it, each engine's multipliers fitted on
    top without it, both scored on its rows (``side`` = the model): do the engine multipliers
    carry to a model their fit never saw?"""
    s = split(arrays, runs)
    models = np.asarray(runs.model_ids)[s.rows]
    out: list[EngineErrors] = []
    for m in sorted(set(models.tolist())):
        pooled = fit(arrays, runs.take(s.rows[models != m]), load_catalog())
        base = with_factors(arrays, HOPPER, list(pooled.values()))
        for e in ENGINES:
            test, train = (s.engine == e) & (models == m), (s.engine == e) & (models != m)
            if not test.any():
                continue
            mine = apply(base, HOPPER, fit_engine(base, runs, s.rows[train], e))
            rows = s.rows[test]
            out.append(
                EngineErrors(
                    e,
                    m,
                    len(rows),
                    _medians(base, runs, rows),  # type: ignore[arg-type]
                    _medians(mine, runs, rows, e),  # type: ignore[arg-type]
                )
            )
    return out


def kernel_ratios(data: Path, catalog: Catalog) -> dict[tuple[str, str], dict[str, float]]:
    """(engine, accelerator) -> each kernel part's figure relative to TensorRT-LLM's."""
    from fleet.perf import kernel_engines as ke
    from fleet.perf import kernel_tables as kt

    data = kt.find_data(data)
    out: dict[tuple[str, str], dict[str, float]] = {}
    for acc_id in (*HOPPER, *BLACKWELL):
        acc = catalog.accelerator(acc_id)
        figures: dict[str, dict[str, float]] = {}
        for e in ENGINES:
            bf16 = ke.gemm(data, acc, e, "bf16")
            f = {
                "bandwidth": bf16.decode.params["bandwidth_fraction"],
                "flops.bf16": bf16.compute.params["flops_fraction"],
                "flops.fp8": ke.gemm(data, acc, e, "fp8").compute.params["flops_fraction"],
            }
            if acc.peak_tflops.fp4:
                f["flops.fp4"] = ke.gemm(data, acc, e, "fp4").compute.params["flops_fraction"]
            ar = ke.all_reduce(data, acc, e).params
            f["link"] = ar["link_fraction"]
            if ar["call_us"] >= MIN_CALL_US:
                f["collective_overhead"] = ar["call_us"]
            figures[e] = f
        for e in ENGINES:
            out[(e, acc_id)] = {
                k: v / figures["trtllm"][k] for k, v in figures[e].items() if k in figures["trtllm"]
            }
    return out


def blackwell(
    hopper: dict[str, float], ratios: dict[tuple[str, str], dict[str, float]], e: str, acc: str
) -> dict[str, float]:
    """An engine's multipliers on ``acc`` from its Hopper ones and the kernel ratios."""

    def on_hopper(part: str) -> float:
        return math.exp(sum(math.log(ratios[(e, h)][part]) for h in HOPPER) / len(HOPPER))

    out: dict[str, float] = {}
    for name, value in hopper.items():
        if name == W4A16_CALL:
            # fitted on Hopper's W4A16 MXFP4 runs; where 4-bit experts are weight-only on
            # Blackwell (INT4) no run or kernel ratio moves it: left out (0)
            continue
        if name == "step_overhead":
            out[name] = value
            continue
        if name not in ratios[(e, acc)]:
            continue  # no usable kernel figure on this part: left out, i.e. not measured (1)
        out[name] = value * ratios[(e, acc)][name] / on_hopper(name)
    if "flops.fp4" in ratios[(e, acc)]:
        # No Hopper run exercises FP4 tensor cores (FP4 is weight-only there), so no end-to-end
        # multiplier exists to move: the FP4 multiplier is the engine's FP4 kernel ratio to
        # TensorRT-LLM on this part alone. (Moving the FP8 end-to-end multiplier by the FP4/FP8
        # kernel ratios compounded vLLM's fast FP8 runs with its slow Hopper FP8 kernels: 1.9.)
        out["flops.fp4"] = ratios[(e, acc)]["flops.fp4"]
    return {k: min(BOUNDS[1], max(BOUNDS[0], v)) for k, v in out.items()}


VERSIONS = {
    "trtllm": "runs 1.0.0rc3-1.3.0rc1; kernel tables 1.3.0rc20",
    "vllm": "runs 0.11.2-0.18.0; kernel tables 0.24.0",
    "sglang": "runs 0.5.1-0.5.9; kernel tables 0.5.14",
}
RUNS_SOURCE = (
    "fitted end to end on this engine's measured H100/H200 serving runs "
    "(measured_calibration.csv), seeded 3/4 of its run series: python -m fleet.perf.engine_fit"
)
KERNEL_SOURCE = (
    "the Hopper multiplier x (this engine / TensorRT-LLM kernel figure here) / (the same on "
    "Hopper), aiconfigurator-core 0.12.0 kernel tables: python -m fleet.perf.engine_fit"
)
STEP_SOURCE = "the Hopper multiplier (serving software, no kernel measures it)"
W4A16_SOURCE = (
    f"fitted end to end, additive (prior 0 +- {W4A16_PRIOR_US:g} us, "
    f"0-{W4A16_CALL_MAX_US:g} us), on this engine's measured H100/H200 serving runs "
    "(measured_calibration.csv) of MoE models with weight-only 4-bit experts "
    "(gpt-oss-120b's MXFP4), seeded 3/4 of its run series, beside the multipliers: python -m "
    "fleet.perf.engine_fit"
)
GRID_SOURCE = (
    "TensorRT-LLM 1.3.0rc20 MoE kernel table of {parts} (aiconfigurator-core 0.12.0, "
    "moe_perf.parquet): block-scaled FP8 rows of the gated kernels, balanced routing, calls of "
    "<= 64 tokens, roofline + call + this term x experts held (E / ep){mean}: python -m "
    "fleet.perf.kernel_moe_grid"
)
FORM_SOURCE = (
    "this engine's MoE kernel table of {parts} (aiconfigurator-core 0.12.0, moe_perf.parquet; "
    "the engine's kernel-table version above): every balanced-routing call, the fastest kernel "
    "per shape, compute = FLOPs / (peak x flops_fraction) x (1 + half_rate_pairs_per_expert / m) "
    "x (1 + half_rate_width / n) in the smooth roofline with a call term, fitted on the seeded "
    "three quarters of shapes{mean}: python -m fleet.perf.kernel_moe_efficiency --engine "
    "{engine}"
)
PREFILL_SOURCE = (
    "this engine's MoE kernel table of {parts} against TensorRT-LLM 1.3.0rc20's "
    "(aiconfigurator-core 0.12.0, moe_perf.parquet; the engine's kernel-table version above): "
    "median latency ratio over the shapes both time, calls of >= 1,024 tokens, balanced "
    "routing, fastest kernel per shape; fp4 = geometric mean of the NVFP4 and MXFP4 x MXFP8 "
    "tables{mean}: python -m fleet.perf.kernel_moe_engines"
)
GRID_ENGINES = ("trtllm",)
"""Engines whose block-scaled FP8 MoE kernel carries a cost per expert held (SGLang's and vLLM's
Triton kernels fit to 0-0.05 us: ``fleet.perf.kernel_moe_grid``)."""


def grid_figure(grid: dict[str, float], accs: Sequence[str]) -> float | None:
    """The per-expert-held figure of an entry over ``accs`` (geometric mean); None where a part
    has none."""
    if not grid or any(a not in grid for a in accs):
        return None
    return math.exp(sum(math.log(grid[a]) for a in accs) / len(accs))


def _toml_factors(
    accs: Sequence[str],
    basis: str,
    m: dict[str, float],
    grid_us: float | None = None,
    prefill: dict[str, float] | None = None,
    forms: dict[str, MoeForm] | None = None,
    engine: str = "",
) -> list[str]:
    lines = ["", "[[engines.factors]]", f"accelerators = {list(accs)!r}".replace("'", '"')]
    lines.append(f'basis = "{basis}"')
    for name in ("bandwidth", "link", "step_overhead", "collective_overhead"):
        if name in m:
            lines.append(f"{name} = {m[name]:.3g}")
    if grid_us is not None:
        lines.append(f"block_fp8_moe_local_expert_us = {grid_us:.3g}")
    if W4A16_CALL in m:
        lines.append(f"{W4A16_CALL} = {round(m[W4A16_CALL], 1):g}")
    flops = {k.split(".")[1]: v for k, v in m.items() if k.startswith("flops.")}
    if flops:
        cells = ", ".join(f"{p} = {v:.3g}" for p, v in flops.items())
        lines.append(f"flops = {{ {cells} }}")
    prefill = {k: v for k, v in (prefill or {}).items() if k not in (forms or {})}
    if prefill:
        cells = ", ".join(f"{k} = {v:.3g}" for k, v in prefill.items())
        lines.append(f"expert_prefill_time = {{ {cells} }}")
    for kind, (f, m0, n0) in (forms or {}).items():
        lines += [
            f"[engines.factors.moe_compute.{kind}]",
            f"flops_fraction = {f:.3g}",
            f"half_rate_pairs_per_expert = {m0:.3g}",
            f"half_rate_width = {n0:.4g}",
        ]
    lines.append("[engines.factors.sources]")
    for name in ("bandwidth", "flops", "link", "step_overhead", "collective_overhead"):
        if name in m or (name == "flops" and flops):
            source = RUNS_SOURCE if basis == "fitted-on-runs" else KERNEL_SOURCE
            if basis != "fitted-on-runs" and name == "step_overhead":
                source = STEP_SOURCE
            lines.append(f'{name} = "{source}"')
    where = {
        "parts": " and ".join(kt_systems(accs)),
        "mean": ", geometric mean of the parts" if len(accs) > 1 else "",
    }
    if grid_us is not None:
        lines.append(f'block_fp8_moe_local_expert_us = "{GRID_SOURCE.format(**where)}"')
    if W4A16_CALL in m:
        lines.append(f'{W4A16_CALL} = "{W4A16_SOURCE}"')
    if prefill:
        lines.append(f'expert_prefill_time = "{PREFILL_SOURCE.format(**where)}"')
    if forms:
        mean = ", the parts' mean (flops fraction geometric, half-rate points arithmetic)"
        form_where = {**where, "mean": mean if len(accs) > 1 else "", "engine": engine}
        lines.append(f'moe_compute = "{FORM_SOURCE.format(**form_where)}"')
    return lines


def form_figure(forms: dict[str, dict[str, MoeForm]], accs: Sequence[str]) -> dict[str, MoeForm]:
    """The MoE compute forms of an entry over ``accs`` per kind every part has, their mean as
    the parts' family means are taken (``transfer.mean_moe_form``)."""
    if not forms or any(a not in forms for a in accs):
        return {}
    return {
        kind: mean_moe_form([forms[a][kind] for a in accs])
        for kind in forms[accs[0]]
        if all(kind in forms[a] for a in accs)
    }


def prefill_figure(
    terms: dict[str, dict[str, float]], accs: Sequence[str]
) -> dict[str, float] | None:
    """The expert prefill times of an entry over ``accs`` per kind every part has (geometric
    mean); None where none."""
    if not terms or any(a not in terms for a in accs):
        return None
    out = {
        k: v
        for k in terms[accs[0]]
        if (v := grid_figure({a: terms[a][k] for a in accs if k in terms[a]}, accs)) is not None
    }
    return out or None


def kt_systems(accs: Sequence[str]) -> list[str]:
    from fleet.perf import kernel_tables as kt

    return [kt.SYSTEMS[a] for a in accs]


def engines_toml(
    fitted: dict[str, dict[str, float]],
    ratios: dict[tuple[str, str], dict[str, float]],
    overheads_ms: dict[str, float],
    grid: dict[str, float] | None = None,
    prefill: dict[str, dict[str, dict[str, float]]] | None = None,
    forms: dict[str, dict[str, dict[str, MoeForm]]] | None = None,
) -> str:
    """fleet/data/engines.toml from the fits (generated: re-run, do not edit by hand); each
    engine's closed-loop TTFT terms from ``fleet.perf.ttft_fit`` (its request overheads)."""
    from fleet.perf.ttft_fit import scheduling_toml

    lines = [
        "# Serving engines: multipliers on the pooled efficiency factors (fleet.catalog.engines).",
        "# Generated by `python -m fleet.perf.engine_fit --toml`; docs/calibration.md, Engines.",
        "# Accelerators no entry names (and multipliers left out) are not measured: 1.",
    ]
    for e, name in ENGINES.items():
        lines += ["", "[[engines]]", f'id = "{e}"', f'name = "{name}"']
        lines.append(f'versions = "{VERSIONS[e]}"')
        lines += scheduling_toml(e, overheads_ms[e])
        g = (grid or {}) if e in GRID_ENGINES else {}
        p = (prefill or {}).get(e, {})
        fm = (forms or {}).get(e, {})
        lines += _toml_factors(
            HOPPER,
            "fitted-on-runs",
            fitted[e],
            grid_figure(g, HOPPER),
            prefill_figure(p, HOPPER),
            form_figure(fm, HOPPER),
            e,
        )
        for acc in BLACKWELL:
            m = blackwell(fitted[e], ratios, e, acc)
            lines += _toml_factors(
                (acc,),
                "runs-and-kernel-ratios",
                m,
                grid_figure(g, (acc,)),
                prefill_figure(p, (acc,)),
                form_figure(fm, (acc,)),
                e,
            )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=reference_csv(REPO_ROOT))
    parser.add_argument("--data", type=Path, default=REPO_ROOT / "build" / "aic" / "whl")
    parser.add_argument("--toml", action="store_true", help="print engines.toml")
    parser.add_argument(
        "--leave-one-model-out",
        action="store_true",
        help="also score each engine's multipliers on a model left out of both fits (slow)",
    )
    args = parser.parse_args(argv)
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    runs = load_measured(catalog, args.csv)
    fitted, table = fit_all(arrays, runs)
    ratios = kernel_ratios(args.data, catalog)
    if args.toml:
        from fleet.perf import (
            kernel_moe_efficiency,
            kernel_moe_engines,
            kernel_moe_grid,
            kernel_tables,
            ttft_fit,
        )

        overheads, _ = ttft_fit.fit_all(arrays, runs)
        parts = [catalog.accelerator(a) for a in kernel_moe_grid.PARTS]
        data = kernel_tables.find_data(args.data)
        grid = kernel_moe_grid.trtllm_figures(data, parts)
        prefill = {e: kernel_moe_engines.terms(data, e) for e in ENGINES}
        forms = {e: kernel_moe_efficiency.chosen_forms(data, catalog, e) for e in ENGINES}
        print(engines_toml(fitted, ratios, overheads, grid, prefill, forms))
        return 0
    print("| engine | split | rows | TPOT pooled / engine | tok/s/GPU pooled / engine "
          "| TTFT pooled / engine |")  # fmt: skip
    print("|---|---|---:|---:|---:|---:|")
    for t in table:
        cells = " | ".join(
            f"{p:.1%} / {q:.1%}" for p, q in zip(t.pooled, t.engine_factors, strict=True)
        )
        print(f"| {ENGINES[t.engine]} | {t.side} | {t.rows} | {cells} |")
    if args.leave_one_model_out:
        print("\nleave one model out (pooled re-fitted without it too):")
        for t in leave_one_model_out(arrays, runs):
            cells = " | ".join(
                f"{p:.1%} / {q:.1%}" for p, q in zip(t.pooled, t.engine_factors, strict=True)
            )
            print(f"| {ENGINES[t.engine]} | {t.side} | {t.rows} | {cells} |")
    print()
    for e, m in fitted.items():
        print(f"{e} hopper: " + ", ".join(f"{k} {v:.3g}" for k, v in m.items()))
        for acc in BLACKWELL:
            b = blackwell(m, ratios, e, acc)
            print(f"{e} {acc}: " + ", ".join(f"{k} {v:.3g}" for k, v in b.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
