"""``farebox estimate``: the performance model for one configuration, or for a CSV of many.

One:   farebox estimate --model llama-3.1-70b --accelerator h100-sxm --tp 4 --batch 32
                        --isl 2048 --osl 512 [--precision fp8] [--prefix-cached-tokens 600]
                        [--spec-draft 3 --spec-acceptance 0.7] [--engine trtllm]
                        [--json]
Many:  farebox estimate --from-csv configs.csv [--out results.csv] [--engine vllm]
       columns model and batch, and accelerator or system (a model may be named by its Hugging
       Face repo or an alias, a system by its alias, e.g. aiconfigurator's b200_sxm); optional:
       precision, kv_precision, tp, pp, dp, ep, isl, osl, prefix_cached_tokens, spec_draft,
       spec_acceptance (an empty cell takes the flag's default); other columns are carried
       through. A bad row gets fits=false and an ``error`` column instead of aborting the file
       (``api.cli._estimate_csv``).

``--engine`` (trtllm, vllm, sglang; default ``any``, the pooled factors) scales the accelerator's
efficiency factors by the engine's multipliers (fleet/data/engines.toml, docs/calibration.md); a
part the engine has no measurements of keeps multipliers 1, and the output says so.

The weight precision defaults to the accelerator's own: its native floating-point format with
the highest peak tensor throughput (``Accelerator.default_precision``: fp8 on Hopper, fp4 on
Blackwell, bf16 on TPUs). To reproduce a plan's assignment, pass its variant, its pool's system,
layout, precision, kv precision, batch cap and draft length, the family's mean input and output
tokens as --isl/--osl (rounded), round(isl x prefix_cache_hit_rate) as --prefix-cached-tokens, and
the scenario's acceptance for that draft length.

For one configuration, unknown ids, impossible layouts and a model that does not fit are one-line
errors (exit 2). Heavy modules load only when a command runs, so ``--help`` is quick.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from api.cli._output import output_file
from fleet.errors import InputError

if TYPE_CHECKING:
    from fleet.catalog import Catalog
    from fleet.perf.arrays import CatalogArrays
    from fleet.perf.types import Configs, Estimate

RESULT_COLUMNS = (
    "fits",
    "problem",
    "error",
    "tpot_ms",
    "tpot_burst_ms",
    "ttft_ms",
    "ttft_burst_ms",
    "tokens_per_s_per_user",
    "tokens_per_s_per_device",
    "tokens_per_s_per_replica",
    "usd_per_hour_per_replica",
    "usd_per_m_output_tokens",
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

PRECISION_HELP = (
    "weight precision: bf16, fp8, fp4, int8 or int4 (default: the accelerator's native float "
    "format with the highest peak throughput: fp8 on H100/H200/MI300X/MI325X/Gaudi 3, fp4 on "
    "B200/GB200, bf16 on TPU, LPU and WSE-3)"
)
ENGINE_HELP = (
    "serving engine whose efficiency multipliers apply: trtllm, vllm or sglang (default: any, "
    "the factors pooled over all three)"
)
DEFAULTS: dict[str, int | float] = {
    "tp": 1,
    "pp": 1,
    "dp": 1,
    "ep": 1,
    "isl": 1024,
    "osl": 256,
    "prefix_cached_tokens": 0,
    "spec_draft": 0,
    "spec_acceptance": 0.0,
}
"""Flag defaults, also those of an empty CSV cell."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("estimate", help="performance model for one or many configurations")
    p.add_argument("--model", help="model id of the catalog")
    p.add_argument("--accelerator", help="accelerator id (its first system in the catalog)")
    p.add_argument("--system", help="system id, instead of --accelerator")
    p.add_argument("--precision", help=PRECISION_HELP)
    p.add_argument(
        "--kv-precision", help="KV-cache precision (default: fp8 with 8/4-bit weights where native)"
    )
    for name in ("tp", "pp", "dp", "ep"):
        p.add_argument(f"--{name}", type=int, default=DEFAULTS[name], help=f"{name} degree")
    p.add_argument("--batch", type=int, help="concurrent requests of the replica (required)")
    p.add_argument("--isl", type=int, default=DEFAULTS["isl"], help="input tokens per request")
    p.add_argument("--osl", type=int, default=DEFAULTS["osl"], help="output tokens per request")
    p.add_argument(
        "--prefix-cached-tokens",
        type=int,
        default=DEFAULTS["prefix_cached_tokens"],
        help="of --isl, tokens whose KV the prefix cache supplies (no prefill compute)",
    )
    p.add_argument(
        "--spec-draft", type=int, default=DEFAULTS["spec_draft"], help="speculative draft length k"
    )
    p.add_argument(
        "--spec-acceptance",
        type=float,
        default=DEFAULTS["spec_acceptance"],
        help="per-token acceptance a",
    )
    p.add_argument("--engine", default="any", help=ENGINE_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--from-csv", type=Path, help="estimate every row of this CSV")
    p.add_argument("--out", type=Path, help="with --from-csv: write results here (default stdout)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fleet.catalog import load_catalog

    if args.from_csv is not None:
        from api.cli._estimate_csv import run_csv

        output_file(args.out, "--out")
        catalog = load_catalog()
        check_engine(catalog, args.engine)
        return run_csv(catalog, args.from_csv, args.out, engine=args.engine)
    from fleet.catalog import PRECISIONS
    from fleet.perf.arrays import build_arrays
    from fleet.perf.configs import make_configs
    from fleet.perf.engines import engine_arrays, engine_note
    from fleet.perf.explain import describe_problem
    from fleet.perf.model import estimate

    for field in ("model", "batch"):
        if getattr(args, field) is None:
            raise InputError(f"--{field} is required (or give --from-csv)")
    if (args.accelerator is None) == (args.system is None):
        raise InputError("give --accelerator or --system")
    catalog = load_catalog()
    check_engine(catalog, args.engine)
    system = (
        catalog.system(args.system) if args.system else catalog.default_system(args.accelerator)
    )
    configs = make_configs(
        catalog,
        model=args.model,
        system=system.id,
        tp=args.tp,
        pp=args.pp,
        dp=args.dp,
        ep=args.ep,
        precision=args.precision or catalog.accelerators[system.accelerator].default_precision,
        kv_precision=args.kv_precision,
        batch=args.batch,
        isl=args.isl,
        osl=args.osl,
        prefix_cached_tokens=args.prefix_cached_tokens,
        spec_draft_tokens=args.spec_draft,
        spec_acceptance=args.spec_acceptance,
    )
    arrays = engine_arrays(catalog, build_arrays(catalog), args.engine)
    est = estimate(arrays, configs)
    message = describe_problem(catalog, configs, est, 0)
    if message is not None:
        raise InputError(message)
    row = result_row(configs, est, 0, arrays=arrays)
    row["engine"] = args.engine
    precision = PRECISIONS[int(configs.weight_precision[0])]
    row["engine_note"] = engine_note(catalog, args.engine, system.accelerator, [precision])
    if args.json:
        import json

        print(json.dumps(row, indent=2))
    else:
        print(_table(catalog, configs, row))
    return 0


def check_engine(catalog: Catalog, engine: str) -> None:
    """One-line error naming ``--engine`` for an engine the catalog does not have."""
    if engine not in catalog.engine_ids:
        raise InputError(
            f"--engine: unknown engine {engine!r}; known: {', '.join(catalog.engine_ids)}"
        )


def result_row(
    configs: Configs, est: Estimate, i: int, *, arrays: CatalogArrays | None = None
) -> dict[str, Any]:
    """Row ``i`` in the faces' units (ms, GB, tokens/s); with ``arrays``, also what it costs at
    the catalog's hourly price (``fleet.perf.cost``: USD per replica-hour and per million output
    tokens at full batch)."""
    import numpy as np

    from fleet.perf.cost import usd_per_hour_per_replica, usd_per_m_output_tokens
    from fleet.perf.types import Bound, Problem

    problem = Problem(int(est.problem[i]))
    valid = problem in (Problem.OK, Problem.DOES_NOT_FIT)

    def num(x: float, scale: float = 1.0, digits: int = 3) -> float | None:
        return round(float(x) * scale, digits) if valid and np.isfinite(x) else None

    cost = {}
    if arrays is not None:
        cost = {
            "usd_per_hour_per_replica": num(
                usd_per_hour_per_replica(arrays, configs, est)[i], 1, 4
            ),
            "usd_per_m_output_tokens": num(usd_per_m_output_tokens(arrays, configs, est)[i], 1, 4),
        }
    return {
        "fits": bool(est.fits[i]),
        "problem": problem.name.lower(),
        "tpot_ms": num(est.tpot_s[i], 1e3),
        "tpot_burst_ms": num(est.tpot_burst_s[i], 1e3),
        "ttft_ms": num(est.ttft_floor_s[i], 1e3),
        "ttft_burst_ms": num(est.ttft_burst_s[i], 1e3),
        "tokens_per_s_per_user": num(est.tokens_per_s_per_user[i], digits=1),
        "tokens_per_s_per_device": num(est.tokens_per_s_per_device[i], digits=1),
        "tokens_per_s_per_replica": num(est.tokens_per_s_per_replica[i], digits=1),
        **cost,
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


def _moe_overhead_notes(catalog: Catalog, configs: Configs, engine_id: str) -> list[str]:
    """What the MoE layers add to the step's overhead, when charged: every engine's routed-expert
    call time (not on weight-only 4-bit experts), and an engine's block-scaled FP8 MoE kernel's
    time per expert held."""
    from fleet.catalog import FOUR_BIT, PRECISIONS
    from fleet.catalog.params import moe_layer_count
    from fleet.perf.engines import block_fp8_moe_terms
    from fleet.perf.transfer import resolve_efficiency

    spec = catalog.model(list(catalog.models)[configs.model[0]])
    if spec.moe is None:
        return []
    acc = catalog.accelerator(catalog.systems[list(catalog.systems)[configs.system[0]]].accelerator)
    precision = PRECISIONS[int(configs.weight_precision[0])]
    layers = moe_layer_count(spec)
    notes = []
    weight_only = precision in acc.weight_only_precisions and precision not in acc.native_precisions
    eff = resolve_efficiency(catalog)[acc.id]
    per_call_us = eff.moe_fp4_call_us if precision in FOUR_BIT else eff.moe_call_us
    if per_call_us and not (weight_only and precision in FOUR_BIT):
        notes.append(
            f"the MoE layers' routed-expert calls: {layers * per_call_us * 1e-3:.2f} ms of the "
            f"overhead per forward pass ({layers} MoE layers x {per_call_us:.3g} us, the measured "
            "kernels' fixed time per call)"
        )
    per_expert_s = block_fp8_moe_terms(catalog, engine_id).get(acc.id)
    if per_expert_s and spec.fp8_block_scaled and precision == "fp8":
        held = spec.moe.num_experts // max(int(configs.ep[0]), 1)
        notes.append(
            f"{engine_id}'s block-scaled FP8 MoE kernel: {held * layers * per_expert_s * 1e3:.2f} "
            f"ms of the overhead per forward pass ({held} experts held per rank x {layers} MoE "
            f"layers x {per_expert_s * 1e6:.3g} us, measured on its kernel tables)"
        )
    return notes


def _dsa_overhead_notes(catalog: Catalog, configs: Configs) -> list[str]:
    """What a DeepSeek Sparse Attention model's attention modules add to the step's overhead."""
    from fleet.perf.transfer import resolve_efficiency

    spec = catalog.model(list(catalog.models)[configs.model[0]])
    if spec.mla is None or not spec.mla.index_topk:
        return []
    acc_id = catalog.systems[list(catalog.systems)[configs.system[0]]].accelerator
    per_call_us = resolve_efficiency(catalog)[acc_id].dsa_call_us
    if not per_call_us:
        return []
    layers = spec.num_layers
    return [
        f"the sparse-attention (DSA) modules: {layers * per_call_us * 1e-3:.2f} ms of the overhead "
        f"per forward pass ({layers} layers x {per_call_us:.3g} us, the measured module's fixed "
        "time)"
    ]


def _table(catalog: Catalog, configs: Configs, row: dict[str, Any]) -> str:
    from fleet.perf.explain import layout_label

    model = list(catalog.models)[configs.model[0]]
    system = list(catalog.systems)[configs.system[0]]
    mem = row["memory"]
    lines = [
        f"{model} on {system}: {layout_label(configs, 0)}, isl {configs.isl[0]}"
        + (f" ({cached} cached)" if (cached := int(configs.prefix_cached_tokens[0])) else "")
        + f", osl {configs.osl[0]}",
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
        f"  engine                   {row['engine']}"
        + (" (pooled factors)" if row["engine"] == "any" else ""),
    ]
    if row.get("usd_per_m_output_tokens") is not None:
        lines.append(
            f"  cost                     ${row['usd_per_m_output_tokens']:.4f} per M output "
            f"tokens at full batch (${row['usd_per_hour_per_replica']:.2f}/h per replica, "
            "the catalog's hourly price)"
        )
    if row["engine_note"]:
        lines.append(f"  note: {row['engine_note']}")
    spec = catalog.model(model)
    for note in [
        *_moe_overhead_notes(catalog, configs, row["engine"]),
        *_dsa_overhead_notes(catalog, configs),
    ]:
        lines.append(f"  note: {note}")
    mla = spec.mla
    if mla is not None and mla.index_topk:
        lines.append(
            f"  note: sparse attention (DeepSeek Sparse Attention): each query reads and scores "
            f"the top {mla.index_topk:,} of its context tokens; the indexer scores them all"
        )
    ca = spec.compressed_attention
    if ca is not None:
        lines.append(
            f"  note: compressed attention (DeepSeek-V4): every layer reads a "
            f"{spec.sliding_window:,}-token window; {ca.csa_layers} layers add one entry per "
            f"{ca.csa_ratio} tokens, of which an indexer selects {ca.index_topk:,}; "
            f"{ca.hca_layers} layers read one entry per {ca.hca_ratio} tokens"
        )
    return "\n".join(lines)
