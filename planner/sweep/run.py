"""Run a sweep: plan every grid point, then evaluate each plan against sampled demand.

Two phases, each a batch of tasks on a ``planner.sweep.backends`` backend:

1. points: ``planner.sweep.point.solve_point`` per grid point, each within the scenario's time
   limit (or ``time_limit_s``);
2. samples (``samples`` > 0): per point with a plan, its samples in chunks of ``CHUNK_SAMPLES``
   (``planner.sweep.montecarlo.run_samples``).

Results are put back in point and sample order, so the numbers are the same whatever ran where.
The work is bounded before it starts (``SweepLimits``): points, points x samples, and each phase
has a deadline from the per-point time limit, so a sweep cannot run for ever.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import msgspec
import numpy as np

from fleet.errors import InputError
from planner.scenario.schema import MAX_TIME_LIMIT_S, Scenario
from planner.sweep.backends import Backend
from planner.sweep.grid import Point, Spec, expand
from planner.sweep.montecarlo import (
    MAX_DEMAND_CV,
    SCOPES,
    FixedPlan,
    SampleOutcome,
    Scope,
    outcome,
    percentiles,
    run_samples,
)
from planner.sweep.point import TIMEOUT, PointSummary, empty_summary, solve_point

CHUNK_SAMPLES = 250
GRACE_S = 60.0
"""Time a point may take beyond its solver time limit: building the tables and assembling."""

Progress = Callable[[str, int, int], None]
"""(phase, done, total): phase is "points" or "samples"."""


@dataclass(frozen=True, slots=True)
class SweepLimits:
    max_points: int = 256
    """Grid points (each one full plan)."""
    max_evaluations: int = 1_000_000
    """Grid points x samples (each a fixed-plan evaluation, milliseconds)."""
    max_samples: int = 100_000


@dataclass(frozen=True, slots=True)
class MonteCarlo:
    samples: int = 0
    demand_cv: float = 0.2
    scope: Scope = "family"
    seed: int = 0


@dataclass(frozen=True, slots=True)
class PointOutcome:
    point: Point
    summary: PointSummary
    samples: np.ndarray | None
    """(samples, 3): margin USD, SLO-miss hours, unserved fraction per sample; None when the
    point has no plan or no samples were asked."""
    forecast: SampleOutcome | None = None
    """The same figures at the forecast demand (multiplier 1), when samples were asked."""

    def percentiles(self, column: int) -> tuple[float, ...] | None:
        return None if self.samples is None else percentiles(self.samples[:, column])


@dataclass(frozen=True, slots=True)
class SweepResult:
    scenario: str
    specs: tuple[Spec, ...]
    monte_carlo: MonteCarlo
    outcomes: tuple[PointOutcome, ...]
    backend: str
    wall_s: float


def check_monte_carlo(mc: MonteCarlo, points: int, limits: SweepLimits) -> None:
    """InputError naming the option when a Monte Carlo setting is out of bounds."""
    if not 0 <= mc.samples <= limits.max_samples:
        raise InputError(f"--samples: must be >= 0 and <= {limits.max_samples:,}")
    if not 0 < mc.demand_cv <= MAX_DEMAND_CV:
        raise InputError(f"--demand-cv: must be > 0 and <= {MAX_DEMAND_CV:g}")
    if mc.scope not in SCOPES:
        raise InputError(f"--demand-error: one of {', '.join(SCOPES)}, not {mc.scope!r}")
    if not 0 <= mc.seed < 2**63:
        raise InputError("--seed: must be >= 0 and < 2**63")
    evaluations = points * mc.samples
    if evaluations > limits.max_evaluations:
        raise InputError(
            f"--samples: {points:,} grid points x {mc.samples:,} samples = {evaluations:,} "
            f"evaluations, over the limit of {limits.max_evaluations:,}; sweep fewer points or "
            "draw fewer samples"
        )


def prepare(
    scenario: Scenario,
    specs: tuple[Spec, ...],
    mc: MonteCarlo,
    limits: SweepLimits,
    time_limit_s: float | None = None,
) -> tuple[Point, ...]:
    """Count, expand and check the whole sweep before anything runs."""
    if time_limit_s is not None and not 0 < time_limit_s <= MAX_TIME_LIMIT_S:
        raise InputError(f"--time-limit: must be > 0 and <= {MAX_TIME_LIMIT_S:g}")
    points = expand(scenario, specs, max_points=limits.max_points)
    check_monte_carlo(mc, len(points), limits)
    return points


def point_time_limit_s(point: Point, time_limit_s: float | None) -> float:
    return point.scenario.options.time_limit_s if time_limit_s is None else time_limit_s


def run_sweep(
    scenario: Scenario,
    points: tuple[Point, ...],
    specs: tuple[Spec, ...],
    mc: MonteCarlo,
    backend: Backend,
    *,
    time_limit_s: float | None = None,
    progress: Progress | None = None,
) -> SweepResult:
    """Run ``points`` (from ``prepare``) on ``backend``; see the module doc."""
    start = time.monotonic()
    want = mc.samples > 0
    args = [
        (
            p.index,
            msgspec.json.encode(p.scenario),
            point_time_limit_s(p, time_limit_s),
            GRACE_S,
            want,
        )
        for p in points
    ]
    longest = max((a[2] for a in args), default=0.0) + GRACE_S
    waves = math.ceil(len(points) / backend.workers)
    deadline = time.monotonic() + waves * longest + GRACE_S
    summaries: dict[int, PointSummary] = {}
    fixed: dict[int, FixedPlan] = {}
    for done, (i, result) in enumerate(backend.run(solve_point, args, deadline), start=1):
        if result is None:
            summaries[i] = _timed_out(i, longest)
        else:
            summaries[i], plan = result
            if plan is not None:
                fixed[i] = plan
        if progress is not None:
            progress("points", done, len(points))
    samples = _run_samples(fixed, mc, backend, progress) if want else {}
    ones = {
        i: np.ones((plan.families, plan.demand_tokens_per_s.shape[1])) for i, plan in fixed.items()
    }
    outcomes = tuple(
        PointOutcome(
            p,
            summaries[p.index],
            samples.get(p.index),
            outcome(fixed[p.index], ones[p.index]) if p.index in fixed else None,
        )
        for p in points
    )
    return SweepResult(
        scenario=scenario.meta.name,
        specs=specs,
        monte_carlo=mc,
        outcomes=outcomes,
        backend=backend.name,
        wall_s=time.monotonic() - start,
    )


def _timed_out(index: int, limit_s: float) -> PointSummary:
    message = f"not finished by the sweep's deadline ({limit_s:g}s per point)"
    return empty_summary(index, TIMEOUT, message, 0.0)


def _run_samples(
    fixed: dict[int, FixedPlan], mc: MonteCarlo, backend: Backend, progress: Progress | None
) -> dict[int, np.ndarray]:
    tasks: list[tuple[int, int, int]] = []
    for index in sorted(fixed):
        for lo in range(0, mc.samples, CHUNK_SAMPLES):
            tasks.append((index, lo, min(lo + CHUNK_SAMPLES, mc.samples)))
    args = [(fixed[index], lo, hi, mc.seed, mc.demand_cv, mc.scope) for index, lo, hi in tasks]
    # A chunk evaluates a fixed plan CHUNK_SAMPLES times: milliseconds each on the largest
    # scenarios; the deadline allows a second per sample per wave, far beyond that.
    waves = math.ceil(len(tasks) / backend.workers) if tasks else 0
    deadline = time.monotonic() + waves * CHUNK_SAMPLES * 1.0 + GRACE_S
    parts: dict[int, dict[int, np.ndarray]] = {index: {} for index in fixed}
    total = len(fixed) * mc.samples
    done = 0
    for t, rows in backend.run(_sample_task, args, deadline):
        index, lo, hi = tasks[t]
        if rows is None:
            raise InputError(
                f"--samples: the Monte Carlo of point {index} did not finish in time; draw "
                "fewer samples"
            )
        parts[index][lo] = rows
        done += hi - lo
        if progress is not None:
            progress("samples", done, total)
    return {
        index: np.concatenate([chunks[lo] for lo in sorted(chunks)])
        for index, chunks in parts.items()
        if chunks
    }


def _sample_task(
    plan: FixedPlan, lo: int, hi: int, seed: int, demand_cv: float, scope: Scope
) -> np.ndarray:
    return run_samples(plan, lo, hi, seed=seed, demand_cv=demand_cv, scope=scope)
