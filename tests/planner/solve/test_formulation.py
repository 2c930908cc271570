"""The hour model is the same model whichever way its rows are written down.

``planner.solve.formulation`` writes each constraint family as its own block; the arrays it stacks
into (matrix, right-hand sides, bounds, objective, row and column maps, the combo part) must be
exactly those the solver was tuned and measured on. Each case below records the model's sizes and
a digest of every array (floats to 9 significant digits), taken from the assembly in place before
the blocks were split out. A change of formulation on purpose re-records them, and says why.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from scipy import sparse

from planner.solve.model import Structure, build_structure
from tests.planner.solve.solve_cases import tiny_tables

# (seed, window, penalty, reconfiguration limit, chunk periods) ->
#     (rows, columns, non-zeros, digest of every array)
CASES: dict[tuple[int, bool, bool, float | None, int | None], tuple[int, int, int, str]] = {
    (0, False, False, None, None): (42, 26, 52, "95025baf18a9568e"),
    (0, True, True, None, None): (38, 26, 52, "c6f059641586c360"),
    (0, False, False, 0.5, None): (50, 28, 66, "2cbbb30587926303"),
    (0, True, False, 0.25, 1): (46, 28, 66, "9a1294049bd75e43"),
    (1, False, False, None, None): (30, 20, 40, "a44f1363115a0b7f"),
    (1, True, True, None, None): (27, 20, 40, "16ef94df41d13314"),
    (1, False, False, 0.5, None): (38, 22, 54, "d00eaf251fc54bf3"),
    (1, True, False, 0.25, 1): (35, 22, 54, "99aafc8cb45ce530"),
    (2, False, False, None, None): (42, 31, 62, "ca70ac393258929e"),
    (2, True, True, None, None): (34, 31, 62, "def01d45c27221a0"),
    (2, False, False, 0.5, None): (57, 37, 100, "402463b859d71404"),
    (2, True, False, 0.25, 1): (49, 37, 100, "751c14eece1bf2d5"),
    (3, False, False, None, None): (28, 19, 38, "36360c22f4ba4d2f"),
    (3, True, True, None, None): (24, 19, 38, "36c16ebb26812cc5"),
    (3, False, False, 0.5, None): (36, 22, 53, "790011e48b1a9c80"),
    (3, True, False, 0.25, 1): (32, 22, 53, "2fac1a1cc7197ecf"),
    (4, False, False, None, None): (81, 46, 92, "d0e19664e7755fbc"),
    (4, True, True, None, None): (69, 46, 92, "1f6c2f91ee1bcd60"),
    (4, False, False, 0.5, None): (99, 52, 130, "1499622bc0f6e126"),
    (4, True, False, 0.25, 1): (87, 52, 130, "e15789672a85dad3"),
    (5, False, False, None, None): (78, 45, 90, "0f443779ce39bb8e"),
    (5, True, True, None, None): (66, 45, 90, "4c40f8512a857219"),
    (5, False, False, 0.5, None): (89, 49, 118, "ce387c3276c8bbe0"),
    (5, True, False, 0.25, 1): (77, 49, 118, "a1fb3b4d9056c3a0"),
}


def _fingerprint(st: Structure) -> tuple[int, int, int, str]:
    h = hashlib.sha256()

    def add(name: str, values: object) -> None:
        if sparse.issparse(values):
            m = sparse.csr_array(values)
            m.sort_indices()
            add(name + ".indptr", m.indptr)
            add(name + ".indices", m.indices)
            add(name + ".data", m.data)
            add(name + ".shape", np.asarray(m.shape))
            return
        a = np.asarray(values)
        h.update(f"{name}{a.shape}{a.dtype.kind}".encode())
        if a.dtype.kind == "f":
            h.update(" ".join(f"{v:.9g}" for v in a.ravel().tolist()).encode())
        else:
            h.update(a.astype(np.int64).tobytes())

    for name in Structure.__slots__:
        if name != "tables":
            add(name, getattr(st, name))
    joint = st.joint(integer=True, names=True)
    for name in ("objective", "col_upper", "col_integer", "matrix", "row_lower", "row_upper"):
        add("joint." + name, getattr(joint, name))
    h.update("|".join(joint.col_names or ()).encode())
    return st.n_rows, st.n_cols, int(st.matrix.nnz), h.hexdigest()[:16]


SETTINGS = [
    (seed, window, penalty, limit, chunk)
    for seed in range(6)
    for window, penalty, limit, chunk in (
        (False, False, None, None),
        (True, True, None, None),
        (False, False, 0.5, None),
        (True, False, 0.25, 1),
    )
]


@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_the_model_is_unchanged(setting: tuple[int, bool, bool, float | None, int | None]) -> None:
    seed, window, penalty, limit, chunk = setting
    tables = tiny_tables(seed, window=window, penalty=penalty, varying_prices=seed % 2 == 1)
    st = build_structure(tables, limit, chunk_periods=chunk)
    assert _fingerprint(st) == CASES[setting]
