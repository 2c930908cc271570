"""Benchmark: ``farebox estimate --from-csv`` on a 2,000-row CSV, before and after vectorizing.

    python bench/bench_estimate_csv.py [--rows 2000] [--repeat 3]

The CSV mixes catalog models and accelerators, layouts (valid and not), precisions (given and
defaulted), batch sizes, sequence lengths, cached prefixes, speculative options and a few bad rows
(unknown ids, non-numbers). Prints the best of ``--repeat`` wall times of:

- per row: one ``make_configs`` + ``estimate`` call per row (what ``--from-csv`` did before);
- vectorized: ``api.cli.main(["estimate", "--from-csv", ...])``, the whole command, CSV read and
  write included (one ``make_configs`` + ``estimate`` call over all valid rows);
- of which compute: that one ``make_configs`` + ``estimate`` call alone.

Catalog loading is outside both timings.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.cli import main as cli_main
from api.cli._estimate_csv import Row, _configs, _parse, _read
from fleet.catalog import load_catalog
from fleet.errors import InputError
from fleet.perf.arrays import build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate

COLUMNS = (
    "model",
    "accelerator",
    "precision",
    "tp",
    "pp",
    "ep",
    "batch",
    "isl",
    "osl",
    "prefix_cached_tokens",
    "spec_draft",
    "spec_acceptance",
)


def write_csv(path: Path, rows: int, seed: int = 0) -> None:
    catalog = load_catalog()
    rng = np.random.default_rng(seed)
    models = list(catalog.models)
    accelerators = list(catalog.accelerators)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(COLUMNS)
        for _ in range(rows):
            isl = int(rng.choice([512, 1024, 4096, 16384]))
            k = int(rng.choice([0, 0, 2, 3]))
            writer.writerow(
                [
                    models[int(rng.integers(len(models)))] if rng.random() > 0.01 else "nope",
                    accelerators[int(rng.integers(len(accelerators)))],
                    str(rng.choice(["", "bf16", "fp8", "fp4"])),
                    int(rng.choice([2, 4, 8])),
                    1,
                    int(rng.choice([1, 1, 8])),
                    str(rng.choice(["1", "8", "32", "128"])) if rng.random() > 0.01 else "many",
                    isl,
                    int(rng.choice([128, 512, 2048])),
                    int(isl * rng.choice([0.0, 0.5])),
                    k,
                    0.7 if k else "",
                ]
            )


def per_row(path: Path) -> float:
    """The loop ``--from-csv`` ran before: one make_configs + estimate per row."""
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    start = time.perf_counter()
    for row in rows:
        try:
            configs = make_configs(
                catalog,
                model=row["model"],
                accelerator=row["accelerator"],
                tp=int(row["tp"]),
                pp=int(row["pp"]),
                ep=int(row["ep"]),
                precision=row["precision"] or "fp8",
                batch=int(row["batch"]),
                isl=int(row["isl"]),
                osl=int(row["osl"]),
                prefix_cached_tokens=int(row["prefix_cached_tokens"]),
                spec_draft_tokens=int(row["spec_draft"]),
                spec_acceptance=float(row["spec_acceptance"] or 0),
            )
        except (InputError, ValueError):
            continue
        estimate(arrays, configs)
    return time.perf_counter() - start


def compute_only(path: Path) -> float:
    """The vectorized command's compute: one make_configs + estimate over the valid rows."""
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    rows, _ = _read(path)
    good = [r for r in (_parse(catalog, row, "any") for row in rows) if isinstance(r, Row)]
    start = time.perf_counter()
    estimate(arrays, _configs(catalog, good))
    return time.perf_counter() - start


def vectorized(path: Path, out: Path) -> float:
    start = time.perf_counter()
    code = cli_main(["estimate", "--from-csv", str(path), "--out", str(out)])
    elapsed = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"farebox estimate --from-csv exited {code}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.csv", Path(tmp) / "out.csv"
        write_csv(src, args.rows)
        load_catalog()  # warm the file cache for both
        before = min(per_row(src) for _ in range(args.repeat))
        after = min(vectorized(src, out) for _ in range(args.repeat))
        compute = min(compute_only(src) for _ in range(args.repeat))
        with out.open(newline="") as fh:
            results = list(csv.DictReader(fh))
    errors = sum(1 for r in results if r["error"])
    print(f"{args.rows} rows ({errors} with an error: bad input, invalid layout or no fit)")
    print(f"  per row (before):    {before * 1e3:9.1f} ms")
    print(f"  vectorized (after):  {after * 1e3:9.1f} ms  (whole command, CSV in and out)")
    print(f"  of which compute:    {compute * 1e3:9.1f} ms  (make_configs + estimate, all rows)")
    print(f"  speed-up:            {before / after:9.1f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
