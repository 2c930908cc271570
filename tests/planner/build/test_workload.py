"""planner.build.workload counts what planner.build.pipeline.screen will evaluate, without
evaluating it."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec
import pytest

from fleet.catalog.load import Catalog
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays
from fleet.perf.grid import grid_configs, grid_size, model_spec
from planner.build.pipeline import build_inventory, screen
from planner.build.workload import check_workload, workload
from planner.scenario.decode import decode_scenario, load_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[3] / "scenarios").glob("*.toml"))


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_workload_counts_the_grids_screen_evaluates(
    path: Path, catalog: Catalog, arrays: CatalogArrays
) -> None:
    s = load_scenario(path)
    work = workload(s, catalog)
    pool_max = build_inventory(s, catalog).systems_available.max(axis=1)
    screened = screen(s, catalog, arrays, pool_max)
    assert work.keys == frozenset(screened.estimates)
    search = s.options.search
    spec = tuple((o.draft_tokens, o.acceptance) for o in search.speculative)
    built_rows = sum(
        len(
            grid_configs(
                catalog,
                model,
                system,
                batches=search.batch_caps,
                precisions=search.precisions,
                isl=isl,
                osl=osl,
                spec=model_spec(catalog, model, spec),  # as evaluate_grid builds it
            )
        )
        for model, system, isl, _, osl, _ in work.keys
    )
    assert work.configurations == built_rows
    # every (family, tier, variant, pool) group screened checks its grid's rows once
    assert work.checks >= sum(len(screened.estimates[g.key][0]) for g in screened.groups)


def test_repeated_search_options_cost_nothing(catalog: Catalog) -> None:
    kwargs = {"batches": (1, 8, 64), "precisions": ("fp8", "fp4")}
    plain = grid_size(catalog, "llama-3.1-8b", "hgx-h100-8", **kwargs)  # type: ignore[arg-type]
    repeated = grid_size(
        catalog,
        "llama-3.1-8b",
        "hgx-h100-8",
        batches=(1, 8, 64) * 30,
        precisions=("fp8", "fp4", "fp8") * 100,
        spec=tuple((0, a / 100) for a in range(50)),  # draft length 0: all one option, "off"
    )
    assert repeated == plain > 0


def test_check_workload_names_the_field_and_the_limit(catalog: Catalog) -> None:
    s = load_scenario(SCENARIOS[0].parent / "tiny.toml")
    work = workload(s, catalog)
    check_workload(s, work, max_configurations=work.configurations, max_checks=work.checks)
    with pytest.raises(InputError, match=r"^\$\.options\.search: .* over the limit of 10;"):
        check_workload(s, work, max_configurations=10, max_checks=work.checks)
    with pytest.raises(InputError, match=r"^\$\.options\.search: .*check .* limit of 10;"):
        check_workload(s, work, max_configurations=work.configurations, max_checks=10)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("options", "search", "batch_caps"), list(range(1, 66)), "options.search.batch_caps"),
        (
            ("fleet", "pools", 0, "outages"),
            [{"start_hour": 0, "end_hour": 1}] * 4097,
            "fleet.pools[0].outages",
        ),
        (("fleet", "pools", 0, "availability"), [1.0] * 1345, "fleet.pools[0].availability"),
        (("tiers", 0, "variants"), ["flagship"] * 33, "tiers[0].variants"),
        (("expect",), [{"metric": "status", "equals": "optimal"}] * 4097, "expect"),
    ],
)
def test_scenario_lists_are_bounded_in_the_schema(
    path: tuple[str | int, ...], value: object, field: str
) -> None:
    body = msgspec.toml.decode((SCENARIOS[0].parent / "tiny.toml").read_bytes())
    node = body
    for step in path[:-1]:
        node = node.setdefault(step, {}) if isinstance(step, str) else node[step]
    node[path[-1]] = value
    with pytest.raises(InputError, match=rf"^\$\.{re.escape(field)}: .*length <= "):
        decode_scenario(msgspec.json.encode(body), "json")
