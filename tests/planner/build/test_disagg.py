"""Disaggregated units as planner candidates (planner.build.disagg,
options.search.disaggregated)."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest

from fleet.catalog.load import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.disagg import unit_bound, units_bound
from planner.build.disagg import decode_slot_cap
from planner.build.pipeline import build, build_inventory, screen
from planner.build.queueing import erlang_c
from planner.build.workload import workload
from planner.plan.schema import Plan, meets_ttft_slo
from planner.run import plan_scenario
from planner.scenario.decode import decode_scenario
from planner.scenario.schema import Scenario


def _doc(
    disaggregated: bool, *, isl: int, osl: int, floor: float, ttft_ms: float, rps: float = 60.0
) -> dict[str, Any]:
    """One GB200 NVL72 pool serving DeepSeek-R1 FP4 in one tier over a day."""
    return {
        "meta": {"name": "disagg", "description": "one pool, one tier"},
        "options": {
            "time_limit_s": 20,
            "search": {
                "disaggregated": disaggregated,
                "precisions": ["fp4"],
                "speculative": [{"draft_tokens": 0}],
            },
        },
        "fleet": {"pools": [{"id": "nvl72", "region": "r", "system": "gb200-nvl72", "count": 4}]},
        "families": [
            {
                "id": "r1",
                "flagship": "deepseek-r1",
                "usd_per_m_input_tokens": 0.5,
                "usd_per_m_output_tokens": 2.0,
            }
        ],
        "tiers": [
            {
                "id": "fast",
                "min_tokens_per_s_per_user": floor,
                "max_ttft_ms": ttft_ms,
                "multipliers": [1.0],
                "reference_multiplier": 1.0,
            }
        ],
        "demand": [
            {
                "family": "r1",
                "mean_input_tokens": isl,
                "mean_output_tokens": osl,
                "requests_per_s": [rps] * 24,
                "choice": {
                    "reference_shares": {"fast": 0.9, "outside": 0.1},
                    "price_sensitivity": 1.0,
                    "speed_weight": 0.0,
                },
            }
        ],
    }


def _scenario(disaggregated: bool, **kwargs: Any) -> Scenario:
    return decode_scenario(msgspec.json.encode(_doc(disaggregated, **kwargs)), "json")


def _plan(s: Scenario, catalog: Catalog, arrays: CatalogArrays) -> Plan:
    return plan_scenario(s, catalog, arrays=arrays)


def test_the_option_is_off_by_default() -> None:
    doc = _doc(False, isl=1024, osl=1024, floor=20, ttft_ms=5000)
    del doc["options"]["search"]["disaggregated"]
    s = decode_scenario(msgspec.json.encode(doc), "json")
    assert s.options.search.disaggregated is False


def test_a_unit_wins_a_tight_speed_floor_on_long_prompts(catalog, arrays) -> None:
    """8k-token prompts at >= 90 tok/s/user: aggregated replicas pay every replacement's prefill
    chunks in their decode steps; decode-only units reach the floor at larger batches."""
    kwargs = {"isl": 8192, "osl": 1024, "floor": 90.0, "ttft_ms": 3000.0}
    aggregated = _plan(_scenario(False, **kwargs), catalog, arrays)
    disaggregated = _plan(_scenario(True, **kwargs), catalog, arrays)
    assert not any(a.disaggregated for a in aggregated.assignments)
    units = [a for a in disaggregated.assignments if a.disaggregated]
    assert units and all(a.disaggregated.startswith("disaggregated: ") for a in units)
    assert disaggregated.margin_usd > 1.5 * aggregated.margin_usd > 0
    # the TTFT promise holds with the prefill queue at its planned load
    assert all(meets_ttft_slo(a) for a in disaggregated.assignments)
    assert all(a.tokens_per_s_per_user >= 90.0 for a in units)


def test_a_unit_loses_where_aggregated_serving_is_cheaper(catalog, arrays) -> None:
    """Short prompts and a loose floor: a prefill replica per few decode replicas only adds
    GPUs, so the plan with the option on keeps aggregated replicas and earns the same."""
    kwargs = {"isl": 1024, "osl": 1024, "floor": 20.0, "ttft_ms": 5000.0}
    aggregated = _plan(_scenario(False, **kwargs), catalog, arrays)
    disaggregated = _plan(_scenario(True, **kwargs), catalog, arrays)
    assert disaggregated.assignments
    assert not any(a.disaggregated for a in disaggregated.assignments)
    assert disaggregated.margin_usd == pytest.approx(aggregated.margin_usd, rel=1e-3)


def test_units_queue_at_their_prefill_replicas(catalog, arrays) -> None:
    s = _scenario(True, isl=8192, osl=1024, floor=90.0, ttft_ms=3000.0)
    built = build(s, catalog, arrays)
    det = built.candidates
    assert det is not None
    unit = np.asarray([bool(x) for x in det.layout])
    assert unit.any()
    screened = screen(s, catalog, arrays, build_inventory(s, catalog).systems_available.max(1))
    (serving,) = screened.serving.values()
    units = serving.units
    # every unit candidate: m prefill replicas of dp attention ranks, m x dp slots each held for
    # the prefill wave, ceiling = decode side
    for c in np.flatnonzero(unit):
        m = int(det.layout[c].split(" prefill x")[0].rsplit("+ ", 1)[1])
        prefill = det.layout[c].split(" prefill x (")[1]
        dp = int(prefill.split("dp=")[1].split()[0].rstrip(")")) if "dp=" in prefill else 1
        match = np.flatnonzero(
            (units.prefill_replicas == m) & np.isclose(units.prefill_hold_s, det.request_s[c])
        )
        assert match.size
        assert det.queue_slots[c] == m * dp
        assert np.any(units.prefill_slots[match] == m * dp)
        assert det.replicas_per_unit[c] == 1
        assert np.isfinite(det.ceiling_tokens_per_s[c])
        assert np.all(
            built.tables.candidates.tokens_per_s_per_replica[c]
            <= det.ceiling_tokens_per_s[c] * (1 + 1e-9)
        )
    # aggregated replicas (the loose tier keeps some) queue at their batch slots, no ceiling
    loose = build(_scenario(True, isl=1024, osl=1024, floor=20.0, ttft_ms=5000.0), catalog, arrays)
    det = loose.candidates
    assert det is not None
    agg = np.asarray([not x for x in det.layout])
    assert agg.any()
    assert np.all(det.queue_slots[agg] == det.configs.batch[agg])
    assert np.all(np.isinf(det.ceiling_tokens_per_s[agg]))


def test_decode_slot_cap_is_the_largest_occupancy_without_a_wait() -> None:
    slots = np.asarray([1.0, 8.0, 64.0, 1024.0])
    cap = decode_slot_cap(slots, 0.99)
    assert np.all(erlang_c(slots, cap * slots) <= 0.01 + 1e-9)
    assert np.all(erlang_c(slots, np.minimum(cap * 1.01, 1.0) * slots) > 0.01)
    assert np.all(np.diff(cap) > 0)  # more slots, higher occupancy
    assert cap[0] == pytest.approx(0.01, rel=1e-6)  # one slot: waits with probability a


def test_workload_counts_units_before_any_work(catalog, arrays) -> None:
    on = _scenario(True, isl=8192, osl=1024, floor=90.0, ttft_ms=3000.0)
    off = _scenario(False, isl=8192, osl=1024, floor=90.0, ttft_ms=3000.0)
    w_on, w_off = workload(on, catalog), workload(off, catalog)
    assert w_on.keys == w_off.keys
    bound = units_bound(catalog, "gb200-nvl72", on.options.search.precisions)
    assert bound == unit_bound(1)
    assert w_on.configurations == w_off.configurations + len(w_on.keys) * bound
    pool_max = build_inventory(on, catalog).systems_available.max(axis=1)
    screened = screen(on, catalog, arrays, pool_max)
    rows = sum(len(c) for c, _ in screened.estimates.values())
    assert w_off.configurations < rows <= w_on.configurations
