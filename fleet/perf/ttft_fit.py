"""Each engine's closed-loop TTFT terms (``fleet.perf.closed_loop``), on the measured Hopper runs.

Two terms per engine, both serving software (the same on every accelerator):
- ``prefill_first``: not fitted, read off the engine's documented scheduler (``SCHEDULERS``).
  SGLang runs a new prefill batch before decoding whenever requests wait and mixes prefill with
  decode only when asked (``--enable-mixed-chunk``, off by default), so a closed loop's waves
  finish together and return as bursts (unless the benchmark drew its lengths from a range,
  ``fleet.perf.protocol``); TensorRT-LLM (in-flight batching with chunked context)
  and vLLM V1 (one token budget per step, running decodes scheduled first) mix prompt chunks
  into decode steps, so after the first wave requests arrive staggered.
- ``request_overhead_ms``: the per-request cost outside the forward passes (HTTP front-end,
  tokenization, scheduling, first detokenization), fitted on the engine's fit series (the
  seeded three quarters of ``fleet.perf.engine_fit.split``) with its TPOT multipliers applied:
  the value on a ``GRID_MS`` grid with the smallest median absolute TTFT error. TTFT is linear
  in it, so one evaluation of the model serves the whole grid.

No per-model or per-row term. ``python -m fleet.perf.ttft_fit [--leave-one-model-out]`` prints
the fitted overheads and the TTFT errors (pooled terms / engine terms) on fit and held-out series,
per engine and over all engines (each run at its own engine's terms).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleet.catalog import load_catalog
from fleet.catalog.engines import POOLED
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.calibrate import (
    HOPPER,
    REPO_ROOT,
    SEED,
    errors,
    fit,
    held_out_series,
    with_factors,
)
from fleet.perf.closed_loop import REQUEST_OVERHEAD_S
from fleet.perf.engine_fit import (
    ENGINES,
    KV_OF_FREE_MEMORY,
    SCHEDULERS,
    fit_engine,
    split,
    with_scheduler,
)
from fleet.perf.engines import apply
from fleet.perf.measured import MeasuredRuns, load_measured, reference_csv
from fleet.perf.model import estimate

GRID_MS = np.arange(0.0, 300.0 + 1e-9, 2.5)
OVERHEAD_SOURCE = (
    "fitted on this engine's measured H100/H200 serving runs (measured_calibration.csv), seeded "
    "3/4 of its run series, median absolute TTFT error on a 2.5 ms grid: python -m "
    "fleet.perf.ttft_fit"
)


def with_terms(arrays: CatalogArrays, engine: str, overhead_ms: float) -> CatalogArrays:
    """``arrays`` with ``engine``'s scheduler (the pooled default ``POOLED``: a mixed one) and a
    request overhead of ``overhead_ms``."""
    return with_scheduler(arrays, engine, overhead_ms * 1e-3)


def grid_best_ms(
    base_s: np.ndarray, measured_s: np.ndarray, unit: np.ndarray, grid_ms: np.ndarray
) -> float:
    """The value g (ms) of ``grid_ms`` whose TTFT, ``base_s + g x unit``, has the smallest median
    absolute error against ``measured_s`` (``unit`` 1: a constant per request; the layer count: a
    cost per layer)."""
    errors = [np.median(np.abs((base_s + g * 1e-3 * unit) / measured_s - 1.0)) for g in grid_ms]
    return float(grid_ms[int(np.argmin(errors))])


def fit_overhead_ms(
    arrays: CatalogArrays, runs: MeasuredRuns, rows: np.ndarray, engine: str
) -> float:
    """The request overhead (ms) minimizing the median absolute TTFT error of ``rows``."""
    base = estimate(with_terms(arrays, engine, 0.0), runs.configs.take(rows)).ttft_burst_s
    return grid_best_ms(base, runs.ttft_s[rows], np.ones(len(rows)), GRID_MS)


def fit_pooled_overhead_ms(arrays: CatalogArrays, runs: MeasuredRuns) -> float:
    """The pooled request overhead (``fleet.perf.closed_loop.REQUEST_OVERHEAD_S``, in ms): the
    same rule on the fit series of ``python -m fleet.perf.calibrate --held-out`` (every engine's
    runs, seeded three quarters of the series), with the pooled factors re-fitted on them."""
    rows, held, base = _refit_on_fit_series(arrays, runs)
    return fit_overhead_ms(base, runs, rows[~held], POOLED)


def _refit_on_fit_series(
    arrays: CatalogArrays, runs: MeasuredRuns, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray, CatalogArrays]:
    """Fitted rows (no multi-node duplicates), the held-out mask of the calibrate split, and the
    pooled factors re-fitted on its fit series."""
    catalog = load_catalog()
    err = errors(arrays, runs, catalog)
    rows = err.rows[~err.duplicate]
    held = held_out_series(runs, rows, seed)
    refit = fit(arrays, runs.take(rows[~held]), catalog)
    return rows, held, with_factors(arrays, HOPPER, list(refit.values()))


def ttft_errors(arrays: CatalogArrays, runs: MeasuredRuns, rows: np.ndarray) -> np.ndarray:
    """Absolute relative TTFT errors of ``rows``."""
    est = estimate(arrays, runs.configs.take(rows))
    return np.abs(est.ttft_burst_s / runs.ttft_s[rows] - 1.0)


@dataclass(frozen=True, slots=True)
class TtftRow:
    engine: str
    """An engine id, or "all" (each run at its own engine's terms)."""
    side: str
    rows: int
    pooled: float
    """Median absolute TTFT error with the pooled factors and terms."""
    engine_terms: float
    """The same with the engine's multipliers and TTFT terms."""
    engine_p90: float


def fit_all(arrays: CatalogArrays, runs: MeasuredRuns) -> tuple[dict[str, float], list[TtftRow]]:
    """Every engine's request overhead (ms) on its fit series, and the error table."""
    s = split(arrays, runs)
    overheads: dict[str, float] = {}
    pooled = np.full(len(s.rows), np.nan)
    mine = np.full(len(s.rows), np.nan)
    for e in ENGINES:
        sel = s.engine == e
        mult = fit_engine(arrays, runs, s.rows[sel & ~s.held_out], e)
        engine_arrays = apply(arrays, HOPPER, mult)
        overheads[e] = fit_overhead_ms(engine_arrays, runs, s.rows[sel & ~s.held_out], e)
        pooled[sel] = ttft_errors(arrays, runs, s.rows[sel])
        mine[sel] = ttft_errors(with_terms(engine_arrays, e, overheads[e]), runs, s.rows[sel])
    table = []
    for e in (*ENGINES, "all"):
        sel = np.ones(len(s.rows), dtype=bool) if e == "all" else s.engine == e
        for side, mask in (("fit", sel & ~s.held_out), ("held-out", sel & s.held_out)):
            table.append(_row(e, side, pooled[mask], mine[mask]))
        if e == "all":
            table.append(_row(e, "every run", pooled[sel], mine[sel]))
    return overheads, table


def _row(engine: str, side: str, pooled: np.ndarray, mine: np.ndarray) -> TtftRow:
    return TtftRow(
        engine,
        side,
        len(pooled),
        float(np.median(pooled)),
        float(np.median(mine)),
        float(np.quantile(mine, 0.9)),
    )


def leave_one_model_out(arrays: CatalogArrays, runs: MeasuredRuns) -> list[TtftRow]:
    """Per model: the pooled factors re-fitted without it, each engine's multipliers and request
    overhead fitted without it, both scored on its rows ("all": every model's rows together)."""
    s = split(arrays, runs)
    models = np.asarray(runs.model_ids)[s.rows]
    out: list[TtftRow] = []
    pooled_all, mine_all = [], []
    for m in sorted(set(models.tolist())):
        refit = fit(arrays, runs.take(s.rows[models != m]), load_catalog())
        base = with_factors(arrays, HOPPER, list(refit.values()))
        for e in ENGINES:
            test, train = (s.engine == e) & (models == m), (s.engine == e) & (models != m)
            if not test.any():
                continue
            engine_arrays = apply(base, HOPPER, fit_engine(base, runs, s.rows[train], e))
            overhead = fit_overhead_ms(engine_arrays, runs, s.rows[train], e)
            p = ttft_errors(base, runs, s.rows[test])
            q = ttft_errors(with_terms(engine_arrays, e, overhead), runs, s.rows[test])
            out.append(_row(e, m, p, q))
            pooled_all.append(p)
            mine_all.append(q)
    out.append(
        _row("all", "every model left out", np.concatenate(pooled_all), np.concatenate(mine_all))
    )
    return out


def held_out_series_check(
    arrays: CatalogArrays, runs: MeasuredRuns, seed: int = SEED
) -> list[TtftRow]:
    """The split of ``python -m fleet.perf.calibrate --held-out`` (a seeded quarter of all run
    series): the pooled factors and request overhead re-fitted on the fit series, each engine's
    multipliers and request overhead fitted on its fit series, both scored on the held-out
    series."""
    rows, held, base = _refit_on_fit_series(arrays, runs, seed)
    base = with_terms(base, POOLED, fit_overhead_ms(base, runs, rows[~held], POOLED))
    engine = np.asarray(runs.backend)[rows]
    pooled = np.full(len(rows), np.nan)
    mine = np.full(len(rows), np.nan)
    for e in ENGINES:
        sel = engine == e
        engine_arrays = apply(base, HOPPER, fit_engine(base, runs, rows[sel & ~held], e))
        overhead = fit_overhead_ms(engine_arrays, runs, rows[sel & ~held], e)
        pooled[sel] = ttft_errors(base, runs, rows[sel])
        mine[sel] = ttft_errors(with_terms(engine_arrays, e, overhead), runs, rows[sel])
    out = []
    for e in (*ENGINES, "all"):
        sel = np.ones(len(rows), dtype=bool) if e == "all" else engine == e
        for side, mask in (("fit", sel & ~held), ("held-out", sel & held)):
            out.append(_row(e, side, pooled[mask], mine[mask]))
    return out


def scheduling_toml(engine: str, overhead_ms: float) -> list[str]:
    """The ``[engines.scheduling]`` table of ``engine`` for fleet/data/engines.toml."""
    prefill_first, source = SCHEDULERS[engine]
    kv_source = KV_OF_FREE_MEMORY.get(engine)
    kv = ["kv_cache_of_free_memory = true"] if kv_source else []
    return [
        "",
        "[engines.scheduling]",
        f"prefill_first = {'true' if prefill_first else 'false'}",
        f"request_overhead_ms = {overhead_ms:g}",
        *kv,
        "[engines.scheduling.sources]",
        f'prefill_first = "{source}"',
        f'request_overhead_ms = "{OVERHEAD_SOURCE}"',
        *([f'kv_cache_of_free_memory = "{kv_source}"'] if kv_source else []),
    ]


def markdown(table: Sequence[TtftRow]) -> str:
    lines = [
        "| engine | split | rows | TTFT pooled | TTFT engine | TTFT engine p90 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for t in table:
        lines.append(
            f"| {ENGINES.get(t.engine, t.engine)} | {t.side} | {t.rows} | {t.pooled:.1%} | "
            f"{t.engine_terms:.1%} | {t.engine_p90:.1%} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=reference_csv(REPO_ROOT))
    parser.add_argument(
        "--leave-one-model-out",
        action="store_true",
        help="also score each engine's terms on a model left out of every fit (slow)",
    )
    args = parser.parse_args(argv)
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    runs = load_measured(catalog, args.csv)
    overheads, table = fit_all(arrays, runs)
    pooled_ms = fit_pooled_overhead_ms(arrays, runs)
    print(f"pooled request overhead: {pooled_ms:g} ms (catalog {REQUEST_OVERHEAD_S * 1e3:g})")
    print("request_overhead_ms: " + ", ".join(f"{e} {v:g}" for e, v in overheads.items()))
    print(markdown(table))
    print("\nheld-out series of python -m fleet.perf.calibrate --held-out (all factors re-fitted):")
    print(markdown(held_out_series_check(arrays, runs)))
    if args.leave_one_model_out:
        print("\nleave one model out (pooled factors re-fitted without it too):")
        print(markdown(leave_one_model_out(arrays, runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
