"""``farebox estimate --from-csv``: every row of a CSV through the performance model at once.

Each row is parsed on its own (a bad cell gives that row ``problem=bad_input`` and an ``error``
naming the column); the valid rows then go through one ``make_configs`` and one ``estimate`` call,
and the result columns are formatted column by column. Columns and defaults:
``api.cli.estimate``. Other columns of the input are carried through unchanged.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from api.cli._output import write_error
from api.cli.estimate import DEFAULTS, RESULT_COLUMNS
from fleet.catalog import PRECISIONS, Catalog, UnknownIdError
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.cost import usd_per_hour_per_replica, usd_per_m_output_tokens
from fleet.perf.engines import engine_arrays
from fleet.perf.explain import describe_problem
from fleet.perf.model import estimate
from fleet.perf.types import Bound, Configs, Estimate, Problem

INT_COLUMNS = ("tp", "pp", "dp", "ep", "batch", "isl", "osl", "prefix_cached_tokens", "spec_draft")
MAX_CELL = 1_000_000_000
"""Largest whole number a cell may hold: far above any real layout, batch or sequence, and far
below where the model's byte counts would overflow int64."""


@dataclass(frozen=True, slots=True)
class Row:
    """One parsed row: ids checked against the catalog, numbers parsed, defaults filled in."""

    model: str
    system: str
    precision: str
    kv_precision: str | None
    ints: tuple[int, ...]
    """In ``INT_COLUMNS`` order."""
    spec_acceptance: float
    engine: str
    """Serving engine whose factors apply (the row's ``engine`` cell, else ``--engine``)."""


def run_csv(catalog: Catalog, path: Path, out: Path | None, *, engine: str = "any") -> int:
    """Estimate every row with its engine's factors (``fleet.perf.engines``): the row's
    ``engine`` cell, else ``engine``. Rows of one engine go through one ``estimate`` call."""
    rows, in_columns = _read(path)
    parsed = [_parse(catalog, row, engine) for row in rows]
    # Result columns over every row: bad-input rows say why, the others are filled below.
    results: dict[str, list[Any]] = {c: [""] * len(rows) for c in RESULT_COLUMNS}
    by_engine: dict[str, list[tuple[int, Row]]] = {}
    for i, r in enumerate(parsed):
        if isinstance(r, str):
            results["fits"][i], results["problem"][i], results["error"][i] = (
                "false",
                "bad_input",
                r,
            )
        else:
            by_engine.setdefault(r.engine, []).append((i, r))
    base = build_arrays(catalog) if by_engine else None
    for engine_id, members in by_engine.items():
        assert base is not None  # built above whenever there are rows to estimate
        mine = [i for i, _ in members]
        configs = _configs(catalog, [r for _, r in members])
        arrays = engine_arrays(catalog, base, engine_id)
        est = estimate(arrays, configs)
        for name, values in _result_columns(catalog, configs, est, arrays).items():
            column = results[name]
            for i, value in zip(mine, values, strict=True):
                column[i] = _cell(value)
    _write(out, in_columns, rows, results)
    return 0


def _read(path: Path) -> tuple[list[dict[str, str]], list[str]]:
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            in_columns = list(reader.fieldnames or [])
    except FileNotFoundError:
        raise InputError(f"--from-csv: {path} does not exist") from None
    except UnicodeDecodeError as err:
        raise InputError(f"--from-csv: {path}: invalid UTF-8 (offset {err.start})") from None
    except csv.Error as err:
        raise InputError(f"--from-csv: {path}: not a CSV file: {err}") from None
    except OSError as err:
        raise InputError(f"--from-csv: cannot read {path}: {err.strerror or err}") from None
    missing = [c for c in ("model", "batch") if c not in in_columns]
    if "accelerator" not in in_columns and "system" not in in_columns:
        missing.append("accelerator (or system)")
    if missing:
        raise InputError(f"--from-csv: missing column(s) {', '.join(missing)}")
    return rows, in_columns


def _parse(catalog: Catalog, row: dict[str, str], default_engine: str) -> Row | str:
    """The row's configuration, or the one-line reason it has none."""

    def text(name: str) -> str | None:
        value = (row.get(name) or "").strip()
        return value or None

    def whole(name: str) -> int:
        value = text(name)
        if value is None:
            if name == "batch":
                raise InputError("batch: required")
            return int(DEFAULTS[name])
        try:
            number = int(value)
        except ValueError:
            raise InputError(f"{name}: {value!r} is not a whole number") from None
        if abs(number) > MAX_CELL:
            raise InputError(f"{name}: {number} is out of range (at most {MAX_CELL:,})")
        return number

    try:
        model = catalog.model_named(text("model") or "").id
        system_id, accelerator = text("system"), text("accelerator")
        if system_id is not None:
            system = catalog.system_named(system_id)
        elif accelerator is not None:
            system = catalog.default_system(accelerator)
        else:
            raise InputError("accelerator: required (or system)")
        precision = text("precision") or catalog.accelerators[system.accelerator].default_precision
        kv = text("kv_precision")
        for name, value in (("precision", precision), ("kv precision", kv)):
            if value is not None and value not in PRECISIONS:
                raise UnknownIdError(name, value, list(PRECISIONS))
        ints = tuple(whole(name) for name in INT_COLUMNS)
        acceptance_text = text("spec_acceptance")
        try:
            acceptance = float(acceptance_text) if acceptance_text else DEFAULTS["spec_acceptance"]
        except ValueError:
            raise InputError(f"spec_acceptance: {acceptance_text!r} is not a number") from None
        if not math.isfinite(acceptance):
            raise InputError(f"spec_acceptance: {acceptance_text!r} is not a finite number")
        engine = text("engine") or default_engine
        if engine not in catalog.engine_ids:
            raise UnknownIdError("engine", engine, list(catalog.engine_ids))
    except InputError as err:
        return str(err)
    return Row(model, system.id, precision, kv, ints, float(acceptance), engine)


def _configs(catalog: Catalog, rows: list[Row]) -> Configs:
    """One ``Configs`` for all rows; a row's own kv precision overrides the default."""
    ints = np.array([r.ints for r in rows], dtype=np.int64).reshape(len(rows), len(INT_COLUMNS))
    col = dict(zip(INT_COLUMNS, ints.T, strict=True))
    configs = make_configs(
        catalog,
        model=np.array([r.model for r in rows]),
        system=np.array([r.system for r in rows]),
        precision=np.array([r.precision for r in rows]),
        tp=col["tp"],
        pp=col["pp"],
        dp=col["dp"],
        ep=col["ep"],
        batch=col["batch"],
        isl=col["isl"],
        osl=col["osl"],
        prefix_cached_tokens=col["prefix_cached_tokens"],
        spec_draft_tokens=col["spec_draft"],
        spec_acceptance=np.array([r.spec_acceptance for r in rows]),
    )
    given = [i for i, r in enumerate(rows) if r.kv_precision is not None]
    if given:
        kv = configs.kv_precision.copy()
        kv[given] = [PRECISIONS.index(rows[i].kv_precision) for i in given]
        configs = dataclasses.replace(configs, kv_precision=kv)
    return configs


def _result_columns(
    catalog: Catalog, configs: Configs, est: Estimate, arrays: CatalogArrays
) -> dict[str, list[Any]]:
    """The result columns of every row, in the units of ``api.cli.estimate.result_row``."""
    problem = est.problem.astype(np.int64)
    valid = (problem == Problem.OK) | (problem == Problem.DOES_NOT_FIT)

    def num(x: np.ndarray, scale: float = 1.0, digits: int = 3) -> list[float | None]:
        keep = (valid & np.isfinite(x)).tolist()
        return [
            round(v * scale, digits) if k else None for v, k in zip(x.tolist(), keep, strict=True)
        ]

    def whole(x: np.ndarray) -> list[int]:
        return x.astype(np.int64).tolist()

    names = {int(p): p.name.lower() for p in Problem}
    bounds = {int(b): b.name.lower() for b in Bound}
    columns: dict[str, list[Any]] = {
        "fits": est.fits.astype(bool).tolist(),
        "problem": [names[p] for p in problem.tolist()],
        "tpot_ms": num(est.tpot_s, 1e3),
        "tpot_burst_ms": num(est.tpot_burst_s, 1e3),
        "ttft_ms": num(est.ttft_floor_s, 1e3),
        "ttft_burst_ms": num(est.ttft_burst_s, 1e3),
        "tokens_per_s_per_user": num(est.tokens_per_s_per_user, digits=1),
        "tokens_per_s_per_device": num(est.tokens_per_s_per_device, digits=1),
        "tokens_per_s_per_replica": num(est.tokens_per_s_per_replica, digits=1),
        "usd_per_hour_per_replica": num(usd_per_hour_per_replica(arrays, configs, est), digits=4),
        "usd_per_m_output_tokens": num(usd_per_m_output_tokens(arrays, configs, est), digits=4),
        "bound": [
            bounds[b] if v else None
            for b, v in zip(est.bound.astype(np.int64).tolist(), valid.tolist(), strict=True)
        ],
        "devices_per_replica": whole(est.devices_per_replica),
        "systems_per_replica": whole(est.systems_per_replica),
        "max_batch": whole(est.max_batch),
        "weight_gb_per_device": num(est.weight_bytes_per_device, 1e-9),
        "kv_gb_per_device": num(est.kv_bytes_per_device, 1e-9),
        "workspace_gb_per_device": num(est.workspace_bytes_per_device, 1e-9),
        "memory_gb_per_device": num(est.memory_bytes_per_device, 1e-9),
        "usable_gb_per_device": [
            round(v * 1e-9, 3) for v in est.usable_bytes_per_device.astype(float).tolist()
        ],
    }
    # Only rows with a problem have a sentence; OK rows get "".
    errors = [""] * len(problem)
    for i in np.flatnonzero(problem != Problem.OK).tolist():
        errors[i] = describe_problem(catalog, configs, est, i) or ""
    columns["error"] = errors
    return columns


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _write(
    out: Path | None,
    in_columns: list[str],
    rows: list[dict[str, str]],
    results: dict[str, list[Any]],
) -> None:
    """The input columns, then the result columns the input does not already have."""
    extra = [c for c in RESULT_COLUMNS if c not in in_columns]
    own = [results.get(c) for c in in_columns]

    def emit(fh: Any) -> None:
        writer = csv.writer(fh)
        writer.writerow(in_columns + extra)
        added = [results[c] for c in extra]
        writer.writerows(
            [
                *(
                    row.get(c, "") if mine is None else mine[i]
                    for c, mine in zip(in_columns, own, strict=True)
                ),
                *(column[i] for column in added),
            ]
            for i, row in enumerate(rows)
        )

    if out is None:
        emit(sys.stdout)
        return
    try:
        with out.open("w", newline="") as fh:
            emit(fh)
    except OSError as err:
        raise write_error("--out", out, err) from None
