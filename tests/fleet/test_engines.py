"""The engines catalog (fleet/data/engines.toml) loads, refuses bad entries by file, path and id,
and its factors apply only when an engine is picked: the pooled default is today's arrays."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fleet.catalog import CatalogError, UnknownIdError, load_catalog
from fleet.catalog.engines import MULTIPLIERS, POOLED
from fleet.catalog.load import DATA_DIR, Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.closed_loop import REQUEST_OVERHEAD_S
from fleet.perf.configs import make_configs
from fleet.perf.engines import (
    FIELDS,
    W4A16_CALL,
    engine_arrays,
    engine_note,
    flat,
    with_serving_overhead,
)
from fleet.perf.model import estimate
from fleet.perf.types import Configs

FILES = ("accelerators.toml", "systems.toml", "models.toml", "engines.toml")


def _configs(catalog: Catalog) -> Configs:
    return make_configs(
        catalog,
        model=["llama-3.1-70b", "qwen3-32b", "deepseek-r1", "gpt-oss-120b", "llama-3.1-70b"],
        system=["hgx-h100-8", "hgx-h200-8", "hgx-b200-8", "hgx-h100-8", "mi300x-8"],
        tp=[4, 2, 8, 2, 4],
        ep=[1, 1, 8, 2, 1],
        precision=["fp8", "bf16", "fp4", "fp4", "fp8"],
        batch=[32, 16, 64, 8, 32],
        isl=[2048, 1024, 4096, 1024, 2048],
        osl=[512, 256, 1024, 1024, 512],
    )


def test_the_catalog_has_the_three_engines_after_the_pooled_default(catalog: Catalog) -> None:
    assert catalog.engine_ids == (POOLED, "trtllm", "vllm", "sglang")
    assert catalog.engine(POOLED) is None
    with pytest.raises(UnknownIdError, match="unknown engine 'tgi'; known: any, trtllm"):
        catalog.engine("tgi")


def test_every_multiplier_given_has_a_source(catalog: Catalog) -> None:
    for engine in catalog.engines.values():
        assert engine.factors, engine.id
        for f in engine.factors:
            given = flat(f)
            names = {n.split(".")[0] for n in given}
            assert names <= {*MULTIPLIERS, W4A16_CALL}
            assert all(f.sources.get(n) for n in names), (engine.id, f.accelerators)
            # the fit never measures a per-layer cost (the pooled one is 0)
            assert "layer_overhead" in f.not_measured()


def test_the_pooled_default_is_todays_arrays_exactly(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    configs = _configs(catalog)
    assert engine_arrays(catalog, arrays, POOLED) is arrays
    before = estimate(arrays, configs)
    after = estimate(engine_arrays(catalog, arrays, POOLED), configs)
    np.testing.assert_array_equal(before.tpot_s, after.tpot_s)
    np.testing.assert_array_equal(before.tokens_per_s_per_device, after.tokens_per_s_per_device)


def test_an_engine_scales_only_the_parts_it_names(catalog: Catalog, arrays: CatalogArrays) -> None:
    acc = arrays.accelerators
    for engine_id, engine in catalog.engines.items():
        scaled = engine_arrays(catalog, arrays, engine_id).accelerators
        named = {a for f in engine.factors for a in f.accelerators}
        for i, a in enumerate(acc.ids):
            for field in ("bandwidth_fraction", "link_fraction", "step_overhead_s"):
                old, new = getattr(acc, field)[i], getattr(scaled, field)[i]
                if a not in named:
                    assert new == old, (engine_id, a, field)
            f = engine.factors_for(a)
            if f is not None and f.bandwidth is not None:
                expected = min(1.0, acc.bandwidth_fraction[i] * f.bandwidth)
                assert scaled.bandwidth_fraction[i] == pytest.approx(expected)
            if f is not None and f.flops.fp8 is not None:
                col = 1  # fp8
                expected = min(1.0, acc.flops_fraction_by_precision[i, col] * f.flops.fp8)
                assert scaled.flops_fraction_by_precision[i, col] == pytest.approx(expected)
        assert set(FIELDS) | {"flops"} == set(MULTIPLIERS)


def test_engines_move_the_estimates_where_measured(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = _configs(catalog)
    pooled = estimate(arrays, configs).tpot_s
    for engine_id in catalog.engines:
        tpot = estimate(engine_arrays(catalog, arrays, engine_id), configs).tpot_s
        assert not np.allclose(tpot[:4], pooled[:4]), engine_id  # Hopper and B200: measured
        assert tpot[4] == pooled[4]  # MI300X: no measurements, multipliers 1


def test_the_w4a16_call_term_charges_weight_only_4bit_experts_only(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """TensorRT-LLM's fitted W4A16 call lands on each MoE layer of a Hopper step of gpt-oss-120b
    (MXFP4 experts, weight-only there) and nowhere else: not on FP8 experts, not on B200 (native
    FP4), not in the pooled default."""
    trt = catalog.engine("trtllm")
    assert trt is not None
    hopper = trt.factors_for("h200-sxm")
    assert hopper is not None and hopper.moe_w4a16_call_us is not None
    assert 5.0 < hopper.moe_w4a16_call_us < 200.0
    assert "engine_fit" in hopper.sources[W4A16_CALL]
    blackwell = trt.factors_for("b200")
    assert blackwell is not None and blackwell.moe_w4a16_call_us is None
    engine = engine_arrays(catalog, arrays, "trtllm")
    without = engine.with_moe_w4a16_call({"h100-sxm": 0.0, "h200-sxm": 0.0})
    configs = make_configs(
        catalog,
        model=["gpt-oss-120b", "qwen3-235b-a22b", "gpt-oss-120b"],
        system=["hgx-h200-8", "hgx-h200-8", "hgx-b200-8"],
        tp=[4, 4, 4],
        precision=["fp4", "fp8", "fp4"],
        batch=[8, 8, 8],
    )
    with_term, no_term = estimate(engine, configs), estimate(without, configs)
    added = with_term.step_overhead_s - no_term.step_overhead_s
    moe_layers = arrays.models.moe_layers[configs.model[0]]
    assert added[0] == pytest.approx(moe_layers * hopper.moe_w4a16_call_us * 1e-6)
    np.testing.assert_array_equal(added[1:], 0.0)
    assert not np.any(arrays.accelerators.moe_w4a16_call_s)


def test_the_serving_overhead_lands_on_the_ttft_floor_only(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """A plan's TTFT carries the engine's per-request serving cost (HTTP, tokenization,
    scheduling) that every measured TTFT does: the floor moves by exactly the engine's overhead
    (the pooled one for the pooled default), nothing else does."""
    configs = _configs(catalog)
    for engine_id in (POOLED, *catalog.engines):
        engine = engine_arrays(catalog, arrays, engine_id)
        est = estimate(engine, configs)
        out = with_serving_overhead(engine, configs, est)
        entry = catalog.engine(engine_id)
        overhead_s = (
            REQUEST_OVERHEAD_S
            if entry is None or entry.scheduling is None
            else entry.scheduling.request_overhead_ms * 1e-3
        )
        np.testing.assert_allclose(out.ttft_floor_s - est.ttft_floor_s, overhead_s, rtol=1e-9)
        np.testing.assert_array_equal(out.tpot_s, est.tpot_s)
        np.testing.assert_array_equal(out.ttft_burst_s, est.ttft_burst_s)


def test_notes_say_what_is_not_measured(catalog: Catalog) -> None:
    assert engine_note(catalog, POOLED, "mi300x") is None
    assert "no measurements on mi300x" in (engine_note(catalog, "vllm", "mi300x") or "")
    note = engine_note(catalog, "sglang", "h100-sxm") or ""
    assert "flops.int8" in note and "flops.fp4" not in note  # fp4 is weight-only on Hopper
    # SGLang's GB300 all-reduce table fits to a 0 us call: no measurement, so no multiplier.
    gb300 = engine_note(catalog, "sglang", "gb300") or ""
    assert "collective_overhead" in gb300 and "link" not in gb300.split(":")[-1]
    assert "collective_overhead" not in (engine_note(catalog, "sglang", "gb200") or "")


def _copy(tmp_path: Path, old: str, new: str) -> Path:
    for name in FILES:
        (tmp_path / name).write_bytes((DATA_DIR / name).read_bytes())
    text = (DATA_DIR / "engines.toml").read_text()
    assert old in text
    (tmp_path / "engines.toml").write_text(text.replace(old, new, 1))
    return tmp_path


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('id = "trtllm"', 'id = "any"', r"engines\[0\]\.id \(id 'any'\): 'any' is the pooled"),
        ('id = "vllm"', 'id = "trtllm"', "duplicate id 'trtllm'"),
        (
            'accelerators = ["b200"]',
            'accelerators = ["b400"]',
            r"engines\[0\]\.factors\[1\]\.accelerators \(id 'trtllm'\): unknown accelerator",
        ),
        (
            'accelerators = ["b200"]',
            'accelerators = ["h100-sxm"]',
            r"factors\[1\]\.accelerators \(id 'trtllm'\): 'h100-sxm' is in two",
        ),
        ("[engines.factors.sources]\nbandwidth = ", "[engines.factors.sources]\nx = ", "no source"),
        ("bandwidth = 1", "bandwidth = 0", r"\$\.engines\[0\]\.factors\[0\]\.bandwidth"),
        ('basis = "fitted-on-runs"', 'basis = "guessed"', "basis"),
        (
            "expert_prefill_time = { bf16 = ",
            "expert_prefill_time = { bf16 = 0, x = ",
            r"\$\.engines\[1\]\.factors\[\d\]\.expert_prefill_time\.bf16",
        ),
        (
            "[engines.factors.moe_compute.bf16]\nflops_fraction = ",
            "[engines.factors.moe_compute.bf16]\nflops_fraction = -",
            r"\$\.engines\[1\]\.factors\[0\]\.moe_compute\.bf16\.flops_fraction",
        ),
        (
            '\nmoe_compute = "',
            '\nx_compute = "',
            r"engines\[1\]\.factors\[0\]\.sources \(id 'vllm'\): no source for \['moe_compute'\]",
        ),
        (  # vLLM's Hopper entry: a ratio for a kind its own form already measures
            "expert_prefill_time = { ",
            "expert_prefill_time = { fp8 = 1.2, ",
            r"engines\[1\]\.factors\[0\]\.expert_prefill_time \(id 'vllm'\): \['fp8'\] also",
        ),
        (
            "expert_prefill_time = { bf16 = ",
            "expert_prefill_time = { int8 = 2, bf16 = ",
            "int8",
        ),
        (
            '\nexpert_prefill_time = "',
            '\nx_prefill_time = "',
            r"no source for \['expert_prefill_time'\]",
        ),
    ],
)
def test_a_broken_engines_file_is_reported_by_file_and_path(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    with pytest.raises(CatalogError, match=expected) as err:
        load_catalog(_copy(tmp_path, old, new))
    assert str(err.value).startswith("engines.toml: ")
    assert "\n" not in str(err.value)


def test_without_an_engines_file_only_the_pooled_default_exists(tmp_path: Path) -> None:
    for name in FILES[:3]:
        (tmp_path / name).write_bytes((DATA_DIR / name).read_bytes())
    assert load_catalog(tmp_path).engine_ids == (POOLED,)


def test_tensorrt_llm_sizes_its_kv_pool_from_the_memory_free_after_the_weights(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """TensorRT-LLM's KV pool is 0.9 of what the weights and workspace leave free; vLLM's
    (and the pooled default's) is 0.9 of the device's memory less both. Llama 3.1 70B FP8 on
    one H200: the pool grows by 0.1 of the weights and workspace, and so does the largest batch,
    while the figures of a batch that fits either way do not move."""
    configs = make_configs(
        catalog, model=["llama-3.1-70b"] * 2, system=["hgx-h200-8"] * 2, tp=[1, 1],
        precision=["fp8"] * 2, batch=[8, 16], isl=[1024] * 2, osl=[8192] * 2,
    )  # fmt: skip
    pooled = estimate(arrays, configs)
    vllm = estimate(engine_arrays(catalog, arrays, "vllm"), configs)
    trt = estimate(engine_arrays(catalog, arrays, "trtllm"), configs)
    assert catalog.engines["trtllm"].scheduling.kv_cache_of_free_memory  # type: ignore[union-attr]
    assert not catalog.engines["vllm"].scheduling.kv_cache_of_free_memory  # type: ignore[union-attr]
    memory = catalog.accelerator("h200-sxm").memory_bytes
    weights = pooled.weight_bytes_per_device[0]
    per_stream = (pooled.memory_bytes_per_device[1] - pooled.memory_bytes_per_device[0]) / 8
    fixed = pooled.memory_bytes_per_device[0] - weights - 8 * per_stream
    assert 0.03 * memory <= fixed <= 0.04 * memory  # runtime reserve + one prefill chunk
    assert (
        pooled.max_batch[0]
        == vllm.max_batch[0]
        == int((0.9 * memory - weights - fixed) // per_stream)
    )
    assert trt.max_batch[0] == int(0.9 * (memory - weights - fixed) // per_stream)
    assert trt.max_batch[0] > vllm.max_batch[0]
    np.testing.assert_array_equal(trt.tpot_s, estimate(
        engine_arrays(catalog, arrays, "trtllm").with_scheduling(
            request_overhead_s=0.08, prefill_first=False, kv_of_free_memory=False
        ),
        configs,
    ).tpot_s)  # fmt: skip


def test_the_kv_rule_leaves_sram_parts_alone(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog, model=["llama-3.1-8b"], system=["cs3"], tp=[1], precision=["bf16"],
        batch=[1], isl=[1024], osl=[256],
    )  # fmt: skip
    free = arrays.with_scheduling(
        request_overhead_s=0.0, prefill_first=False, kv_of_free_memory=True
    )
    device = arrays.with_scheduling(request_overhead_s=0.0, prefill_first=False)
    assert estimate(free, configs).max_batch[0] == estimate(device, configs).max_batch[0]
