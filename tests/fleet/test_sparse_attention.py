"""DeepSeek Sparse Attention (GLM-5): attention reads and scores the top-k tokens the indexer
selects, the indexer every token's key; dense models are untouched."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleet.catalog import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate
from fleet.perf.sparse import mean_capped
from fleet.perf.transfer import resolve_efficiency
from fleet.perf.types import Problem

MODEL = "glm-5"


def test_mean_capped_is_the_mean_of_the_capped_positions() -> None:
    low, high = np.array([0.0, 100.0, 8192.0, 1000.0]), np.array([8192.0, 200.0, 9216.0, 3000.0])
    # uncapped: exactly the midpoint the dense model uses
    assert np.array_equal(mean_capped(low, high, np.full(4, np.inf)), low + 0.5 * (high - low))
    cap = np.array([2048.0, 150.0, 2048.0, 2048.0])
    got = mean_capped(low, high, cap)
    for i in range(4):
        x = np.linspace(low[i], high[i], 2_000_001)
        assert got[i] == pytest.approx(np.minimum(x, cap[i]).mean(), rel=1e-6)
    assert got[2] == 2048.0  # every position past the cap


def _dense(arrays: CatalogArrays) -> CatalogArrays:
    """GLM-5 read densely: every context token's full KV entry, attention over all of them."""
    m = arrays.models
    i = m.ids.index(MODEL)
    topk, index = m.sparse_topk.copy(), m.index_elements_per_token_layer.copy()
    flops = m.index_flops_per_token_ctx_layer.copy()
    topk[i], index[i], flops[i] = np.inf, 0.0, 0.0
    models = dataclasses.replace(
        m, sparse_topk=topk, index_elements_per_token_layer=index,
        index_flops_per_token_ctx_layer=flops,
    )  # fmt: skip
    return dataclasses.replace(arrays, models=models)


def _memory_s(catalog: Catalog, arrays: CatalogArrays, isl: int, osl: int) -> np.ndarray:
    configs = make_configs(
        catalog, model=MODEL, accelerator="b200", precision="fp8", kv_precision="fp8", tp=8,
        batch=np.array([16, 64]), isl=isl, osl=osl,
    )  # fmt: skip
    est = estimate(arrays, configs)
    assert np.all(est.problem == Problem.OK)
    return est.step_memory_s


def test_decode_reads_the_selected_latents_and_every_indexer_key(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    mla = catalog.model(MODEL).mla
    assert mla is not None and mla.index_topk == 2048
    isl, osl, batch = 8192, 1024, np.array([16, 64])
    saved = _memory_s(catalog, _dense(arrays), isl, osl) - _memory_s(catalog, arrays, isl, osl)
    # Positions 8192-9216 all lie past the top-k: each layer reads 2,048 latents (512 + 64 rope,
    # FP8) instead of the mean 8,704, and the 128-element indexer key of every token either way.
    latent = mla.kv_lora_rank + mla.qk_rope_head_dim
    per_stream = catalog.model(MODEL).num_layers * latent * (isl + osl / 2 - 2048)
    bw = 8e12 * resolve_efficiency(catalog)["b200"].kv_bandwidth_fraction
    np.testing.assert_allclose(saved, batch * per_stream / bw, rtol=1e-9)
    assert saved[1] > 0.15 * _memory_s(catalog, arrays, isl, osl)[1]  # a large share at 8k


def test_short_contexts_read_every_token(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Within the top-k every token is selected: the decode reads what dense attention reads."""
    np.testing.assert_array_equal(
        _memory_s(catalog, _dense(arrays), 1024, 512), _memory_s(catalog, arrays, 1024, 512)
    )


def test_long_prompts_prefill_faster_and_short_ones_pay_the_indexer(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    def prefill(a: CatalogArrays, isl: int) -> float:
        configs = make_configs(
            catalog, model=MODEL, accelerator="b200", precision="fp8", kv_precision="fp8",
            tp=8, batch=1, isl=isl, osl=256,
        )  # fmt: skip
        return float(estimate(a, configs).prefill_s[0])

    # the dense reference here still prefills in MQA form (only top-k and indexer undone)
    assert prefill(arrays, 32768) < 0.9 * prefill(_dense(arrays), 32768)
    assert prefill(arrays, 1024) > prefill(_dense(arrays), 1024)  # the indexer's own work
