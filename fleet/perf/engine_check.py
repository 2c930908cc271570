"""Each measured run at its own engine's terms, on the held-out split of ``fleet.perf.calibrate``.

The split of ``python -m fleet.perf.calibrate --held-out`` (a seeded quarter of all run series):
the pooled factors re-fitted on its fit series, each engine's multipliers fitted on top on that
engine's fit series (``fleet.perf.engine_fit.fit_engine``), and every held-out run scored at its
engine's multipliers and documented scheduler (``SCHEDULERS``; TPOT as the closed-loop benchmark
measures it, ``tpot_burst_s``). The pooled figure (the default engine, every run at the pooled
factors and a mixed scheduler) is the one calibrate prints; this one says what knowing the
engine adds.

    python -m fleet.perf.engine_check [--csv PATH]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleet.catalog import load_catalog
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.calibrate import (
    HOPPER,
    REPO_ROOT,
    SEED,
    errors,
    fit,
    held_out_series,
    relative_errors,
    with_factors,
)
from fleet.perf.engine_fit import ENGINES, fit_engine, with_scheduler
from fleet.perf.engines import apply
from fleet.perf.measured import MeasuredRuns, load_measured, reference_csv
from fleet.perf.model import estimate


@dataclass(frozen=True, slots=True)
class EngineHeldOut:
    engine: str
    """An engine id, or "all"."""
    rows: int
    pooled: tuple[float, float]
    """Median absolute TPOT and tokens/s per GPU errors at the pooled factors and scheduler."""
    engine_terms: tuple[float, float]
    """The same at the engine's multipliers and scheduler."""


def held_out_by_engine(
    arrays: CatalogArrays, runs: MeasuredRuns, seed: int = SEED
) -> list[EngineHeldOut]:
    """Per engine and over all engines, calibrate's held-out runs at pooled and engine terms."""
    catalog = load_catalog()
    err = errors(arrays, runs, catalog)
    rows = err.rows[~err.duplicate]
    held = held_out_series(runs, rows, seed)
    pooled = fit(arrays, runs.take(rows[~held]), catalog)
    base = with_factors(arrays, HOPPER, list(pooled.values()))
    engine = np.asarray(runs.backend)[rows]
    out: list[EngineHeldOut] = []
    errs: dict[str, list[np.ndarray]] = {"pooled": [], "engine": []}
    for e in ENGINES:
        test = rows[held & (engine == e)]
        mult = fit_engine(base, runs, rows[~held & (engine == e)], e)
        mine = with_scheduler(apply(base, HOPPER, mult), e)
        p, m = _abs_errors(base, runs, test), _abs_errors(mine, runs, test)
        errs["pooled"].append(p)
        errs["engine"].append(m)
        out.append(EngineHeldOut(e, len(test), _medians(p), _medians(m)))
    p, m = (np.concatenate(errs[k], axis=1) for k in ("pooled", "engine"))
    out.append(EngineHeldOut("all", p.shape[1], _medians(p), _medians(m)))
    return out


def _abs_errors(arrays: CatalogArrays, runs: MeasuredRuns, rows: np.ndarray) -> np.ndarray:
    tpot, tput, _ = relative_errors(estimate(arrays, runs.configs.take(rows)), runs, rows)
    return np.abs(np.stack([tpot, tput]))


def _medians(abs_errors: np.ndarray) -> tuple[float, float]:
    return float(np.median(abs_errors[0])), float(np.median(abs_errors[1]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=reference_csv(REPO_ROOT))
    args = parser.parse_args(argv)
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    runs = load_measured(catalog, args.csv)
    print("| engine | held-out rows | TPOT pooled / engine | tok/s/GPU pooled / engine |")
    print("|---|---:|---:|---:|")
    for r in held_out_by_engine(arrays, runs):
        name = ENGINES.get(r.engine, "all engines")
        print(
            f"| {name} | {r.rows} | {r.pooled[0]:.1%} / {r.engine_terms[0]:.1%} | "
            f"{r.pooled[1]:.1%} / {r.engine_terms[1]:.1%} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
