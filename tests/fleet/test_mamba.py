"""Mamba2 hybrids (NVIDIA Nemotron-H) in the catalog and the performance model: blocks that are
single sublayers (a Mamba2 or attention mixer, or an MoE or dense FFN), a fixed Mamba2 state per
stream held from the first token and read and written back every decode step, the prefill scan
and convolution at their rates, one all-reduce per block, and every other model unchanged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fleet.catalog import Catalog
from fleet.catalog.hf_config import describe, differences, match
from fleet.catalog.params import (
    active_params,
    attention_layers,
    dense_ffn_layers,
    kv_elements_per_token_per_layer,
    mamba_params_per_layer,
    moe_layer_count,
    param_breakdown,
    state_bytes_per_layer,
    state_layers,
)
from fleet.perf.arrays import CatalogArrays
from fleet.perf.comm import all_reduce_s
from fleet.perf.configs import make_configs
from fleet.perf.disagg import kv_transfer_bytes
from fleet.perf.grid import layouts
from fleet.perf.model import estimate
from fleet.perf.types import Problem

NANO = "nemotron-3-nano-30b-a3b"
H56 = "nemotron-h-56b"
SUPER = "nemotron-3-super-120b-a12b"
ULTRA = "nemotron-3-ultra-550b-a55b"
CONFIGS = (
    Path(__file__).resolve().parents[2] / "build" / "aic" / "whl" / "aiconfigurator_core"
) / "model_configs"


def _config(name: str) -> dict[str, Any]:
    path = CONFIGS / f"nvidia--{name}_config.json"
    if not path.exists():
        pytest.skip(f"aiconfigurator-core model configs not under {CONFIGS}")
    return json.loads(path.read_text(encoding="utf-8"))


def test_blocks_and_weights_are_what_the_config_says(catalog: Catalog) -> None:
    nano = catalog.model(NANO)
    assert (state_layers(nano), attention_layers(nano), moe_layer_count(nano)) == (23, 6, 23)
    assert dense_ffn_layers(nano) == 0
    # in_proj: z and x (2 x 64 heads x 64), B and C (2 x 8 groups x 128), one dt per head;
    # the depthwise conv over x, B and C; out_proj
    h, inner, bc = 2688, 64 * 64, 2 * 8 * 128
    expected = h * (2 * inner + bc + 64) + (inner + bc) * 4 + inner * h
    assert mamba_params_per_layer(nano) == expected
    b = param_breakdown(nano)
    # relu2 experts: up and down only (2 matrices), 128 routed and one shared of 3712
    assert b.routed_experts == 23 * 128 * 2 * h * 1856
    assert b.shared_experts == 23 * 2 * h * 3712
    attention = 2 * h * 32 * 128 + 2 * h * 2 * 128
    assert b.attention == 6 * attention + 23 * expected
    assert b.dense_ffn == 0
    assert b.total / 1e9 == pytest.approx(31.58, abs=0.01)  # model card: 31.6B
    assert active_params(nano) / 1e9 == pytest.approx(3.58, abs=0.01)  # 3.6B with embeddings
    h56 = catalog.model(H56)
    assert (state_layers(h56), attention_layers(h56), dense_ffn_layers(h56)) == (54, 10, 54)
    assert param_breakdown(h56).dense_ffn == 54 * 2 * 8192 * 32768


def test_the_state_per_stream_is_exact(catalog: Catalog) -> None:
    nano = catalog.model(NANO)
    # 64 heads x 64 x 128 float32 recurrent state + the conv's last 3 inputs of x, B and C at 2 B
    assert state_bytes_per_layer(nano) == 64 * 64 * 128 * 4 + (4096 + 2048) * 3 * 2
    assert state_bytes_per_layer(catalog.model(H56)) == 256 * 64 * 256 * 4 + (16384 + 4096) * 6


def _nano(catalog: Catalog, arrays: CatalogArrays, **kw: object) -> tuple:
    base = dict(model=NANO, accelerator="b200", precision="fp8", kv_precision="fp8", tp=2)
    base.update(kw)
    configs = make_configs(catalog, **base)  # type: ignore[arg-type]
    return configs, estimate(arrays, configs)


def _b200(catalog: Catalog) -> int:
    return list(catalog.accelerators).index("b200")


def test_memory_holds_the_state_from_the_first_token(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    nano = catalog.model(NANO)
    isl, osl, batch, tp = 4000, 1000, np.array([8, 16]), 2
    _, est = _nano(catalog, arrays, isl=isl, osl=osl, batch=batch)
    assert np.all(est.problem == Problem.OK)
    kv_per_token = 6 * kv_elements_per_token_per_layer(nano) * (1 / tp) * 1.0  # 2 KV heads / 2
    per_stream = kv_per_token * (isl + osl) + 23 * state_bytes_per_layer(nano) / tp
    np.testing.assert_allclose(est.kv_bytes_per_device, batch * per_stream, rtol=1e-12)
    _, short = _nano(catalog, arrays, isl=16, osl=16, batch=8)
    # at 32 tokens the state is nearly all a stream holds: 23 x 2.13 MB against 6 attention
    # layers' KV of 32 tokens
    assert short.kv_bytes_per_device[0] / 8 > 0.99 * 23 * state_bytes_per_layer(nano) / tp


def test_each_decode_step_reads_and_writes_the_state_at_the_measured_rates(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    nano = catalog.model(NANO)
    mb = nano.mamba
    assert mb is not None
    isl, osl, tp = 1000, 200, 2
    b = np.array([512.0, 1024.0])  # every expert touched at both: only per-stream terms differ
    _, est = _nano(catalog, arrays, isl=isl, osl=osl, batch=b.astype(int))
    per_stream_s = (est.step_memory_s[1] - est.step_memory_s[0]) / (b[1] - b[0])
    acc, i = arrays.accelerators, _b200(catalog)
    bw = acc.memory_bandwidth_bytes_per_s[i]
    kv_read = 6 * kv_elements_per_token_per_layer(nano) * 0.5 * 1.0 * (isl + osl / 2)
    recurrent = 2 * 23 * mb.num_heads * mb.head_dim * mb.state_size * 4 / tp
    window = 2 * 23 * (4096 + 2048) * 3 * 2 / tp
    expected = (
        kv_read / (bw * acc.kv_bandwidth_fraction[i])
        + recurrent / (bw * acc.state_bandwidth_fraction[i])
        + window / (bw * acc.mamba_conv_bandwidth_fraction[i])
    )
    assert per_stream_s == pytest.approx(expected, rel=1e-9)
    # the catalog's measured conv figure is the one used, and the state dwarfs the KV read
    kernel = catalog.accelerator("b200").kernel
    assert kernel is not None
    assert acc.mamba_conv_bandwidth_fraction[i] == kernel.mamba_conv_bandwidth_fraction
    assert recurrent > 20 * kv_read


def test_the_prefill_scan_and_convolution_run_at_their_rates(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """An 8k prompt: the scan (4 x heads x head_dim x state FLOPs per token and layer) at the
    measured linear-attention scan fraction, the convolution (x, B and C in and out, BF16) at
    the measured Mamba2 conv bandwidth; at the GEMM rate and full bandwidth instead, the prefill
    is faster by the difference of those times."""
    isl, tp = 8192, 2
    configs, measured = _nano(catalog, arrays, batch=1, isl=isl, osl=64)
    acc, i = arrays.accelerators, _b200(catalog)
    fast = dataclasses.replace(
        arrays,
        accelerators=dataclasses.replace(
            acc,
            state_prefill_flops_fraction=acc.flops_fraction,
            mamba_conv_prefill_bandwidth_fraction=np.ones_like(acc.flops_fraction),
        ),
    )
    quick = estimate(fast, configs)
    scan = 23 * isl * 4 * 64 * 64 * 128 / tp
    conv = 23 * isl * 2 * 2 * (4096 + 2048) / tp
    bf16, bw = acc.peak_flops[i, 0], acc.memory_bandwidth_bytes_per_s[i]
    expected = scan / bf16 * (
        1 / acc.state_prefill_flops_fraction[i] - 1 / acc.flops_fraction[i]
    ) + conv / bw * (1 / acc.mamba_conv_prefill_bandwidth_fraction[i] - 1)
    slower = measured.prefill_s[0] - quick.prefill_s[0]
    assert 0.8 * expected <= slower <= 1.05 * expected


def test_one_all_reduce_per_block(catalog: Catalog, arrays: CatalogArrays) -> None:
    """52 blocks, 52 all-reduces of the step's activations at tp 2 (a 52-layer transformer
    would make 104); the decode step's communication is exactly that."""
    batch = 64
    _, est = _nano(catalog, arrays, batch=batch, isl=1000, osl=100)
    acc, i = arrays.accelerators, _b200(catalog)
    link = acc.scale_up_bytes_per_s[i] * acc.link_fraction[i]
    one = all_reduce_s(
        np.float64(2.0),
        np.float64(batch * 2688 * 2.0),
        link,
        acc.scale_up_latency_s[i],
        acc.collective_overhead_s[i],
    )
    assert est.step_comm_s[0] == pytest.approx(52 * one, rel=1e-12)
    # the fixed per-layer cost counts two blocks as one layer (a mixer and an FFN); the fitted
    # figure is 0 on today's parts, so a per-layer cost of 10 us is set to see it
    per_layer = np.full_like(acc.step_overhead_s, 1e-5)
    costly = dataclasses.replace(
        arrays, accelerators=dataclasses.replace(acc, layer_overhead_s=per_layer)
    )
    configs, _ = _nano(catalog, arrays, batch=batch, isl=1000, osl=100)
    overhead = estimate(costly, configs).step_overhead_s[0]
    # beside each MoE block's routed-expert call time (23 of the 52 blocks are MoE)
    moe = int(costly.models.moe_layers[configs.model[0]]) * acc.moe_call_s[i]
    assert int(costly.models.moe_layers[configs.model[0]]) == 23
    assert overhead == pytest.approx(acc.step_overhead_s[i] + 26 * 1e-5 + moe, rel=1e-12)


def test_tp_must_split_the_mamba_heads_and_groups(catalog: Catalog, arrays: CatalogArrays) -> None:
    # 8 B/C groups: tp 16 cannot split them (the 32 attention heads and 2 KV heads could)
    _, est = _nano(catalog, arrays, tp=[8, 16], batch=8, isl=1000, osl=100)
    assert est.problem[0] == Problem.OK and est.problem[1] == Problem.BAD_LAYOUT
    # and the planner's layout grid never offers it, though a 72-GPU rack would allow tp 16
    offered = layouts(catalog, H56, "gb200-nvl72", precisions=("fp8",))
    assert len(offered.tp) > 0 and set(offered.tp.tolist()) <= {1, 2, 4, 8}


def test_a_disaggregated_prompt_ships_its_state(catalog: Catalog, arrays: CatalogArrays) -> None:
    nano = catalog.model(NANO)
    configs, _ = _nano(catalog, arrays, isl=2000, osl=100, batch=1)
    kv = 6 * kv_elements_per_token_per_layer(nano) * 1.0 * 2000
    expected = kv + 23 * state_bytes_per_layer(nano)
    assert kv_transfer_bytes(arrays, configs)[0] == pytest.approx(expected, rel=1e-12)


def test_other_models_do_not_see_the_mamba_figures(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Every model without Mamba2 blocks is estimated bit-identically when the Mamba2 rates
    change, and its block columns are neutral (no FFN-only or mixer-only blocks)."""
    models = [m for m in catalog.models if catalog.model(m).block_pattern is None]
    M = arrays.models
    rows = [M.ids.index(m) for m in models]
    assert np.all(M.mixerless_layers[rows] == 0) and np.all(M.ffnless_layers[rows] == 0)
    assert np.all(M.conv_state_bytes_per_layer[rows] == 0)
    np.testing.assert_array_equal(M.layer_units[rows], M.num_layers[rows])
    acc = arrays.accelerators
    other = dataclasses.replace(
        arrays,
        accelerators=dataclasses.replace(
            acc,
            mamba_conv_bandwidth_fraction=acc.mamba_conv_bandwidth_fraction * 0.3,
            mamba_conv_prefill_bandwidth_fraction=acc.mamba_conv_prefill_bandwidth_fraction * 0.3,
        ),
    )
    configs = make_configs(
        catalog,
        model=np.asarray(models)[:, None],
        accelerator="h200-sxm",
        precision="fp8",
        tp=8,
        batch=32,
        isl=2000,
        osl=500,
    )
    a, b = estimate(arrays, configs), estimate(other, configs)
    for field in ("step_s", "tpot_s", "prefill_s", "ttft_floor_s", "memory_bytes_per_device"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    nano = make_configs(catalog, model=NANO, accelerator="h200-sxm", precision="fp8", tp=8,
                        batch=32, isl=2000, osl=500)  # fmt: skip
    assert estimate(other, nano).step_s[0] > estimate(arrays, nano).step_s[0]


def test_the_configs_are_read_field_by_field(catalog: Catalog) -> None:
    nano = _config("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    assert match(catalog, nano).model is not None
    assert match(catalog, nano).model.id == NANO  # type: ignore[union-attr]
    # Lightning: the same blocks and widths (written as layers_block_type) plus an MTP module
    lightning = describe(_config("NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")).fields
    assert lightning is not None
    assert differences(catalog.model(NANO), lightning) == ["mtp_layers: 0 -> 1"]
    # Ultra's config counts its blocks only in layers_block_type (no num_hidden_layers)
    ultra = _config("NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16")
    assert ultra.get("num_hidden_layers") is None
    found = match(catalog, ultra).model
    assert found is not None and found.id == ULTRA and found.num_layers == 108
    super_moe = catalog.model(SUPER).moe
    assert super_moe is not None and super_moe.latent_size == 1024


def test_a_latent_moe_routes_in_its_latent_width(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Nemotron 3 Super: the routed experts work in the 1024-wide latent (2 x 1024 x 2688 each),
    the router and the shared expert in the 4096-wide hidden width, and each MoE block adds the
    projections 4096 -> 1024 -> 4096; under expert parallelism tokens are dispatched and
    combined in the latent width."""
    model = catalog.model(SUPER)
    b = param_breakdown(model)
    assert b.routed_experts == 40 * 512 * 2 * 1024 * 2688
    assert b.shared_experts == 40 * 2 * 4096 * 5376
    assert b.router == 40 * 4096 * 512
    assert b.latent_projections == 40 * 2 * 4096 * 1024
    assert b.total / 1e9 == pytest.approx(120.67, abs=0.01)  # NVIDIA: 120B total
    assert active_params(model, "output_only") / 1e9 == pytest.approx(12.23, abs=0.01)  # 12B
    M = arrays.models
    i = M.ids.index(SUPER)
    assert M.replicated_params[i] == b.attention + b.shared_experts + b.router + (
        b.latent_projections
    )
    # dispatch + combine of a decode step at ep 8 move a quarter of what the hidden width would
    configs = make_configs(catalog, model=SUPER, accelerator="b200", precision="fp8", tp=1,
                           dp=8, ep=8, batch=512, isl=1000, osl=100)  # fmt: skip
    wide = dataclasses.replace(
        arrays, models=dataclasses.replace(M, expert_width_ratio=np.ones_like(M.num_layers))
    )
    latent, hidden = estimate(arrays, configs), estimate(wide, configs)
    assert latent.problem[0] == Problem.OK
    assert latent.step_comm_s[0] < hidden.step_comm_s[0]
