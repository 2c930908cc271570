"""How much the held-out errors move with the draw of the held-out quarter.

    python -m fleet.perf.held_out_spread [--seeds N] [--csv PATH]

``python -m fleet.perf.calibrate --held-out``, ``python -m fleet.perf.engine_check`` and
``python -m fleet.perf.ttft_fit`` each score one seeded quarter of the run series. A quarter
holds ~50 series of a handful of models, so which series it draws moves the medians by several
points; a figure a few points from a bar says little on one draw. This repeats the three checks
on ``N`` draws (the canonical ``SEED`` first, then the next seeds) and prints, per figure, the
canonical draw's value, the median over the draws, and the range: the median over draws is the
proxy to hold against a bar, the range is how far one draw can sit from it.

Every draw re-fits everything it scores (the pooled factors, each engine's multipliers and request
overhead) on its own fit series, exactly as the single-draw checks do.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleet.catalog import Catalog, load_catalog
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.calibrate import REPO_ROOT, SEED, held_out_check
from fleet.perf.engine_check import held_out_by_engine
from fleet.perf.measured import MeasuredRuns, load_measured, reference_csv
from fleet.perf.ttft_fit import held_out_series_check

MAX_SEEDS = 64
"""Each draw re-fits every factor (a few seconds); more draws than this is not a check."""

FIGURES: tuple[tuple[str, float], ...] = (
    ("TPOT, pooled factors", 0.12),
    ("tokens/s per GPU, pooled factors", 0.12),
    ("TTFT, pooled factors", 0.30),
    ("TPOT, each run at its engine", 0.12),
    ("tokens/s per GPU, each run at its engine", 0.12),
    ("TTFT, each run at its engine", 0.30),
)
"""The held-out medians reported, with the bar each is held against (issue targets)."""


@dataclass(frozen=True, slots=True)
class Draw:
    seed: int
    rows: int
    figures: tuple[float, ...]
    """Median absolute errors on the held-out series, in ``FIGURES`` order."""


def draw(arrays: CatalogArrays, runs: MeasuredRuns, catalog: Catalog, seed: int) -> Draw:
    """The held-out medians of the three checks on the quarter drawn with ``seed``."""
    _, table = held_out_check(arrays, runs, catalog, seed=seed)
    pooled = next(t for t in table if t.group == "held-out")
    engines = next(r for r in held_out_by_engine(arrays, runs, seed) if r.engine == "all")
    ttft = next(
        r for r in held_out_series_check(arrays, runs, seed)
        if r.engine == "all" and r.side == "held-out"
    )  # fmt: skip
    return Draw(
        seed=seed,
        rows=pooled.rows,
        figures=(
            pooled.tpot_median,
            pooled.tput_median,
            pooled.ttft_median,
            engines.engine_terms[0],
            engines.engine_terms[1],
            ttft.engine_terms,
        ),
    )


def draws(
    arrays: CatalogArrays, runs: MeasuredRuns, catalog: Catalog, seeds: int, progress: bool = False
) -> list[Draw]:
    """``seeds`` draws: ``SEED``, ``SEED + 1``, ..."""
    if not 1 <= seeds <= MAX_SEEDS:
        raise ValueError(f"seeds: {seeds} is outside 1..{MAX_SEEDS}")
    out = []
    for k in range(seeds):
        out.append(draw(arrays, runs, catalog, SEED + k))
        if progress:
            print(f"draw {k + 1} of {seeds} done", file=sys.stderr, flush=True)
    return out


def markdown(results: Sequence[Draw]) -> str:
    values = np.asarray([d.figures for d in results])
    rows = [d.rows for d in results]
    lines = [
        f"held-out medians over {len(results)} draws of the held-out quarter "
        f"({min(rows)}-{max(rows)} held-out runs per draw)",
        "| figure | canonical draw | median over draws | range | bar | draws over the bar |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for j, (name, bar) in enumerate(FIGURES):
        col = values[:, j]
        lines.append(
            f"| {name} | {col[0]:.1%} | {np.median(col):.1%} | {col.min():.1%}-{col.max():.1%} "
            f"| {bar:.0%} | {int((col > bar).sum())} of {len(col)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=12, help="draws (default 12)")
    parser.add_argument("--csv", type=Path, default=reference_csv(REPO_ROOT))
    args = parser.parse_args(argv)
    if not 1 <= args.seeds <= MAX_SEEDS:
        print(f"error: --seeds: {args.seeds} is outside 1..{MAX_SEEDS}", file=sys.stderr)
        return 2
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    runs = load_measured(catalog, args.csv)
    print(markdown(draws(arrays, runs, catalog, args.seeds, progress=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
