"""Sweep grids: the --set grammar, paths into the scenario, counting before expanding."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet.errors import InputError
from planner.run import load_scenario
from planner.scenario.schema import Scenario
from planner.sweep.grid import (
    count_points,
    expand,
    format_value,
    iter_points,
    parse_spec,
    parse_specs,
    spec_fields,
)

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.fixture(scope="module")
def tiny() -> Scenario:
    return load_scenario(SCENARIOS / "tiny.toml")


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("a=0..3", (0, 1, 2, 3)),
        ("a=1,2.5,x", (1, 2.5, "x")),
        ("a=0.5..1.5:0.25", (0.5, 0.75, 1.0, 1.25, 1.5)),
        ("a=0..10:5", (0, 5, 10)),
        ("a=0.1..0.3:0.1", (0.1, 0.2, 0.3)),  # no 0.30000000000000004 lost to rounding
        ("a=[1.5,2],[2,3,4],[]", ((1.5, 2), (2, 3, 4), ())),
        ("a=none,true,false", (None, True, False)),
        ("a=1..2,5", (1, 2, 5)),
    ],
)
def test_grammar(text: str, values: tuple[object, ...]) -> None:
    assert parse_spec(text, max_values=100).values == values


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a", "write PATH=VALUES"),
        ("a=", "no values"),
        ("a=3..1", "runs backwards"),
        ("a=0.5..2", "needs a step"),
        ("a=0..2:0", "step must be > 0"),
        ("a=0..2:-1", "range step"),
        ("a=1,,2", "empty value"),
        ("a=[1,[2]]", "do not nest"),
        ("a=[1,2", "without ']'"),
        ("a=1,1", "repeated"),
        ("a=0..1000000000", "more than 100 values"),
        # overflowing and non-finite numbers: refused, never an OverflowError
        ("a=1..1e400:1", "'1e400' is beyond the range of a number"),
        ("a=1.." + "9" * 400, "more than 100 values"),
        ("a=1.." + "9" * 400 + ":0.5", "is beyond the range of a number"),
        ("a=1..2:1e-320", "more than 100 values"),
        ("a=-1e308..1e308:1e306", "more than 100 values"),
        ("a=1e400", "'1e400' is beyond the range of a number"),
        ("a=[1,-1e999]", "'-1e999' is beyond the range of a number"),
    ],
)
def test_grammar_errors_name_the_path(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        parse_spec(text, max_values=100)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("--set a")


def test_points_counted_before_expanding() -> None:
    specs = parse_specs(["a=0..9", "b=0..9"], max_points=100)
    assert count_points(specs, max_points=100) == 100
    with pytest.raises(InputError, match=r"10 x 10 x 2 = 200 grid points, over the limit of 100"):
        parse_specs(["a=0..9", "b=0..9", "c=1,2"], max_points=100)
    with pytest.raises(InputError, match="given twice"):
        parse_specs(["a=1", "a=2"], max_points=100)


def test_expand_applies_values_by_id_and_checks_each_point(tiny: Scenario) -> None:
    specs = parse_specs(
        [
            "pools.h100-us-east.count=1..3",
            "tiers.fast.multipliers=[1.5,2],[2,3]",
            "demand.llama-8b.choice.price_sensitivity=2",
        ],
        max_points=64,
    )
    points = expand(tiny, specs, max_points=64)
    assert len(points) == 6
    assert [p.index for p in points] == list(range(6))
    # the first path varies slowest
    assert [p.values[0] for p in points] == [1, 1, 2, 2, 3, 3]
    last = points[-1].scenario
    assert last.fleet.pools[0].count == 3
    assert last.tiers[1].multipliers == (2.0, 3.0)
    assert last.tiers[0].multipliers == tiny.tiers[0].multipliers
    assert last.demand[0].choice.price_sensitivity == 2.0
    assert last.meta.name == "tiny[5]"
    # the base scenario is untouched
    assert tiny.fleet.pools[0].count == 6
    # the full path, an index and the alias reach the same field
    for path in ("fleet.pools.h100-us-east.count", "fleet.pools.0.count"):
        (point,) = expand(tiny, parse_specs([f"{path}=4"], max_points=1), max_points=1)
        assert point.scenario.fleet.pools[0].count == 4


def test_iter_points_builds_each_point_when_asked(tiny: Scenario) -> None:
    specs = parse_specs(["pools.h100-us-east.count=1,-1,2"], max_points=8)
    points = iter_points(tiny, specs, max_points=8)
    first = next(points)
    assert first.index == 0 and first.scenario.fleet.pools[0].count == 1
    with pytest.raises(InputError, match=r"--set pools.h100-us-east.count=-1: .*must be >= 0"):
        next(points)  # the bad point fails only when it is built
    with pytest.raises(InputError, match="has no element 'nope'"):
        next(iter_points(tiny, parse_specs(["pools.nope.count=1"], max_points=1), max_points=1))


def test_spec_fields_are_schema_paths(tiny: Scenario) -> None:
    specs = parse_specs(
        ["pools.h100-us-east.count=1", "options.time_limit_s=5", "tiers.fast.max_ttft_ms=9"],
        max_points=1,
    )
    assert spec_fields(tiny, specs) == (
        "$.fleet.pools[0].count",
        "$.options.time_limit_s",
        "$.tiers[1].max_ttft_ms",
    )
    with pytest.raises(InputError, match=r"--set pools.nope.count: \$.fleet.pools has no"):
        spec_fields(tiny, parse_specs(["pools.nope.count=1"], max_points=1))


def test_no_specs_is_the_scenario_itself(tiny: Scenario) -> None:
    (point,) = expand(tiny, (), max_points=1)
    assert point.scenario == tiny


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("pools.nope.count=1", r"--set pools.nope.count: \$.fleet.pools has no element 'nope'"),
        ("pools.h100-us-east.cnt=1", r"\$.fleet.pools\[0\] has no field 'cnt'"),
        ("tiers.fast=1", r"\$.tiers\[1\] is a table; name one of its fields"),
        ("pools.h100-us-east.count=2.5", r"\$.fleet.pools\[0\].count: expected `int`, got `float`"),
        ("pools.h100-us-east.count=many", r"expected `int`, got `str`"),
        ("pools.h100-us-east.count=-1", r"count: must be >= 0"),
        ("tiers.fast.multipliers=2,3", r"is a list; write each value in brackets"),
        ("pools.h100-us-east.count=[1,2]", r"is a single value, not a list"),
        ("tiers.fast.multipliers=[3,4]", r"reference_multiplier: 2 is not on the menu"),
        ("options.method=gurobi", r"\$.options.method"),
        ("meta.name.x=1", r"\$.meta.name is a value"),
    ],
)
def test_bad_paths_and_values_are_one_line_naming_the_path(
    tiny: Scenario, spec: str, message: str
) -> None:
    specs = parse_specs([spec], max_points=8)
    with pytest.raises(InputError, match=message) as err:
        expand(tiny, specs, max_points=8)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"--set {spec.split('=')[0]}")


def test_format_value_round_trips() -> None:
    for text in ("a=3", "a=0.5", "a=[2,3]", "a=none", "a=highs", "a=true"):
        (value,) = parse_spec(text, max_values=4).values
        assert format_value(value) == text.split("=")[1]
