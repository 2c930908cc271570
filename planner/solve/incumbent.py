"""The best plan found so far and the proven bound, with the progress reports they trigger."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from planner.solve.evaluate import PlanValue, evaluate
from planner.solve.repair import reconfiguration_ok
from planner.solve.solution import Progress, ProgressCallback
from planner.solve.tables import SECONDS_PER_HOUR, PlanningTables

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


ABS_TOLERANCE_USD = 1e-5


def relative_gap(bound: float, objective: float) -> float:
    if not math.isfinite(bound) or not math.isfinite(objective):
        return math.inf
    return max(bound - objective, 0.0) / max(abs(bound), 1.0)


def trivial_bound(tables: PlanningTables) -> float:
    """Every demanded token served at the best price of its offer, at no cost: a valid bound."""
    d = tables.demand
    unit = SECONDS_PER_HOUR * tables.period_hours
    best_price = np.where(
        d.combo_offer >= 0,
        d.offers.usd_per_output_token.max(axis=1)[np.maximum(d.combo_offer, 0)],
        0.0,
    )  # (combos, tiers)
    per_combo = (np.maximum(best_price, 0.0) * d.tokens_per_s.sum(axis=2)).sum(axis=1) * unit
    out = 0.0
    for f in range(len(d.family_ids)):
        ms = np.flatnonzero(d.combo_family == f)
        out += float(per_combo[ms].max()) if ms.size else 0.0
    return out


@dataclass(slots=True)
class Incumbent:
    tables: PlanningTables
    start_s: float
    progress: ProgressCallback | None
    reconfiguration_limit: float | None = None
    combo: IntArray | None = None
    replicas: IntArray | None = None
    value: PlanValue | None = None
    duals: FloatArray | None = None
    """Row prices of the hour LP at ``combo`` (for shadow prices), when known."""
    bound: float = math.inf
    log: list[str] = field(default_factory=list)

    @property
    def objective(self) -> float:
        return self.value.objective_usd if self.value is not None else -math.inf

    @property
    def gap(self) -> float:
        return relative_gap(self.bound, self.objective)

    def proven(self, gap_target: float) -> bool:
        """Gap within target, or bound and plan within a micro-dollar (MIP solvers' absolute
        tolerance; matters only for toy instances)."""
        return self.gap <= gap_target or self.bound - self.objective <= ABS_TOLERANCE_USD

    def offer(
        self, combo: IntArray, replicas: IntArray, duals: FloatArray | None, source: str
    ) -> bool:
        if not reconfiguration_ok(self.tables, replicas, self.reconfiguration_limit):
            return False
        value = evaluate(self.tables, combo, replicas)
        if self.value is None or value.objective_usd > self.objective + 1e-9 * max(
            1.0, abs(self.objective)
        ):
            same_prices = self.combo is not None and np.array_equal(combo, self.combo)
            if duals is not None or not same_prices:
                self.duals = duals  # keep the LP prices of these combos when none come along
            self.combo, self.replicas, self.value = combo.copy(), replicas.copy(), value
            self.bound = max(self.bound, value.objective_usd)
            self.report(f"new plan from {source}")
            return True
        if duals is not None and self.combo is not None and np.array_equal(combo, self.combo):
            self.duals = duals
        return False

    def tighten(self, bound: float, source: str) -> None:
        if not math.isfinite(self.bound) or bound < self.bound - 1e-9 * max(1.0, abs(self.bound)):
            self.bound = max(bound, self.objective)
            self.report(f"bound from {source}")

    def report(self, message: str) -> None:
        elapsed = time.perf_counter() - self.start_s
        self.log.append(
            f"{elapsed:.2f}s {message}: objective {self.objective:.6g}, "
            f"bound {self.bound:.6g}, gap {self.gap:.3%}"
        )
        if self.progress is not None:
            self.progress(
                Progress(
                    elapsed_s=elapsed,
                    objective=self.objective if self.value is not None else None,
                    bound=self.bound if math.isfinite(self.bound) else None,
                    message=message,
                )
            )
