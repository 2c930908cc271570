"""Pools of the PCIe parts measured by kernel tables (RTX PRO 6000, Arc Pro B60): each part's
caveats reach the plan's warnings, once per pool and caveat."""

from __future__ import annotations

from typing import Any

import pytest

from planner.build.pipeline import build
from planner.scenario.decode import decode_scenario


@pytest.mark.parametrize(
    ("system", "count", "marks"),
    [
        ("rtx-pro-6000-server-8", 2, ("1.5x too slow", "Triton")),
        ("b60-8", 3, ("vLLM 0.24.0", "~74 us", "MXFP4")),
    ],
)
def test_pool_repeats_its_caveats(tiny_with, catalog, system, count, marks) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["fleet"]["pools"] += [{"id": "pcie", "region": "r", "system": system, "count": 1}]

    built = build(decode_scenario(tiny_with(edit), "json"), catalog)
    acc = catalog.accelerator(catalog.system(system).accelerator)
    assert len(acc.efficiency.caveats) == count
    mine = [w for w in built.warnings if w.startswith(f"pool pcie: {acc.name}: ")]
    assert [w.split(": ", 2)[2] for w in mine] == list(acc.efficiency.caveats)
    caveats = " ".join(acc.efficiency.caveats)
    assert all(m in caveats for m in marks)
