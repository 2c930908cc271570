"""Farebox's performance model against published throughput-vs-interactivity points.

    python bench/published_points.py [--markdown] [--points FILE] [--spec K:A]

For every point of ``bench/data/published_points.toml`` (model, accelerator, precision, isl/osl,
tokens/s per user, tokens/s per GPU as published), the model's frontier of that model on the
accelerator's default system (``fleet.perf.frontier``: every layout farebox searches x a fine
batch grid, the point's weight precision only, aggregated serving) gives the best tokens/s per
GPU among configurations reaching at least the point's tokens/s per user. Speculative decoding
only where the point says it was used: the model's own MTP draft (``fleet.perf.grid.model_spec``)
when its ``speculative`` is "mtp" or "mtp-or-none" (the benchmark's configuration file lists MTP
and non-MTP recipes for the curve; both are searched), never for "none" or "unspecified"; ``--spec``
adds an option to
every point. Where the point carries the benchmark's ``recipe`` (what its configuration file swept:
largest concurrency per serving instance, devices per instance, data-parallel attention or not),
the frontier is of those configurations only (``recipe_frontier``), so that farebox is compared
on the ground the figure was measured on, not with a batch or layout nobody ran; where it carries
the disaggregated units the file lists (``disaggregated_recipe``: prefill and decode workers,
concurrency, MTP or not), those units (``bench.recipes``); with both, the better figure;
elsewhere every layout and batch. That figure is put in the published token accounting
(x (isl + osl) / osl when the source counts input + output tokens per GPU) and divided by the
published one: r = farebox / published.

The "off by Nx on average" figure is the geometric mean of max(r, 1/r) = exp(mean |ln r|) over
the evaluable points (overall, per accelerator and per model); the bias is exp(mean ln r) (> 1:
farebox too fast). Points the model cannot evaluate (model, accelerator or precision not in the
catalog, no layout fits, no layout reaches the interactivity) are listed with the reason and
counted, never dropped.

The points are a yardstick: no factor of the model is fitted to them (docs/calibration.md).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, cast

import msgspec
import numpy as np
from msgspec import Meta, Struct

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.recipes import DisaggRecipe, Recipe, disaggregated_recipe_frontier, recipe_frontier
from fleet.catalog import PRECISIONS, Catalog, Precision, load_catalog
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.frontier import DEFAULT_BATCHES, Frontier, frontier

POINTS_FILE = Path(__file__).resolve().parent / "data" / "published_points.toml"
BATCHES: tuple[int, ...] = tuple(
    sorted({round(2 ** (i / 4)) for i in range(4 * int(math.log2(max(DEFAULT_BATCHES))) + 1)})
)
"""Concurrent requests per replica searched: the range of ``farebox frontier`` (1 .. 1024) in
steps of 2^(1/4) (~19%) instead of 2, so that the best configuration at a given interactivity is
not an artefact of a coarse grid (the published figures are interpolated along measured curves)."""

Positive = Annotated[float, Meta(gt=0)]
Tokens = Annotated[int, Meta(gt=0)]
Text = Annotated[str, Meta(min_length=1)]


class PublishedPoint(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """One published operating point (field meanings: the header of the data file)."""

    id: Annotated[str, Meta(pattern=r"^[a-z0-9][a-z0-9.\-]*$")]
    model: Text
    model_published: Text
    accelerator: Text
    accelerator_published: Text
    precision: Text
    isl_tokens: Tokens
    osl_tokens: Tokens
    tokens_per_s_per_user: Positive
    tokens_per_s_per_gpu: Positive
    throughput_counts: Literal["input+output", "output"]
    engine: Text
    disaggregated: Literal["yes", "no", "unspecified"]
    speculative: Literal["mtp", "mtp-or-none", "none", "unspecified"]
    serving_notes: Text
    source_url: Annotated[str, Meta(pattern=r"^https://")]
    source_date: Annotated[str, Meta(pattern=r"^(\d{4}-\d{2}-\d{2}|undated)$")]
    location: Text
    recipe: Recipe | None = None
    """The swept aggregated serving configurations when the benchmark's configuration file is
    known."""
    disaggregated_recipe: DisaggRecipe | None = None
    """The disaggregated units the configuration file lists for the curve. With either recipe
    the search covers the recipes given only; with neither, every layout and batch farebox
    searches."""

    def published_per_output_token(self) -> float:
        """Factor from output tokens/s to the published accounting."""
        if self.throughput_counts == "input+output":
            return (self.isl_tokens + self.osl_tokens) / self.osl_tokens
        return 1.0


class PointsFile(Struct, frozen=True, forbid_unknown_fields=True):
    points: list[PublishedPoint]


def load_points(path: Path = POINTS_FILE) -> tuple[PublishedPoint, ...]:
    """Decode the data file; errors name the file and the field path; ids must be unique."""
    try:
        data = msgspec.toml.decode(path.read_bytes(), type=PointsFile)
    except OSError as err:
        raise InputError(f"{path}: {err.strerror}") from None
    except msgspec.ValidationError as err:
        raise InputError(f"{path.name}: {err}") from None
    except msgspec.DecodeError as err:
        raise InputError(f"{path.name}: not valid TOML: {err}") from None
    seen: set[str] = set()
    for i, point in enumerate(data.points):
        if point.id in seen:
            raise InputError(f"{path.name}: $.points[{i}].id: duplicate id {point.id!r}")
        recipe = point.recipe
        if recipe is not None and len(recipe.gpus) != len(recipe.max_concurrency):
            raise InputError(
                f"{path.name}: $.points[{i}].recipe: max_concurrency needs one entry per gpus "
                f"entry ({len(recipe.max_concurrency)} for {len(recipe.gpus)})"
            )
        seen.add(point.id)
    return tuple(data.points)


_GroupKey = tuple[str, str, str, int, int, bool, Recipe | None, DisaggRecipe | None]


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Farebox's answer for one point: a figure in the published accounting, or why there is
    none."""

    point: PublishedPoint
    tokens_per_s_per_gpu: float | None
    """Farebox's best tokens/s per GPU at >= the point's interactivity, published accounting."""
    tokens_per_s_per_user: float | None
    """Interactivity of that configuration."""
    configuration: str
    reason: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.tokens_per_s_per_gpu is None:
            return None
        return self.tokens_per_s_per_gpu / self.point.tokens_per_s_per_gpu


def _unsupported(catalog: Catalog, point: PublishedPoint) -> str | None:
    if point.model not in catalog.models:
        return f"model {point.model_published} is not in the catalog"
    if point.accelerator not in catalog.accelerators:
        return f"accelerator {point.accelerator_published} is not in the catalog"
    if point.precision not in PRECISIONS:
        return f"precision {point.precision} is not one farebox models ({', '.join(PRECISIONS)})"
    if not catalog.accelerator(point.accelerator).runs(cast(Precision, point.precision)):
        return f"{point.accelerator} runs {point.precision} neither natively nor weight-only"
    return None


def uses_mtp(point: PublishedPoint) -> bool:
    """The model's own MTP draft is searched only where the point says MTP was used, or where the
    benchmark's configuration file lists MTP recipes among those behind the curve (the search
    then has the configurations with and without the draft, as the curve had)."""
    return point.speculative in ("mtp", "mtp-or-none")


def evaluate(
    catalog: Catalog,
    arrays: CatalogArrays,
    points: Iterable[PublishedPoint],
    *,
    batches: Sequence[int] = BATCHES,
    spec: Sequence[tuple[int, float]] = ((0, 0.0),),
) -> list[Evaluation]:
    """One ``Evaluation`` per point, in input order; one frontier per (model, accelerator,
    precision, isl, osl)."""
    points = list(points)
    out: dict[str, Evaluation] = {}
    groups: dict[_GroupKey, list[PublishedPoint]] = defaultdict(list)
    for point in points:
        reason = _unsupported(catalog, point)
        if reason is not None:
            out[point.id] = Evaluation(point, None, None, "", reason)
        else:
            key = (
                point.model,
                point.accelerator,
                point.precision,
                point.isl_tokens,
                point.osl_tokens,
                uses_mtp(point),
                point.recipe,
                point.disaggregated_recipe,
            )
            groups[key].append(point)
    for (model, accelerator, precision, isl, osl, mtp, recipe, disagg), members in groups.items():
        system = catalog.default_system(accelerator)
        fronts: list[Frontier] = []
        if recipe is None and disagg is None:
            fronts.append(
                frontier(
                    catalog,
                    arrays,
                    model,
                    system.id,
                    isl=isl,
                    osl=osl,
                    precisions=(precision,),
                    batches=batches,
                    spec=spec,
                    own_mtp=mtp,
                )
            )
        if recipe is not None:
            fronts.append(
                recipe_frontier(
                    catalog,
                    arrays,
                    model,
                    system.id,
                    recipe,
                    isl=isl,
                    osl=osl,
                    precision=precision,
                    batches=batches,
                    spec=spec,
                    own_mtp=mtp,
                )
            )
        if disagg is not None:
            fronts.append(
                disaggregated_recipe_frontier(
                    catalog,
                    arrays,
                    model,
                    system.id,
                    disagg,
                    isl=isl,
                    osl=osl,
                    precision=precision,
                    batches=batches,
                    spec=spec,
                )
            )
        restricted = recipe is not None or disagg is not None
        for point in members:
            found = [_best_at(f, point, system.id, recipe=restricted) for f in fronts]
            out[point.id] = max(found, key=lambda e: e.tokens_per_s_per_gpu or -1.0)
    return [out[p.id] for p in points]


def _best_at(
    front: Frontier, point: PublishedPoint, system_id: str, *, recipe: bool = False
) -> Evaluation:
    """The best tokens/s per GPU of ``front`` at the point's interactivity; ``recipe``: the
    frontier is of the published recipe's configurations (``recipe_frontier``), said in the
    configuration and the reasons."""
    est, cfg = front.estimate, front.configs
    searched = "the published recipe swept" if recipe else "farebox searches"
    if len(front) == 0:
        reason = f"{point.model} fits on {system_id} in no layout {searched}"
        return Evaluation(point, None, None, "", reason)
    reach = np.flatnonzero(est.tokens_per_s_per_user >= point.tokens_per_s_per_user)
    if reach.size == 0:
        fastest = float(est.tokens_per_s_per_user.max())
        reason = (
            f"no layout reaches {point.tokens_per_s_per_user:g} tok/s/user "
            f"(fastest {fastest:.1f} on {system_id}{' in the recipe' if recipe else ''})"
        )
        return Evaluation(point, None, None, "", reason)
    i = int(reach[np.argmax(est.tokens_per_s_per_device[reach])])
    per_gpu = float(est.tokens_per_s_per_device[i]) * point.published_per_output_token()
    unit = f"{front.layouts[i]}, decode " if front.layouts else ""
    layout = (
        f"{system_id} {unit}tp{cfg.tp[i]} dp{cfg.dp[i]} ep{cfg.ep[i]} pp{cfg.pp[i]} "
        f"b{cfg.batch[i]}"
        + (f" spec{cfg.spec_draft_tokens[i]}" if cfg.spec_draft_tokens[i] else "")
        + (" [recipe]" if recipe else "")
    )
    return Evaluation(point, per_gpu, float(est.tokens_per_s_per_user[i]), layout)


@dataclass(frozen=True, slots=True)
class Spread:
    """Geometric statistics of the ratios of a set of evaluated points."""

    points: int
    off_factor: float
    """exp(mean |ln r|): the geometric mean of max(r, 1/r)."""
    bias: float
    """exp(mean ln r): > 1 when farebox is faster than published on balance."""


def spread(ratios: Sequence[float]) -> Spread | None:
    if not ratios:
        return None
    logs = np.log(np.asarray(ratios, dtype=np.float64))
    return Spread(len(ratios), float(np.exp(np.abs(logs).mean())), float(np.exp(logs.mean())))


@dataclass(frozen=True, slots=True)
class Summary:
    overall: Spread | None
    by_accelerator: dict[str, Spread]
    by_model: dict[str, Spread]
    evaluated: int
    not_evaluable: int


def summarize(evaluations: Sequence[Evaluation]) -> Summary:
    ok = [(e.point, r) for e in evaluations if (r := e.ratio) is not None]
    by_acc: dict[str, list[float]] = defaultdict(list)
    by_model: dict[str, list[float]] = defaultdict(list)
    for point, ratio in ok:
        by_acc[point.accelerator].append(ratio)
        by_model[point.model].append(ratio)
    return Summary(
        overall=spread([r for _, r in ok]),
        by_accelerator={k: s for k, v in sorted(by_acc.items()) if (s := spread(v)) is not None},
        by_model={k: s for k, v in sorted(by_model.items()) if (s := spread(v)) is not None},
        evaluated=len(ok),
        not_evaluable=len(evaluations) - len(ok),
    )


def _seq(point: PublishedPoint) -> str:
    return f"{point.isl_tokens // 1024}k/{point.osl_tokens // 1024}k"


def _counts(point: PublishedPoint) -> str:
    return "in+out" if point.throughput_counts == "input+output" else "out"


def render(evaluations: Sequence[Evaluation], summary: Summary, *, markdown: bool) -> str:
    """The per-point table, the not-evaluable list and the averages, as text or Markdown."""
    head = (
        "point",
        "prec",
        "seq",
        "tok/s/user",
        "published tok/s/GPU",
        "farebox tok/s/GPU",
        "farebox/published",
        "farebox configuration (tok/s/user)",
    )
    rows = []
    for e in evaluations:
        if e.ratio is None:
            continue
        p = e.point
        rows.append(
            (
                p.id,
                p.precision,
                _seq(p),
                f"{p.tokens_per_s_per_user:g}",
                f"{p.tokens_per_s_per_gpu:,.0f} ({_counts(p)})",
                f"{e.tokens_per_s_per_gpu:,.0f}",
                f"{e.ratio:.2f}",
                f"{e.configuration} ({e.tokens_per_s_per_user:.0f})",
            )
        )
    lines = _table(head, rows, markdown)
    skipped = [e for e in evaluations if e.ratio is None]
    lines.append("")
    lines.append(f"Not evaluable ({len(skipped)} of {len(evaluations)}):")
    lines.extend(f"- {e.point.id}: {e.reason}" for e in skipped)
    lines.append("")
    lines.extend(_summary_lines(summary, markdown))
    return "\n".join(lines)


def _summary_lines(summary: Summary, markdown: bool) -> list[str]:
    head = ("scope", "points", "off by (geo-mean of max(r, 1/r))", "bias (geo-mean of r)")
    rows = []
    if summary.overall is not None:
        o = summary.overall
        rows.append(("all", str(o.points), f"{o.off_factor:.2f}x", f"{o.bias:.2f}"))
    for label, table in (("accelerator", summary.by_accelerator), ("model", summary.by_model)):
        for key, s in table.items():
            rows.append((f"{label} {key}", str(s.points), f"{s.off_factor:.2f}x", f"{s.bias:.2f}"))
    return _table(head, rows, markdown)


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> list[str]:
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out.extend("| " + " | ".join(r) + " |" for r in rows)
        return out
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)
    ]
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    out.extend("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return out


def _spec(text: str) -> tuple[int, float]:
    try:
        k, a = text.split(":")
        draft, acceptance = int(k), float(a)
    except ValueError:
        raise InputError(f"--spec: {text!r} is not k:a (e.g. 3:0.7)") from None
    if draft < 1 or not 0.0 <= acceptance <= 1.0 or math.isnan(acceptance):
        raise InputError(f"--spec: {text!r}: k must be >= 1 and a in [0, 1]")
    return draft, acceptance


def evaluate_disaggregated(
    catalog: Catalog,
    arrays: CatalogArrays,
    evaluations: Sequence[Evaluation],
    *,
    batches: Sequence[int] = BATCHES,
    spec: Sequence[tuple[int, float]] = ((0, 0.0),),
) -> list[Evaluation]:
    """``evaluations`` where the points published as disaggregated (``disaggregated = "yes"``)
    also search disaggregated prefill/decode units (``fleet.perf.disagg``), keeping the better
    of the two figures; the other points, and those whose search a recipe already restricts,
    unchanged."""
    out = list(evaluations)
    for i, e in enumerate(out):
        p = e.point
        restricted = p.recipe is not None or p.disaggregated_recipe is not None
        if p.disaggregated != "yes" or restricted or _unsupported(catalog, p) is not None:
            continue
        system = catalog.default_system(p.accelerator)
        front = frontier(
            catalog,
            arrays,
            p.model,
            system.id,
            isl=p.isl_tokens,
            osl=p.osl_tokens,
            precisions=(p.precision,),
            batches=batches,
            spec=spec,
            disaggregated=True,
        )
        unit = _best_at(front, p, system.id)
        if unit.tokens_per_s_per_gpu is None:
            continue
        if e.tokens_per_s_per_gpu is None or unit.tokens_per_s_per_gpu > e.tokens_per_s_per_gpu:
            j = int(
                np.flatnonzero(front.estimate.tokens_per_s_per_user == unit.tokens_per_s_per_user)[
                    0
                ]
            )
            out[i] = Evaluation(
                p, unit.tokens_per_s_per_gpu, unit.tokens_per_s_per_user, front.layouts[j]
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    parser.add_argument("--points", type=Path, default=POINTS_FILE, help="points data file")
    parser.add_argument(
        "--spec", action="append", default=[], help="also search speculative option k:a"
    )
    parser.add_argument(
        "--disaggregated",
        action="store_true",
        help="points published as disaggregated also search disaggregated units (before/after)",
    )
    args = parser.parse_args(argv)
    try:
        spec = [(0, 0.0)] + [_spec(s) for s in args.spec]
        points = load_points(args.points)
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    catalog = load_catalog()
    arrays = build_arrays(catalog)
    evaluations = evaluate(catalog, arrays, points, spec=spec)
    if args.disaggregated:
        before = evaluations
        evaluations = evaluate_disaggregated(catalog, arrays, before, spec=spec)
        for b, a in zip(before, evaluations, strict=True):
            if b.point.disaggregated == "yes":
                print(
                    f"{b.point.id}: ratio {b.ratio or float('nan'):.2f} aggregated -> "
                    f"{a.ratio or float('nan'):.2f} with disaggregated units ({a.configuration})"
                )
    print(render(evaluations, summarize(evaluations), markdown=args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
