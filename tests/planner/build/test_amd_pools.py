"""Pools of MI300X / MI325X: the plan flags them as estimates and repeats their caveats, which
name the one measured factor (8-bit compute) and what is still Hopper's estimate."""

from __future__ import annotations

from typing import Any

import pytest

from planner.build.pipeline import build
from planner.scenario.decode import decode_scenario


@pytest.mark.parametrize(("system", "count"), [("mi300x-8", 1), ("mi325x-8", 2)])
def test_pool_warns_what_is_still_estimated(tiny_with, catalog, system, count) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["fleet"]["pools"] += [{"id": "amd", "region": "r", "system": system, "count": 1}]

    built = build(decode_scenario(tiny_with(edit), "json"), catalog)
    acc = catalog.accelerator(catalog.system(system).accelerator)
    assert len(acc.efficiency.caveats) == count
    mine = [w for w in built.warnings if w.startswith(f"pool amd: {acc.name}")]
    estimate = [w for w in mine if "performance is an estimate" in w]
    assert len(estimate) == 1
    assert "only its 8-bit FLOP fraction is measured" in estimate[0]
    assert "no measurements of this accelerator exist" not in estimate[0]
    caveats = [w.split(": ", 2)[2] for w in mine if "performance is an estimate" not in w]
    assert caveats == list(acc.efficiency.caveats)
    first = caveats[0]
    assert "only 8-bit (FP8/INT8) compute is measured" in first
    for estimated in ("weight streaming", "KV reads", "BF16 compute", "links", "overheads"):
        assert estimated in first, estimated
