"""Shared fixtures for planner tests: the catalog, its perf arrays, and scenario documents."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.fixture(scope="session")
def tiny_doc() -> dict[str, Any]:
    return tomllib.loads((SCENARIOS / "tiny.toml").read_text())


@pytest.fixture
def tiny_with(tiny_doc: dict[str, Any]) -> Callable[..., bytes]:
    """JSON bytes of tiny.toml after ``edit(doc)`` mutates a deep copy of it (the JSON body and
    the TOML file decode to the same types; no TOML writer is installed)."""

    def make(edit: Callable[[dict[str, Any]], None] | None = None) -> bytes:
        doc = copy.deepcopy(tiny_doc)
        if edit is not None:
            edit(doc)
        return msgspec.json.encode(doc)

    return make
