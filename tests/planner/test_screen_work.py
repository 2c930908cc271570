"""``planner.build.workload`` counts the turns of ``screen``'s loop (offer x pool x engine)
exactly, from the lists' sizes: a scenario whose grids are all empty still costs ~12 us a turn,
and 64 families x 16 tiers x 2 models x 512 pools x 4 engines once took 47 s to screen."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import msgspec
import pytest

import planner.build.pipeline
from fleet.catalog.load import Catalog
from fleet.errors import InputError
from fleet.perf.arrays import CatalogArrays
from planner.build.pipeline import build_inventory, screen
from planner.build.workload import check_workload, workload
from planner.scenario.decode import decode_scenario, load_scenario
from planner.scenario.schema import Scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _tiny() -> dict[str, Any]:
    return msgspec.toml.decode((SCENARIOS / "tiny.toml").read_bytes())


def _decode(doc: dict[str, Any]) -> Scenario:
    return decode_scenario(msgspec.json.encode(doc), "json")


def mixed() -> Scenario:
    """Two families (one with a variant), three tiers (one admitting only flagships, one the
    second family does not sell), three pools on two systems, engines listed with a repeat."""
    doc = _tiny()
    doc.pop("expect", None)
    doc["options"]["search"] = {"engines": ["any", "vllm", "any"], "batch_caps": [8, 64]}
    h100 = doc["fleet"]["pools"][0]
    doc["fleet"]["pools"] = [
        h100,
        {**h100, "id": "h100-eu", "region": "eu"},
        {**h100, "id": "h200-us", "system": "hgx-h200-8"},
    ]
    doc["families"].append(
        {
            "id": "llama-70b",
            "flagship": "llama-3.1-70b",
            "variants": [{"model": "llama-3.1-8b"}],
            "usd_per_m_input_tokens": 0.5,
            "usd_per_m_output_tokens": 1.0,
        }
    )
    doc["tiers"][1]["variants"] = ["flagship"]
    doc["tiers"].append({**doc["tiers"][0], "id": "batch", "max_ttft_ms": 20000})
    other = copy.deepcopy(doc["demand"][0])
    other["family"] = "llama-70b"
    other["choice"]["reference_shares"] = {"standard": 0.4, "fast": 0.1, "outside": 0.5}
    doc["demand"][0]["choice"]["reference_shares"] = {
        "standard": 0.5,
        "fast": 0.1,
        "batch": 0.1,
        "outside": 0.3,
    }
    doc["demand"].append(other)
    return _decode(doc)


def _turns(
    s: Scenario, catalog: Catalog, arrays: CatalogArrays, monkeypatch: pytest.MonkeyPatch
) -> int:
    """Turns of ``screen``'s loop, counted as it runs: it calls ``eligible`` once a turn."""
    calls = 0
    real = planner.build.pipeline.eligible

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(planner.build.pipeline, "eligible", counting)
    screen(s, catalog, arrays, build_inventory(s, catalog).systems_available.max(axis=1))
    return calls


@pytest.mark.parametrize("name", ["mixed", "tiny", "two-tricks"])
def test_screen_combinations_count_the_loops_turns_exactly(
    name: str, catalog: Catalog, arrays: CatalogArrays, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = mixed() if name == "mixed" else load_scenario(SCENARIOS / f"{name}.toml")
    work = workload(s, catalog)
    turns = _turns(s, catalog, arrays, monkeypatch)
    assert work.screen_combinations == turns > 0
    if name == "mixed":
        # family 1: 3 tiers x 1 model; family 2: standard x 2 models + fast x flagship
        assert work.offers == 6
        assert turns == 6 * 3 * 2  # x 3 pools x 2 distinct engines


def big(n_pools: int) -> Scenario:
    """The audit's scenario: nothing to evaluate (neither model has a layout on a TPU v5e-8),
    64 families x 16 tiers x 2 models on ``n_pools`` pools with 4 engines."""
    doc = _tiny()
    doc.pop("expect", None)
    doc["options"]["search"] = {
        "engines": ["any", "trtllm", "vllm", "sglang"],
        "batch_caps": [1],
        "precisions": ["fp8"],
    }
    doc["fleet"]["pools"] = [
        {"id": f"p{i}", "region": f"r{i % 4}", "system": "tpu-v5e-8", "count": 2}
        for i in range(n_pools)
    ]
    doc["families"] = [
        {
            "id": f"f{j}",
            "flagship": "deepseek-v4-pro",
            "variants": [{"model": "kimi-k2.5"}],
            "usd_per_m_input_tokens": 0.1,
            "usd_per_m_output_tokens": 0.2,
        }
        for j in range(64)
    ]
    doc["tiers"] = [
        {
            "id": f"t{k}",
            "min_tokens_per_s_per_user": 30,
            "max_ttft_ms": 2000,
            "multipliers": [1.0],
            "reference_multiplier": 1.0,
        }
        for k in range(16)
    ]
    shares = {**{f"t{k}": 0.5 / 16 for k in range(16)}, "outside": 0.5}
    demand = doc["demand"][0]
    doc["demand"] = [
        {**demand, "family": f"f{j}", "choice": {**demand["choice"], "reference_shares": shares}}
        for j in range(64)
    ]
    return _decode(doc)


def test_a_scenario_with_nothing_to_evaluate_still_counts_its_screening(catalog: Catalog) -> None:
    """Counted from the sizes: 2,048 offers x 512 pools x 4 engines, without screening."""
    work = workload(big(512), catalog)
    assert (work.configurations, work.checks) == (0, 0)
    assert work.offers == 64 * 16 * 2
    assert work.screen_combinations == 64 * 16 * 2 * 512 * 4 == 4_194_304


def test_check_workload_refuses_too_many_screen_combinations(catalog: Catalog) -> None:
    s = big(16)
    work = workload(s, catalog)
    limits = {"max_configurations": 1, "max_checks": 1}
    check_workload(s, work, **limits)  # not checked unless asked
    check_workload(s, work, **limits, max_screen_combinations=work.screen_combinations)
    with pytest.raises(InputError) as err:
        check_workload(s, work, **limits, max_screen_combinations=100_000)
    assert str(err.value).startswith(
        "$.options.search: this scenario would screen 131,072 combinations of offer x pool x "
        "engine (2,048 offers of family x tier x admitted model, 16 pools, 4 engines), over the "
        "limit of 100,000;"
    )
