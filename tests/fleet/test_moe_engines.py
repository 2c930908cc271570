"""Each engine's routed experts on prefill tokens take its own MoE kernels' time
(``EngineFactors.expert_prefill_time``, measured by ``fleet.perf.kernel_moe_engines``): the
figures are the tables' ratios, and the model charges them on prefill tokens only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleet.catalog.load import Catalog
from fleet.perf import kernel_moe_engines as kme
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.engines import engine_arrays, expert_prefill_terms
from fleet.perf.model import estimate
from fleet.perf.types import Configs
from tests.fleet.kernel_data import kernel_data, needs_data


@needs_data
@pytest.mark.parametrize("part", ["b200", "gb200", "b300", "gb300"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_block_scaled_fp8_experts_prefill_slower_than_tensorrt_llm_on_blackwell(
    part: str, engine: str
) -> None:
    data = kernel_data()
    assert data is not None
    by_kind = {r.kind: r for r in kme.measure(data, part, engine)}
    block = by_kind["fp8_block"]
    assert block.calls > 1000
    assert block.ratio > 1.5  # ~1.7-1.9x at prefill sizes
    assert 0.9 < by_kind["bf16"].ratio < 1.1  # BF16 experts: the same speed


@needs_data
def test_tensorrt_llm_is_the_reference_and_has_no_terms() -> None:
    data = kernel_data()
    assert data is not None
    assert kme.terms(data, "trtllm") == {}
    assert kme.measure(data, "b200", "trtllm")[0].ratio == pytest.approx(1.0)


@needs_data
def test_the_catalog_figures_are_the_measurements(catalog: Catalog) -> None:
    data = kernel_data()
    assert data is not None
    for engine_id in ("vllm", "sglang"):
        measured = kme.terms(data, engine_id)
        engine = catalog.engine(engine_id)
        assert engine is not None
        for f in engine.factors:
            given = f.expert_prefill_time.given()
            assert given, (engine_id, f.accelerators)
            assert "kernel_moe_engines" in f.sources["expert_prefill_time"]
            for kind, value in given.items():
                mean = math.exp(
                    sum(math.log(measured[a][kind]) for a in f.accelerators) / len(f.accelerators)
                )
                assert value == pytest.approx(mean, rel=5e-3), (engine_id, f.accelerators, kind)


def _configs(catalog: Catalog, model: str, precision: str, isl: int) -> Configs:
    return make_configs(
        catalog, model=[model], system=["hgx-b200-8"], tp=[8], ep=[1],
        precision=[precision], batch=[16], isl=[isl], osl=[1024],
    )  # fmt: skip


def test_prefill_experts_take_the_engines_multiple_and_decode_does_not(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    assert catalog.models["deepseek-r1"].fp8_block_scaled
    configs = _configs(catalog, "deepseek-r1", "fp8", 8192)
    base = estimate(arrays, configs)
    slow = estimate(arrays.with_expert_prefill({"b200": {"fp8_block": 3.0}}), configs)
    per_tensor = estimate(arrays.with_expert_prefill({"b200": {"fp8": 3.0}}), configs)
    assert slow.prefill_s[0] > 1.2 * base.prefill_s[0]
    assert slow.step_s[0] == pytest.approx(base.step_s[0])  # a decode step: no prefill tokens
    assert per_tensor.prefill_s[0] == pytest.approx(base.prefill_s[0])  # not this kind
    # a dense model has no routed experts to slow
    dense = _configs(catalog, "llama-3.1-70b", "fp8", 8192)
    assert estimate(
        arrays.with_expert_prefill({"b200": {"fp8": 3.0, "fp8_block": 3.0}}), dense
    ).prefill_s[0] == pytest.approx(estimate(arrays, dense).prefill_s[0])


def test_the_pooled_default_and_tensorrt_llm_carry_none(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    assert np.all(arrays.accelerators.expert_prefill_time == 1.0)
    assert expert_prefill_terms(catalog, "any") == {}
    assert expert_prefill_terms(catalog, "trtllm") == {}
    trt = engine_arrays(catalog, arrays, "trtllm")
    assert np.all(trt.accelerators.expert_prefill_time == 1.0)
    sglang = engine_arrays(catalog, arrays, "sglang").accelerators
    b200 = sglang.ids.index("b200")
    assert sglang.expert_prefill_time[b200].max() > 1.5
