"""``farebox score LOG.csv``: the performance model against a serving-benchmark log.

The log is in aiconfigurator-core's silicon-sample format (aggregated and disaggregated rows;
models by catalog id, Hugging Face repo or alias, systems by id or alias such as ``b200_sxm``).
Prints the coverage (rows scored / all rows, the rest counted under their reason) and the median
and p90 absolute errors of TPOT, tokens/s per GPU and TTFT and their bias (median signed error)
per accelerator, model, engine and serving mode, each row at its own engine's factors
(``--pooled``: the pooled ones); with ``--seen FIT.csv`` (the runs a fit read) also over the rows
FIT holds too (in-sample) and the rest.
What is modelled how: ``fleet.perf.score`` and docs/calibration.md. ``python -m
fleet.perf.score`` is the same command.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "score",
        help="score the performance model against a serving-benchmark log",
        description=__doc__,
    )
    p.add_argument("log", type=Path, help="the log (aiconfigurator silicon-sample CSV)")
    p.add_argument("--pooled", action="store_true", help="every row at the pooled factors")
    p.add_argument("--rows", type=Path, help="write every row's figures or reason to this CSV")
    p.add_argument(
        "--seen",
        type=Path,
        help="a log a fit read (e.g. the reference runs): LOG's rows it holds too are grouped "
        "as in-sample, the rest apart",
    )
    form = p.add_mutually_exclusive_group()
    form.add_argument("--markdown", action="store_true", help="the error table as markdown")
    form.add_argument("--json", action="store_true", help="coverage and errors as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fleet.catalog import load_catalog
    from fleet.perf.score import report, score, write_rows

    result = score(load_catalog(), args.log, pooled=args.pooled, seen=args.seen)
    if args.rows is not None:
        write_rows(result, args.rows)
    print(report(result, markdown=args.markdown, as_json=args.json))
    return 0
