"""A linear (or mixed-integer) program as arrays, and its solve through a MathOpt model proto.

The solver modules assemble every model they solve as ``LinearProgram``: ``max c.v`` subject to
``row_lower <= A v <= row_upper`` and ``0 <= v <= col_upper``, some columns integer. The arrays go
straight into a MathOpt ``ModelProto`` (no per-variable Python objects: on a week-scale model of
~120k columns and 18k rows, OR-Tools 9.15's high-level MathOpt API took 5.2 s to build what the
arrays write in 0.16 s) and the proto result comes back as arrays.

Dual values are returned in the convention of the maximization: ``y >= 0`` on a binding ``<=`` row
(``y`` = objective gain per unit of right-hand side), ``y <= 0`` on a binding ``>=`` row.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt
from ortools.math_opt import (
    callback_pb2,
    model_parameters_pb2,
    model_pb2,
    parameters_pb2,
    result_pb2,
)
from ortools.math_opt.core.python import solver as mathopt_core
from ortools.math_opt.python import init_arguments
from ortools.util.python.pybind_solve_interrupter import PySolveInterrupter
from pybind11_abseil.status import StatusNotOk
from scipy import sparse

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


class Engine(Enum):
    GLOP = parameters_pb2.SOLVER_TYPE_GLOP
    HIGHS = parameters_pb2.SOLVER_TYPE_HIGHS
    SCIP = parameters_pb2.SOLVER_TYPE_GSCIP
    CPSAT = parameters_pb2.SOLVER_TYPE_CP_SAT
    PDLP = parameters_pb2.SOLVER_TYPE_PDLP
    """First-order LP method: approximate primal and dual values, fast on large LPs. Its row
    prices are used only through weak duality (``planner.solve.cuts``), valid however
    approximate."""


@dataclass(frozen=True, slots=True)
class LinearProgram:
    objective: FloatArray
    """(cols,): maximized."""
    col_upper: FloatArray
    """(cols,): every column is >= 0 and <= this."""
    col_integer: BoolArray
    matrix: sparse.csr_array
    """(rows, cols)."""
    row_lower: FloatArray
    row_upper: FloatArray
    objective_offset: float = 0.0
    col_names: tuple[str, ...] | None = None
    row_names: tuple[str, ...] | None = None

    def restrict(self, rows: IntArray, cols: IntArray) -> LinearProgram:
        """The sub-program of ``rows`` x ``cols`` (no offset, no names): one independent block,
        such as a period group once prices are fixed."""
        return LinearProgram(
            objective=self.objective[cols],
            col_upper=self.col_upper[cols],
            col_integer=self.col_integer[cols],
            matrix=self.matrix[rows][:, cols],
            row_lower=self.row_lower[rows],
            row_upper=self.row_upper[rows],
        )


class Outcome(Enum):
    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    """A solution, not proven optimal (limit reached)."""
    NO_SOLUTION = "no_solution"
    INFEASIBLE = "infeasible"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class LinearResult:
    outcome: Outcome
    objective: float
    """Objective of the returned solution (nan without one)."""
    bound: float
    """Proven upper bound on the optimum (inf when unknown)."""
    values: FloatArray | None
    duals: FloatArray | None
    """(rows,), maximization convention; None for MIPs or when not available."""
    detail: str
    solve_s: float


def to_proto(lp: LinearProgram) -> model_pb2.ModelProto:
    n_cols = lp.objective.shape[0]
    n_rows = lp.row_upper.shape[0]
    proto = model_pb2.ModelProto()
    var = proto.variables
    var.ids.extend(range(n_cols))
    var.lower_bounds.extend(np.zeros(n_cols).tolist())
    var.upper_bounds.extend(lp.col_upper.tolist())
    var.integers.extend(lp.col_integer.tolist())
    if lp.col_names is not None:
        var.names.extend(lp.col_names)
    proto.objective.maximize = True
    proto.objective.offset = lp.objective_offset
    nz = np.flatnonzero(lp.objective)
    proto.objective.linear_coefficients.ids.extend(nz.tolist())
    proto.objective.linear_coefficients.values.extend(lp.objective[nz].tolist())
    rows = proto.linear_constraints
    rows.ids.extend(range(n_rows))
    rows.lower_bounds.extend(lp.row_lower.tolist())
    rows.upper_bounds.extend(lp.row_upper.tolist())
    if lp.row_names is not None:
        rows.names.extend(lp.row_names)
    coo = sparse.coo_array(lp.matrix)
    coo.sum_duplicates()  # also sorts by (row, col), as the proto requires
    keep = coo.data != 0.0
    mat = proto.linear_constraint_matrix
    mat.row_ids.extend(coo.row[keep].tolist())
    mat.column_ids.extend(coo.col[keep].tolist())
    mat.coefficients.extend(coo.data[keep].tolist())
    return proto


def solve_program(
    lp: LinearProgram,
    engine: Engine,
    time_limit_s: float,
    *,
    relative_gap: float = 1e-4,
    threads: int = 1,
    pdlp_tolerance: float = 1e-4,
    interrupter: PySolveInterrupter | None = None,
) -> LinearResult:
    """Solve ``lp`` and read the proto result into arrays; termination is checked first.
    ``pdlp_tolerance``: PDLP's relative and absolute optimality tolerance (PDLP only);
    ``interrupter``: another thread may stop the solve through it."""
    proto = to_proto(lp)
    params = parameters_pb2.SolveParametersProto()
    params.time_limit.FromTimedelta(_seconds(time_limit_s))
    is_mip = bool(lp.col_integer.any())
    if is_mip:
        params.relative_gap_tolerance = relative_gap
        params.absolute_gap_tolerance = 0.0
    if engine is Engine.HIGHS:
        # MathOpt rejects the common `threads` parameter for HiGHS; set it through the options.
        params.highs.int_options["threads"] = max(1, threads)
    elif engine is Engine.CPSAT:
        params.threads = max(1, threads)
    elif engine is Engine.PDLP:
        criteria = params.pdlp.termination_criteria.simple_optimality_criteria
        criteria.eps_optimal_relative = pdlp_tolerance
        criteria.eps_optimal_absolute = pdlp_tolerance
    # GLOP is sequential; SCIP through MathOpt fails with threads > 1 ("GScipOutput UNKNOWN").
    try:
        result = _solve(proto, engine, params, interrupter)
    except StatusNotOk as err:  # a solver failure is an outcome, not a crash of the plan
        return LinearResult(Outcome.ERROR, math.nan, math.inf, None, None, str(err), 0.0)
    out = _read(result, lp, is_mip)
    if engine is Engine.PDLP:  # its objective is approximate: no proven bound from it
        out = dataclasses.replace(out, bound=math.inf)
    return out


def _solve(
    proto: model_pb2.ModelProto,
    engine: Engine,
    params: parameters_pb2.SolveParametersProto,
    interrupter: PySolveInterrupter | None = None,
) -> result_pb2.SolveResultProto:
    return mathopt_core.solve(
        proto,
        engine.value,
        init_arguments.StreamableSolverInitArguments().to_proto(),
        params,
        model_parameters_pb2.ModelSolveParametersProto(),
        None,
        callback_pb2.CallbackRegistrationProto(),
        None,
        interrupter,
    )


def _seconds(value: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=max(0.01, value))


def _read(res: result_pb2.SolveResultProto, lp: LinearProgram, is_mip: bool) -> LinearResult:
    reason = res.termination.reason
    detail = res.termination.detail
    solve_s = res.solve_stats.solve_time.ToTimedelta().total_seconds()
    bound = res.termination.objective_bounds.dual_bound
    bound = math.inf if not math.isfinite(bound) else float(bound)
    if reason == result_pb2.TERMINATION_REASON_INFEASIBLE:
        return LinearResult(Outcome.INFEASIBLE, math.nan, -math.inf, None, None, detail, solve_s)
    values = None
    duals = None
    objective = math.nan
    for sol in res.solutions:
        primal = sol.primal_solution
        if sol.HasField("primal_solution") and (
            primal.feasibility_status == result_pb2.FEASIBILITY_STATUS_FEASIBLE
        ):
            values = np.zeros(lp.objective.shape[0])
            vv = primal.variable_values
            values[np.asarray(vv.ids, dtype=np.int64)] = np.asarray(vv.values)
            objective = float(primal.objective_value)
            if not is_mip and sol.HasField("dual_solution"):
                duals = _dual_values(sol, lp)
            break
    if duals is None and not is_mip:
        # An iterative method stopped early (PDLP on its time limit) may still return row
        # prices: keep them, they bound the LP through weak duality whatever their accuracy.
        with_duals = [sol for sol in res.solutions if sol.HasField("dual_solution")]
        if with_duals:
            duals = _dual_values(with_duals[0], lp)
    if reason == result_pb2.TERMINATION_REASON_OPTIMAL and values is not None:
        outcome = Outcome.OPTIMAL
        if not is_mip:
            bound = objective
    elif values is not None:
        outcome = Outcome.FEASIBLE
    elif reason in (
        result_pb2.TERMINATION_REASON_NO_SOLUTION_FOUND,
        result_pb2.TERMINATION_REASON_FEASIBLE,
    ):
        outcome = Outcome.NO_SOLUTION
    else:
        outcome = Outcome.ERROR
    return LinearResult(outcome, objective, bound, values, duals, detail, solve_s)


def _dual_values(sol: result_pb2.SolutionProto, lp: LinearProgram) -> FloatArray:
    dv = sol.dual_solution.dual_values
    duals = np.zeros(lp.row_upper.shape[0])
    duals[np.asarray(dv.ids, dtype=np.int64)] = np.asarray(dv.values)
    return duals
