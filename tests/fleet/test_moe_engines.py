"""Each engine's routed experts on prefill tokens take its own MoE kernels' time: its own compute
form where its kernel table gives one (``EngineFactors.moe_compute``, fitted by
``fleet.perf.kernel_moe_efficiency --engine``), else its kernels' time over TensorRT-LLM's
(``EngineFactors.expert_prefill_time``, measured by ``fleet.perf.kernel_moe_engines``); the
figures are the tables', and the model charges them on prefill tokens only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fleet.catalog.engines import EXPERT_KINDS
from fleet.catalog.load import Catalog
from fleet.perf import kernel_moe_engines as kme
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.engines import engine_arrays, expert_prefill_terms, moe_compute_terms
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
            # every entry measures its MoE kernels, by a form of their own or by this ratio
            assert given or f.moe_forms(), (engine_id, f.accelerators)
            if not given:
                continue
            assert "kernel_moe_engines" in f.sources["expert_prefill_time"]
            assert not set(given) & set(f.moe_forms())  # a form replaces the ratio
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
    assert moe_compute_terms(catalog, "any") == {}
    assert moe_compute_terms(catalog, "trtllm") == {}
    trt = engine_arrays(catalog, arrays, "trtllm")
    assert np.all(trt.accelerators.expert_prefill_time == 1.0)
    assert np.array_equal(trt.accelerators.moe_compute, arrays.accelerators.moe_compute)
    sglang = engine_arrays(catalog, arrays, "sglang").accelerators
    b200 = sglang.ids.index("b200")
    # SGLang's own block-scaled FP8 form replaces the part's on B200, and its prefill-time
    # ratio with it; its BF16 experts keep their ratio (its form predicts its table worse)
    block, bf16 = EXPERT_KINDS.index("fp8_block"), EXPERT_KINDS.index("bf16")
    assert sglang.expert_prefill_time[b200, block] == 1.0
    assert not np.allclose(
        sglang.moe_compute[b200, block], arrays.accelerators.moe_compute[b200, block]
    )
    assert sglang.expert_prefill_time[b200, bf16] != 1.0
    assert np.array_equal(
        sglang.moe_compute[b200, bf16], arrays.accelerators.moe_compute[b200, bf16]
    )


def test_an_engine_form_replaces_the_part_form_and_its_prefill_ratio(arrays: CatalogArrays) -> None:
    """``with_moe_compute`` puts the given (ratio, m0, n0) in the named part's kind and sets that
    kind's prefill-time multiple back to 1; other parts and kinds keep theirs."""
    slow = arrays.with_expert_prefill({"b200": {"fp8_block": 2.0, "bf16": 3.0}})
    out = slow.with_moe_compute({"b200": {"fp8_block": (0.25, 30.0, 40.0)}}).accelerators
    acc = arrays.accelerators
    b200, h200 = acc.ids.index("b200"), acc.ids.index("h200-sxm")
    block, bf16 = EXPERT_KINDS.index("fp8_block"), EXPERT_KINDS.index("bf16")
    assert tuple(out.moe_compute[b200, block]) == (0.25, 30.0, 40.0)
    assert out.expert_prefill_time[b200, block] == 1.0
    assert out.expert_prefill_time[b200, bf16] == 3.0
    assert np.array_equal(out.moe_compute[h200], acc.moe_compute[h200])
    assert np.array_equal(out.moe_compute[b200, bf16], acc.moe_compute[b200, bf16])


def test_vllm_prefill_follows_its_kernels_across_expert_widths(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """MiniMax-M2.5 (block-scaled FP8 experts of width 1,536) on B200, 8k-token prompts. vLLM's
    MoE table times its grouped GEMMs at 1.9x TensorRT-LLM's with the experts whole (tp 1, 8,192
    tokens: 2,554 against 1,341 us) and at 1.05x with them split four ways (818 against 778 us):
    TensorRT-LLM's kernel loses rate on narrow experts, vLLM's hardly. The model's prefill (the
    experts with attention and the dense layers) follows: vLLM's over TensorRT-LLM's falls by
    more than a quarter from tp 1 to tp 4, where one ratio of the two engines' times (the
    ``expert_prefill_time`` this replaced) kept it flat."""
    ratio = {}
    for tp in (1, 4):
        configs = make_configs(
            catalog, model=["minimax-m2.5"], system=["hgx-b200-8"], tp=[tp], ep=[1],
            precision=["fp8"], batch=[16], isl=[8192], osl=[1024],
        )  # fmt: skip
        vllm = estimate(engine_arrays(catalog, arrays, "vllm"), configs).prefill_s[0]
        trt = estimate(engine_arrays(catalog, arrays, "trtllm"), configs).prefill_s[0]
        ratio[tp] = vllm / trt
    assert ratio[1] > 1.15  # vLLM slower with whole experts
    assert 0.75 < ratio[4] < 1.25  # about even with them split
    assert ratio[4] < 0.75 * ratio[1]


def test_int4_weight_only_experts_prefill_at_their_measured_form(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Kimi K2.5's INT4 weight-only experts on B200: vLLM's W4A16 grouped GEMM (the kernel such
    checkpoints are served with) reaches 0.10 of the BF16 peak at its best on prefill-sized calls
    and halves that at 11 pairs per expert and at 79 elements of width (the catalog's
    ``moe_compute.int4``, fitted on its MoE table), where the dense BF16 GEMMs reach 0.67. An
    8k-token prompt's prefill at tp 8 takes over twice as long as at the dense rate (the flat
    form); a decode step does not move (decode tokens keep the streaming and call terms)."""
    b200 = catalog.accelerator("b200")
    assert b200.kernel is not None and b200.kernel.moe_compute is not None
    form = b200.kernel.moe_compute.int4
    assert form is not None and form.flops_fraction < 0.2
    configs = make_configs(
        catalog, model=["kimi-k2.5"], system=["hgx-b200-8"], tp=[8], ep=[1],
        precision=["int4"], batch=[16], isl=[8192], osl=[1024],
    )  # fmt: skip
    measured = estimate(arrays, configs)
    flat = estimate(arrays.with_moe_compute({"b200": {"int4": (1.0, 0.0, 0.0)}}), configs)
    assert measured.prefill_s[0] > 2.0 * flat.prefill_s[0]
    assert measured.step_s[0] == pytest.approx(flat.step_s[0])
