"""Prefill as it is scheduled (whole prompts in chunks riding with decode), MLA prefill FLOPs,
the burst TTFT of a closed-loop benchmark, and 4-bit weights on the experts only."""

from __future__ import annotations

import numpy as np

from fleet.catalog import BYTES_PER_ELEMENT, Catalog
from fleet.catalog.params import param_breakdown
from fleet.perf.arrays import CatalogArrays
from fleet.perf.comm import Links, StageComm, pipeline_hop_s
from fleet.perf.configs import INT4, make_configs
from fleet.perf.model import PREFILL_CHUNK_TOKENS, estimate
from fleet.perf.types import Problem


def test_mla_prefill_runs_uncompressed(catalog: Catalog, arrays: CatalogArrays) -> None:
    """DeepSeek-R1: decode 2 x 128 x (2 x 512 + 64), prefill 2 x 128 x (128 + 64 + 128)."""
    M = arrays.models
    i = M.ids.index("deepseek-r1")
    assert M.attention_flops_per_token_ctx_layer[i] == 2 * 128 * (2 * 512 + 64)
    assert M.attention_prefill_flops_per_token_ctx_layer[i] == 2 * 128 * (128 + 64 + 128)
    ratio = (
        M.attention_flops_per_token_ctx_layer[i] / M.attention_prefill_flops_per_token_ctx_layer[i]
    )
    assert 3.3 < ratio < 3.5
    j = M.ids.index("llama-3.1-70b")  # GQA: one form for both
    assert (
        M.attention_flops_per_token_ctx_layer[j] == M.attention_prefill_flops_per_token_ctx_layer[j]
    )


def test_whole_prompt_prefill_does_not_touch_every_expert_every_step(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """At batch 8 with 1k prompts and 1k outputs a replacement arrives every ~128 steps: the
    mixed step touches all experts once, the other steps only the decode tokens' experts, so the
    aggregated step stays close to the decode step (the fused model read ~8 prompt tokens' worth
    of experts in every step)."""
    configs = make_configs(
        catalog, model="deepseek-r1", accelerator="h200-sxm", tp=8, ep=8, precision="fp8",
        batch=8, isl=1024, osl=1024,
    )  # fmt: skip
    est = estimate(arrays, configs)
    assert est.problem[0] == Problem.OK
    assert est.aggregated_step_s[0] < 1.1 * est.step_s[0]
    # One prompt's prefill is spread over osl / batch steps: its time per step is what is added.
    per_step = est.aggregated_step_s[0] - est.step_s[0]
    assert 0 < per_step < est.prefill_s[0] * 8 / 1024 * 1.5


def test_long_prompts_are_prefilled_in_chunks(catalog: Catalog, arrays: CatalogArrays) -> None:
    """A prompt of 4 chunks takes ~4x one chunk's prefill (plus the attention over the longer
    context), never less."""
    isl = [int(PREFILL_CHUNK_TOKENS), int(4 * PREFILL_CHUNK_TOKENS)]
    configs = make_configs(
        catalog, model="llama-3.1-70b", accelerator="h200-sxm", tp=8, precision="fp8",
        batch=1, isl=isl, osl=64,
    )  # fmt: skip
    est = estimate(arrays, configs)
    assert 4.0 <= est.prefill_s[1] / est.prefill_s[0] < 6.0


def test_burst_ttft_grows_with_concurrency_and_exceeds_the_floor(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    batches = [1, 4, 16, 64, 128]
    configs = make_configs(
        catalog, model="qwen3-32b", accelerator="h100-sxm", tp=4, precision="bf16",
        batch=batches, isl=2048, osl=256,
    )  # fmt: skip
    est = estimate(arrays, configs)
    assert np.all(est.problem == Problem.OK)
    assert np.all(est.ttft_burst_s > est.ttft_floor_s)
    assert np.all(np.diff(est.ttft_burst_s) > 0)
    # One request's prefill does not depend on concurrency (the floor only through its decode
    # step); the burst does, sub-linearly (later waves are staggered): 128x the concurrency
    # costs far less than 128x the TTFT.
    np.testing.assert_allclose(est.prefill_s, est.prefill_s[0])
    assert est.ttft_burst_s[-1] / est.ttft_burst_s[0] < 64


def test_four_bit_on_moe_quantizes_experts_only(catalog: Catalog, arrays: CatalogArrays) -> None:
    """gpt-oss-120b at fp4 on one H100: experts 0.5 B/param, everything else BF16; a dense model
    at fp4 or int4 is 0.5 B/param throughout its blocks."""
    moe = catalog.model("gpt-oss-120b")
    b = param_breakdown(moe)
    configs = make_configs(
        catalog, model="gpt-oss-120b", accelerator="h100-sxm", tp=1, precision=["fp4", "int4"],
        batch=1, isl=1024, osl=128,
    )  # fmt: skip
    est = estimate(arrays, configs)
    tables = 2.0 * (b.embedding + (b.lm_head or 0.0))
    expected = 0.5 * b.routed_experts + 2.0 * (b.non_expert - b.embedding - b.lm_head) + tables
    np.testing.assert_allclose(est.weight_bytes_per_device, expected, rtol=1e-9)

    dense = catalog.model("llama-3.1-70b")
    d = param_breakdown(dense)
    configs = make_configs(
        catalog, model="llama-3.1-70b", accelerator="h100-sxm", tp=8,
        precision=["fp8", "fp4", "int4"], batch=1, isl=1024, osl=128,
    )  # fmt: skip
    est = estimate(arrays, configs)
    blocks = d.attention + d.dense_ffn
    tables = 2.0 * (d.embedding + d.lm_head)
    for i, p in enumerate(("fp8", "fp4", "int4")):
        per_param = BYTES_PER_ELEMENT[p]
        assert est.weight_bytes_per_device[i] == (per_param * blocks + tables) / 8


def test_int4_is_weight_only_with_a_bf16_kv_cache(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog, model="llama-3.1-70b", accelerator=["h100-sxm", "b200", "wse3"], tp=1,
        precision="int4", batch=1, isl=1024, osl=128,
    )  # fmt: skip
    assert np.all(configs.weight_precision == INT4)
    assert configs.kv_precision.tolist() == [0, 0, 0]  # BF16
    est = estimate(arrays, configs)
    assert est.problem.tolist()[:2] == [Problem.OK, Problem.OK]
    assert est.problem[2] == Problem.PRECISION_UNSUPPORTED
    assert catalog.accelerator("h100-sxm").runs("int4")
    assert "int4" not in catalog.accelerator("h100-sxm").native_precisions


def test_stage_communication_is_affine_in_tokens() -> None:
    """The burst TTFT extrapolates a stage's communication and pipeline hops linearly in its
    tokens from two evaluated steps (fleet.perf.model); that needs both to be affine."""
    rng = np.random.default_rng(0)
    n = 256
    layout = {
        "tp": rng.choice([1.0, 2.0, 4.0, 8.0], n),
        "dp": rng.choice([1.0, 2.0, 8.0], n),
        "ep": rng.choice([1.0, 2.0, 8.0], n),
        "hidden_size": rng.choice([4096.0, 7168.0], n),
        "experts_per_token": rng.choice([0.0, 4.0, 8.0], n),
        "dense_layers": rng.uniform(0, 10, n),
        "moe_layers": rng.uniform(0, 60, n),
        "domain": rng.choice([8.0, 72.0], n),
        "link": Links(
            up_bytes_per_s=rng.uniform(1e11, 1e12, n),
            up_hop_s=rng.uniform(1e-6, 1e-5, n),
            out_bytes_per_s=rng.uniform(1e10, 1e11, n),
            out_hop_s=rng.uniform(1e-6, 2e-5, n),
            call_s=rng.uniform(0, 1e-5, n),
        ),
    }
    a, b, c = (rng.uniform(1, 2e4, n) for _ in range(3))
    comm = [StageComm(**layout)(t) for t in (a, b, c)]
    np.testing.assert_allclose((comm[1] - comm[0]) / (b - a), (comm[2] - comm[0]) / (c - a))
    hop = {"hidden_size": layout["hidden_size"], "link_bytes_per_s": layout["link"].up_bytes_per_s}
    hops = [pipeline_hop_s(tokens=t, latency_s=1e-6, **hop) for t in (a, b, c)]
    np.testing.assert_allclose((hops[1] - hops[0]) / (b - a), (hops[2] - hops[0]) / (c - a))
