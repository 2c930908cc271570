"""Every number of a scenario is finite and bounded: typos such as 1e308, inf or 2**63 are one-line
errors naming the field (a 422 on the API, exit 2 on the CLI), never an overflow in the planner."""

from __future__ import annotations

import re

import msgspec
import pytest

from fleet.errors import InputError
from planner.scenario.decode import decode_scenario
from planner.scenario.schema import MAX_POOL_SYSTEMS, Expectation, Scenario
from tests.planner.conftest import SCENARIOS

TINY = (SCENARIOS / "tiny.toml").read_text()
RATES = "  140, 120, 110, 110,"


def _tiny(old: str, new: str) -> str:
    assert TINY.count(old) == 1, old
    return TINY.replace(old, new)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_tiny(RATES, "  1e308, 120, 110, 110,"), "$.demand[0].requests_per_s[0]: must be <="),
        (_tiny(RATES, "  inf, 120, 110, 110,"), "$.demand[0].requests_per_s[0]: must be <="),
        (_tiny(RATES, "  nan, 120, 110, 110,"), "$.demand[0].requests_per_s[0]: must be >= 0"),
        (
            _tiny("count = 6 }", "count = 9223372036854775808 }"),
            f"$.fleet.pools[0].count: must be <= {MAX_POOL_SYSTEMS}",
        ),
        (
            _tiny("count = 6 }", "count = 9223372036854775807 }"),
            f"$.fleet.pools[0].count: must be <= {MAX_POOL_SYSTEMS}",
        ),
        (
            _tiny("count = 6 }", "count = 6, usd_per_hour = inf }"),
            "$.fleet.pools[0].usd_per_hour: must be <= 1000000",
        ),
        (
            _tiny("usd_per_m_output_tokens = 0.20", "usd_per_m_output_tokens = 1e300"),
            "$.families[0].usd_per_m_output_tokens: must be <=",
        ),
        (
            _tiny("mean_output_tokens = 400", "mean_output_tokens = 1e20"),
            "$.demand[0].mean_output_tokens: must be <= 10000000",
        ),
        (
            _tiny("multipliers = [1.5, 2.0, 3.0, 4.0]", "multipliers = [1.5, 2.0, 3.0, 1e9]"),
            "$.tiers[1].multipliers[3]: must be <= 1000",
        ),
        (
            _tiny("choice.price_sensitivity = 2.5", "choice.price_sensitivity = 1e308"),
            "$.demand[0].choice.price_sensitivity: must be <= 100",
        ),
        (
            _tiny("time_limit_s = 10", "time_limit_s = inf"),
            "$.options.time_limit_s: must be <= 604800",
        ),
        (_tiny("max_ttft_ms = 500", "max_ttft_ms = -inf"), "$.tiers[1].max_ttft_ms: must be > 0"),
    ],
)
def test_out_of_range_numbers_name_the_field(text: str, expected: str) -> None:
    with pytest.raises(InputError) as info:
        decode_scenario(text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(expected), message


def test_json_number_out_of_range_names_the_field(tiny_with) -> None:
    body = tiny_with().replace(b'"count":6', b'"count":1e400')
    assert body != tiny_with()
    with pytest.raises(InputError, match=re.escape("$.fleet.pools[0].count: ")):
        decode_scenario(body, "json")


def test_compact_peak_is_bounded_across_its_factors() -> None:
    rates = TINY[TINY.index("requests_per_s = [") : TINY.index("]", TINY.index("requests_per_s"))]
    text = TINY.replace(
        rates + "]",
        "compact.level_requests_per_s = 1e7\ncompact.daily_profile = [1.5" + ", 1.0" * 23 + "]",
    )
    with pytest.raises(InputError) as info:
        decode_scenario(text)
    assert str(info.value).startswith("$.demand[0].compact: peak of 1.5e+07 requests/s")


def _unbounded(t: msgspec.inspect.Type, path: str, seen: set[type]) -> list[str]:
    """Paths of numeric fields with no upper bound, walking the scenario's types."""
    i = msgspec.inspect
    if isinstance(t, i.IntType | i.FloatType):
        return [] if t.le is not None or t.lt is not None else [path]
    if isinstance(t, i.UnionType):
        return [p for x in t.types for p in _unbounded(x, path, seen)]
    if isinstance(t, i.TupleType):
        return [p for k, x in enumerate(t.item_types) for p in _unbounded(x, f"{path}[{k}]", seen)]
    if isinstance(t, i.VarTupleType | i.ListType):
        return _unbounded(t.item_type, f"{path}[]", seen)
    if isinstance(t, i.DictType):
        return _unbounded(t.value_type, f"{path}{{}}", seen)
    if isinstance(t, i.StructType):
        if t.cls in seen or t.cls is Expectation:
            return []  # expectations' min/max are free comparison bounds, not planner inputs
        seen.add(t.cls)
        return [p for f in t.fields for p in _unbounded(f.type, f"{path}.{f.name}", seen)]
    return []


def test_every_number_of_the_schema_has_an_upper_bound() -> None:
    assert _unbounded(msgspec.inspect.type_info(Scenario), "$", set()) == []
