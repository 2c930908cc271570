"""Benchmark: evaluate 1,000,000 random configurations of the performance model on one core.

    python bench/bench_perf.py [--rows 1000000] [--repeat 3]

Rows mix every catalog model and system, layouts (valid and not), precisions, batch sizes,
sequence lengths, cached prefixes and speculative options; the ids are resolved once
(``make_configs``), then ``estimate`` runs. Prints the best wall time of ``--repeat`` runs and
rows per second. Target: <= 2 s for 1,000,000 rows (the planner evaluates grids of this size per
scenario).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fleet.catalog import PRECISIONS, load_catalog
from fleet.perf.arrays import build_arrays
from fleet.perf.model import estimate
from fleet.perf.types import Configs, Problem


def random_configs(n: int, n_models: int, n_systems: int, seed: int = 0) -> Configs:
    rng = np.random.default_rng(seed)
    pow2 = np.array([1, 2, 4, 8])
    k = rng.choice([0, 0, 0, 2, 3, 4], n)
    isl = rng.choice(np.array([128, 1024, 4096, 32768]), n)
    return Configs(
        model=rng.integers(0, n_models, n),
        system=rng.integers(0, n_systems, n),
        tp=rng.choice(pow2, n),
        pp=rng.choice(np.array([1, 1, 2, 4]), n),
        dp=rng.choice(np.array([1, 1, 2, 8]), n),
        ep=rng.choice(np.array([1, 1, 8]), n),
        weight_precision=rng.integers(0, len(PRECISIONS), n),
        kv_precision=rng.choice(np.array([0, 1]), n),
        batch=rng.choice(2 ** np.arange(11), n),
        isl=isl,
        prefix_cached_tokens=(isl * rng.choice(np.array([0.0, 0.0, 0.5, 0.9]), n)).astype(np.int64),
        osl=rng.choice(np.array([64, 256, 1024, 4096]), n),
        spec_draft_tokens=k,
        spec_acceptance=np.where(k > 0, rng.uniform(0.5, 0.9, n), 0.0),
        lengths_vary=np.zeros(n, dtype=bool),
        recv_interval=np.ones(n, dtype=np.int64),
        ctx_hold_requests=np.zeros(n),
        ctx_hold_iters=np.zeros(n, dtype=np.int64),
        ctx_hold_periodic=np.zeros(n, dtype=bool),
        moe_held_expert_time=np.ones(n, dtype=bool),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--bound-s",
        type=float,
        default=2.0,
        help="fail (exit 1) above this many seconds per 1,000,000 rows; CI passes a loose bound",
    )
    args = parser.parse_args()
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    configs = random_configs(args.rows, len(catalog.models), len(catalog.systems))
    best = float("inf")
    for _ in range(args.repeat):
        start = time.perf_counter()
        est = estimate(arrays, configs)
        best = min(best, time.perf_counter() - start)
    counts = {p.name: int(np.sum(est.problem == p)) for p in Problem}
    print(
        f"estimate: {args.rows:,} configurations in {best:.3f} s (best of {args.repeat}), "
        f"{args.rows / best:,.0f} rows/s"
    )
    print(f"problems: {counts}")
    return 0 if best <= args.bound_s * args.rows / 1_000_000 else 1


if __name__ == "__main__":
    raise SystemExit(main())
