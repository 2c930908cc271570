"""bench/published_points.py: the published points decode, and the model is compared to each.

No network: the points come from the checked-in data file, the model from the catalog."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec
import numpy as np
import pytest

from bench.published_points import (
    BATCHES,
    POINTS_FILE,
    evaluate,
    load_points,
    main,
    render,
    spread,
    summarize,
    uses_mtp,
)
from bench.recipes import DisaggUnit, disaggregated_recipe_frontier, recipe_frontier
from fleet.catalog import PRECISIONS
from fleet.catalog.load import Catalog
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays
from fleet.perf.frontier import frontier
from fleet.perf.grid import layouts


@pytest.fixture(scope="module")
def points():
    return load_points()


@pytest.fixture(scope="module")
def evaluations(catalog: Catalog, arrays: CatalogArrays, points):
    return evaluate(catalog, arrays, points)


def test_every_entry_decodes_with_a_source(points) -> None:
    raw = msgspec.toml.decode(POINTS_FILE.read_bytes())
    assert len(points) == len(raw["points"]) >= 20
    assert len({p.id for p in points}) == len(points)
    for p in points:
        assert p.source_url.startswith("https://")
        assert p.location and p.engine and p.serving_notes
        if "inferencex.semianalysis.com" in p.source_url:
            # InferenceX charts count input + output tokens per GPU.
            assert p.throughput_counts == "input+output", p.id


def test_loader_names_the_field_and_duplicates(tmp_path: Path, points) -> None:
    text = POINTS_FILE.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace('precision = "fp8"', 'precision = "fp8"\nbogus = 1', 1))
    with pytest.raises(InputError, match=r"bogus.*\$\.points\[0\]"):
        load_points(bad)
    first = text.index("\n[[points]]\n")
    second = text.index("\n[[points]]\n", first + 1)
    dup = tmp_path / "dup.toml"
    dup.write_text(text + "\n" + text[first:second])
    with pytest.raises(InputError, match=f"duplicate id '{points[0].id}'"):
        load_points(dup)
    with pytest.raises(InputError, match=r"missing\.toml"):
        load_points(tmp_path / "missing.toml")


def test_a_ratio_for_every_point_the_catalog_covers(catalog: Catalog, evaluations) -> None:
    ratios = 0
    for e in evaluations:
        p = e.point
        covered = (
            p.model in catalog.models
            and p.accelerator in catalog.accelerators
            and p.precision in PRECISIONS
        )
        if not covered:
            assert e.ratio is None
            assert "not in the catalog" in e.reason or "not one farebox models" in e.reason
            continue
        if e.ratio is None:
            # The only other outcome is a model finding, stated with the fastest it reaches.
            assert e.reason.startswith("no layout reaches"), (p.id, e.reason)
            continue
        ratios += 1
        assert math.isfinite(e.ratio) and e.ratio > 0
        assert e.tokens_per_s_per_user >= p.tokens_per_s_per_user
        assert e.configuration
    assert ratios >= 40


def test_ratio_is_the_frontier_best_in_published_accounting(
    catalog: Catalog, arrays: CatalogArrays, points
) -> None:
    point = next(p for p in points if p.id == "l70-b200-fp8-1k1k-76")
    (e,) = evaluate(catalog, arrays, [point])
    front = frontier(
        catalog,
        arrays,
        "llama-3.1-70b",
        "hgx-b200-8",
        isl=1024,
        osl=1024,
        precisions=("fp8",),
        batches=BATCHES,
    )
    reach = front.estimate.tokens_per_s_per_user >= 76
    best = front.estimate.tokens_per_s_per_device[reach].max()
    assert e.tokens_per_s_per_gpu == pytest.approx(best * 2.0)  # (1024 + 1024) / 1024
    output_only = msgspec.structs.replace(point, throughput_counts="output")
    (o,) = evaluate(catalog, arrays, [output_only])
    assert o.tokens_per_s_per_gpu == pytest.approx(best)
    assert o.ratio == pytest.approx(e.ratio / 2.0)


def test_unevaluable_points_are_listed_with_reasons(evaluations) -> None:
    summary = summarize(evaluations)
    skipped = [e for e in evaluations if e.ratio is None]
    assert summary.not_evaluable == len(skipped) > 0
    assert summary.evaluated + summary.not_evaluable == len(evaluations)
    text = render(evaluations, summary, markdown=True)
    for e in skipped:
        assert f"- {e.point.id}: {e.reason}" in text
    reasons = {e.point.id: e.reason for e in skipped}
    assert "MI355X is not in the catalog" in reasons["l70-mi355x-fp8-1k1k-55"]
    # Qwen3.5 (linear attention) and B300 are in the catalog now: their points are evaluated
    assert {"qwen35-b200-fp4-1k1k-95", "r1-b300-fp4-1k1k-78"}.isdisjoint(reasons)


def test_average_is_the_geometric_mean_of_the_worse_side(evaluations) -> None:
    s = spread([2.0, 0.5, 1.0])
    assert s is not None and s.off_factor == pytest.approx(2 ** (2 / 3)) and s.bias == 1.0
    assert spread([]) is None
    summary = summarize(evaluations)
    r = np.array([e.ratio for e in evaluations if e.ratio is not None])
    assert summary.overall.off_factor == pytest.approx(np.exp(np.abs(np.log(r)).mean()))
    assert summary.overall.bias == pytest.approx(np.exp(np.log(r).mean()))
    assert sum(s.points for s in summary.by_accelerator.values()) == len(r)


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| all |" in out and "Not evaluable" in out
    assert main(["--spec", "3"]) == 2
    assert "--spec" in capsys.readouterr().err


def test_every_recipe_can_produce_its_point(points) -> None:
    recipes = [p for p in points if p.recipe is not None]
    assert len(recipes) >= 10
    for p in recipes:
        r = p.recipe
        assert r.source.startswith("https://github.com/") and r.note
        best = max(
            cap * p.tokens_per_s_per_user * p.published_per_output_token() / gpus
            for gpus, cap in zip(r.gpus, r.max_concurrency, strict=True)
        )
        assert best >= p.tokens_per_s_per_gpu, p.id


def test_recipe_frontier_stays_in_the_recipe(catalog: Catalog, arrays: CatalogArrays, points):
    point = next(p for p in points if p.id == "oss-b200-fp4-1k1k-72")
    recipe = point.recipe
    front = recipe_frontier(
        catalog,
        arrays,
        "gpt-oss-120b",
        "hgx-b200-8",
        recipe,
        isl=1024,
        osl=1024,
        precision="fp4",
        batches=BATCHES,
    )
    assert len(front) > 0
    cap = dict(zip(recipe.gpus, recipe.max_concurrency, strict=True))
    for i in range(len(front)):
        devices = int(front.estimate.devices_per_replica[i])
        assert devices in cap and front.configs.batch[i] <= cap[devices]
        assert front.configs.pp[i] == 1
    # The recipe can only take configurations away: never faster than the full search.
    (limited,) = evaluate(catalog, arrays, [point])
    (full,) = evaluate(catalog, arrays, [msgspec.structs.replace(point, recipe=None)])
    assert "[recipe]" in limited.configuration and "[recipe]" not in full.configuration
    assert limited.tokens_per_s_per_gpu <= full.tokens_per_s_per_gpu
    # Without data-parallel attention a recipe keeps dp = 1.
    tp_only = msgspec.structs.replace(recipe, attention_dp=False)
    front = recipe_frontier(
        catalog,
        arrays,
        "gpt-oss-120b",
        "hgx-b200-8",
        tp_only,
        isl=1024,
        osl=1024,
        precision="fp4",
        batches=BATCHES,
    )
    assert len(front) > 0 and (front.configs.dp == 1).all()


def test_recipe_lists_must_pair(tmp_path: Path) -> None:
    text = POINTS_FILE.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(
        text.replace("max_concurrency = [256, 256, 64, 8]", "max_concurrency = [256]", 1)
    )
    with pytest.raises(InputError, match=r"recipe: max_concurrency needs one entry per gpus"):
        load_points(bad)


def test_mtp_or_none_searches_with_and_without_the_draft(
    catalog: Catalog, arrays: CatalogArrays, points
) -> None:
    both = [p for p in points if p.speculative == "mtp-or-none"]
    assert both and all(uses_mtp(p) for p in both)
    assert all("configuration file" in p.serving_notes for p in both)
    # In the open search (a recipe's units say for themselves whether they ran MTP).
    point = next(p for p in both if p.id == "r1-b200-fp8-8k1k-75")
    point = msgspec.structs.replace(point, recipe=None, disaggregated_recipe=None)
    (with_draft,) = evaluate(catalog, arrays, [point])
    (without,) = evaluate(
        catalog, arrays, [msgspec.structs.replace(point, speculative="unspecified")]
    )
    # The draft is an extra option: never worse than the search without it.
    assert with_draft.tokens_per_s_per_gpu >= without.tokens_per_s_per_gpu
    assert "spec" not in without.configuration


def _unit_gpus(unit: DisaggUnit) -> int:
    return unit.prefill_workers * unit.prefill.tp + unit.decode_workers * unit.decode.tp


def test_every_disaggregated_recipe_can_produce_its_point(points) -> None:
    with_units = [p for p in points if p.disaggregated_recipe is not None]
    assert len(with_units) >= 3
    for p in with_units:
        r = p.disaggregated_recipe
        assert r.source.startswith("https://github.com/") and r.note
        # Only disaggregated recipes behind the curve: the point was served disaggregated; with
        # aggregated ones beside them, either may be the page's best.
        assert p.disaggregated == ("unspecified" if p.recipe is not None else "yes"), p.id
        best = max(
            u.max_concurrency
            * p.tokens_per_s_per_user
            * p.published_per_output_token()
            / _unit_gpus(u)
            for u in r.units
        )
        assert best >= p.tokens_per_s_per_gpu, p.id


def test_disaggregated_recipe_frontier_stays_in_its_units(
    catalog: Catalog, arrays: CatalogArrays, points
) -> None:
    point = next(p for p in points if p.id == "r1-h100-fp8-1k1k-100")
    recipe = point.disaggregated_recipe
    front = disaggregated_recipe_frontier(
        catalog,
        arrays,
        "deepseek-r1",
        "hgx-h100-8",
        recipe,
        isl=1024,
        osl=1024,
        precision="fp8",
        batches=BATCHES,
    )
    assert len(front) > 0 and len(front.layouts) == len(front)
    c, e = front.configs, front.estimate
    for i in range(len(front)):
        matches = [
            u
            for u in recipe.units
            if (u.decode.attention_dp and (c.tp[i], c.dp[i]) == (1, u.decode.tp))
            or (not u.decode.attention_dp and (c.tp[i], c.dp[i]) == (u.decode.tp, 1))
        ]
        matches = [
            u
            for u in matches
            if c.ep[i] == u.decode.ep
            and c.batch[i] <= math.ceil(u.max_concurrency / u.decode_workers)
            and e.devices_per_replica[i] == _unit_gpus(u)
            and (c.spec_draft_tokens[i] == 0 or u.mtp)
        ]
        assert matches, front.layouts[i]
        assert c.pp[i] == 1
    # Tensor parallel over two 8-GPU nodes is not in farebox's own layout grid: the recipe's
    # workers are evaluated as the benchmark ran them.
    own = layouts(catalog, "deepseek-r1", "hgx-h100-8", precisions=("fp8",))
    assert not np.any((own.tp == 16) & (own.pp == 1))
    assert np.any(c.tp == 16)


def test_a_disaggregated_recipe_replaces_the_open_search(
    catalog: Catalog, arrays: CatalogArrays, points
) -> None:
    point = next(p for p in points if p.id == "r1-h100-fp8-1k1k-71")
    (limited,) = evaluate(catalog, arrays, [point])
    (full,) = evaluate(catalog, arrays, [msgspec.structs.replace(point, disaggregated_recipe=None)])
    assert "disaggregated" in limited.configuration and "[recipe]" in limited.configuration
    assert "disaggregated" not in full.configuration
    assert limited.ratio is not None and full.ratio is not None
    # An STP-only recipe never gets the draft.
    stp = msgspec.structs.replace(
        point.disaggregated_recipe,
        units=tuple(u for u in point.disaggregated_recipe.units if not u.mtp),
    )
    (no_draft,) = evaluate(
        catalog, arrays, [msgspec.structs.replace(point, disaggregated_recipe=stp)]
    )
    assert no_draft.ratio is not None and "spec" not in no_draft.configuration
    assert no_draft.tokens_per_s_per_gpu <= limited.tokens_per_s_per_gpu


def test_disaggregated_recipe_errors_name_the_field(tmp_path: Path) -> None:
    text = POINTS_FILE.read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("decode_workers = 3,", "decode_workers = 0,", 1))
    with pytest.raises(InputError, match=r"disaggregated_recipe\.units\[\d+\]\.decode_workers"):
        load_points(bad)


def test_with_both_recipes_the_better_one_counts(
    catalog: Catalog, arrays: CatalogArrays, points
) -> None:
    both = [p for p in points if p.recipe is not None and p.disaggregated_recipe is not None]
    assert len(both) >= 10
    for point in (p for p in both if p.id in ("r1-b200-fp8-1k1k-100", "r1-b200-fp4-8k1k-73")):
        (e,) = evaluate(catalog, arrays, [point])
        (agg,) = evaluate(
            catalog, arrays, [msgspec.structs.replace(point, disaggregated_recipe=None)]
        )
        (dis,) = evaluate(catalog, arrays, [msgspec.structs.replace(point, recipe=None)])
        figures = [x.tokens_per_s_per_gpu or 0.0 for x in (agg, dis)]
        assert e.tokens_per_s_per_gpu == pytest.approx(max(figures))
        assert ("disaggregated" in e.configuration) == (figures[1] > figures[0])
