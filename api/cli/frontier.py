"""``farebox frontier``: the throughput-vs-interactivity Pareto frontier of one model on one system.

    farebox frontier --model llama-3.1-70b --accelerator h100-sxm [--isl 1024 --osl 256]
                     [--precision fp8 ...] [--spec 3:0.7] [--engine trtllm] [--disaggregated]
                     [--csv F] [--png F]

Evaluates every valid layout x precision x batch (``fleet.perf.frontier``), prints the frontier as
a table (fastest per user first), and optionally writes it as CSV and as a chart: tokens/s per
device (cost efficiency) against tokens/s per user (interactivity), each point labelled with its
layout, precision and batch. ``--disaggregated`` gives the frontier of disaggregated
prefill/decode units instead (``fleet.perf.disagg``: k decode replicas fed by m prefill replicas;
the layout column is the decode replica's, the unit's line follows it).

The configurations are counted before any is evaluated and held to the API's frontier limit
(``api.perf_wire.MAX_FRONTIER_CONFIGS``, 250,000): over it, one line naming ``--spec`` or
``--precision`` and exit 2, where 100 ``--spec`` options once took 12 s and 4.5 GB.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import TYPE_CHECKING

from api.cli._output import output_file, write_error
from api.cli.estimate import ENGINE_HELP, check_engine
from fleet.errors import InputError

if TYPE_CHECKING:
    from fleet.catalog import Catalog
    from fleet.perf.arrays import CatalogArrays
    from fleet.perf.frontier import Frontier

COLUMNS = (
    "layout",
    "tokens_per_s_per_user",
    "tokens_per_s_per_device",
    "tpot_ms",
    "ttft_ms",
    "devices_per_replica",
    "usd_per_m_output_tokens",
    "bound",
    "disaggregated",
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "frontier", help="Pareto frontier of tokens/s per device vs per user for one model"
    )
    p.add_argument("--model", required=True)
    p.add_argument("--accelerator")
    p.add_argument("--system", help="system id (default: the accelerator's default system)")
    p.add_argument("--isl", type=int, default=1024, help="input tokens per request")
    p.add_argument("--osl", type=int, default=256, help="output tokens per request")
    p.add_argument(
        "--precision", action="append", help="weight precision(s) to consider (default: all run)"
    )
    p.add_argument(
        "--spec", action="append", default=[], help="speculative option k:a, e.g. 3:0.7 (repeat)"
    )
    p.add_argument("--engine", default="any", help=ENGINE_HELP)
    p.add_argument(
        "--disaggregated",
        action="store_true",
        help="frontier of disaggregated prefill/decode units instead of aggregated replicas",
    )
    p.add_argument("--csv", type=Path, help="write the frontier as CSV")
    p.add_argument("--png", type=Path, help="write the frontier chart as PNG")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fleet.catalog import load_catalog
    from fleet.perf.arrays import build_arrays
    from fleet.perf.engines import engine_arrays, engine_note
    from fleet.perf.frontier import frontier

    output_file(args.csv, "--csv")
    output_file(args.png, "--png")
    catalog = load_catalog()
    catalog.model(args.model)
    check_engine(catalog, args.engine)
    if (args.accelerator is None) == (args.system is None):
        raise InputError("give --accelerator or --system")
    system = (
        catalog.system(args.system) if args.system else catalog.default_system(args.accelerator)
    )
    if args.isl < 1 or args.osl < 1:
        raise InputError("--isl and --osl must be >= 1")
    spec = [(0, 0.0)] + [_spec(s) for s in args.spec]
    check_size(catalog, args.model, system.id, args.precision, spec, args.disaggregated)
    arrays = engine_arrays(catalog, build_arrays(catalog), args.engine)
    front = frontier(
        catalog,
        arrays,
        args.model,
        system.id,
        isl=args.isl,
        osl=args.osl,
        precisions=args.precision,
        spec=spec,
        disaggregated=args.disaggregated,
    )
    if len(front) == 0:
        raise InputError(
            f"model {args.model} fits on {system.id} in no layout of at most 8 systems per replica"
        )
    rows = _rows(front, arrays)
    serving = "disaggregated" if args.disaggregated else "aggregated"
    print(
        f"{args.model} on {system.id}, isl {args.isl}, osl {args.osl}, engine {args.engine}, "
        f"{serving}: "
        f"{len(rows)} frontier points"
    )
    note = engine_note(catalog, args.engine, system.accelerator)
    if note:
        print(f"note: {note}")
    print(
        f"{'layout':34s} {'tok/s/user':>11s} {'tok/s/device':>13s} {'TPOT ms':>9s} "
        f"{'TTFT ms':>9s} {'devices':>8s} {'$/M out':>8s}  bound"
    )
    for r in rows:
        print(
            f"{r['layout']:34s} {r['tokens_per_s_per_user']:11.1f} "
            f"{r['tokens_per_s_per_device']:13.1f} {r['tpot_ms']:9.2f} {r['ttft_ms']:9.1f} "
            f"{r['devices_per_replica']:8d} {r['usd_per_m_output_tokens']:8.4f}  {r['bound']}"
        )
        if r["disaggregated"]:
            print(f"  {r['disaggregated']}")
    print(
        "$/M out: USD per million output tokens at full batch, at the system's hourly price in "
        f"the catalog (${float(arrays.systems.usd_per_hour[front.configs.system[0]]):,.2f}/h)"
    )
    if args.csv:
        try:
            with args.csv.open("w", newline="") as fh:
                writer = csv.DictWriter(fh, fieldnames=COLUMNS)
                writer.writeheader()
                writer.writerows(rows)
        except OSError as err:
            raise write_error("--csv", args.csv, err) from None
    if args.png:
        try:
            plot(catalog, front, args.model, system.id, args.isl, args.osl, args.png)
        except OSError as err:
            raise write_error("--png", args.png, err) from None
    return 0


def check_size(
    catalog: Catalog,
    model: str,
    system: str,
    precisions: list[str] | None,
    spec: list[tuple[int, float]],
    disaggregated: bool,
) -> None:
    """InputError naming ``--spec`` or ``--precision`` when the frontier would evaluate more than
    the API's ``MAX_FRONTIER_CONFIGS`` configurations."""
    from api.perf_wire import MAX_FRONTIER_CONFIGS
    from fleet.perf.frontier import DEFAULT_BATCHES, frontier_size, supported_precisions
    from fleet.perf.grid import model_spec, search_options

    # what the frontier evaluates at the CLI's batches, counted as the API counts it
    n = frontier_size(
        catalog, model, system, precisions=precisions, spec=spec, disaggregated=disaggregated
    )
    if n <= MAX_FRONTIER_CONFIGS:
        return
    precs, batches, options = search_options(
        tuple(precisions) if precisions else supported_precisions(catalog, system),
        DEFAULT_BATCHES,
        model_spec(catalog, model, spec),
    )
    flag = "--precision" if len(precs) > len(options) else "--spec"
    raise InputError(
        f"{flag}: this frontier would evaluate {n:,} configurations ({len(precs)} precisions x "
        f"{len(batches)} batches x {len(options)} speculative options x the layouts of {model} "
        f"on {system}), over the limit of {MAX_FRONTIER_CONFIGS:,}; give fewer --spec options "
        "or name fewer --precision"
    )


def _spec(text: str) -> tuple[int, float]:
    try:
        k, a = text.split(":")
        out = (int(k), float(a))
    except ValueError:
        raise InputError(f"--spec: {text!r} is not k:a (e.g. 3:0.7)") from None
    if out[0] < 1 or not 0 <= out[1] <= 1:
        raise InputError(f"--spec: {text!r}: k must be >= 1 and a in [0, 1]")
    return out


def _rows(front: Frontier, arrays: CatalogArrays) -> list[dict[str, object]]:
    from fleet.perf.cost import usd_per_m_output_tokens
    from fleet.perf.explain import layout_label
    from fleet.perf.types import Bound

    e, c = front.estimate, front.configs
    usd = usd_per_m_output_tokens(arrays, c, e)
    return [
        {
            "layout": layout_label(c, i),
            "tokens_per_s_per_user": round(float(e.tokens_per_s_per_user[i]), 2),
            "tokens_per_s_per_device": round(float(e.tokens_per_s_per_device[i]), 2),
            "tpot_ms": round(float(e.tpot_s[i]) * 1e3, 3),
            "ttft_ms": round(float(e.ttft_floor_s[i]) * 1e3, 2),
            "devices_per_replica": int(e.devices_per_replica[i]),
            "usd_per_m_output_tokens": round(float(usd[i]), 4),
            "bound": Bound(int(e.bound[i])).name.lower(),
            "disaggregated": front.layouts[i] if front.layouts else "",
        }
        for i in range(len(front))
    ]


def plot(
    catalog: Catalog, front: Frontier, model: str, system: str, isl: int, osl: int, path: Path
) -> None:
    """A chart to show in a meeting: frontier line, labelled points, log axes with units."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fleet.catalog import PRECISIONS
    from fleet.perf.explain import layout_label

    e, c = front.estimate, front.configs
    x = e.tokens_per_s_per_user
    y = e.tokens_per_s_per_device
    fig, ax = plt.subplots(figsize=(11, 6.5), dpi=130)
    ax.plot(x, y, "-", color="#1f77b4", lw=1.5, zorder=1)
    precisions = sorted({int(p) for p in c.weight_precision})
    markers = dict(zip(precisions, ["o", "s", "^", "D"], strict=False))

    for p in precisions:
        sel = c.weight_precision == p
        ax.scatter(x[sel], y[sel], marker=markers[p], s=40, zorder=2, label=PRECISIONS[p])
    # Label every point when few, else a spread subset, alternating sides to limit overlap.
    n = len(front)
    step = max(1, int(np.ceil(n / 18)))
    for k, i in enumerate(range(0, n, step)):
        ax.annotate(
            layout_label(c, i, compact=True),
            (x[i], y[i]),
            textcoords="offset points",
            xytext=(6, 6 if k % 2 == 0 else -12),
            fontsize=7,
            color="#333333",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("interactivity: output tokens/s per user (1 / TPOT)")
    ax.set_ylabel("cost efficiency: output tokens/s per device")
    ax.set_title(
        f"{model} on {system}: throughput vs interactivity frontier "
        f"(input {isl} / output {osl} tokens, "
        f"{'disaggregated' if front.layouts else 'aggregated'} serving)",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="weights", loc="lower left", fontsize=8)
    fig.text(
        0.01,
        0.01,
        "Pareto-optimal layouts (tp/pp/dp/ep, precision, batch b) of the farebox roofline model; "
        "efficiency factors: docs/calibration.md",
        fontsize=7,
        color="#666666",
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path)
    plt.close(fig)
