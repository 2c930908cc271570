"""A request overhead per layer against a constant one, on the measured Hopper runs (measured,
not adopted).

Each engine's request overhead (``fleet.perf.ttft_fit``) is one constant per request. A prefill
pass that runs outside the engine's captured CUDA graphs dispatches every layer's kernels from the
host, so a cost per layer would make deeper models' TTFT longer; the unseen MoE models (60-94
layers) read short, the fitted ones span 32-80. ``compare`` fits both forms per engine on the
grid of ``ttft_fit`` (a constant on ``ttft_fit.GRID_MS``, a cost per layer on ``GRID_MS_PER_LAYER``)
and scores them two ways:

- on the engine's held-out series (``fleet.perf.engine_fit.split``: its seeded quarter), both
  forms fitted on the other three quarters;
- per model left out: both forms fitted on the engine's runs of the other models, scored on the
  model's, which is the question a per-model term has to answer.

The engine's multipliers (``fleet.perf.engine_fit``) are fitted on its fit series, as
``ttft_fit`` fits them. The constant form is what the catalog carries.

    python -m fleet.perf.ttft_layers

prints the table docs/calibration.md reads ("A request overhead per layer").
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleet.catalog import load_catalog
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.calibrate import HOPPER, REPO_ROOT
from fleet.perf.engine_fit import ENGINES, fit_engine, split
from fleet.perf.engines import apply
from fleet.perf.measured import MeasuredRuns, load_measured, reference_csv
from fleet.perf.model import estimate
from fleet.perf.ttft_fit import GRID_MS, grid_best_ms, with_terms

GRID_MS_PER_LAYER = np.arange(0.0, 5.0 + 1e-9, 0.05)
"""Cost per layer per request, ms (0-5 ms: 0-400 ms over an 80-layer model)."""


@dataclass(frozen=True, slots=True)
class FormScore:
    """Both forms on one set of runs: the fitted values and their median absolute TTFT errors."""

    engine: str
    scope: str
    """"held-out series", or the model left out."""
    runs: int
    constant_ms: float
    constant_error: float
    per_layer_ms: float
    per_layer_error: float


def _score(
    engine: str, scope: str, base: np.ndarray, measured: np.ndarray, layers: np.ndarray,
    train: np.ndarray, test: np.ndarray,
) -> tuple[FormScore, np.ndarray, np.ndarray]:  # fmt: skip
    """Both forms fitted on ``train``, scored on ``test``; also each test run's absolute errors."""
    one = np.ones(len(base))
    const = grid_best_ms(base[train], measured[train], one[train], GRID_MS)
    per_layer = grid_best_ms(base[train], measured[train], layers[train], GRID_MS_PER_LAYER)

    def err(unit: np.ndarray, g_ms: float) -> np.ndarray:
        return np.abs((base[test] + g_ms * 1e-3 * unit[test]) / measured[test] - 1.0)

    e_const, e_layer = err(one, const), err(layers, per_layer)
    score = FormScore(
        engine, scope, int(test.sum()), const, float(np.median(e_const)), per_layer,
        float(np.median(e_layer)),
    )  # fmt: skip
    return score, e_const, e_layer


def _pooled(scope: str, errors: list[tuple[np.ndarray, np.ndarray]]) -> FormScore:
    """Every engine's scored runs together (each at its own engine's fitted values)."""
    const = np.concatenate([c for c, _ in errors])
    layer = np.concatenate([lay for _, lay in errors])
    return FormScore(
        "all", scope, len(const), float("nan"), float(np.median(const)), float("nan"),
        float(np.median(layer)),
    )  # fmt: skip


def compare(arrays: CatalogArrays, runs: MeasuredRuns) -> list[FormScore]:
    """Per engine: its held-out series, then each model left out in turn; then both scopes over
    every engine's runs."""
    s = split(arrays, runs)
    models = np.asarray(runs.model_ids)
    layers = arrays.models.num_layers[runs.configs.model].astype(np.float64)
    out: list[FormScore] = []
    held_errors: list[tuple[np.ndarray, np.ndarray]] = []
    left_out_errors: list[tuple[np.ndarray, np.ndarray]] = []
    for e in ENGINES:
        sel = s.engine == e
        mult = fit_engine(arrays, runs, s.rows[sel & ~s.held_out], e)
        rows = s.rows[sel]
        at_zero = with_terms(apply(arrays, HOPPER, mult), e, 0.0)
        base = estimate(at_zero, runs.configs.take(rows)).ttft_burst_s
        measured, lr, mr = runs.ttft_s[rows], layers[rows], models[rows]
        held = s.held_out[sel]
        score, e_const, e_layer = _score(e, "held-out series", base, measured, lr, ~held, held)
        out.append(score)
        held_errors.append((e_const, e_layer))
        for m in sorted(set(mr.tolist())):
            score, e_const, e_layer = _score(e, m, base, measured, lr, mr != m, mr == m)
            out.append(score)
            left_out_errors.append((e_const, e_layer))
    return [
        *out,
        _pooled("held-out series", held_errors),
        _pooled("each model left out", left_out_errors),
    ]


def markdown(scores: Sequence[FormScore]) -> str:
    lines = [
        "| engine | scored on | runs | constant, ms | TTFT error | per layer, ms | TTFT error |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for f in scores:
        lines.append(
            f"| {ENGINES.get(f.engine, f.engine)} | {f.scope} | {f.runs} | {_ms(f.constant_ms)} | "
            f"{f.constant_error:.1%} | {_ms(f.per_layer_ms)} | {f.per_layer_error:.1%} |"
        )
    return "\n".join(lines)


def _ms(value: float) -> str:
    return "each engine's" if np.isnan(value) else f"{value:g}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=reference_csv(REPO_ROOT))
    args = parser.parse_args(argv)
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    print(markdown(compare(arrays, load_measured(catalog, args.csv))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
