"""Block-sparse attention with its own indexer (MiniMax Sparse Attention, MiniMax-M3): weights,
KV held and read, and attention FLOPs, worked out by hand.

MiniMax-M3's entry (tests/fleet/data/minimax-m3.toml) is held out of fleet/data/models.toml
until its published active figure checks (see the entry); these tests load the catalog with it
appended."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from fleet.catalog import Catalog
from fleet.catalog.hf_config import describe, match
from fleet.catalog.load import DATA_DIR, CatalogError, load_catalog
from fleet.catalog.params import active_params, kv_bytes_per_sequence, param_breakdown
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.disagg import kv_transfer_bytes
from fleet.perf.model import estimate
from fleet.perf.transfer import resolve_efficiency
from fleet.perf.types import Problem

MODEL = "minimax-m3"
H, LAYERS, SPARSE, KV_ELEMENTS, INDEX_DIM = 6144, 60, 57, 4 * (128 + 128), 128
CONFIGS = Path(__file__).resolve().parents[2] / "build/aic/whl/aiconfigurator_core/model_configs"
ENTRY = Path(__file__).resolve().parent / "data" / "minimax-m3.toml"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The catalog with MiniMax-M3's entry appended (this module's own, not the session's), or
    the catalog itself once the entry is in it."""
    default = load_catalog()
    if MODEL in default.models:
        return default
    root = tmp_path_factory.mktemp("data")
    for path in DATA_DIR.glob("*.toml"):
        shutil.copy(path, root / path.name)
    models = (DATA_DIR / "models.toml").read_text(encoding="utf-8")
    (root / "models.toml").write_text(models + "\n" + ENTRY.read_text(encoding="utf-8"))
    return load_catalog(root)


@pytest.fixture(scope="module")
def arrays(catalog: Catalog) -> CatalogArrays:
    return build_arrays(catalog)


def _dense(arrays: CatalogArrays) -> CatalogArrays:
    """MiniMax-M3 read densely: no block-sparse layer (no selection, no index keys)."""
    m = arrays.models
    layers = m.block_sparse_layers.copy()
    layers[m.ids.index(MODEL)] = 0.0
    return dataclasses.replace(arrays, models=dataclasses.replace(m, block_sparse_layers=layers))


def test_weights_by_hand(catalog: Catalog) -> None:
    """60 GQA layers (64 query / 4 KV heads of 128), an indexer on 57 of them (4 query heads
    and one shared key of 128), 3 dense FFNs of 12288, 57 MoE layers of 128 experts of 3072
    and one shared expert."""
    model = catalog.model(MODEL)
    b = param_breakdown(model)
    gqa = H * 64 * 128 * 2 + H * 4 * 128 * 2  # q and o, k and v
    assert b.attention == LAYERS * gqa + SPARSE * H * (4 + 1) * 128
    assert b.dense_ffn == 3 * 3 * H * 12288
    assert b.routed_experts == SPARSE * 128 * 3 * H * 3072
    assert b.shared_experts == SPARSE * 3 * H * 3072
    assert b.router == SPARSE * H * 128
    # MiniMax's ~428B counts the whole checkpoint (vision tower and MTP modules as well)
    assert 425e9 < b.total < 428e9


def test_kv_held_by_hand(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Every token's K and V on all 60 layers, plus its 128-element index key on the 57 sparse
    layers, which each tensor-parallel rank keeps whole while the 4 KV heads split over tp."""
    model = catalog.model(MODEL)
    tokens = 10_000.0
    per_token = LAYERS * KV_ELEMENTS + SPARSE * INDEX_DIM  # FP8: one byte each
    assert kv_bytes_per_sequence(model, 1.0, tokens) == per_token * tokens
    isl, osl, batch = 8192, 1024, 16
    configs = make_configs(
        catalog, model=MODEL, system="hgx-b200-8", precision="fp8", kv_precision="fp8",
        tp=np.array([1, 4, 8]), batch=batch, isl=isl, osl=osl,
    )  # fmt: skip
    est = estimate(arrays, configs)
    kv_share = np.array([1.0, 0.25, 0.25])  # 4 KV heads: one per rank from tp 4 on
    per_device = LAYERS * KV_ELEMENTS * kv_share + SPARSE * INDEX_DIM
    np.testing.assert_array_equal(est.kv_bytes_per_device, batch * (isl + osl) * per_device)
    transfer = kv_transfer_bytes(arrays, configs)
    np.testing.assert_array_equal(transfer, isl * per_token)


def _decode(catalog: Catalog, arrays: CatalogArrays, isl: int, osl: int) -> tuple:
    configs = make_configs(
        catalog, model=MODEL, system="hgx-b200-8", precision="fp8", kv_precision="fp8", tp=4,
        batch=np.array([16, 64]), isl=isl, osl=osl,
    )  # fmt: skip
    est = estimate(arrays, configs)
    assert np.all(est.problem == Problem.OK)
    return est.step_memory_s, est.step_compute_s


def test_decode_reads_the_selected_blocks_and_every_index_key(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    isl, osl, batch = 8192, 1024, np.array([16, 64])
    dense_s, _ = _decode(catalog, _dense(arrays), isl, osl)
    sparse_s, _ = _decode(catalog, arrays, isl, osl)
    # every decode position lies past 16 blocks of 128: each sparse layer reads the K/V of
    # 2,048 tokens (one KV head of 256 elements per rank at tp 4, FP8) instead of the mean
    # 8,704, and the index key of every token
    ctx = isl + osl / 2
    per_stream = SPARSE * (KV_ELEMENTS / 4 * (ctx - 2048) - INDEX_DIM * ctx)
    bw = 8e12 * resolve_efficiency(catalog)["b200"].kv_bandwidth_fraction
    np.testing.assert_allclose(dense_s - sparse_s, batch * per_stream / bw, rtol=1e-9)
    # a small share at 8k: the KV of 4 heads is small and each rank reads every index key
    assert np.all(dense_s > sparse_s)


def test_short_contexts_read_every_token_and_the_index_keys(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Within 2,048 tokens every block is selected: the sparse layers read what dense attention
    reads, plus the index keys, and their indexer adds its scoring FLOPs."""
    isl, osl, batch = 1024, 512, np.array([16, 64])
    dense_mem, dense_flops = _decode(catalog, _dense(arrays), isl, osl)
    sparse_mem, sparse_flops = _decode(catalog, arrays, isl, osl)
    bw = 8e12 * resolve_efficiency(catalog)["b200"].kv_bandwidth_fraction
    index_read = SPARSE * INDEX_DIM * (isl + osl / 2)
    np.testing.assert_allclose(sparse_mem - dense_mem, batch * index_read / bw, rtol=1e-9)
    assert np.all(sparse_flops > dense_flops)


def test_long_prompts_prefill_faster_and_short_ones_pay_the_indexer(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    def prefill(a: CatalogArrays, isl: int) -> float:
        configs = make_configs(
            catalog, model=MODEL, system="hgx-b200-8", precision="fp8", kv_precision="fp8",
            tp=4, batch=1, isl=isl, osl=256,
        )  # fmt: skip
        return float(estimate(a, configs).prefill_s[0])

    assert prefill(arrays, 131072) < 0.8 * prefill(_dense(arrays), 131072)
    assert prefill(arrays, 1024) > prefill(_dense(arrays), 1024)  # the indexer's own work


@pytest.mark.parametrize(("precision", "tp", "batch"), [("bf16", 8, 32), ("fp4", 4, 64)])
def test_an_hgx_b200_node_serves_it(
    catalog: Catalog, arrays: CatalogArrays, precision: str, tp: int, batch: int
) -> None:
    """The BF16 release on a whole node, NVIDIA's NVFP4 release on half of one, at 8k/1k."""
    configs = make_configs(
        catalog, model=MODEL, system="hgx-b200-8", precision=precision, kv_precision="fp8",
        tp=tp, ep=tp, batch=batch, isl=8192, osl=1024,
    )  # fmt: skip
    est = estimate(arrays, configs)
    assert est.problem[0] == Problem.OK and est.fits[0]
    assert est.max_batch[0] >= batch
    assert 0.0 < est.tpot_s[0] < 0.2 and 0.0 < est.ttft_floor_s[0] < 10.0


@pytest.mark.skipif(not CONFIGS.is_dir(), reason="aiconfigurator-core configs not unpacked")
@pytest.mark.parametrize("repo", ["MiniMaxAI--MiniMax-M3", "nvidia--MiniMax-M3-NVFP4"])
def test_both_bundled_configs_are_this_architecture(catalog: Catalog, repo: str) -> None:
    config = json.loads((CONFIGS / f"{repo}_config.json").read_text(encoding="utf-8"))
    found = match(catalog, config)
    assert found.model is not None and found.model.id == MODEL, found.differences
    fields = describe(config).fields
    assert fields is not None and fields["block_sparse_attention"]["layers"] == SPARSE


def test_the_published_figures(catalog: Catalog) -> None:
    """The total within 2% of MiniMax's ~428B; the active count 2.2% above its ~23B, the
    reason the entry is held out of the catalog (tests/fleet/test_params.py's bound is +-0.5B)."""
    model = catalog.model(MODEL)
    b = param_breakdown(model)
    assert b.total / 1e9 == pytest.approx(model.published_total_params_b, rel=0.02)
    active_b = active_params(model, model.published_active_embeddings) / 1e9
    assert active_b == pytest.approx(23.503, abs=0.001)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("local_blocks = 1", "local_blocks = 16", "block_sparse_attention.local_blocks"),
        ("layers = 57", "layers = 61", "block_sparse_attention.layers (id 'minimax-m3'): exceeds"),
        ("topk_blocks = 16", "topk_blocks = 0", "topk_blocks"),
    ],
)
def test_a_broken_entry_is_named(tmp_path: Path, old: str, new: str, message: str) -> None:
    for path in DATA_DIR.glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
    entry = ENTRY.read_text(encoding="utf-8")
    assert old in entry
    models = (DATA_DIR / "models.toml").read_text(encoding="utf-8")
    (tmp_path / "models.toml").write_text(models + "\n" + entry.replace(old, new))
    with pytest.raises(CatalogError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_catalog(tmp_path)
