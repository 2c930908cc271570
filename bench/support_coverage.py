"""How much of what aiconfigurator-core supports the catalog can estimate.

    python bench/support_coverage.py [--data build/aic/whl]

Reads the package's support matrix (``systems/support_matrix/*.csv``: one row per Hugging Face
model x system x engine x serving mode it was checked on) and counts the rows it marks as
supported (PASS, HYBRID_PASS) whose model and system the catalog knows by id or alias, the
share of serving runs ``python -m fleet.perf.score`` can at least map to a configuration; then
the rows it cannot, by model or system. A known model and system can still be left unscored
for a layout the model rejects or weights that do not fit; those need the runs themselves.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from fleet.catalog import load_catalog
from fleet.errors import InputError

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "build" / "aic" / "whl"
SUPPORTED = frozenset({"PASS", "HYBRID_PASS"})


def coverage(data: Path) -> tuple[int, int, Counter[str]]:
    """(rows the catalog can map, supported rows, the unmapped ones by reason)."""
    matrix = data / "aiconfigurator_core" / "systems" / "support_matrix"
    files = sorted(matrix.glob("*.csv"))
    if not files:
        raise FileNotFoundError(f"no support matrix under {matrix} (see .ci/run)")
    catalog = load_catalog()
    known = total = 0
    missing: Counter[str] = Counter()
    for path in files:
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row.get("Status") not in SUPPORTED:
                    continue
                total += 1
                try:
                    catalog.model_named(row["HuggingFaceID"])
                    catalog.system_named(row["System"])
                except InputError as err:
                    missing[str(err).split(";")[0]] += 1
                    continue
                known += 1
    return known, total, missing


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    try:
        known, total, missing = coverage(args.data)
    except FileNotFoundError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"supported rows whose model and system the catalog knows: {known} of {total} "
          f"({known / total:.1%})")  # fmt: skip
    for reason, n in missing.most_common():
        print(f"  {n:5d}  {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
