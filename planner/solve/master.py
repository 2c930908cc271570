"""The Benders master over the price binaries only: one combo per family, one theta per group.

    max  sum_g theta_g - penalty.z
    s.t. (1) sum_{m in f} z_m = 1                       for each family f
         theta_g <= alpha_g + beta_g.z                  every cut collected so far
         sum_{g in k} theta_g <= alpha_k + beta_k.z     a coarse cut per union k of groups
                                                        (``planner.solve.seambound``)
         sum_g theta_g - penalty.z <= bound_k + M_k (F - sum_f z_{f, m_k(f)})
                                                        a value cut per combo choice m_k that
                                                        has been solved with integer replicas
         z binary

Its optimum bounds the integer problem from above: every cut is valid for the hour model with
replicas relaxed, which is itself a relaxation, and a value cut only removes a choice whose
integer value is known (``bound_k``). It is a small MIP (hundreds of binaries), solved by HiGHS
through ``scipy.optimize.milp``, whose proven dual bound is what is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from planner.solve.cuts import Cuts

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class MasterResult:
    combo: IntArray | None
    """(families,): the master's best choice, None when it found none."""
    bound: float
    """Proven upper bound (inf when unknown)."""
    objective: float


@dataclass(slots=True)
class Master:
    combo_family: IntArray
    combo_penalty: FloatArray
    n_groups: int
    alphas: list[FloatArray] = field(default_factory=list)
    betas: list[sparse.csr_array] = field(default_factory=list)
    value_cuts: list[tuple[IntArray, float, float]] = field(default_factory=list)
    coarse: list[tuple[FloatArray, sparse.csr_array, sparse.csr_array]] = field(
        default_factory=list
    )
    """Coarse cuts: (alpha (k,), beta (k, combos), members (k, groups))."""

    def add(self, cuts: Cuts) -> None:
        """Add the cuts, skipping any group whose cut is already in (same point, same cut)."""
        fresh = np.ones(self.n_groups, dtype=bool)
        beta = cuts.beta.toarray()
        for alpha_old, beta_old in zip(self.alphas, self.betas, strict=True):
            same = np.isclose(alpha_old, cuts.alpha, rtol=1e-12, atol=1e-9) & np.all(
                np.isclose(beta_old.toarray(), beta, rtol=1e-12, atol=1e-9), axis=1
            )
            fresh &= ~same
        if not fresh.any():
            return
        # A group without a fresh cut repeats its first cut (harmless, keeps one row per group).
        keep_alpha = np.where(fresh, cuts.alpha, self.alphas[0] if self.alphas else cuts.alpha)
        keep_beta = np.where(fresh[:, None], beta, self.betas[0].toarray() if self.betas else beta)
        self.alphas.append(keep_alpha)
        self.betas.append(sparse.csr_array(keep_beta))

    def add_coarse(self, cuts: Cuts, members: sparse.csr_array) -> None:
        """Cuts on sums of thetas: row k bounds the sum of the groups ``members[k]`` marks."""
        self.coarse.append((cuts.alpha.copy(), sparse.csr_array(cuts.beta), members))

    def add_value_cut(self, combo: IntArray, bound: float, big_m: float) -> None:
        self.value_cuts.append((combo.copy(), bound, max(big_m, 0.0) + 1.0))

    def solve(self, time_limit_s: float, relative_gap: float) -> MasterResult:
        n_combos = self.combo_family.shape[0]
        n_fam = int(self.combo_family.max()) + 1
        g = self.n_groups
        c = np.concatenate([self.combo_penalty, -np.ones(g)])  # minimize the negative
        blocks = []
        lo, hi = [], []
        fam = sparse.csr_array(
            (np.ones(n_combos), (self.combo_family, np.arange(n_combos))), shape=(n_fam, n_combos)
        )
        blocks.append(sparse.hstack([fam, sparse.csr_array((n_fam, g))]))
        lo.append(np.ones(n_fam))
        hi.append(np.ones(n_fam))
        if self.betas:
            beta = sparse.vstack(self.betas, format="csr")
            k = beta.shape[0]
            theta = sparse.csr_array(
                (np.ones(k), (np.arange(k), np.tile(np.arange(g), len(self.betas)))), shape=(k, g)
            )
            blocks.append(sparse.hstack([-beta, theta]))
            lo.append(np.full(k, -np.inf))
            hi.append(np.concatenate(self.alphas))
        for alpha, beta_k, members in self.coarse:
            blocks.append(sparse.hstack([-beta_k, members], format="csr"))
            lo.append(np.full(alpha.shape[0], -np.inf))
            hi.append(alpha)
        for combo, bound, big_m in self.value_cuts:
            row = np.concatenate([self.combo_penalty * -1.0, np.ones(g)])
            row[combo] += big_m
            blocks.append(sparse.csr_array(row[None, :]))
            lo.append(np.array([-np.inf]))
            hi.append(np.array([bound + big_m * n_fam]))
        a = sparse.vstack(blocks, format="csr")
        args = {
            "c": c,
            "integrality": np.concatenate([np.ones(n_combos), np.zeros(g)]),
            "bounds": Bounds(
                np.concatenate([np.zeros(n_combos), np.full(g, -np.inf)]),
                np.concatenate([np.ones(n_combos), np.full(g, np.inf)]),
            ),
            "constraints": LinearConstraint(a, np.concatenate(lo), np.concatenate(hi)),
        }
        options = {
            "time_limit": max(time_limit_s, 0.05),
            "mip_rel_gap": relative_gap,
            "disp": False,
        }
        res = milp(**args, options=options)
        if res.status == 4:  # HiGHS "solve error", seen from its presolve on repeated cuts
            res = milp(**args, options={**options, "presolve": False})
        if res.x is None:
            dual = getattr(res, "mip_dual_bound", None)
            bound = -float(dual) if dual is not None and math.isfinite(dual) else math.inf
            return MasterResult(None, bound, math.nan)
        z = res.x[:n_combos]
        combo = np.zeros(n_fam, dtype=np.int64)
        for f in range(n_fam):
            ms = np.flatnonzero(self.combo_family == f)
            combo[f] = ms[np.argmax(z[ms])]
        dual = getattr(res, "mip_dual_bound", None)
        bound = -float(dual) if dual is not None and math.isfinite(dual) else -float(res.fun)
        if res.status == 0:
            bound = max(bound, -float(res.fun))
        return MasterResult(combo, bound, -float(res.fun))
