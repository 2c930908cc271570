"""A pool of RTX PRO 6000 servers: the part's caveats (PCIe collectives, block-scaled FP8 MoE)
reach the plan's warnings, once per pool."""

from __future__ import annotations

from typing import Any

from planner.build.pipeline import build
from planner.scenario.decode import decode_scenario


def test_rtx_pro_pool_repeats_its_caveats(tiny_with, catalog) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["fleet"]["pools"] += [
            {"id": "rtx", "region": "r", "system": "rtx-pro-6000-server-8", "count": 1}
        ]

    built = build(decode_scenario(tiny_with(edit), "json"), catalog)
    acc = catalog.accelerator("rtx-pro-6000-server")
    assert len(acc.efficiency.caveats) == 2
    mine = [w for w in built.warnings if w.startswith(f"pool rtx: {acc.name}: ")]
    assert [w.split(": ", 2)[2] for w in mine] == list(acc.efficiency.caveats)
    caveats = " ".join(acc.efficiency.caveats)
    assert "1.5x too slow" in caveats and "Triton" in caveats
