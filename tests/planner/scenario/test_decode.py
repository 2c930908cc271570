"""Scenario decoding: the checked-in files decode; every error is one line naming the field."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from fleet.catalog.load import Catalog
from fleet.errors import InputError
from planner.scenario.decode import check_catalog, decode_scenario, load_scenario
from planner.scenario.derived import family_variants, horizon_hours
from planner.scenario.schema import Scenario
from tests.planner.conftest import SCENARIOS

Edit = Callable[[dict[str, Any]], None]


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.name)
def test_checked_in_scenarios_decode_and_reference_the_catalog(path, catalog: Catalog) -> None:
    scenario = load_scenario(path)
    check_catalog(scenario, catalog)
    assert horizon_hours(scenario) % scenario.options.period_hours == 0


def decode_scenario_json(data: bytes) -> Scenario:
    return decode_scenario(data, "json")


def test_toml_and_json_bodies_are_the_same_type() -> None:
    from_toml = decode_scenario((SCENARIOS / "tiny.toml").read_bytes())
    as_json = msgspec.json.encode(from_toml)
    assert decode_scenario(as_json, "json") == from_toml
    assert isinstance(from_toml, Scenario)


def _error(tiny_with, edit: Edit) -> str:
    with pytest.raises(InputError) as info:
        decode_scenario_json(tiny_with(edit))
    message = str(info.value)
    assert "\n" not in message
    return message


def _set(path: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        node = doc
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if key.isdigit() else node[key]
        node[keys[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (_set("fleet.pools.0.count", -1), "$.fleet.pools[0].count: must be >= 0"),
        (_set("fleet.pools.0.colour", "red"), "$.fleet.pools[0].colour: unknown field"),
        (_set("options.method", "gurobi"), "$.options.method: invalid enum value 'gurobi'"),
        (_set("options.period_hours", 5), "$.options.period_hours"),
        (_set("tiers.1.reference_multiplier", 2.5), "$.tiers[1].reference_multiplier: 2.5 is"),
        (_set("tiers.0.multipliers", [1.0, 1.0]), "$.tiers[0].multipliers: duplicate"),
        (_set("tiers.1.variants", ["llama-3.1-70b"]), "$.tiers[1].variants[0]: 'llama-3.1-70b'"),
        (_set("tiers.1.id", "standard"), "$.tiers[1].id: duplicate id 'standard'"),
        (_set("tiers.1.id", "outside"), "$.tiers[1].id: 'outside' is reserved"),
        (
            _set(
                "demand.0.choice.reference_shares", {"standard": 0.6, "fastt": 0.1, "outside": 0.3}
            ),
            "$.demand[0].choice.reference_shares.fastt: unknown tier",
        ),
        (
            _set(
                "demand.0.choice.reference_shares", {"standard": 0.6, "fast": 0.2, "outside": 0.3}
            ),
            "$.demand[0].choice.reference_shares: shares sum to 1.1",
        ),
        (
            _set("demand.0.choice.reference_shares", {"standard": 0.7, "fast": 0.3}),
            "$.demand[0].choice.reference_shares.outside: required",
        ),
        (_set("demand.0.family", "qwen"), "$.demand[0].family: unknown family 'qwen'"),
        (_set("demand.0.requests_per_s", [1.0] * 1345), "exceeds the limit of 1344 hours"),
        (
            _set("demand.0.compact", {"level_requests_per_s": 1, "daily_profile": [1] * 24}),
            "$.demand[0]: give exactly one of requests_per_s or compact",
        ),
        (
            _set("demand.0.prefix_cache_hit_rate", 1.0),
            "$.demand[0].prefix_cache_hit_rate: must be < 1",
        ),
        (_set("fleet.pools.0.availability", [1.0] * 5), "$.fleet.pools[0].availability: 5 values"),
        (
            _set("fleet.pools.0.outages", [{"start_hour": 5, "end_hour": 5}]),
            "$.fleet.pools[0].outages[0].end_hour: must be > start_hour",
        ),
        (_set("meta.name", ""), "$.meta.name: must have length >= 1"),
        (_set("fleet.pools.0.id", "A B"), "$.fleet.pools[0].id: expected `str` matching regex"),
    ],
)
def test_errors_name_the_field(tiny_with, edit: Edit, expected: str) -> None:
    assert _error(tiny_with, edit).startswith(expected) or expected in _error(tiny_with, edit)


def test_missing_field_is_named(tiny_with) -> None:
    def drop(doc: dict[str, Any]) -> None:
        del doc["fleet"]["pools"][0]["system"]

    assert _error(tiny_with, drop) == "$.fleet.pools[0].system: required field missing"


def test_not_toml_is_one_line(tmp_path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[meta\nname = 1\n")
    with pytest.raises(InputError, match=r"^broken.toml: \$: not valid TOML"):
        load_scenario(path)


def test_json_file_by_suffix(tmp_path, tiny_with) -> None:
    path = tmp_path / "tiny.json"
    path.write_bytes(msgspec.json.encode(decode_scenario_json(tiny_with())))
    assert load_scenario(path).meta.name == "tiny"


def test_catalog_references(tiny_with, catalog: Catalog) -> None:
    bad_system = decode_scenario_json(tiny_with(_set("fleet.pools.0.system", "hgx-h900-8")))
    with pytest.raises(
        InputError, match=r"^\$.fleet.pools\[0\].system: unknown system 'hgx-h900-8'"
    ):
        check_catalog(bad_system, catalog)

    def variant(doc: dict[str, Any]) -> None:
        doc["families"][0]["variants"] = [{"model": "llama-9b"}]

    bad_model = decode_scenario_json(tiny_with(variant))
    with pytest.raises(InputError, match=r"^\$.families\[0\].variants\[0\].model: unknown model"):
        check_catalog(bad_model, catalog)


def test_tier_variants_resolve_flagship_keyword(tiny_with) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["families"][0]["flagship"] = "llama-3.1-70b"
        doc["families"][0]["variants"] = [{"model": "llama-3.1-8b", "quality": 20}]
        doc["tiers"][0]["variants"] = ["flagship"]

    s = decode_scenario_json(tiny_with(edit))
    assert family_variants(s, 0, 0) == ("llama-3.1-70b",)
    assert family_variants(s, 0, 1) == ("llama-3.1-70b", "llama-3.1-8b")


def test_a_sold_tier_must_admit_a_variant(tiny_with) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["families"].append(
            {**doc["families"][0], "id": "llama-70b", "flagship": "llama-3.1-70b"}
        )
        doc["demand"].append({**doc["demand"][0], "family": "llama-70b"})
        doc["tiers"][1]["variants"] = ["llama-3.1-8b"]

    assert "admits none of family 'llama-70b'" in _error(tiny_with, edit)


@pytest.mark.parametrize(
    ("expectation", "expected"),
    [
        (
            {"metric": "pool_utilization", "max": 1},
            "$.expect[0].pool: metric 'pool_utilization' needs",
        ),
        (
            {"metric": "gap", "family": "llama-8b", "max": 1},
            "$.expect[0].family: metric 'gap' takes no",
        ),
        ({"metric": "status", "equals": "great"}, "$.expect[0].equals: metric 'status' needs"),
        (
            {"metric": "tier_served", "family": "llama-8b", "tier": "fast", "equals": "yes"},
            "$.expect[0].equals: metric 'tier_served' needs equals = true or false",
        ),
        ({"metric": "revenue_usd", "equals": "1"}, "$.expect[0]: metric 'revenue_usd' is numeric"),
        ({"metric": "revenue_usd"}, "$.expect[0]: metric 'revenue_usd' needs min and/or max"),
        ({"metric": "revenue_usd", "min": 2, "max": 1}, "$.expect[0].max: below min"),
        ({"metric": "reason", "max": 1}, "$.expect[0].contains: metric 'reason' needs"),
        ({"metric": "cost_usd", "pool": "tpu", "max": 1}, "$.expect[0].pool: unknown pool 'tpu'"),
        ({"metric": "margin", "max": 1}, "$.expect[0].metric: invalid enum value 'margin'"),
    ],
)
def test_expectations_are_checked(tiny_with, expectation: dict[str, Any], expected: str) -> None:
    message = _error(tiny_with, _set("expect", [expectation]))
    assert message.startswith(expected), message


def test_valid_expectations_pass(tiny_with) -> None:
    expectations = [
        {"metric": "tier_served", "family": "llama-8b", "tier": "fast", "equals": True},
        {"metric": "variant_share", "variant": "llama-3.1-8b", "min": 0.5},
        {"metric": "reason", "contains": "fast tier"},
        {"metric": "price_multiplier", "family": "llama-8b", "tier": "fast", "min": 1.5},
        {"metric": "pool_utilization", "pool": "h100-us-east", "max": 1},
    ]
    s = decode_scenario_json(tiny_with(_set("expect", expectations)))
    assert len(s.expect) == len(expectations)


def test_scenario_is_frozen(tiny_with) -> None:
    s = decode_scenario_json(tiny_with())
    with pytest.raises(AttributeError):
        s.meta = None  # type: ignore[misc]
    assert json.loads(msgspec.json.encode(s))["meta"]["name"] == "tiny"
