"""Golden cases and physical properties of the performance model (fleet.perf.model)."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.catalog import PRECISIONS, Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.grid import layouts
from fleet.perf.model import estimate
from fleet.perf.types import Bound, Problem


def ideal(arrays: CatalogArrays, accelerator: str) -> CatalogArrays:
    """Datasheet figures at face value: fractions 1, no overheads."""
    return arrays.with_efficiency(
        (accelerator,),
        bandwidth_fraction=1.0,
        flops_fraction=1.0,
        step_overhead_s=0.0,
        link_fraction=1.0,
    )


def test_golden_llama8b_bf16_h100_batch1(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Llama 3.1 8B, BF16, one H100 SXM (3.35 TB/s), batch 1, isl 1000, osl 2, ideal efficiency.

    Per layer: attention 2*4096*32*128 + 2*4096*8*128 = 41,943,040; FFN 3*4096*14336 =
    176,160,768; x 32 layers = 6,979,321,856 params = 13,958,643,712 bytes. LM head 128256*4096 =
    525,336,576 params = 1,050,673,152 bytes (read every step; the input embedding is a lookup).
    KV per token: 2*8*128 elements * 2 bytes * 32 layers = 131,072 bytes, mean context
    1000 + 2/2 = 1001 tokens -> 131,203,072 bytes.
    Memory term = 15,140,519,936 / 3.35e12 = 4.51956 ms.
    Weights held: (6,979,321,856 + 2*525,336,576) * 2 = 16,059,990,016 bytes; KV held at
    isl + osl = 1002 tokens: 131,334,144 bytes.
    """
    configs = make_configs(
        catalog,
        model="llama-3.1-8b",
        accelerator="h100-sxm",
        precision="bf16",
        batch=1,
        isl=1000,
        osl=2,
    )
    est = estimate(ideal(arrays, "h100-sxm"), configs)
    assert est.problem[0] == Problem.OK
    assert est.step_memory_s[0] == pytest.approx(15_140_519_936 / 3.35e12, rel=1e-9)
    assert est.weight_bytes_per_device[0] == pytest.approx(16_059_990_016, rel=1e-12)
    assert est.kv_bytes_per_device[0] == pytest.approx(131_334_144, rel=1e-12)
    assert est.bound[0] == Bound.MEMORY
    # Compute (~15 GFLOP at 989 TFLOP/s) is ~0.3% of memory: the smooth roof adds < 0.01%.
    assert est.step_s[0] == pytest.approx(est.step_memory_s[0], rel=1e-4)


def test_golden_tp_all_reduce_cost(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Llama 3.1 70B, tp 8 on HGX H100, batch 1, ideal link (450 GB/s, 2 us per hop).

    Two all-reduces per layer x 80 layers = 160, each of 1 token x 8192 x 2 bytes = 16,384 bytes:
    2 * 7/8 * 16,384 / 450e9 = 63.7 ns of bandwidth plus 2 * log2(8) * 2 us = 12 us of latency.
    160 * (12e-6 + 6.371e-8) = 1.930194 ms.
    """
    configs = make_configs(
        catalog, model="llama-3.1-70b", accelerator="h100-sxm", tp=8, batch=1, isl=100, osl=2
    )
    est = estimate(ideal(arrays, "h100-sxm"), configs)
    expected = 160 * (12e-6 + 2 * 7 / 8 * 16_384 / 450e9)
    assert est.step_comm_s[0] == pytest.approx(expected, rel=1e-9)


def test_memory_bound_at_small_batch_compute_bound_at_large(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    configs = make_configs(
        catalog,
        model="llama-3.1-70b",
        accelerator="h200-sxm",
        tp=2,
        precision="fp8",
        batch=[1, 4096],
        isl=64,
        osl=64,
    )
    est = estimate(arrays, configs)
    assert est.fits.all()
    assert est.bound[0] == Bound.MEMORY
    assert est.bound[1] == Bound.COMPUTE
    # Throughput per device rises, speed per user falls.
    assert est.tokens_per_s_per_device[1] > 20 * est.tokens_per_s_per_device[0]
    assert est.tokens_per_s_per_user[1] < est.tokens_per_s_per_user[0]


def test_moe_expert_fraction_touched(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Weight bytes read per step = non-expert + experts x (1 - (1 - k/E)^tokens)."""
    batches = np.array([1, 4, 16, 64, 256])
    configs = make_configs(
        catalog,
        model="gpt-oss-120b",
        accelerator="h200-sxm",
        precision="fp8",
        kv_precision="fp8",
        batch=batches,
        isl=1,
        osl=2,
    )
    est = estimate(ideal(arrays, "h200-sxm"), configs)
    m = list(catalog.models).index("gpt-oss-120b")
    M = arrays.models
    touched = 1 - (1 - 4 / 128) ** batches
    weights = M.replicated_params[m] + M.expert_params[m] * touched + 2 * M.lm_head_params[m]
    kv = batches * 2.0 * M.kv_elements_per_token_layer[m] * 36 * 1.0  # fp8, context 1 + 2/2 = 2
    assert est.step_memory_s == pytest.approx((weights + kv) / 4.8e12, rel=1e-9)
    assert touched[0] == pytest.approx(4 / 128)
    assert touched[-1] > 0.999


def test_kv_sizes_gqa_mla_and_precision(catalog: Catalog, arrays: CatalogArrays) -> None:
    """GQA: 2 x kv_heads x head_dim per token-layer, split over tp; MLA: 512 + 64, replicated."""
    ctx = 1000 + 24
    gqa = make_configs(
        catalog,
        model="llama-3.1-70b",
        accelerator="h200-sxm",
        tp=8,
        batch=10,
        kv_precision=["bf16", "fp8"],
        isl=1000,
        osl=24,
    )
    est = estimate(arrays, gqa)
    per_token = 2 * 8 * 128 / 8 * 80  # one KV head per device at tp 8
    assert est.kv_bytes_per_device == pytest.approx(10 * ctx * per_token * np.array([2, 1]))
    mla = make_configs(
        catalog,
        model="deepseek-r1",
        accelerator="h200-sxm",
        tp=8,
        ep=8,
        batch=10,
        kv_precision="fp8",
        isl=1000,
        osl=24,
    )
    est = estimate(arrays, mla)
    assert est.kv_bytes_per_device[0] == pytest.approx(10 * ctx * (512 + 64) * 61 * 1.0)


def test_sliding_window_layers_capped(catalog: Catalog, arrays: CatalogArrays) -> None:
    """gpt-oss-120b: 18 of 36 layers keep only the last 128 tokens."""
    configs = make_configs(
        catalog,
        model="gpt-oss-120b",
        accelerator="h200-sxm",
        batch=1,
        kv_precision="bf16",
        isl=[64, 10_000],
        osl=0 + 1,
    )
    est = estimate(arrays, configs)
    per_token_layer = 2 * 8 * 64 * 2
    assert est.kv_bytes_per_device[0] == pytest.approx(per_token_layer * 36 * 65)
    assert est.kv_bytes_per_device[1] == pytest.approx(per_token_layer * (18 * 10_001 + 18 * 128))


def test_fp4_on_hopper_is_weight_only(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog,
        model="llama-3.1-70b",
        accelerator=["h100-sxm", "h100-sxm", "b200"],
        precision=["fp8", "fp4", "fp4"],
        tp=2,
        batch=512,
        isl=256,
        osl=256,
    )
    est = estimate(arrays, configs)
    assert (est.problem == Problem.OK).all()
    emb = 2 * 2 * 128256 * 8192 / 2  # BF16 embedding + head, split over tp 2
    assert est.weight_bytes_per_device[1] - emb == pytest.approx(
        (est.weight_bytes_per_device[0] - emb) / 2
    )
    # No FP4 tensor cores on Hopper: FP4 math runs at the BF16 rate (the same compute time as
    # BF16 weights), below the FP8 rate by the ratio of the two effective rates (half the peak;
    # the fitted fractions per precision narrow it, docs/calibration.md).
    bf16 = make_configs(
        catalog, model="llama-3.1-70b", accelerator="h100-sxm", precision="bf16",
        tp=2, batch=512, isl=256, osl=256,
    )  # fmt: skip
    assert est.step_compute_s[1] == pytest.approx(estimate(arrays, bf16).step_compute_s[0])
    acc = arrays.accelerators
    h100 = acc.ids.index("h100-sxm")
    rate = acc.peak_flops[h100] * acc.flops_fraction_by_precision[h100]
    fp8_over_bf16 = rate[PRECISIONS.index("fp8")] / rate[PRECISIONS.index("bf16")]
    assert fp8_over_bf16 > 1.0
    # attention math (BF16 for both) dilutes the ratio a little
    assert est.step_compute_s[1] > 0.95 * fp8_over_bf16 * est.step_compute_s[0]
    # Blackwell runs FP4 natively.
    assert est.step_compute_s[2] < est.step_compute_s[0]


def test_problem_codes_never_raise(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog,
        model=[
            "llama-3.1-70b",
            "deepseek-r1",
            "deepseek-r1",
            "llama-3.1-70b",
            "llama-3.1-8b",
            "llama-3.1-405b",
            "llama-3.1-8b",
        ],
        accelerator=[
            "h100-sxm",
            "h100-sxm",
            "h200-sxm",
            "h100-sxm",
            "wse3",
            "h100-sxm",
            "h100-sxm",
        ],
        tp=[3, 1, 8, 1, 1, 8, 1],
        dp=[1, 12, 1, 1, 1, 1, 1],
        ep=[1, 4, 3, 1, 1, 1, 2],
        pp=[1, 1, 1, 1, 1, 2, 1],
        precision=["fp8", "fp8", "fp8", "fp8", "fp8", "bf16", "fp8"],
        batch=[1, 1, 1, 64, 1, 8, 1],
    )
    est = estimate(arrays, configs)
    assert est.problem.tolist() == [
        Problem.BAD_LAYOUT,  # tp 3 does not divide 64 heads
        Problem.OVER_SCALE_UP,  # a 12-GPU stage is not a whole number of 8-GPU NVLink nodes
        Problem.BAD_LAYOUT,  # ep 3 divides neither 256 experts nor 8 devices
        Problem.DOES_NOT_FIT,  # 70B FP8 on one 80 GB GPU
        Problem.PRECISION_UNSUPPORTED,  # WSE-3 serves 16-bit weights only
        Problem.OK,  # pipeline stages may span systems
        Problem.BAD_LAYOUT,  # ep on a dense model
    ]
    assert est.systems_per_replica[5] == 2
    assert np.isnan(est.tpot_s[0]) and not est.fits[0]


def test_pipeline_adds_hops_and_memory_not_speed(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog,
        model="llama-3.1-70b",
        accelerator="h100-sxm",
        tp=4,
        pp=[1, 2],
        batch=1,
        isl=1024,
        osl=256,
    )
    est = estimate(arrays, configs)
    assert est.tokens_per_s_per_user[1] <= est.tokens_per_s_per_user[0]
    assert est.max_batch[1] > 2 * est.max_batch[0]


def test_tensor_parallel_speedup_is_sublinear(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog,
        model="llama-3.1-70b",
        accelerator="h200-sxm",
        tp=[1, 2, 4, 8],
        batch=1,
        isl=1024,
        osl=256,
    )
    est = estimate(arrays, configs)
    speed = est.tokens_per_s_per_user
    assert np.all(np.diff(speed) > 0)
    assert speed[3] / speed[0] < 8 * 0.6
    assert est.step_comm_s[0] == 0 and np.all(np.diff(est.step_comm_s) > 0)


def test_expert_parallel_and_dp_attention(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog,
        model="deepseek-r1",
        accelerator="h200-sxm",
        tp=[8, 1],
        dp=[1, 8],
        ep=8,
        batch=256,
        isl=1024,
        osl=1024,
    )
    est = estimate(arrays, configs)
    assert (est.problem == Problem.OK).all()
    # dp ranks replicate attention: more weight bytes per device, KV split over ranks.
    assert est.weight_bytes_per_device[1] > est.weight_bytes_per_device[0]
    assert est.kv_bytes_per_device[1] < est.kv_bytes_per_device[0]


def test_dp_attention_ranks_idle_without_streams(catalog: Catalog, arrays: CatalogArrays) -> None:
    """A request's attention runs on the one dp rank that holds its KV: a lone 8k prefill on
    tp 1 x dp 8 computes its attention and projections on one GPU (tp 8 x dp 1 splits them over
    8), and at batch 1 the other 7 ranks idle instead of sharing the stream's work."""
    configs = make_configs(
        catalog,
        model="deepseek-r1",
        accelerator="h200-sxm",
        tp=[8, 1],
        dp=[1, 8],
        ep=8,
        batch=1,
        isl=8192,
        osl=1024,
    )
    est = estimate(arrays, configs)
    # 2.4x measured with MLA prefill at its uncompressed cost (3.4x fewer attention FLOPs than
    # the decode form, which gave > 3x): the one-rank share is the non-expert work.
    assert est.prefill_s[1] > 2.0 * est.prefill_s[0]
    assert est.step_compute_s[1] > est.step_compute_s[0]


def test_prefill_interference_in_aggregated_serving(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    configs = make_configs(
        catalog,
        model="llama-3.1-8b",
        accelerator="h100-sxm",
        precision="bf16",
        batch=64,
        isl=[128, 4096],
        osl=128,
    )
    est = estimate(arrays, configs)
    ratio = est.tpot_s / est.step_s
    assert ratio[0] < 1.3
    assert ratio[1] > 2.0  # long inputs: the prefills of replacement requests dominate


def test_speculative_decoding(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog,
        model="llama-3.1-70b",
        accelerator="h200-sxm",
        tp=8,
        batch=[1, 1, 256],
        spec_draft_tokens=[0, 3, 3],
        spec_acceptance=[0.0, 0.7, 0.7],
        isl=1024,
        osl=512,
    )
    est = estimate(arrays, configs)
    accepted = (1 - 0.7**4) / (1 - 0.7)
    assert est.tokens_per_step[1] == pytest.approx(accepted)
    assert est.step_draft_s[0] == 0 and est.step_draft_s[1] > 0
    # Memory-bound at batch 1: verifying 4 tokens costs little more than 1, so users go faster.
    assert est.tokens_per_s_per_user[1] > 1.5 * est.tokens_per_s_per_user[0]


@pytest.mark.parametrize(
    ("accelerator", "model", "precision", "low", "high"),
    [
        ("wse3", "llama-3.1-70b", "bf16", 450, 2100),
        ("wse3", "gpt-oss-120b", "bf16", 2000, 3000),
        ("wse3", "llama-3.1-405b", "bf16", 800, 1200),
        ("groq-lpu", "llama-3.1-70b", "fp8", 180, 350),
    ],
)
def test_sram_resident_speeds_near_published(
    catalog: Catalog,
    arrays: CatalogArrays,
    accelerator: str,
    model: str,
    precision: str,
    low: float,
    high: float,
) -> None:
    """Per-user speed at batch 1 on the fewest chips that hold the model (grid's SRAM layouts).

    Published: Cerebras Llama 3.1 70B 450 (Aug 2024) to 2,100 tok/s (Oct 2024); gpt-oss-120B
    ~2,000-3,000; Llama 3.1 405B 969 tok/s; Groq Llama 3.1 70B ~250 tok/s.
    """
    system = catalog.default_system(accelerator).id
    lay = layouts(catalog, model, system, precisions=(precision,), sram_pp_factors=(1.0, 1.25))
    configs = make_configs(
        catalog,
        model=model,
        system=system,
        tp=lay.tp,
        pp=lay.pp,
        dp=lay.dp,
        ep=lay.ep,
        precision=precision,
        kv_precision="bf16",
        batch=1,
        isl=1000,
        osl=500,
    )
    est = estimate(arrays, configs)
    ok = est.fits
    assert ok.any()
    best = est.tokens_per_s_per_user[ok].max()
    assert low <= best <= high
    # Weights live in SRAM across chips: the replica needs many of them.
    assert (
        est.devices_per_replica[ok].min() * catalog.accelerator(accelerator).memory_gb
        > (est.weight_bytes_per_device[ok][0] * est.devices_per_replica[ok][0] / 1e9) * 0.99
    )


def test_stages_span_systems_over_the_scale_out_network(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Multi-node tensor / expert parallel: a 16-GPU stage on 8-GPU HGX nodes is valid, spans two
    systems, and its collectives pay InfiniBand (50 GB/s per GPU, 5 us) on top of NVLink; wide EP
    inside one GB200 NVL72 rack stays on NVLink."""
    configs = make_configs(
        catalog,
        model=["llama-3.1-70b", "llama-3.1-70b", "deepseek-r1", "deepseek-r1", "deepseek-r1"],
        system=["hgx-h100-8", "hgx-h100-8", "hgx-h200-8", "hgx-h200-8", "gb200-nvl72"],
        tp=[8, 16, 8, 1, 1],
        dp=[1, 1, 1, 64, 64],
        ep=[1, 1, 8, 64, 64],
        precision="fp8",
        batch=[8, 8, 64, 2048, 2048],
        isl=1024,
        osl=256,
    )
    est = estimate(arrays, configs)
    assert (est.problem == Problem.OK).all()
    assert est.systems_per_replica.tolist() == [1, 2, 1, 8, 1]
    # tp 16 over two nodes: the all-reduces gain an inter-node stage, so comm grows.
    assert est.step_comm_s[1] > est.step_comm_s[0]
    # DeepSeek wide EP over 8 nodes vs inside one NVL72 (same layout, 2048 streams): 7/8 of the
    # all-to-all traffic crosses InfiniBand at 50 GB/s per GPU instead of NVLink at 900 GB/s.
    assert est.step_comm_s[3] > 5.0 * est.step_comm_s[4]
