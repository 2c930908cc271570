"""``options.search.engines``: each engine is a candidate dimension the planner chooses per group,
counted before work starts, refused by field when unknown, named in the plan's assignments."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from fleet.catalog.load import Catalog
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays
from planner.build.pipeline import build_inventory, screen
from planner.build.workload import workload
from planner.run import plan_scenario
from planner.scenario.decode import check_catalog, decode_scenario
from planner.scenario.schema import MAX_ENGINES

TINY = Path(__file__).resolve().parents[3] / "scenarios" / "tiny.toml"


def _tiny(engines: list[str] | None):  # type: ignore[no-untyped-def]
    body = msgspec.toml.decode(TINY.read_bytes())
    if engines is not None:
        body["options"].setdefault("search", {})["engines"] = engines
    return decode_scenario(msgspec.json.encode(body), "json")


def test_workload_counts_each_engine(catalog: Catalog, arrays: CatalogArrays) -> None:
    one = workload(_tiny(None), catalog)
    s = _tiny(["any", "trtllm", "vllm", "trtllm"])  # a repeat is evaluated once
    three = workload(s, catalog)
    assert three.configurations == 3 * one.configurations
    assert three.checks == 3 * one.checks
    assert {k[5] for k in three.keys} == {"any", "trtllm", "vllm"}
    pool_max = build_inventory(s, catalog).systems_available.max(axis=1)
    assert three.keys == frozenset(screen(s, catalog, arrays, pool_max).estimates)


def test_unknown_engine_is_named_by_field(catalog: Catalog) -> None:
    s = _tiny(["trtllm", "tgi"])
    for check in (check_catalog, workload):
        with pytest.raises(InputError, match=r"^\$\.options\.search\.engines\[1\]: unknown engine"):
            check(s, catalog)


def test_engine_list_is_bounded() -> None:
    with pytest.raises(InputError, match=r"^\$\.options\.search\.engines: .*length <= "):
        _tiny(["trtllm"] * (MAX_ENGINES + 1))


def test_the_plan_names_the_engine_it_chose(catalog: Catalog, arrays: CatalogArrays) -> None:
    pooled = plan_scenario(_tiny(None), catalog, arrays=arrays)
    assert pooled.assignments and {a.engine for a in pooled.assignments} == {"any"}
    plan = plan_scenario(_tiny(["trtllm", "sglang"]), catalog, arrays=arrays)
    assert plan.status == "optimal"
    assert plan.assignments and {a.engine for a in plan.assignments} <= {"trtllm", "sglang"}
