"""``farebox estimate``: the performance model for one configuration, or for a CSV of many.

One:   farebox estimate --model llama-3.1-70b --accelerator h100-sxm --tp 4 --batch 32
                        --isl 2048 --osl 512 [--precision fp8]
                        [--spec-draft 3 --spec-acceptance 0.7]
                        [--json]
Many:  farebox estimate --from-csv configs.csv [--out results.csv]
       columns model,accelerator,precision,tp,pp,dp,ep,batch,isl,osl (optional: system,
       kv_precision, spec_draft, spec_acceptance); other columns are carried through. A bad row
       gets fits=false and an ``error`` column instead of aborting the file.

For one configuration, unknown ids, impossible layouts and a model that does not fit are one-line
errors (exit 2).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from fleet.catalog import Catalog, load_catalog
from fleet.errors import InputError
from fleet.perf.arrays import build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.explain import describe_problem
from fleet.perf.model import estimate
from fleet.perf.types import Bound, Configs, Estimate, Problem

RESULT_COLUMNS = (
    "fits",
    "problem",
    "error",
    "tpot_ms",
    "ttft_ms",
    "ttft_burst_ms",
    "tokens_per_s_per_user",
    "tokens_per_s_per_device",
    "tokens_per_s_per_replica",
    "bound",
    "devices_per_replica",
    "systems_per_replica",
    "max_batch",
    "weight_gb_per_device",
    "kv_gb_per_device",
    "workspace_gb_per_device",
    "memory_gb_per_device",
    "usable_gb_per_device",
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("estimate", help="performance model for one or many configurations")
    p.add_argument("--model")
    p.add_argument("--accelerator")
    p.add_argument("--system", help="system id (default: the accelerator's default system)")
    p.add_argument(
        "--precision", default="fp8", help="weight precision (bf16, fp8, fp4, int8, int4)"
    )
    p.add_argument("--kv-precision", help="KV-cache precision (default: fp8 with 8/4-bit weights)")
    for name in ("tp", "pp", "dp", "ep"):
        p.add_argument(f"--{name}", type=int, default=1)
    p.add_argument("--batch", type=int, help="concurrent requests of the replica")
    p.add_argument("--isl", type=int, default=1024, help="input tokens per request")
    p.add_argument("--osl", type=int, default=256, help="output tokens per request")
    p.add_argument("--spec-draft", type=int, default=0, help="speculative draft length k")
    p.add_argument("--spec-acceptance", type=float, default=0.0, help="per-token acceptance a")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--from-csv", type=Path, help="estimate every row of this CSV")
    p.add_argument("--out", type=Path, help="with --from-csv: write results here (default stdout)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    catalog = load_catalog()
    if args.from_csv is not None:
        return _run_csv(catalog, args.from_csv, args.out)
    for field in ("model", "batch"):
        if getattr(args, field) is None:
            raise InputError(f"--{field} is required (or give --from-csv)")
    if (args.accelerator is None) == (args.system is None):
        raise InputError("give --accelerator or --system")
    configs = make_configs(
        catalog,
        model=args.model,
        accelerator=None if args.system else args.accelerator,
        system=args.system,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        ep=args.ep,
        precision=args.precision,
        kv_precision=args.kv_precision,
        batch=args.batch,
        isl=args.isl,
        osl=args.osl,
        spec_draft_tokens=args.spec_draft,
        spec_acceptance=args.spec_acceptance,
    )
    est = estimate(build_arrays(catalog), configs)
    message = describe_problem(catalog, configs, est, 0)
    if message is not None:
        raise InputError(message)
    row = result_row(configs, est, 0)
    if args.json:
        print(json.dumps(row, indent=2))
    else:
        print(_table(catalog, configs, row))
    return 0


def result_row(configs: Configs, est: Estimate, i: int) -> dict[str, Any]:
    """Row ``i`` in the faces' units (ms, GB, tokens/s)."""
    problem = Problem(int(est.problem[i]))
    valid = problem in (Problem.OK, Problem.DOES_NOT_FIT)

    def num(x: float, scale: float = 1.0, digits: int = 3) -> float | None:
        return round(float(x) * scale, digits) if valid and np.isfinite(x) else None

    return {
        "fits": bool(est.fits[i]),
        "problem": problem.name.lower(),
        "tpot_ms": num(est.tpot_s[i], 1e3),
        "ttft_ms": num(est.ttft_floor_s[i], 1e3),
        "ttft_burst_ms": num(est.ttft_burst_s[i], 1e3),
        "tokens_per_s_per_user": num(est.tokens_per_s_per_user[i], digits=1),
        "tokens_per_s_per_device": num(est.tokens_per_s_per_device[i], digits=1),
        "tokens_per_s_per_replica": num(est.tokens_per_s_per_replica[i], digits=1),
        "bound": Bound(int(est.bound[i])).name.lower() if valid else None,
        "devices_per_replica": int(est.devices_per_replica[i]),
        "systems_per_replica": int(est.systems_per_replica[i]),
        "max_batch": int(est.max_batch[i]),
        "tokens_per_step": round(float(est.tokens_per_step[i]), 3),
        "step_ms": num(est.step_s[i], 1e3),
        "step_compute_ms": num(est.step_compute_s[i], 1e3),
        "step_memory_ms": num(est.step_memory_s[i], 1e3),
        "step_comm_ms": num(est.step_comm_s[i], 1e3),
        "step_overhead_ms": num(est.step_overhead_s[i], 1e3),
        "prefill_ms": num(est.prefill_s[i], 1e3),
        "request_s": num(est.request_s[i]),
        "memory": {
            "weight_gb_per_device": num(est.weight_bytes_per_device[i], 1e-9),
            "kv_gb_per_device": num(est.kv_bytes_per_device[i], 1e-9),
            "workspace_gb_per_device": num(est.workspace_bytes_per_device[i], 1e-9),
            "memory_gb_per_device": num(est.memory_bytes_per_device[i], 1e-9),
            "usable_gb_per_device": round(float(est.usable_bytes_per_device[i]) * 1e-9, 3),
        },
    }


def _table(catalog: Catalog, configs: Configs, row: dict[str, Any]) -> str:
    from fleet.perf.explain import layout_label

    model = list(catalog.models)[configs.model[0]]
    system = list(catalog.systems)[configs.system[0]]
    mem = row["memory"]
    lines = [
        f"{model} on {system}: {layout_label(configs, 0)}, isl {configs.isl[0]}, "
        f"osl {configs.osl[0]}",
        f"  fits                     {'yes' if row['fits'] else 'no'} "
        f"(largest batch {row['max_batch']})",
        f"  memory per device        {mem['memory_gb_per_device']:.1f} GB of "
        f"{mem['usable_gb_per_device']:.1f} usable (weights {mem['weight_gb_per_device']:.1f}, "
        f"KV {mem['kv_gb_per_device']:.1f}, workspace {mem['workspace_gb_per_device']:.1f})",
        f"  devices per replica      {row['devices_per_replica']} "
        f"({row['systems_per_replica']} system(s))",
        f"  decode step              {row['step_ms']:.2f} ms, {row['bound']}-bound "
        f"(compute {row['step_compute_ms']:.2f}, memory {row['step_memory_ms']:.2f}, "
        f"comm {row['step_comm_ms']:.2f}, overhead {row['step_overhead_ms']:.2f})",
        f"  TPOT (with prefills)     {row['tpot_ms']:.2f} ms",
        f"  TTFT floor               {row['ttft_ms']:.1f} ms",
        f"  TTFT in a burst          {row['ttft_burst_ms']:.1f} ms "
        f"({configs.batch[0]} requests starting together, closed-loop benchmark)",
        f"  tokens/s per user        {row['tokens_per_s_per_user']:.1f}",
        f"  tokens/s per device      {row['tokens_per_s_per_device']:.1f}",
        f"  tokens/s per replica     {row['tokens_per_s_per_replica']:.1f}",
    ]
    return "\n".join(lines)


def _run_csv(catalog: Catalog, path: Path, out: Path | None) -> int:
    if not path.exists():
        raise InputError(f"--from-csv: {path} does not exist")
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        in_columns = list(reader.fieldnames or [])
    missing = [c for c in ("model", "batch") if c not in in_columns]
    if missing:
        raise InputError(f"--from-csv: missing column(s) {', '.join(missing)}")
    arrays = build_arrays(catalog)
    results: list[dict[str, Any]] = []
    for row in rows:
        try:
            configs = _row_configs(catalog, row)
        except (InputError, ValueError) as err:
            results.append({"fits": False, "problem": "bad_input", "error": str(err)})
            continue
        est = estimate(arrays, configs)
        result = result_row(configs, est, 0)
        mem = result.pop("memory")
        result.update(mem)
        result["error"] = describe_problem(catalog, configs, est, 0) or ""
        results.append(result)
    columns = in_columns + [c for c in RESULT_COLUMNS if c not in in_columns]
    fh = out.open("w", newline="") if out else sys.stdout
    try:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row, result in zip(rows, results, strict=True):
            writer.writerow({**row, **{k: _cell(v) for k, v in result.items()}})
    finally:
        if out:
            fh.close()
    return 0


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _row_configs(catalog: Catalog, row: dict[str, str]) -> Configs:
    def text(name: str, default: str | None = None) -> str | None:
        value = (row.get(name) or "").strip()
        return value or default

    def whole(name: str, default: int) -> int:
        value = text(name)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise InputError(f"{name}: {value!r} is not a whole number") from None

    system, accelerator = text("system"), text("accelerator")
    if system is None and accelerator is None:
        raise InputError("accelerator: required (or system)")
    try:
        acceptance = float(text("spec_acceptance", "0") or 0)
    except ValueError:
        raise InputError("spec_acceptance: not a number") from None
    return make_configs(
        catalog,
        model=text("model") or "",
        system=system,
        accelerator=None if system else accelerator,
        tp=whole("tp", 1),
        pp=whole("pp", 1),
        dp=whole("dp", 1),
        ep=whole("ep", 1),
        precision=text("precision", "fp8") or "fp8",
        kv_precision=text("kv_precision"),
        batch=whole("batch", 1),
        isl=whole("isl", 1024),
        osl=whole("osl", 256),
        spec_draft_tokens=whole("spec_draft", 0),
        spec_acceptance=acceptance,
    )
