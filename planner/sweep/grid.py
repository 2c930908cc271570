"""Sweep grids: ``--set PATH=VALUES`` parsed, counted, expanded and applied to a scenario.

Grammar (docs/cli.md, "farebox sweep")::

    SPEC   := PATH "=" VALUES
    PATH   := SEGMENT ("." SEGMENT)*
    VALUES := ALT ("," ALT)*            commas inside [...] belong to the list
    ALT    := RANGE | LIST | SCALAR
    RANGE  := NUM ".." NUM [":" STEP]   inclusive; without STEP both ends are integers, step 1
    LIST   := "[" [SCALAR ("," SCALAR)*] "]"   one value of a list field
    SCALAR := integer | decimal | true | false | none | text

A PATH walks the scenario as its TOML file is written: a table by field name, a list of tables by
the ``id`` of an element (``family`` for ``demand``) or by its index, so
``fleet.pools.h100-us-east.count``, ``tiers.fast.max_ttft_ms``,
``demand.llama-8b.choice.price_sensitivity``, ``options.search.batch_caps``. ``pools.ID`` is short
for ``fleet.pools.ID``. Ids may contain dots; the longest id that matches is taken.

Several specs form the Cartesian product, the first varying slowest. The points are counted
before any of them is built (``count_points``), and every point is decoded and checked exactly as
a scenario file is (``planner.scenario.decode.decode_scenario``), so a value of the wrong type or
one that breaks a rule of the schema is refused before anything runs, naming the spec. Numbers
are finite: a value or range end that overflows a float (``1e400``) is refused, and a range is
counted in exact arithmetic before any of its values is made. ``iter_points`` builds the points
one at a time, for a caller that checks each and drops it; ``expand`` keeps them all.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from fleet.errors import InputError
from planner.scenario.decode import decode_scenario
from planner.scenario.schema import Scenario

Scalar = int | float | bool | str | None
Value = Scalar | tuple[Scalar, ...]

MAX_SPECS = 8
"""Swept paths per sweep: the product of more is beyond any point cap."""
MAX_SPEC_CHARS = 4096
ALIASES = {"pools": ("fleet", "pools")}
LIST_KEYS = ("id", "family")
"""Keys that name an element of a list of tables, in the order tried."""

_INT = re.compile(r"^[+-]?\d+$")
_NUM = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_RANGE = re.compile(r"^(?P<lo>[^.:]+(?:\.\d+)?)\.\.(?P<hi>[^:]+?)(?::(?P<step>.+))?$")


@dataclass(frozen=True, slots=True)
class Spec:
    """One ``--set``: a path into the scenario and the values it takes, in order."""

    path: str
    values: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Point:
    """One scenario of the grid: its index, the value of each spec, and the scenario."""

    index: int
    values: tuple[Value, ...]
    scenario: Scenario


def format_value(value: Value) -> str:
    """A value as the grammar writes it: ``3``, ``0.5``, ``[2,3]``, ``none``."""
    if isinstance(value, tuple):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e15 else repr(value)
    return str(value)


def _finite(text: str, where: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputError(f"{where}: {text.strip()!r} is beyond the range of a number")
    return value


def _scalar(text: str, where: str) -> Scalar:
    t = text.strip()
    if _INT.match(t):
        return int(t)
    if _NUM.match(t):
        return _finite(t, where)
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    return t


def _split(text: str, where: str) -> list[str]:
    """Split at commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise InputError(f"{where}: lists do not nest")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise InputError(f"{where}: ']' without '['")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise InputError(f"{where}: '[' without ']'")
    parts.append(text[start:])
    return parts


def _range_count(lo: float, hi: float, step: float) -> int | None:
    """Values of the inclusive range, or None when there are more than a float can count."""
    if isinstance(lo, int) and isinstance(hi, int) and isinstance(step, int):
        return (hi - lo) // step + 1  # exact, however large
    steps = (hi - lo) / step
    if not math.isfinite(steps):
        return None
    return math.floor(steps + 1e-9) + 1


def _range(alt: str, where: str) -> tuple[float | int, float | int, float | int] | None:
    m = _RANGE.match(alt.strip())
    if m is None:
        return None
    lo, hi, step_text = m.group("lo"), m.group("hi"), m.group("step")
    a: float
    b: float
    step: float
    if not (_NUM.match(lo.strip()) and _NUM.match(hi.strip())):
        raise InputError(f"{where}: range {alt.strip()!r} needs numbers at both ends (a..b)")
    if step_text is None:
        if not (_INT.match(lo.strip()) and _INT.match(hi.strip())):
            raise InputError(f"{where}: range {alt.strip()!r} of decimals needs a step (a..b:step)")
        a, b, step = int(lo), int(hi), 1
    else:
        if not _NUM.match(step_text.strip()):
            raise InputError(f"{where}: range step {step_text!r} is not a number")
        all_int = all(_INT.match(x.strip()) for x in (lo, hi, step_text))
        if all_int:
            a, b, step = int(lo), int(hi), int(step_text)
        else:
            a, b, step = (_finite(x, where) for x in (lo, hi, step_text))
        if not step > 0:
            raise InputError(f"{where}: range step must be > 0")
    if b < a:
        raise InputError(f"{where}: range {alt.strip()!r} runs backwards")
    return a, b, step


def parse_spec(text: str, *, max_values: int) -> Spec:
    """Parse ``PATH=VALUES``; ranges are counted before they are expanded."""
    if len(text) > MAX_SPEC_CHARS:
        raise InputError(f"--set: longer than {MAX_SPEC_CHARS} characters")
    path, eq, rest = text.partition("=")
    path = path.strip()
    if not eq or not path:
        raise InputError(f"--set {text}: write PATH=VALUES (e.g. pools.ID.count=0..7)")
    where = f"--set {path}"
    if not rest.strip():
        raise InputError(f"{where}: no values after '='")
    values: list[Value] = []
    for alt in _split(rest, where):
        a = alt.strip()
        if not a:
            raise InputError(f"{where}: empty value between commas")
        if a.startswith("["):
            if not a.endswith("]"):
                raise InputError(f"{where}: {a!r}: text after ']'")
            inner = a[1:-1].strip()
            values.append(tuple(_scalar(x, where) for x in inner.split(",")) if inner else ())
        elif (r := _range(a, where)) is not None:
            lo, hi, step = r
            n = _range_count(lo, hi, step)
            if n is None or len(values) + n > max_values:
                raise InputError(f"{where}: more than {max_values:,} values (the grid point limit)")
            if isinstance(step, int) and isinstance(lo, int):
                values.extend(range(lo, lo + n * step, step))
            else:
                values.extend(float(f"{lo + k * step:.12g}") for k in range(n))
        else:
            values.append(_scalar(a, where))
        if len(values) > max_values:
            raise InputError(f"{where}: more than {max_values:,} values (the grid point limit)")
    if len(set(map(format_value, values))) != len(values):
        raise InputError(f"{where}: a value is repeated")
    return Spec(path, tuple(values))


def parse_specs(texts: list[str] | tuple[str, ...], *, max_points: int) -> tuple[Spec, ...]:
    """Parse every ``--set``; no path twice; the product counted against ``max_points``."""
    if len(texts) > MAX_SPECS:
        raise InputError(f"--set: at most {MAX_SPECS} swept paths")
    specs = tuple(parse_spec(t, max_values=max_points) for t in texts)
    seen: set[str] = set()
    for spec in specs:
        if spec.path in seen:
            raise InputError(f"--set {spec.path}: given twice (list its values in one --set)")
        seen.add(spec.path)
    count_points(specs, max_points=max_points)
    return specs


def count_points(specs: tuple[Spec, ...], *, max_points: int) -> int:
    """Grid points of ``specs`` (1 with none); an InputError over ``max_points``."""
    n = math.prod(len(s.values) for s in specs)
    if n > max_points:
        sizes = " x ".join(str(len(s.values)) for s in specs)
        raise InputError(
            f"--set: {sizes} = {n:,} grid points, over the limit of {max_points:,}; sweep "
            "fewer values"
        )
    return n


def _resolve(doc: dict[str, Any], path: str) -> tuple[Any, str | int, str]:
    """(container, key, schema path) of ``path`` in the scenario's builtins ``doc``."""
    where = f"--set {path}"
    segments = path.split(".")
    if any(not s for s in segments):
        raise InputError(f"{where}: empty segment in the path")
    if segments[0] in ALIASES:
        segments = [*ALIASES[segments[0]], *segments[1:]]
    node: Any = doc
    schema = "$"
    i = 0
    parent: Any = None
    key: str | int = ""
    while i < len(segments):
        seg = segments[i]
        if isinstance(node, dict):
            if seg not in node:
                known = ", ".join(sorted(node))
                raise InputError(f"{where}: {schema} has no field {seg!r} (fields: {known})")
            parent, key, node = node, seg, node[seg]
            schema = f"{schema}.{seg}"
            i += 1
        elif isinstance(node, list):
            found = None
            if node and all(isinstance(e, dict) for e in node):
                for j in range(len(segments), i, -1):
                    name = ".".join(segments[i:j])
                    for k, element in enumerate(node):
                        if any(element.get(lk) == name for lk in LIST_KEYS):
                            found = (k, j)
                            break
                    if found:
                        break
            if found is None and _INT.match(seg) and 0 <= int(seg) < len(node):
                found = (int(seg), i + 1)
            if found is None:
                ids = [
                    next((str(e[lk]) for lk in LIST_KEYS if lk in e), "?")
                    for e in node
                    if isinstance(e, dict)
                ]
                hint = f" (ids: {', '.join(ids)})" if ids else f" ({len(node)} elements)"
                raise InputError(f"{where}: {schema} has no element {seg!r}{hint}")
            k, i = found
            parent, key, node = node, k, node[k]
            schema = f"{schema}[{k}]"
        else:
            raise InputError(f"{where}: {schema} is a value, not a table or a list")
    if isinstance(node, dict) or (isinstance(node, list) and node and isinstance(node[0], dict)):
        raise InputError(f"{where}: {schema} is a table; name one of its fields")
    return parent, key, schema


def _apply(doc: dict[str, Any], spec: Spec, value: Value) -> None:
    parent, key, schema = _resolve(doc, spec.path)
    current = parent[key]
    if isinstance(current, list) and not isinstance(value, tuple):
        raise InputError(
            f"--set {spec.path}: {schema} is a list; write each value in brackets, e.g. "
            f"{spec.path}=[1,2],[2,3]"
        )
    if isinstance(value, tuple) and current is not None and not isinstance(current, list):
        raise InputError(f"--set {spec.path}: {schema} is a single value, not a list")
    parent[key] = list(value) if isinstance(value, tuple) else value


def spec_fields(scenario: Scenario, specs: tuple[Spec, ...]) -> tuple[str, ...]:
    """Each spec's field in the base scenario as a schema path (``$.options.time_limit_s``),
    without building any point; an InputError naming a spec whose path is not there."""
    return _fields(msgspec.json.encode(scenario), specs)


def _fields(encoded: bytes, specs: tuple[Spec, ...]) -> tuple[str, ...]:
    base = msgspec.json.decode(encoded)  # plain dicts and lists
    return tuple(_resolve(base, spec.path)[2] for spec in specs)


def iter_points(scenario: Scenario, specs: tuple[Spec, ...], *, max_points: int) -> Iterator[Point]:
    """Every point of the grid as a checked scenario, each named ``NAME[i]``, built one at a
    time as it is asked for: a caller that checks each point and drops it holds one at a time.

    Paths are resolved on the base scenario first, so a missing one fails before any point is
    built; a point whose scenario fails its checks names the values that made it."""
    count_points(specs, max_points=max_points)
    encoded = msgspec.json.encode(scenario)
    _fields(encoded, specs)
    for index, values in enumerate(itertools.product(*(s.values for s in specs))):
        yield Point(index, values, _build(scenario.meta.name, encoded, specs, index, values))


def expand(scenario: Scenario, specs: tuple[Spec, ...], *, max_points: int) -> tuple[Point, ...]:
    """``iter_points``, every point kept."""
    return tuple(iter_points(scenario, specs, max_points=max_points))


def _build(
    name: str, encoded: bytes, specs: tuple[Spec, ...], index: int, values: tuple[Value, ...]
) -> Scenario:
    """The scenario of one point: the base's JSON ``encoded`` with ``values`` applied."""
    doc = msgspec.json.decode(encoded)
    for spec, value in zip(specs, values, strict=True):
        _apply(doc, spec, value)
    if specs:
        doc["meta"]["name"] = f"{name}[{index}]"
    try:
        return decode_scenario(msgspec.json.encode(doc), "json")
    except InputError as err:
        label = " ".join(f"{s.path}={format_value(v)}" for s, v in zip(specs, values, strict=True))
        raise InputError(f"--set {label}: {err}") from None
