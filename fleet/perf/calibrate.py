"""Fit the shared efficiency factors of a family of accelerators on measured serving runs.

One set of physics factors for all rows of the family (Hopper: h100-sxm and h200-sxm share
silicon and software): achievable fraction of memory bandwidth, of peak FLOPs and of link
bandwidth, a fixed overhead per step, per layer and per collective call. No per-row, per-model or
per-backend factor: the model must carry to accelerators and models the file does not contain.

Rows left out of the fit (``multi_node_duplicates``): the 41 runs whose layout spans more than one
8-GPU node (DeepSeek-R1 tp 64 / dp 64, gpt-oss-120b tp 16 / tp 64, "2-8 HGX nodes"). They repeat
4-8 GPU runs of the file (the DeepSeek-R1 rows to every digit, the gpt-oss rows within a few
percent), so their GPU count is a label, not a measurement across nodes: fitting them would teach
the model that 64 GPUs deliver what 8 did. They are still evaluated and reported on their own.

Factors: the catalog's efficiency figures (``EFFICIENCY_FIGURES``): weight-streaming fractions of
the HBM bandwidth for 8/16-bit and for 4-bit weights (weight-only on Hopper), the KV-read fraction
of decode attention, BF16 and FP8 (INT8) fractions of peak FLOPs, link fraction and the fixed
costs.

TTFT: the errors of ``ttft_burst_s`` (the closed-loop benchmark's mean TTFT, at the pooled
closed-loop terms of ``fleet.perf.closed_loop``; each engine's terms: ``fleet.perf.ttft_fit``) are
reported per group; TTFT is not part of the catalog's objective. ``--ttft-weight W`` adds the
log TTFT errors at weight W (0.08 is the inverse-variance weight: robust spreads of the log
residuals 0.52 for TTFT against 0.16 / 0.13 for TPOT / tokens/s per GPU). It was measured and
not adopted
(docs/calibration.md): it lowers the TTFT error by lowering the BF16 compute fraction below what
the BF16 kernels measure, charging engine scheduling as compute on every part.

Objective: least squares on log errors of TPOT (the closed-loop benchmark's, ``tpot_burst_s``,
at the pooled mixed scheduler: ``tpot_s``) and of tokens/s per GPU (both count equally), with
a soft-L1 loss so that the few saturated runs (engine queueing beyond its KV capacity, runs whose
TPOT falls as concurrency rises) do not steer the fit. Rows the model rejects (concurrency beyond
the KV capacity) are left out and counted.

Held-out check (``held_out_series``, ``--held-out``): a seeded quarter (``SEED``) of the run
series — a series is one (model, GPU, precision, engine, layout, input and output length), all its
concurrencies together — is left out of a re-fit and only scored; the re-fit keeps any
``--hold`` factor at its value, as the catalog's fit does.

Re-run (prints the factors for fleet/data/accelerators.toml and the error tables):

    python -m fleet.perf.calibrate [--csv PATH] [--markdown] [--catalog-factors] [--held-out]
                                   [--ttft-weight W] [--hold NAME=VALUE ...]

(the catalog's figures: ``--hold layer_overhead_us=0``; each fitted figure prints with its 1-sd
error from the fit's Jacobian)
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from fleet.catalog import PRECISIONS, Catalog, load_catalog
from fleet.catalog.schema import EFFICIENCY_FIGURES
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.measured import MeasuredRuns, load_measured, reference_csv
from fleet.perf.model import estimate
from fleet.perf.types import Estimate, FloatArray, Problem

HOPPER = ("h100-sxm", "h200-sxm")
FACTOR_NAMES = EFFICIENCY_FIGURES
"""The fitted factors, in the order of ``_START`` and of ``with_factors``'s vector."""
_START = (0.7, 0.5, 200.0, 0.5, 10.0, 5.0, 0.6, 0.5, 0.6)
_LOWER = (0.05, 0.05, 0.0, 0.05, 0.0, 0.0, 0.05, 0.05, 0.05)
_UPPER = (1.0, 1.0, 5000.0, 1.0, 500.0, 100.0, 1.0, 1.0, 1.0)
REPO_ROOT = Path(__file__).resolve().parents[2]
SEED = 20260
HELD_OUT_FRACTION = 0.25


@dataclass(frozen=True, slots=True)
class Errors:
    """Signed relative errors (model / measured - 1) of the rows the model evaluates."""

    rows: np.ndarray
    """Indices into the measured runs."""
    tpot: FloatArray
    tokens_per_s_per_gpu: FloatArray
    ttft: FloatArray
    """Of ``ttft_burst_s`` against the measured TTFT (reported, not fitted)."""
    excluded: dict[str, int]
    """Rows left out, by ``Problem`` name."""
    duplicate: np.ndarray
    """Per evaluated row: a multi-node label repeating a single-node run (not fitted)."""


@dataclass(frozen=True, slots=True)
class ErrorSummary:
    group: str
    rows: int
    tpot_median: float
    tpot_p90: float
    tput_median: float
    tput_p90: float
    ttft_median: float
    ttft_p90: float
    tpot_bias: float | None = None
    """Median signed error (model / measured - 1): negative reads too fast, as for TTFT; for
    tokens/s negative reads too slow. None where not computed (the calibration's tables)."""
    tput_bias: float | None = None
    ttft_bias: float | None = None


def with_factors(
    arrays: CatalogArrays, accelerators: Sequence[str], x: Sequence[float] | FloatArray
) -> CatalogArrays:
    return arrays.with_efficiency(
        tuple(accelerators),
        bandwidth_fraction=x[0],
        flops_fraction=x[1],
        step_overhead_s=x[2] * 1e-6,
        link_fraction=x[3],
        layer_overhead_s=x[4] * 1e-6,
        collective_overhead_s=x[5] * 1e-6,
        kv_bandwidth_fraction=x[6],
        fp8_flops_fraction=x[7],
        four_bit_bandwidth_fraction=x[8],
    )


def multi_node_duplicates(runs: MeasuredRuns, catalog: Catalog) -> np.ndarray:
    """Rows whose layout spans more than one node of the measured system (left out of the fit).

    The file's multi-node rows repeat single-node runs under a wider layout label (module
    docstring); a row is one when its GPUs (tp x dp x pp) exceed the devices of its system.
    """
    c = runs.configs
    gpus = c.tp * np.maximum(c.dp, 1) * c.pp
    per_system = np.asarray([catalog.system(s).devices_per_system for s in runs.system_ids])
    return gpus > per_system


def relative_errors(
    est: Estimate, runs: MeasuredRuns, rows: np.ndarray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Model / measured - 1 of TPOT (as the closed-loop benchmark measures it), tokens/s per GPU
    and TTFT, ``est`` being the estimate of ``runs``' rows ``rows`` in that order."""
    return (
        est.tpot_burst_s / runs.tpot_s[rows] - 1.0,
        est.tokens_per_s_per_device / runs.tokens_per_s_per_gpu[rows] - 1.0,
        est.ttft_burst_s / runs.ttft_s[rows] - 1.0,
    )


def errors(arrays: CatalogArrays, runs: MeasuredRuns, catalog: Catalog) -> Errors:
    """Model vs measured, with the efficiency factors ``arrays`` carries."""
    est = estimate(arrays, runs.configs)
    ok = est.problem == Problem.OK
    excluded = {
        Problem(code).name: int(np.sum(est.problem == code)) for code in np.unique(est.problem[~ok])
    }
    rows = np.flatnonzero(ok)
    tpot, tput, ttft = relative_errors(est.take(rows), runs, rows)
    return Errors(
        rows=rows,
        tpot=tpot,
        tokens_per_s_per_gpu=tput,
        ttft=ttft,
        excluded=excluded,
        duplicate=multi_node_duplicates(runs, catalog)[rows],
    )


def fit(
    arrays: CatalogArrays,
    runs: MeasuredRuns,
    catalog: Catalog,
    accelerators: Sequence[str] = HOPPER,
    ttft_weight: float = 0.0,
    held: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Least-squares fit of the shared factors on the evaluated rows that are not multi-node
    duplicates (log TTFT errors at ``ttft_weight`` when > 0); returns them by ``FACTOR_NAMES``.
    ``held`` factors keep the values given."""
    return fit_with_errors(arrays, runs, catalog, accelerators, ttft_weight, held)[0]


def fit_with_errors(
    arrays: CatalogArrays,
    runs: MeasuredRuns,
    catalog: Catalog,
    accelerators: Sequence[str] = HOPPER,
    ttft_weight: float = 0.0,
    held: Mapping[str, float] | None = None,
) -> tuple[dict[str, float], dict[str, float]]:
    """``fit``, and each factor's 1-sd error from the fit's Jacobian at the optimum (the residual
    variance x (J^T J)^-1, J as the robust loss weights it; 0 for held factors)."""
    held = dict(held or {})
    unknown = sorted(set(held) - set(FACTOR_NAMES))
    if unknown:
        raise ValueError(f"unknown factor(s) to hold: {', '.join(unknown)}")
    free = [i for i, n in enumerate(FACTOR_NAMES) if n not in held]
    err = errors(arrays, runs, catalog)
    rows = err.rows[~err.duplicate]
    configs = runs.configs.take(rows)
    tpot, tput = runs.tpot_s[rows], runs.tokens_per_s_per_gpu[rows]
    ttft = runs.ttft_s[rows]

    def full(y: np.ndarray) -> np.ndarray:
        x = np.asarray([held.get(n, 0.0) for n in FACTOR_NAMES], dtype=np.float64)
        x[free] = y
        return x

    def residuals(y: np.ndarray) -> np.ndarray:
        est = estimate(with_factors(arrays, accelerators, full(y)), configs)
        parts = [np.log(est.tpot_burst_s / tpot), np.log(est.tokens_per_s_per_device / tput)]
        if ttft_weight > 0:
            parts.append(np.sqrt(ttft_weight) * np.log(est.ttft_burst_s / ttft))
        return np.concatenate(parts)

    pick = np.asarray(free)
    result = least_squares(
        residuals,
        x0=np.asarray(_START)[pick],
        bounds=(np.asarray(_LOWER)[pick], np.asarray(_UPPER)[pick]),
        loss="soft_l1",
        f_scale=0.2,
    )
    if not result.success:
        raise RuntimeError(f"calibration did not converge: {result.message}")
    dof = max(1, result.fun.size - len(free))
    cov = np.linalg.pinv(result.jac.T @ result.jac) * float(np.sum(result.fun**2) / dof)
    sd = np.zeros(len(FACTOR_NAMES))
    sd[pick] = np.sqrt(np.maximum(np.diag(cov), 0.0))
    x = full(result.x)
    return (
        {n: float(v) for n, v in zip(FACTOR_NAMES, x, strict=True)},
        {n: float(v) for n, v in zip(FACTOR_NAMES, sd, strict=True)},
    )


def held_out_series(runs: MeasuredRuns, rows: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Boolean per entry of ``rows``: its run series is in the seeded held-out quarter.

    The draw depends only on ``seed`` and the sorted distinct series of every run in the file,
    not on which of them the model evaluates: a change that lets the model evaluate more runs
    (or fewer) leaves every series on the side it was drawn.
    """
    c = runs.configs
    series = [
        (runs.model_ids[i], runs.system_ids[i], int(c.weight_precision[i]), runs.backend[i],
         int(c.tp[i]), int(c.pp[i]), int(c.dp[i]), int(c.ep[i]), *map(int, runs.logged_lengths[i]))
        for i in range(len(runs.model_ids))
    ]  # fmt: skip
    distinct = sorted(set(series))
    pick = np.random.default_rng(seed).random(len(distinct)) < HELD_OUT_FRACTION
    held = {s for s, p in zip(distinct, pick, strict=True) if p}
    return np.asarray([series[int(i)] in held for i in rows], dtype=bool)


def held_out_check(
    arrays: CatalogArrays,
    runs: MeasuredRuns,
    catalog: Catalog,
    ttft_weight: float = 0.0,
    seed: int = SEED,
    held: Mapping[str, float] | None = None,
) -> tuple[dict[str, float], list[ErrorSummary]]:
    """Re-fit on the fit series only (``held`` factors kept at the values given, as ``fit``
    keeps them); the errors of both sides and per weight precision and per engine of the
    held-out side (``ErrorSummary`` groups "fit", "held-out", "held-out <precision>", "held-out
    engine <backend>"), all at the pooled factors and scheduler."""
    err = errors(arrays, runs, catalog)
    rows = err.rows[~err.duplicate]
    out_of_fit = held_out_series(runs, rows, seed)
    factors = fit(arrays, runs.take(rows[~out_of_fit]), catalog, ttft_weight=ttft_weight, held=held)
    refit = errors(with_factors(arrays, HOPPER, list(factors.values())), runs, catalog)
    fitted = ~refit.duplicate
    side = np.zeros(len(refit.rows), dtype=bool)
    side[fitted] = out_of_fit
    precision = np.asarray([PRECISIONS[p] for p in runs.configs.weight_precision[refit.rows]])
    out = [_summary("fit", refit, fitted & ~side), _summary("held-out", refit, side)]
    for p in sorted(set(precision[side].tolist())):
        out.append(_summary(f"held-out {p}", refit, side & (precision == p)))
    backend = np.asarray(runs.backend)[refit.rows]
    for b in sorted(set(backend[side].tolist())):
        out.append(_summary(f"held-out engine {b}", refit, side & (backend == b)))
    return factors, out


def summarize(err: Errors, runs: MeasuredRuns, catalog: Catalog) -> list[ErrorSummary]:
    """Median and p90 absolute errors per (model, accelerator) and overall on the fitted rows,
    then the multi-node duplicates on their own."""
    models = np.asarray(runs.model_ids)[err.rows]
    accs = np.asarray([catalog.system(s).accelerator for s in runs.system_ids])[err.rows]
    fitted = ~err.duplicate
    keys = sorted(set(zip(models[fitted].tolist(), accs[fitted].tolist(), strict=True)))
    out = []
    for model, acc in keys:
        mask = (models == model) & (accs == acc) & fitted
        out.append(_summary(f"{model} on {acc}", err, mask))
    out.append(_summary("overall", err, fitted))
    if err.duplicate.any():
        out.append(_summary("multi-node labels (not fitted)", err, err.duplicate))
    return out


def _summary(group: str, err: Errors, mask: np.ndarray) -> ErrorSummary:
    t, x = np.abs(err.tpot[mask]), np.abs(err.tokens_per_s_per_gpu[mask])
    ft = np.abs(err.ttft[mask])
    return ErrorSummary(
        group=group,
        rows=int(mask.sum()),
        tpot_median=float(np.median(t)),
        tpot_p90=float(np.quantile(t, 0.9)),
        tput_median=float(np.median(x)),
        tput_p90=float(np.quantile(x, 0.9)),
        ttft_median=float(np.median(ft)),
        ttft_p90=float(np.quantile(ft, 0.9)),
    )


def markdown_table(
    summaries: Sequence[ErrorSummary], first_column: str = "model on accelerator"
) -> str:
    biases = [(s.tpot_bias, s.tput_bias, s.ttft_bias) for s in summaries]
    biased = bool(summaries) and all(None not in b for b in biases)
    extra = " TPOT bias | tok/s/GPU bias | TTFT bias |" if biased else ""
    lines = [
        f"| {first_column} | rows | TPOT median | TPOT p90 | tok/s/GPU median"
        " | tok/s/GPU p90 | TTFT median | TTFT p90 |" + extra,
        "|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" * 3 if biased else ""),
    ]
    for s, b in zip(summaries, biases, strict=True):
        cells = "".join(f" {v:+.1%} |" for v in b) if biased else ""
        lines.append(
            f"| {s.group} | {s.rows} | {s.tpot_median:.1%} | {s.tpot_p90:.1%} | "
            f"{s.tput_median:.1%} | {s.tput_p90:.1%} | {s.ttft_median:.1%} | {s.ttft_p90:.1%} |"
            + cells
        )
    return "\n".join(lines)


def _held(items: Sequence[str]) -> dict[str, float]:
    """``NAME=VALUE`` items as factors to hold; a one-line error for a bad one."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or name not in FACTOR_NAMES:
            raise ValueError(
                f"{item!r}: expected NAME=VALUE with NAME one of {', '.join(FACTOR_NAMES)}"
            )
        try:
            out[name] = float(value)
        except ValueError:
            raise ValueError(f"{item!r}: {value!r} is not a number") from None
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=reference_csv(REPO_ROOT))
    parser.add_argument("--markdown", action="store_true", help="print the error table as markdown")
    parser.add_argument(
        "--catalog-factors",
        action="store_true",
        help="report the errors of the factors in accelerators.toml instead of re-fitting",
    )
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="re-fit on three quarters of the run series and score the held-out quarter",
    )
    parser.add_argument(
        "--ttft-weight",
        type=float,
        default=0.0,
        help="weight of the log TTFT errors in the objective (default 0: not fitted)",
    )
    parser.add_argument(
        "--hold",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="keep a factor at a value instead of fitting it (the catalog holds "
        "layer_overhead_us=0); repeatable",
    )
    args = parser.parse_args(argv)
    if not 0.0 <= args.ttft_weight <= 10.0:
        parser.exit(2, f"--ttft-weight: {args.ttft_weight} is outside 0-10\n")
    try:
        args.hold = _held(args.hold)
    except ValueError as bad:
        parser.exit(2, f"--hold: {bad}\n")
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    runs = load_measured(catalog, args.csv)
    if args.held_out:
        factors, table = held_out_check(arrays, runs, catalog, args.ttft_weight, held=args.hold)
        print(
            "re-fitted on the fit series: " + ", ".join(f"{k} {v:.3g}" for k, v in factors.items())
        )
        print(markdown_table(table))
        return 0
    if args.catalog_factors:
        err = errors(arrays, runs, catalog)
        print(f"factors of accelerators.toml: {catalog.accelerator(HOPPER[0]).efficiency}")
    else:
        factors, sd = fit_with_errors(
            arrays, runs, catalog, ttft_weight=args.ttft_weight, held=args.hold
        )
        print("[accelerators.efficiency]  # h100-sxm and h200-sxm")
        for name, value in factors.items():
            note = "held" if name in args.hold else f"+- {sd[name]:.2g} (1 sd)"
            print(f"{name} = {value:.3g}  # {note}")
        err = errors(with_factors(arrays, HOPPER, list(factors.values())), runs, catalog)
    print(
        f"rows evaluated: {len(err.rows)} of {len(runs)}; left out: {err.excluded}; "
        f"fitted: {int((~err.duplicate).sum())} (multi-node duplicates not fitted: "
        f"{int(err.duplicate.sum())})"
    )
    table = summarize(err, runs, catalog)
    if args.markdown:
        print(markdown_table(table))
    else:
        for s in table:
            print(
                f"{s.group:32s} n={s.rows:4d}  TPOT median {s.tpot_median:6.1%} p90 "
                f"{s.tpot_p90:6.1%}  tok/s/GPU median {s.tput_median:6.1%} p90 {s.tput_p90:6.1%}"
                f"  TTFT median {s.ttft_median:6.1%} p90 {s.ttft_p90:6.1%}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
