"""Build time (scenario -> PlanningTables, ``planner.build.pipeline.build``) of the shipped
scenarios. Prints the best of ``--repeat`` wall-clock times per scenario; run from the repo root:

    python bench/bench_build.py [--repeat N] [scenario.toml ...]

Defaults to scenarios/frontier-lab-week.toml (the week-scale one, where pruning dominates) and
scenarios/two-tricks.toml. The catalog arrays are built once, outside the timing.
"""

from __future__ import annotations

import argparse
import time

from fleet.catalog.load import load_catalog
from fleet.perf import build_arrays
from planner.build.pipeline import Built, build
from planner.scenario.decode import load_scenario

DEFAULT = ("scenarios/frontier-lab-week.toml", "scenarios/two-tricks.toml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenarios", nargs="*", default=list(DEFAULT))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    for path in args.scenarios:
        s = load_scenario(path)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            built = build(s, catalog, arrays)
            times.append(time.perf_counter() - t0)
        cands = built.tables.candidates.pool.shape[0] if isinstance(built, Built) else 0
        print(
            f"{path}: build {min(times):.3f}s best of {args.repeat} "
            f"(all: {', '.join(f'{t:.3f}' for t in times)}), candidates {cands}"
        )


if __name__ == "__main__":
    main()
