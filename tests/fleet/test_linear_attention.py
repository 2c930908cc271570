"""Linear-attention (Gated DeltaNet) layers in the performance model: a fixed state per stream,
held from the first token, split over tensor-parallel ranks by heads, read and written back
every decode step; no KV cache on those layers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleet.catalog import Catalog
from fleet.catalog.params import (
    kv_elements_per_token_per_layer,
    linear_attention_params_per_layer,
    state_bytes_per_layer,
)
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.disagg import kv_transfer_bytes
from fleet.perf.model import estimate
from fleet.perf.types import Problem

MODEL = "qwen3.5-397b-a17b"


def test_the_state_is_what_the_config_says(catalog: Catalog) -> None:
    model = catalog.model(MODEL)
    # 64 value heads x 128 x 128 float32 recurrent state + the conv's last 3 inputs at 2 bytes:
    # (2 x 16 x 128 + 64 x 128) channels.
    assert state_bytes_per_layer(model) == 64 * 128 * 128 * 4 + (2 * 2048 + 8192) * 3 * 2
    # in_proj_qkvz, in_proj_ba, the depthwise conv and out_proj
    expected = 4096 * (2 * 2048 + 2 * 8192) + 4096 * 128 + (2 * 2048 + 8192) * 4 + 8192 * 4096
    assert linear_attention_params_per_layer(model) == expected


def _estimates(catalog: Catalog, arrays: CatalogArrays, **kw: object) -> tuple:
    base = dict(model=MODEL, accelerator="b200", precision="fp8", kv_precision="fp8", tp=8)
    base.update(kw)
    configs = make_configs(catalog, **base)  # type: ignore[arg-type]
    est = estimate(arrays, configs)
    assert np.all(est.problem == Problem.OK)
    return configs, est


def test_memory_holds_kv_of_the_attention_layers_and_the_state_of_the_others(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    model = catalog.model(MODEL)
    isl, osl, batch, tp = 4000, 1000, np.array([8, 16]), 8
    _, est = _estimates(catalog, arrays, isl=isl, osl=osl, batch=batch)
    kv_heads_share = max(1 / tp, 1 / model.num_kv_heads)  # 2 KV heads over 8 ranks: 1 each
    kv_per_token = 15 * kv_elements_per_token_per_layer(model) * kv_heads_share * 1.0
    per_stream = kv_per_token * (isl + osl) + 45 * state_bytes_per_layer(model) / tp
    np.testing.assert_allclose(est.kv_bytes_per_device, batch * per_stream, rtol=1e-9)
    # the state is a large share at these lengths: ~24 MB per stream and rank against ~38 MB of KV
    assert 45 * state_bytes_per_layer(model) / tp > 0.5 * kv_per_token * (isl + osl)


def test_the_state_is_held_from_the_first_token(catalog: Catalog, arrays: CatalogArrays) -> None:
    _, short = _estimates(catalog, arrays, isl=64, osl=16, batch=32)
    _, long = _estimates(catalog, arrays, isl=6400, osl=1600, batch=32)
    # 100x the context, yet the memory per stream grows far less than 100x: the state is fixed
    ratio = long.kv_bytes_per_device[0] / short.kv_bytes_per_device[0]
    assert 1.0 < ratio < 10.0


def test_each_decode_step_reads_and_writes_the_state(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    model = catalog.model(MODEL)
    isl, osl, tp = 1000, 200, 8
    b = np.array([512.0, 1024.0])  # every expert touched at both: only per-stream terms differ
    _, est = _estimates(catalog, arrays, isl=isl, osl=osl, batch=b.astype(int))
    per_stream_s = (est.step_memory_s[1] - est.step_memory_s[0]) / (b[1] - b[0])
    acc = arrays.accelerators
    i = list(catalog.accelerators).index("b200")
    bw = acc.memory_bandwidth_bytes_per_s[i]
    kv_read = 15 * kv_elements_per_token_per_layer(model) * 0.5 * 1.0 * (isl + osl / 2)
    state_rw = 2 * 45 * state_bytes_per_layer(model) / tp
    expected = kv_read / (bw * acc.kv_bandwidth_fraction[i]) + state_rw / (
        bw * acc.state_bandwidth_fraction[i]
    )
    assert per_stream_s == pytest.approx(expected, rel=1e-3)
    # the state, not the KV, is most of a stream's traffic at this length
    assert state_rw / acc.state_bandwidth_fraction[i] > 3 * kv_read / acc.kv_bandwidth_fraction[i]


def test_the_state_rate_is_the_measured_kernels(catalog: Catalog, arrays: CatalogArrays) -> None:
    acc = arrays.accelerators
    ids = list(catalog.accelerators)
    for part in ("h100-sxm", "b200", "gb300"):
        kernel = catalog.accelerator(part).kernel
        assert kernel is not None and kernel.state_bandwidth_fraction is not None
        assert acc.state_bandwidth_fraction[ids.index(part)] == kernel.state_bandwidth_fraction
    # parts without kernel tables take their family's figure, as every other factor
    assert acc.state_bandwidth_fraction[ids.index("mi300x")] == pytest.approx(
        acc.state_bandwidth_fraction[ids.index("h100-sxm")]
    )


def test_a_disaggregated_prompt_ships_its_state(catalog: Catalog, arrays: CatalogArrays) -> None:
    model = catalog.model(MODEL)
    configs, _ = _estimates(catalog, arrays, isl=2000, osl=100, batch=1)
    shipped = kv_transfer_bytes(arrays, configs)[0]
    kv = 15 * kv_elements_per_token_per_layer(model) * 1.0 * 2000
    assert shipped == pytest.approx(kv + 45 * state_bytes_per_layer(model))


def test_the_prefill_scan_runs_at_its_measured_rate(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """The chunked delta-rule scan reaches only ~2-4% of the BF16 peak in the kernel tables; at
    the attention math's rate instead, an 8k prompt would prefill faster by about the scan's
    time at the measured rate."""
    isl, tp = 8192, 8
    configs = make_configs(
        catalog, model=MODEL, accelerator="b200", precision="fp8", tp=tp, batch=1, isl=isl, osl=64
    )
    measured = estimate(arrays, configs)
    acc = arrays.accelerators
    fast = dataclasses.replace(
        arrays,
        accelerators=dataclasses.replace(acc, state_prefill_flops_fraction=acc.flops_fraction),
    )
    quick = estimate(fast, configs)
    i = list(catalog.accelerators).index("b200")
    la = catalog.model(MODEL).linear_attention
    assert la is not None
    scan_flops = 45 * isl * 4 * la.num_value_heads * la.key_head_dim * la.value_head_dim / tp
    bf16 = acc.peak_flops[i, 0]
    expected = (
        scan_flops / bf16 * (1 / acc.state_prefill_flops_fraction[i] - 1 / acc.flops_fraction[i])
    )
    slower = measured.prefill_s[0] - quick.prefill_s[0]
    assert 0.8 * expected <= slower <= 1.05 * expected
    assert acc.state_prefill_flops_fraction[i] < 0.05  # the measured scan is far off the peak
