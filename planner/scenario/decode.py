"""Decode a scenario at the edge and check what one field cannot check alone.

``decode_scenario`` parses TOML or JSON into ``planner.scenario.schema.Scenario`` (one JSON Decoder,
built once), turns msgspec's errors into ``InputError`` messages that start with the field path
(``$.fleet.pools[2].count: must be >= 0``), then runs ``check_scenario``: duplicate ids,
references between sections (demand -> family, tier variants -> family variants, reference shares
-> tiers), horizon lengths and limits, and that each expectation's selectors fit its metric.
``check_catalog`` adds the references into the catalog (systems, models); it needs the catalog,
so ``planner.run.plan_scenario`` calls it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import msgspec

from fleet.catalog.load import Catalog
from fleet.errors import InputError
from planner.scenario.derived import family_variants
from planner.scenario.schema import (
    FLAGSHIP,
    HOURS_PER_WEEK,
    MAX_HOURS,
    MAX_REQUESTS_PER_S,
    OUTSIDE,
    Expectation,
    Metric,
    Scenario,
)

Format = Literal["toml", "json"]

_JSON_DECODER = msgspec.json.Decoder(Scenario)

Selector = Literal["family", "tier", "pool", "variant"]

METRIC_SELECTORS: dict[Metric, tuple[frozenset[Selector], frozenset[Selector]]] = {
    # metric: (required selectors, allowed selectors)
    "revenue_usd": (frozenset(), frozenset({"family", "tier"})),
    "cost_usd": (frozenset(), frozenset({"family", "tier", "pool"})),
    "margin_usd": (frozenset(), frozenset({"family"})),
    "margin_fraction": (frozenset(), frozenset({"family"})),
    "gap": (frozenset(), frozenset()),
    "status": (frozenset(), frozenset()),
    "tier_served": (frozenset({"family", "tier"}), frozenset({"family", "tier", "variant"})),
    "price_multiplier": (frozenset({"family", "tier"}), frozenset({"family", "tier"})),
    "pool_utilization": (frozenset({"pool"}), frozenset({"pool"})),
    "served_fraction": (frozenset(), frozenset({"family", "tier"})),
    "variant_share": (frozenset({"variant"}), frozenset({"family", "tier", "variant"})),
    "reason": (frozenset(), frozenset()),
}
"""Which selectors each metric requires and which it accepts."""

_STATUSES = ("optimal", "feasible", "infeasible", "no_solution")
_SELECTORS: tuple[Selector, ...] = ("family", "tier", "pool", "variant")
_SHARE_TOLERANCE = 1e-6

_AT = re.compile(r"^(?P<what>.*?)(?: - at `(?P<path>\$[^`]*)`)?$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<field>[^`]*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<field>[^`]*)`$")
_BOUND = re.compile(r"^Expected `\w+` (?P<op>[<>]=?) (?P<value>\S+)$")
_LENGTH = re.compile(r"^Expected `\w+` of length (?P<op>[<>]=?) (?P<value>\S+)$")


def _field_error(err: msgspec.ValidationError) -> InputError:
    """One line, path first: ``$.fleet.pools[2].count: must be >= 0``."""
    match = _AT.match(str(err))
    what = match.group("what") if match else str(err)
    path = (match.group("path") if match else None) or "$"
    if m := _UNKNOWN.match(what):
        return InputError(f"{path}.{m.group('field')}: unknown field")
    if m := _MISSING.match(what):
        return InputError(f"{path}.{m.group('field')}: required field missing")
    if m := _BOUND.match(what):
        return InputError(f"{path}: must be {m.group('op')} {_number(m.group('value'))}")
    if m := _LENGTH.match(what):
        return InputError(f"{path}: must have length {m.group('op')} {m.group('value')}")
    return InputError(f"{path}: {what[0].lower()}{what[1:]}" if what else path)


def _number(text: str) -> str:
    """msgspec's bound as a reader writes it: ``10000000.0`` -> ``10000000``, ``0.5`` stays."""
    try:
        value = float(text)
    except ValueError:
        return text
    return str(int(value)) if value.is_integer() and abs(value) < 1e16 else f"{value:g}"


def decode_scenario(data: bytes | str, format: Format = "toml") -> Scenario:
    """Parse and check a scenario; every problem is an ``InputError`` naming the field."""
    try:
        if format == "toml":
            scenario = msgspec.toml.decode(data, type=Scenario)
        elif format == "json":
            scenario = _JSON_DECODER.decode(data)
        else:
            raise InputError(f"format: unknown scenario format {format!r} (toml or json)")
    except msgspec.ValidationError as err:
        raise _field_error(err) from None
    except msgspec.DecodeError as err:
        raise InputError(f"$: not valid {format.upper()}: {err}") from None
    except UnicodeDecodeError as err:
        raise InputError(
            f"$: not valid {format.upper()}: invalid UTF-8 (byte 0x{err.object[err.start]:02x} "
            f"at offset {err.start})"
        ) from None
    except RecursionError:
        # The TOML parser recurses per level of nesting; no scenario nests more than a few.
        raise InputError(f"$: not valid {format.upper()}: nested too deeply") from None
    check_scenario(scenario)
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file; ``.json`` is JSON, anything else TOML. Errors name the file."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as err:
        raise InputError(f"{file}: cannot read: {err.strerror}") from None
    try:
        return decode_scenario(data, "json" if file.suffix == ".json" else "toml")
    except InputError as err:
        raise InputError(f"{file.name}: {err}") from None


def _duplicates(ids: Iterable[str], where: str, field: str = "id") -> None:
    seen: set[str] = set()
    for i, key in enumerate(ids):
        if key in seen:
            raise InputError(f"{where}[{i}].{field}: duplicate {field} {key!r}")
        seen.add(key)


def check_scenario(s: Scenario) -> None:
    """Cross-field checks that need no catalog."""
    _duplicates((p.id for p in s.fleet.pools), "$.fleet.pools")
    _duplicates((f.id for f in s.families), "$.families")
    _duplicates((t.id for t in s.tiers), "$.tiers")
    _duplicates((d.family for d in s.demand), "$.demand", "family")
    hours = _check_demand_horizon(s)
    _check_demand_rates(s)
    _check_pools(s, hours)
    _check_families(s)
    _check_tiers(s)
    _check_shares(s)
    for i, expectation in enumerate(s.expect):
        _check_expectation(s, expectation, f"$.expect[{i}]")


def _check_demand_horizon(s: Scenario) -> int:
    families = {f.id for f in s.families}
    hours = None
    for i, d in enumerate(s.demand):
        where = f"$.demand[{i}]"
        if d.family not in families:
            raise InputError(f"{where}.family: unknown family {d.family!r}")
        if (d.requests_per_s is None) == (d.compact is None):
            raise InputError(f"{where}: give exactly one of requests_per_s or compact")
        if d.hours > MAX_HOURS:
            raise InputError(
                f"{where}: horizon of {d.hours} hours exceeds the limit of {MAX_HOURS} hours "
                f"({MAX_HOURS // HOURS_PER_WEEK} weeks)"
            )
        if hours is None:
            hours = d.hours
        elif d.hours != hours:
            raise InputError(
                f"{where}: forecast covers {d.hours} hours but $.demand[0] covers {hours}; "
                "all families share one horizon"
            )
    missing = families - {d.family for d in s.demand}
    if missing:
        raise InputError(f"$.demand: no demand for family {sorted(missing)[0]!r}")
    assert hours is not None  # min_length=1 on demand
    if hours % s.options.period_hours:
        raise InputError(
            f"$.options.period_hours: {s.options.period_hours} does not divide the horizon of "
            f"{hours} hours"
        )
    return hours


def _check_demand_rates(s: Scenario) -> None:
    """A compact forecast's peak (level x daily x weekly) stays within MAX_REQUESTS_PER_S, as an
    explicit forecast's every value does (by its type)."""
    for i, d in enumerate(s.demand):
        c = d.compact
        if c is None:
            continue
        peak = c.level_requests_per_s * max(c.daily_profile) * max(c.weekly_profile)
        if peak > MAX_REQUESTS_PER_S:
            raise InputError(
                f"$.demand[{i}].compact: peak of {peak:.3g} requests/s (level x daily x weekly "
                f"profile) exceeds the limit of {MAX_REQUESTS_PER_S:g}"
            )


def _check_pools(s: Scenario, hours: int) -> None:
    for i, pool in enumerate(s.fleet.pools):
        where = f"$.fleet.pools[{i}]"
        if pool.availability is not None and len(pool.availability) not in (
            hours,
            HOURS_PER_WEEK,
        ):
            raise InputError(
                f"{where}.availability: {len(pool.availability)} values; give one per hour of "
                f"the horizon ({hours}) or {HOURS_PER_WEEK} repeated weekly"
            )
        if (
            pool.availability is not None
            and len(pool.availability) == HOURS_PER_WEEK
            and hours % HOURS_PER_WEEK
        ):
            raise InputError(
                f"{where}.availability: a weekly profile needs a horizon of whole weeks "
                f"(it is {hours} hours)"
            )
        for j, outage in enumerate(pool.outages):
            if outage.end_hour <= outage.start_hour:
                raise InputError(f"{where}.outages[{j}].end_hour: must be > start_hour")
            if outage.start_hour >= hours:
                raise InputError(
                    f"{where}.outages[{j}].start_hour: after the horizon ({hours} hours)"
                )


def _check_families(s: Scenario) -> None:
    for i, family in enumerate(s.families):
        models = [family.flagship] + [v.model for v in family.variants]
        for j, model in enumerate(models[1:]):
            if model in models[: j + 1]:
                raise InputError(
                    f"$.families[{i}].variants[{j}].model: {model!r} is already a variant of "
                    f"family {family.id!r}"
                )


def _check_tiers(s: Scenario) -> None:
    known = {FLAGSHIP} | {f.flagship for f in s.families}
    known |= {v.model for f in s.families for v in f.variants}
    for i, tier in enumerate(s.tiers):
        where = f"$.tiers[{i}]"
        if tier.id == OUTSIDE:
            raise InputError(f"{where}.id: {OUTSIDE!r} is reserved for the outside option")
        if len(set(tier.multipliers)) != len(tier.multipliers):
            raise InputError(f"{where}.multipliers: duplicate multiplier")
        if tier.reference_multiplier not in tier.multipliers:
            raise InputError(
                f"{where}.reference_multiplier: {tier.reference_multiplier:g} is not on the menu "
                f"{list(tier.multipliers)}"
            )
        for j, variant in enumerate(tier.variants or ()):
            if variant not in known:
                raise InputError(
                    f"{where}.variants[{j}]: {variant!r} is no family's flagship or variant "
                    f"(known: {', '.join(sorted(known))})"
                )
        window = tier.completion_window_hours
        if window is not None and window % s.options.period_hours:
            raise InputError(
                f"{where}.completion_window_hours: must be a multiple of period_hours "
                f"({s.options.period_hours})"
            )
        if tier.max_ttft_ms is not None and window is not None:
            raise InputError(
                f"{where}: a tier has max_ttft_ms or completion_window_hours, not both"
            )


def _check_shares(s: Scenario) -> None:
    tier_index = {t.id: k for k, t in enumerate(s.tiers)}
    family_index = {f.id: i for i, f in enumerate(s.families)}
    for i, d in enumerate(s.demand):
        where = f"$.demand[{i}].choice.reference_shares"
        shares = d.choice.reference_shares
        for key, share in shares.items():
            if key != OUTSIDE and key not in tier_index:
                raise InputError(f"{where}.{key}: unknown tier (tiers: {', '.join(tier_index)})")
            if share <= 0:
                raise InputError(f"{where}.{key}: must be > 0 (leave a tier out to not sell it)")
        if shares.get(OUTSIDE, 0.0) <= 0:
            raise InputError(f"{where}.{OUTSIDE}: required and > 0 (the outside option)")
        if len(shares) < 2:
            raise InputError(f"{where}: sell at least one tier")
        total = sum(shares.values())
        if abs(total - 1.0) > _SHARE_TOLERANCE:
            raise InputError(f"{where}: shares sum to {total:.6g}, must sum to 1")
        f = family_index[d.family]
        for key in shares:
            if key != OUTSIDE and not family_variants(s, f, tier_index[key]):
                raise InputError(
                    f"$.tiers[{tier_index[key]}].variants: admits none of family "
                    f"{d.family!r}'s models, yet its demand sells tier {key!r}"
                )


def _check_expectation(s: Scenario, e: Expectation, where: str) -> None:
    required, allowed = METRIC_SELECTORS[e.metric]
    given = {name for name in _SELECTORS if getattr(e, name) is not None}
    for name in sorted(given - allowed):
        raise InputError(f"{where}.{name}: metric {e.metric!r} takes no {name} selector")
    for name in sorted(required - given):
        raise InputError(f"{where}.{name}: metric {e.metric!r} needs a {name} selector")
    known = {
        "family": {f.id for f in s.families},
        "tier": {t.id for t in s.tiers},
        "pool": {p.id for p in s.fleet.pools},
        "variant": {f.flagship for f in s.families}
        | {v.model for f in s.families for v in f.variants},
    }
    for name in sorted(given):
        value = getattr(e, name)
        if value not in known[name]:
            raise InputError(f"{where}.{name}: unknown {name} {value!r}")
    bounds = e.min is not None or e.max is not None
    if e.metric == "status":
        if e.equals not in _STATUSES or bounds or e.contains is not None:
            raise InputError(f"{where}.equals: metric 'status' needs equals = one of {_STATUSES}")
    elif e.metric == "tier_served":
        if not isinstance(e.equals, bool) or bounds or e.contains is not None:
            raise InputError(f"{where}.equals: metric 'tier_served' needs equals = true or false")
    elif e.metric == "reason":
        if e.contains is None or bounds or e.equals is not None:
            raise InputError(f"{where}.contains: metric 'reason' needs contains = \"text\"")
    else:
        if e.equals is not None or e.contains is not None:
            raise InputError(f"{where}: metric {e.metric!r} is numeric: use min and/or max")
        if not bounds:
            raise InputError(f"{where}: metric {e.metric!r} needs min and/or max")
        if e.min is not None and e.max is not None and e.min > e.max:
            raise InputError(f"{where}.max: below min")


def check_engines(s: Scenario, catalog: Catalog) -> None:
    """Every engine of ``options.search.engines`` exists in the catalog."""
    for i, engine in enumerate(s.options.search.engines):
        if engine not in catalog.engine_ids:
            raise InputError(
                f"$.options.search.engines[{i}]: unknown engine {engine!r}; known: "
                f"{', '.join(catalog.engine_ids)}"
            )


def check_catalog(s: Scenario, catalog: Catalog) -> None:
    """Every system, model and engine the scenario names exists in the catalog."""
    check_engines(s, catalog)
    for i, pool in enumerate(s.fleet.pools):
        if pool.system not in catalog.systems:
            raise InputError(
                f"$.fleet.pools[{i}].system: unknown system {pool.system!r}; known: "
                f"{', '.join(catalog.systems)}"
            )
    for i, family in enumerate(s.families):
        if family.flagship not in catalog.models:
            raise InputError(
                f"$.families[{i}].flagship: unknown model {family.flagship!r}; known: "
                f"{', '.join(catalog.models)}"
            )
        for j, variant in enumerate(family.variants):
            if variant.model not in catalog.models:
                raise InputError(
                    f"$.families[{i}].variants[{j}].model: unknown model {variant.model!r}; "
                    f"known: {', '.join(catalog.models)}"
                )
