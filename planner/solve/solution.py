"""What the solver returns: chosen combos, replicas, served demand, and how sure it is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class SolveStatus(StrEnum):
    OPTIMAL = "optimal"
    """Proven gap within the requested gap target."""
    FEASIBLE = "feasible"
    """A plan and a bound, the gap above the target (time limit reached)."""
    INFEASIBLE = "infeasible"
    NO_SOLUTION = "no_solution"
    """Time limit reached before any plan was found."""

    @property
    def has_plan(self) -> bool:
        """A plan came out (optimal or feasible): its figures may be read."""
        return self in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE)


@dataclass(frozen=True, slots=True)
class SolveOptions:
    time_limit_s: float = 60.0
    gap_target: float = 1e-3
    """Relative gap |bound - objective| / max(|bound|, 1) that makes a plan optimal."""
    repair_reserve: float = 0.0
    """Share of ``gap_target`` kept for a repair that follows the solve and may lower the
    objective (the TTFT promise at the planned load, ``planner.plan.promise``): the search stops
    at ``stop_gap``, while the status is judged at ``gap_target``."""
    method: str = "decompose"
    """"decompose" (price branching over hour LPs, then integer repair) or a MathOpt
    solver for the monolithic MILP: "highs", "scip", "cpsat"."""
    threads: int = 1
    reconfiguration_limit: float | None = None
    """Max fraction of a pool's systems that may change role between consecutive periods."""

    @property
    def stop_gap(self) -> float:
        """The gap at which the search stops: ``gap_target`` less the repair reserve."""
        return self.gap_target * (1.0 - self.repair_reserve)


@dataclass(frozen=True, slots=True)
class Progress:
    elapsed_s: float
    objective: float | None
    bound: float | None
    message: str


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True, slots=True)
class BindingConstraint:
    kind: str
    """"inventory" (pool x period), "demand" (all demand served), "price" ..."""
    key: str
    """Domain key, e.g. ``pool=b200-us-east,period=13``."""
    shadow_price_usd: float
    """Objective gain per unit relaxation, from the LP with prices fixed (0 when unknown)."""


@dataclass(frozen=True, slots=True)
class SolveResult:
    status: SolveStatus
    objective_usd: float
    """Revenue - running cost - unserved penalty of the plan, over the horizon."""
    bound_usd: float
    gap: float
    solve_s: float
    build_s: float
    combo: IntArray
    """(families,): chosen combo index (into Demand.combo_*) per family."""
    replicas: IntArray
    """(cands, periods)."""
    served_tokens_per_s: FloatArray
    """(cands, periods): output tokens/s each candidate serves."""
    unserved_tokens_per_s: FloatArray
    """(families, tiers, periods)."""
    revenue_usd: float
    cost_usd: float
    penalty_usd: float
    binding: tuple[BindingConstraint, ...]
    message: str
    """How the solve ended, in words."""
