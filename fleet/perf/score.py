"""Score the performance model against a serving-benchmark log: coverage, then errors.

    python -m fleet.perf.score LOG.csv [--markdown | --json] [--pooled] [--rows OUT.csv]
                               [--seen FIT.csv]

The log is in aiconfigurator-core's silicon format (``fleet.perf.measured``; any system and
model the catalog knows by id or alias, aggregated and disaggregated rows). Every row is
estimated the way its benchmark ran it, at its own engine's factors (the pooled factors with
``--pooled``, or where the catalog has no such engine):
- aggregated, concurrency within the KV capacity: the estimate at that concurrency
  (``tpot_burst_s``, ``ttft_burst_s``, tokens/s per device: the closed-loop benchmark's figures);
- aggregated, concurrency beyond the KV capacity B but the weights fit: an engine admits B
  requests and queues the rest (vLLM and SGLang admit while KV blocks last; TensorRT-LLM's
  capacity scheduler likewise), so the N users of the closed loop share B slots: TPOT is the
  estimate's at B, each request waits (N / B - 1) request cycles before it is admitted (cycle =
  TTFT + osl x TPOT at B), and tokens/s per GPU = N x osl / (TTFT + osl x TPOT) / GPUs, as the
  measured figure is computed;
- disaggregated: ``fleet.perf.disagg.assemble_units`` with the row's workers (decode replicas at
  concurrency / decode workers each, re-estimated at their KV capacity past it; prefill replicas
  at one prompt per rank); TPOT = the decode step over the accepted tokens; the users' request
  rate is at most the unit's (its decode slots' or its prefill side's, whichever is less), and
  what it cannot serve waits before its first token (Little's law: cycle = users / rate), so
  TTFT = the unit's plus that wait and tokens/s per GPU follow from the cycle as measured.

Coverage = rows with an estimate / all rows; every other row is counted under its reason (a
model or system the catalog lacks, a layout the model rejects, weights that do not fit).
Errors are model / measured - 1; medians and p90 of their absolute values, and their median
(the bias: negative TPOT and TTFT read too fast, negative tokens/s too slow) per accelerator,
model, engine and serving mode, and over the rows whose benchmark drew its lengths from a range
(``fleet.perf.protocol``: read at the range's mean lengths, later waves staggered). With
``--seen FIT.csv`` (the runs a fit read, e.g. the reference runs), the rows FIT holds too
(``fleet.perf.seen``: in-sample) and the rest are two more groups, and a ``seen`` column.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fleet.catalog import Catalog, load_catalog
from fleet.catalog.engines import POOLED
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.calibrate import ErrorSummary, markdown_table
from fleet.perf.configs import make_configs
from fleet.perf.disagg import assemble_units
from fleet.perf.engines import engine_arrays
from fleet.perf.explain import describe_problem
from fleet.perf.measured import MeasuredRuns, Run, read_log
from fleet.perf.model import estimate
from fleet.perf.seen import seen_lines
from fleet.perf.types import Configs, Estimate, FloatArray, Problem


@dataclass(frozen=True, slots=True)
class Scored:
    """Model figures of the covered rows, beside the measured ones (one entry per covered row)."""

    line: np.ndarray
    accelerator: np.ndarray
    model: np.ndarray
    engine: np.ndarray
    mode: np.ndarray
    queued: np.ndarray
    """The concurrency exceeded the KV capacity: scored as an engine queue."""
    lengths_drawn: np.ndarray
    """The row's benchmark drew its lengths from a range (``fleet.perf.protocol``): scored at the
    range's mean lengths, its later waves staggered."""
    seen: np.ndarray
    """The row's measurement is in the ``--seen`` log (a fit read it): in-sample."""
    concurrency: np.ndarray
    """Users the benchmark kept in flight (the row's concurrency)."""
    isl: np.ndarray
    """Prompt tokens as the row logs them (the benchmark's nominal length)."""
    tpot: FloatArray
    ttft: FloatArray
    tput: FloatArray
    measured_tpot: FloatArray
    measured_ttft: FloatArray
    measured_tput: FloatArray


@dataclass(frozen=True, slots=True)
class Score:
    rows: int
    scored: Scored
    uncovered: tuple[tuple[int, str, str], ...]
    """(line, kind, reason) of every row without an estimate; ``kind`` is the reason's short
    form rows are counted under."""

    @property
    def coverage(self) -> float:
        return len(self.scored.line) / self.rows if self.rows else 0.0


def queued(
    tpot_s: FloatArray,
    ttft_s: FloatArray,
    requests_per_s: FloatArray,
    users: FloatArray,
    osl: FloatArray,
    gpus: FloatArray,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(TPOT, TTFT, tokens/s per GPU) of a closed loop of ``users`` served at ``tpot_s`` and
    ``ttft_s`` by a deployment that completes at most ``requests_per_s``: each user's cycle is
    users / rate (Little's law), so what the rate cannot serve waits before its first token
    (for B slots at rate B / (TTFT + osl x TPOT): (users / B - 1) request cycles)."""
    cycle = ttft_s + osl * tpot_s
    rate = np.minimum(users / cycle, requests_per_s)
    ttft = np.maximum(ttft_s, users / rate - osl * tpot_s)
    return tpot_s, ttft, users * osl / (ttft + osl * tpot_s) / gpus


def _engine(catalog: Catalog, backend: str, pooled: bool) -> str:
    return backend if not pooled and backend in catalog.engines else POOLED


def _with_batch(configs: Configs, batch: np.ndarray) -> Configs:
    return dataclasses.replace(configs, batch=np.asarray(batch, dtype=configs.batch.dtype))


def _problem(catalog: Catalog, configs: Configs, est: Estimate, i: int) -> str:
    """``<problem> (<model> on <system>): <the sentence>``: rows are counted under the part
    before the colon."""
    sentence = describe_problem(catalog, configs, est, i) or "no estimate"
    model = list(catalog.models)[int(configs.model[i])]
    system = list(catalog.systems)[int(configs.system[i])]
    return f"{sentence.split(':')[0]} ({model} on {system}): {sentence}"


def _at_capacity(
    catalog: Catalog, arrays: CatalogArrays, configs: Configs
) -> tuple[Estimate, Configs, np.ndarray, list[str | None]]:
    """The estimate of ``configs``, rows beyond their KV capacity re-estimated at it; whether
    each row was, and the reason of rows left without an estimate."""
    est = estimate(arrays, configs)
    over = (est.problem == Problem.DOES_NOT_FIT) & (est.max_batch >= 1)
    if over.any():
        configs = _with_batch(configs, np.where(over, est.max_batch, configs.batch))
        est = estimate(arrays, configs)
    reasons = [
        _problem(catalog, configs, est, i) if est.problem[i] != Problem.OK else None
        for i in range(len(configs))
    ]
    return est, configs, over, reasons


def _score_aggregated(
    catalog: Catalog, base: CatalogArrays, runs: MeasuredRuns, engines: list[str]
) -> tuple[list[dict[str, np.ndarray]], list[tuple[int, str]]]:
    parts: list[dict[str, np.ndarray]] = []
    uncovered: list[tuple[int, str]] = []
    for engine in sorted(set(engines)):
        rows = np.flatnonzero(np.asarray(engines) == engine)
        sub = runs.take(rows)
        est, configs, over, reasons = _at_capacity(
            catalog, engine_arrays(catalog, base, engine), sub.configs
        )
        uncovered.extend((int(rows[i]), r) for i, r in enumerate(reasons) if r is not None)
        ok = np.asarray([r is None for r in reasons], dtype=bool)
        users = sub.configs.batch.astype(float)
        osl = sub.configs.osl.astype(float)
        gpus = (sub.configs.tp * sub.configs.dp * sub.configs.pp).astype(float)
        slots = configs.batch.astype(float)
        rate = slots / (est.ttft_burst_s + osl * est.tpot_burst_s)
        tpot, ttft, tput = queued(est.tpot_burst_s, est.ttft_burst_s, rate, users, osl, gpus)
        tput = np.where(over, tput, est.tokens_per_s_per_device)
        parts.append(
            dict(
                rows=rows[ok], engine=np.full(ok.sum(), engine), queued=over[ok],
                tpot=tpot[ok], ttft=ttft[ok], tput=tput[ok],
            )
        )  # fmt: skip
    return parts, uncovered


def _score_disaggregated(
    catalog: Catalog, base: CatalogArrays, runs: Sequence[Run], engines: list[str]
) -> tuple[list[dict[str, np.ndarray]], list[tuple[int, str]]]:
    parts: list[dict[str, np.ndarray]] = []
    uncovered: list[tuple[int, str]] = []
    for engine in sorted(set(engines)):
        rows = np.flatnonzero(np.asarray(engines) == engine)
        group = [runs[int(i)] for i in rows]
        n = len(group)
        k = np.asarray([r.decode_workers for r in group], dtype=np.int64)
        users = np.asarray([r.concurrency for r in group], dtype=float)
        workers = [r.worker for r in group] + [r.prefill for r in group if r.prefill is not None]
        both = group + group
        configs = make_configs(
            catalog,
            model=[r.model for r in both],
            system=[r.system for r in both],
            tp=[w.tp for w in workers],
            pp=[w.pp for w in workers],
            dp=[w.dp for w in workers],
            ep=[w.ep for w in workers],
            precision=[r.precision for r in both],
            batch=np.concatenate([np.ceil(users / k), [w.dp for w in workers[n:]]]).astype(int),
            isl=[r.isl for r in both],
            osl=[r.osl for r in both],
            lengths_vary=[r.lengths_vary for r in both],
        )
        arrays = engine_arrays(catalog, base, engine)
        est, configs, over, reasons = _at_capacity(catalog, arrays, configs)
        ok = np.asarray(
            [reasons[i] is None and reasons[n + i] is None for i in range(n)], dtype=bool
        )
        uncovered.extend(
            (int(rows[i]), reasons[i] or f"prefill workers: {reasons[n + i]}")
            for i in np.flatnonzero(~ok)
        )
        idx = np.arange(n)
        units = assemble_units(
            arrays,
            configs,
            est,
            idx,
            n + idx,
            k,
            np.asarray([r.prefill_workers for r in group], dtype=np.int64),
        )
        u = units.estimate
        osl = np.asarray([r.osl for r in group], dtype=float)
        gpus = np.asarray([r.gpus for r in group], dtype=float)
        slots = k * configs.batch[:n].astype(float)
        # The decode slots' rate and the unit's (prefill-bound) request rate, whichever is less.
        rate = np.minimum(
            slots / (u.ttft_burst_s + osl * u.tpot_s), u.tokens_per_s_per_replica / osl
        )
        tpot, ttft, tput = queued(u.tpot_s, u.ttft_burst_s, rate, users, osl, gpus)
        parts.append(
            dict(
                rows=rows[ok], engine=np.full(ok.sum(), engine), queued=over[:n][ok],
                tpot=tpot[ok], ttft=ttft[ok], tput=tput[ok],
            )
        )  # fmt: skip
    return parts, uncovered


def score(catalog: Catalog, path: Path, *, pooled: bool = False, seen: Path | None = None) -> Score:
    """Coverage and model figures of every row of the log at ``path``; with ``seen``, which of
    them that log holds too (``fleet.perf.seen``)."""
    log = read_log(catalog, path)
    held = seen_lines(path, seen) if seen is not None else frozenset()
    base = build_arrays(catalog)
    agg, dis = log.aggregated, log.disaggregated
    a_parts, a_missing = _score_aggregated(
        catalog, base, agg, [_engine(catalog, b, pooled) for b in agg.backend]
    )
    d_parts, d_missing = _score_disaggregated(
        catalog, base, dis, [_engine(catalog, r.backend, pooled) for r in dis]
    )
    uncovered = sorted(
        [(line, reason) for line, reason in log.skipped]
        + [(int(log.aggregated_lines[i]), reason) for i, reason in a_missing]
        + [(dis[i].line, reason) for i, reason in d_missing]
    )

    def cat(parts: list[dict[str, np.ndarray]], key: str) -> np.ndarray:
        return np.concatenate([p[key] for p in parts]) if parts else np.zeros(0)

    a_rows = cat(a_parts, "rows").astype(np.int64)
    d_runs = [dis[i] for i in cat(d_parts, "rows").astype(int).tolist()]
    accelerator = {s.id: s.accelerator for s in catalog.systems.values()}
    systems = [agg.system_ids[i] for i in a_rows] + [r.system for r in d_runs]

    def both(key: str) -> np.ndarray:
        return np.concatenate([cat(a_parts, key), cat(d_parts, key)])

    lines = np.concatenate([log.aggregated_lines[a_rows], [r.line for r in d_runs]])
    scored = Scored(
        line=lines,
        accelerator=np.asarray([accelerator[s] for s in systems]),
        model=np.asarray([agg.model_ids[i] for i in a_rows] + [r.model for r in d_runs]),
        engine=both("engine").astype(str),
        mode=np.asarray(["aggregated"] * len(a_rows) + ["disaggregated"] * len(d_runs)),
        queued=both("queued").astype(bool),
        lengths_drawn=np.concatenate(
            [agg.configs.lengths_vary[a_rows], [r.lengths_vary for r in d_runs]]
        ).astype(bool),
        seen=np.asarray([int(line) in held for line in lines.tolist()], dtype=bool),
        concurrency=np.concatenate(
            [agg.configs.batch[a_rows], [r.concurrency for r in d_runs]]
        ).astype(np.int64),
        isl=np.concatenate(
            [agg.logged_lengths[a_rows, 0], [r.logged_isl or r.isl for r in d_runs]]
        ).astype(np.int64),
        tpot=both("tpot"),
        ttft=both("ttft"),
        tput=both("tput"),
        measured_tpot=np.concatenate([agg.tpot_s[a_rows], [r.tpot_s for r in d_runs]]),
        measured_ttft=np.concatenate([agg.ttft_s[a_rows], [r.ttft_s for r in d_runs]]),
        measured_tput=np.concatenate(
            [agg.tokens_per_s_per_gpu[a_rows], [r.tokens_per_s_per_gpu for r in d_runs]]
        ),
    )
    return Score(
        rows=log.rows,
        scored=scored,
        uncovered=tuple((line, reason.split(":")[0], reason) for line, reason in uncovered),
    )


CONCURRENCY_BANDS: tuple[tuple[int, int], ...] = ((1, 4), (5, 16), (17, 64), (65, 1 << 30))
"""Users in flight: small batches (step overhead and weight streaming), mid, large (KV reads and
the prefills riding decode steps weigh in), beyond 64."""
PROMPT_BANDS: tuple[tuple[int, int], ...] = ((1, 1024), (1025, 4096), (4097, 1 << 30))
"""Prompt tokens as logged: up to 1k, up to 4k, longer (prefill chunks of several thousand)."""


def _band(what: str, lo: int, hi: int) -> str:
    return f"{what} {lo:,}+" if hi >= 1 << 30 else f"{what} {lo:,}-{hi:,}"


def summaries(s: Scored) -> list[ErrorSummary]:
    """Median and p90 absolute errors and the median signed error (the bias) overall, then per
    accelerator, model, engine and mode, concurrency band and prompt length (empty groups left
    out)."""
    signed = {
        "tpot": s.tpot / s.measured_tpot - 1.0,
        "tput": s.tput / s.measured_tput - 1.0,
        "ttft": s.ttft / s.measured_ttft - 1.0,
    }
    err = {k: np.abs(v) for k, v in signed.items()}
    groups: list[tuple[str, np.ndarray]] = [("all", np.ones(len(s.line), dtype=bool))]
    for label, column in (
        ("accelerator", s.accelerator),
        ("model", s.model),
        ("engine", s.engine),
        ("mode", s.mode),
    ):
        for value in sorted(set(column.tolist())):
            groups.append((f"{label} {value}", column == value))
    for lo, hi in CONCURRENCY_BANDS:
        groups.append((_band("concurrency", lo, hi), (s.concurrency >= lo) & (s.concurrency <= hi)))
    for lo, hi in PROMPT_BANDS:
        groups.append((_band("prompt tokens", lo, hi), (s.isl >= lo) & (s.isl <= hi)))
    if s.queued.any():
        groups.append(("queued beyond KV capacity", s.queued))
    if s.lengths_drawn.any():
        groups.append(("benchmark lengths drawn from a range", s.lengths_drawn))
    if s.seen.any():
        groups.append(("also in the --seen log (in-sample)", s.seen))
        groups.append(("not in the --seen log", ~s.seen))
    out = []
    for name, mask in groups:
        if not mask.any():
            continue
        q = {
            k: (float(np.median(v[mask])), float(np.quantile(v[mask], 0.9))) for k, v in err.items()
        }
        b = {k: float(np.median(v[mask])) for k, v in signed.items()}
        out.append(
            ErrorSummary(
                group=name, rows=int(mask.sum()),
                tpot_median=q["tpot"][0], tpot_p90=q["tpot"][1],
                tput_median=q["tput"][0], tput_p90=q["tput"][1],
                ttft_median=q["ttft"][0], ttft_p90=q["ttft"][1],
                tpot_bias=b["tpot"], tput_bias=b["tput"], ttft_bias=b["ttft"],
            )
        )  # fmt: skip
    return out


def write_rows(result: Score, out: Path) -> None:
    """One line per row of the log, in its order: what it is, model and measured figures, or
    why it has no estimate."""
    s = result.scored
    with out.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(
            ["line", "accelerator", "model", "engine", "mode", "queued", "tpot_ms",
             "measured_tpot_ms", "ttft_ms", "measured_ttft_ms", "tokens_per_s_per_gpu",
             "measured_tokens_per_s_per_gpu", "lengths_drawn", "seen", "concurrency", "isl",
             "not_scored"]
        )  # fmt: skip
        lines: list[tuple[int, int | str]] = [
            (int(line), i) for i, line in enumerate(s.line.tolist())
        ]
        lines += [(line, reason) for line, _, reason in result.uncovered]
        for line, i in sorted(lines, key=lambda item: item[0]):
            if isinstance(i, str):
                w.writerow([line] + [""] * 15 + [i])
                continue
            w.writerow(
                [line, s.accelerator[i], s.model[i], s.engine[i], s.mode[i],
                 bool(s.queued[i]), round(s.tpot[i] * 1e3, 3), round(s.measured_tpot[i] * 1e3, 3),
                 round(s.ttft[i] * 1e3, 3), round(s.measured_ttft[i] * 1e3, 3),
                 round(float(s.tput[i]), 2), round(float(s.measured_tput[i]), 2),
                 bool(s.lengths_drawn[i]), bool(s.seen[i]), int(s.concurrency[i]),
                 int(s.isl[i]), ""]
            )  # fmt: skip


def _signed(value: float | None) -> str:
    return "     -" if value is None else f"{value:+6.1%}"


def report(result: Score, *, markdown: bool = False, as_json: bool = False) -> str:
    """Coverage, the unscored rows by reason, then the error table (text, markdown or JSON)."""
    scored = len(result.scored.line)
    table = summaries(result.scored) if scored else []
    reasons = Counter(kind for _, kind, _ in result.uncovered)
    if as_json:
        return json.dumps(
            {
                "rows": result.rows,
                "scored": scored,
                "coverage": result.coverage,
                "not_scored": dict(reasons),
                "groups": [dataclasses.asdict(t) for t in table],
            },
            indent=2,
        )
    lines = [f"coverage: {scored} of {result.rows} rows scored ({result.coverage:.1%})"]
    lines += [f"  not scored, {count} rows: {kind}" for kind, count in reasons.most_common()]
    if table and markdown:
        lines.append(markdown_table(table, first_column="rows scored"))
    elif table:
        lines += [
            f"{t.group:40s} n={t.rows:5d}  TPOT median {t.tpot_median:6.1%} p90 "
            f"{t.tpot_p90:6.1%}  tok/s/GPU median {t.tput_median:6.1%} p90 "
            f"{t.tput_p90:6.1%}  TTFT median {t.ttft_median:6.1%} p90 {t.ttft_p90:6.1%}"
            f"  bias TPOT {_signed(t.tpot_bias)} tok/s/GPU {_signed(t.tput_bias)}"
            f" TTFT {_signed(t.ttft_bias)}"
            for t in table
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="serving-benchmark log (aiconfigurator silicon CSV)")
    parser.add_argument("--markdown", action="store_true", help="print the error table as markdown")
    parser.add_argument(
        "--pooled", action="store_true", help="every row at the pooled factors, not its engine's"
    )
    parser.add_argument("--rows", type=Path, help="write the scored rows to this CSV")
    parser.add_argument(
        "--json", action="store_true", help="print coverage and the error table as JSON"
    )
    parser.add_argument(
        "--seen", type=Path, help="a log a fit read: its rows in LOG are grouped as in-sample"
    )
    args = parser.parse_args(argv)
    catalog = load_catalog()
    try:
        result = score(catalog, args.log, pooled=args.pooled, seen=args.seen)
    except InputError as err:
        print(f"fleet.perf.score: error: {err}", file=sys.stderr)
        return 2
    if args.rows is not None:
        write_rows(result, args.rows)
    print(report(result, markdown=args.markdown, as_json=args.json))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
