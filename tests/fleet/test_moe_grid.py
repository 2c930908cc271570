"""TensorRT-LLM's block-scaled FP8 MoE kernel costs a fixed time per expert held on the rank:
measured on its kernel tables (and absent from SGLang's), stored in engines.toml with a source,
charged only where an engine carries it, on models whose FP8 checkpoint is block-scaled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fleet.catalog import CatalogError, load_catalog
from fleet.catalog.load import DATA_DIR, Catalog
from fleet.perf import kernel_moe_grid as grid
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.engine_fit import GRID_ENGINES, grid_figure
from fleet.perf.engines import block_fp8_moe_terms, engine_arrays
from fleet.perf.model import estimate
from fleet.perf.types import Configs
from tests.fleet.kernel_data import kernel_data, needs_data


@needs_data
@pytest.mark.parametrize("part", ["h200-sxm", "b200"])
def test_tensorrt_llm_block_fp8_moe_costs_per_expert_held(catalog: Catalog, part: str) -> None:
    """On unseen shapes the term halves the median error and cuts the p90 by more than half;
    SGLang's Triton kernel of the same dtype fits to no such term."""
    data = kernel_data()
    assert data is not None
    acc = catalog.accelerator(part)
    trt = grid.fit(data, acc, "trtllm")
    assert 0.2 < trt.local_expert_us < 0.4
    assert trt.with_term.held_out_median < 0.6 * trt.without_term.held_out_median
    assert trt.with_term.held_out_p90 < 0.5 * trt.without_term.held_out_p90
    assert trt.with_term.held_out_median < 0.06
    sglang = grid.fit(data, acc, "sglang")
    assert sglang.local_expert_us < 0.02


@needs_data
def test_the_catalog_figures_are_the_fits(catalog: Catalog) -> None:
    data = kernel_data()
    assert data is not None
    parts = [catalog.accelerator(a) for a in grid.PARTS]
    fitted = grid.trtllm_figures(data, parts)
    for engine in catalog.engines.values():
        for f in engine.factors:
            stored = f.block_fp8_moe_local_expert_us
            expected = grid_figure(fitted, f.accelerators) if engine.id in GRID_ENGINES else None
            if expected is None:
                assert stored is None, (engine.id, f.accelerators)
            else:
                assert stored == pytest.approx(expected, rel=0.005), (engine.id, f.accelerators)
                assert "kernel_moe_grid" in f.sources["block_fp8_moe_local_expert_us"]


def _configs(catalog: Catalog, model: str, precision: str, ep: list[int]) -> Configs:
    n = len(ep)
    return make_configs(
        catalog, model=[model] * n, system=["hgx-h200-8"] * n, tp=[8] * n, ep=ep,
        precision=[precision] * n, batch=[4] * n, isl=[1024] * n, osl=[1024] * n,
    )  # fmt: skip


def test_tensorrt_llm_charges_each_moe_layer_its_experts_held(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """DeepSeek-R1 FP8 on 8 H200s: tp 8 holds all 256 experts per rank, ep 8 holds 32; every
    forward pass of the step (one decode step here) pays 58 MoE layers x held x the figure."""
    trt = engine_arrays(catalog, arrays, "trtllm")
    us = block_fp8_moe_terms(catalog, "trtllm")["h200-sxm"] * 1e6
    configs = _configs(catalog, "deepseek-r1", "fp8", [1, 8])
    without = trt.with_block_fp8_moe({"h200-sxm": 0.0})
    extra = estimate(trt, configs).step_s - estimate(without, configs).step_s
    moe_layers = 61 - 3
    np.testing.assert_allclose(extra * 1e6, [moe_layers * 256 * us, moe_layers * 32 * us])
    assert catalog.models["deepseek-r1"].fp8_block_scaled


def test_nothing_moves_without_the_term(catalog: Catalog, arrays: CatalogArrays) -> None:
    """The pooled default and SGLang carry no term; gpt-oss (MXFP4, not block-scaled FP8), a
    block-scaled model at FP4 and a dense model are not charged under TensorRT-LLM either."""
    assert block_fp8_moe_terms(catalog, "any") == {}
    assert block_fp8_moe_terms(catalog, "sglang") == {}
    assert not np.any(arrays.accelerators.block_fp8_moe_local_expert_s)
    trt = engine_arrays(catalog, arrays, "trtllm")
    off = trt.with_block_fp8_moe({a: 0.0 for a in trt.accelerators.ids})
    cases = (("gpt-oss-120b", "fp8"), ("deepseek-r1", "fp4"), ("llama-3.1-70b", "fp8"))
    for model, precision in cases:
        configs = _configs(catalog, model, precision, [1] if model == "llama-3.1-70b" else [1, 8])
        np.testing.assert_array_equal(
            estimate(trt, configs).tpot_s, estimate(off, configs).tpot_s, err_msg=model
        )


def test_a_block_scaled_model_needs_a_source(tmp_path: Path) -> None:
    for name in ("accelerators.toml", "systems.toml", "engines.toml"):
        (tmp_path / name).write_bytes((DATA_DIR / name).read_bytes())
    text = (DATA_DIR / "models.toml").read_text()
    line = next(x for x in text.splitlines() if x.startswith('fp8_block_scaled = "config.json'))
    (tmp_path / "models.toml").write_text(text.replace(line + "\n", "", 1))
    with pytest.raises(CatalogError, match=r"sources\.fp8_block_scaled"):
        load_catalog(tmp_path)
