"""Weight streaming per weight precision and KV reads are separate bandwidth factors.

The measured kernel tables separate them (docs/calibration.md): NVFP4 small-m GEMMs stream weights
at ~0.46 of the datasheet bandwidth on B200 against ~0.71 for BF16/FP8, and decode attention reads
KV at ~0.84 on B200 against ~0.63 on Hopper; an MoE layer's routed experts (grouped GEMMs) stream
FP4 weights at ~0.72 on B200, far above the dense NVFP4 GEMMs; the Hopper runs fit 4-bit
weight-only streaming and KV reads on their own (docs/calibration.md). These tests fail if the
model goes back to one bandwidth factor for every byte it reads.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from fleet.catalog import FOUR_BIT, PRECISIONS, Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate
from fleet.perf.transfer import resolve_efficiency

HOPPER = ("h100-sxm", "h200-sxm")
FP4, BF16 = PRECISIONS.index("fp4"), PRECISIONS.index("bf16")


def _one_factor(arrays: CatalogArrays) -> CatalogArrays:
    """The split undone: every byte streams at the BF16 weight fraction."""
    acc = arrays.accelerators
    by_precision = np.repeat(acc.bandwidth_fraction[:, None], len(PRECISIONS), axis=1)
    return dataclasses.replace(
        arrays,
        accelerators=dataclasses.replace(
            acc,
            bandwidth_fraction_by_precision=by_precision,
            expert_bandwidth_fraction_by_precision=by_precision.copy(),
            kv_bandwidth_fraction=acc.bandwidth_fraction.copy(),
        ),
    )


def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def test_fp4_decode_on_b200_is_slower_by_the_measured_streaming_ratio(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Llama 3.1 70B NVFP4 on 8 B200s at batch 1, short context: weights dominate the bytes, so
    the memory time is the one-factor time x the kernel tables' BF16/FP8 over NVFP4 streaming
    ratio (0.71 / 0.46), less a little for the BF16 LM head and the KV."""
    configs = make_configs(
        catalog, model="llama-3.1-70b", accelerator="b200", tp=8, precision="fp4",
        batch=1, isl=128, osl=128,
    )  # fmt: skip
    split = estimate(arrays, configs).step_memory_s[0]
    one = estimate(_one_factor(arrays), configs).step_memory_s[0]
    kernel = catalog.accelerator("b200").kernel
    assert kernel is not None and kernel.gemm_fp4_bandwidth_fraction is not None
    measured = kernel.gemm_bandwidth_fraction / kernel.gemm_fp4_bandwidth_fraction
    assert measured > 1.4
    assert split / one == pytest.approx(measured, rel=0.05)
    assert split / one < measured  # the BF16 LM head and the KV keep their fractions
    # The same checkpoint at FP8 streams at the BF16/FP8 figure: the split changes nothing.
    fp8 = make_configs(
        catalog, model="llama-3.1-70b", accelerator="b200", tp=8, precision="fp8",
        batch=1, isl=128, osl=128,
    )  # fmt: skip
    ratio = (
        estimate(arrays, fp8).step_memory_s[0] / estimate(_one_factor(arrays), fp8).step_memory_s[0]
    )
    assert ratio == pytest.approx(1.0, abs=0.01)


def test_hopper_four_bit_weights_stream_at_their_run_fitted_fraction(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Hopper runs FP4 (and INT4) weight-only: the runs fit its 4-bit streaming on its own
    (~0.49 against ~0.82 for 8/16-bit weights), so gpt-oss MXFP4 decode is not credited with
    half the bytes at the 8-bit kernel's efficiency."""
    eff = catalog.accelerator("h100-sxm").efficiency
    assert eff.four_bit_bandwidth_fraction is not None and eff.bandwidth_fraction is not None
    assert eff.four_bit_bandwidth_fraction < 0.7 * eff.bandwidth_fraction
    for acc in HOPPER:
        row = arrays.accelerators.ids.index(acc)
        streaming = arrays.accelerators.bandwidth_fraction_by_precision[row]
        for p, fraction in zip(PRECISIONS, streaming, strict=True):
            want = eff.four_bit_bandwidth_fraction if p in FOUR_BIT else eff.bandwidth_fraction
            assert fraction == pytest.approx(want), (acc, p)
    configs = make_configs(
        catalog, model="llama-3.1-70b", accelerator="h100-sxm", tp=8, precision="fp4",
        batch=1, isl=128, osl=128,
    )  # fmt: skip
    split = estimate(arrays, configs).step_memory_s[0]
    one = estimate(_one_factor(arrays), configs).step_memory_s[0]
    ratio = eff.bandwidth_fraction / eff.four_bit_bandwidth_fraction
    assert split / one == pytest.approx(ratio, rel=0.05)


def test_long_context_decode_reads_kv_at_the_kv_fraction(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """Llama 3.1 8B FP8 on one H100 at 32k context: each added stream adds its KV read at the KV
    fraction (~0.54, fitted on the runs), not at the weight-streaming one (~0.82)."""
    configs = make_configs(
        catalog, model="llama-3.1-8b", accelerator="h100-sxm", precision="fp8",
        batch=[1, 9], isl=32768, osl=256,
    )  # fmt: skip
    eff = resolve_efficiency(catalog)["h100-sxm"]
    assert eff.kv_bandwidth_fraction < eff.bandwidth_fraction - 0.15
    for arr, fraction in (
        (arrays, eff.kv_bandwidth_fraction),
        (_one_factor(arrays), eff.bandwidth_fraction),
    ):
        est = estimate(arr, configs)
        assert est.fits.all()
        per_stream_s = (est.step_memory_s[1] - est.step_memory_s[0]) / 8
        kv_bytes = est.kv_bytes_per_device[0] * (32768 + 128) / (32768 + 256)
        bw = catalog.accelerator("h100-sxm").memory_bandwidth_bytes_per_s
        assert per_stream_s == pytest.approx(kv_bytes / (bw * fraction), rel=0.01)


def test_transfer_scales_each_factor_by_its_own_kernel(catalog: Catalog) -> None:
    eff = resolve_efficiency(catalog)
    hopper = eff["h100-sxm"]
    fam = [catalog.accelerator(h).kernel for h in HOPPER]
    for acc in ("b200", "gb200"):
        k = catalog.accelerator(acc).kernel
        assert k is not None and k.gemm_fp4_bandwidth_fraction is not None
        gemm = _geo([x.gemm_bandwidth_fraction for x in fam])  # type: ignore[union-attr]
        attention = _geo([x.attention_bandwidth_fraction for x in fam])  # type: ignore[union-attr]
        mine = eff[acc]
        assert mine.weight_bandwidth["bf16"] == pytest.approx(
            hopper.bandwidth_fraction * k.gemm_bandwidth_fraction / gemm
        )
        assert mine.weight_bandwidth["fp4"] == pytest.approx(
            hopper.bandwidth_fraction * k.gemm_fp4_bandwidth_fraction / gemm
        )
        assert mine.kv_bandwidth_fraction == pytest.approx(
            hopper.kv_bandwidth_fraction * k.attention_bandwidth_fraction / attention
        )
        # Blackwell reads KV better than Hopper and streams NVFP4 weights worse than BF16 (its
        # decode-regime GEMMs: NVFP4 0.55 of HBM against BF16 0.78-0.79).
        assert mine.kv_bandwidth_fraction > hopper.kv_bandwidth_fraction
        assert mine.weight_bandwidth["fp4"] < 0.75 * mine.weight_bandwidth["bf16"]


def _experts_as_dense(arrays: CatalogArrays) -> CatalogArrays:
    """Routed experts charged at the dense GEMM streaming figures (the MoE split undone)."""
    acc = arrays.accelerators
    return dataclasses.replace(
        arrays,
        accelerators=dataclasses.replace(
            acc,
            expert_bandwidth_fraction_by_precision=acc.bandwidth_fraction_by_precision.copy(),
        ),
    )


def test_fp4_experts_on_b200_stream_at_the_moe_kernel_fraction(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    """DeepSeek-R1 NVFP4 on 8 B200s (ep 8) at a batch that touches every expert: the routed
    experts' read time is their bytes at the MoE kernel's FP4 streaming (~0.72 of HBM), not
    the dense NVFP4 GEMM's (~0.55 in the decode regime); the BF16 attention and shared weights
    keep theirs."""
    configs = make_configs(
        catalog, model="deepseek-r1", accelerator="b200", tp=8, ep=8, precision="fp4",
        batch=256, isl=128, osl=128,
    )  # fmt: skip
    moe = estimate(arrays, configs).step_memory_s[0]
    dense = estimate(_experts_as_dense(arrays), configs).step_memory_s[0]
    eff = resolve_efficiency(catalog)["b200"]
    ratio = eff.expert_bandwidth["fp4"] / eff.weight_bandwidth["fp4"]
    assert ratio > 1.3
    # the experts are most of the bytes read: the step's memory time shrinks by most of the ratio
    assert 1.0 / ratio < moe / dense < 0.8
    # A dense model has no routed experts: the MoE figures change nothing.
    llama = make_configs(
        catalog, model="llama-3.1-70b", accelerator="b200", tp=8, precision="fp4",
        batch=1, isl=128, osl=128,
    )  # fmt: skip
    assert estimate(arrays, llama).step_memory_s[0] == pytest.approx(
        estimate(_experts_as_dense(arrays), llama).step_memory_s[0]
    )


def test_expert_streaming_transfers_by_the_moe_kernels(catalog: Catalog) -> None:
    """Blackwell experts: the Hopper fit x this part's MoE kernel over Hopper's (8/16-bit), FP4
    from the Hopper 8/16-bit figure; Hopper and the estimated parts charge experts like the other
    weights (their runs do not separate them)."""
    eff = resolve_efficiency(catalog)
    hopper = eff["h100-sxm"]
    fam = [catalog.accelerator(h).kernel for h in HOPPER]
    moe = _geo([x.moe_bandwidth_fraction for x in fam])  # type: ignore[union-attr]
    for acc in ("b200", "gb200"):
        k = catalog.accelerator(acc).kernel
        assert k is not None and k.moe_fp4_bandwidth_fraction is not None
        mine = eff[acc]
        assert mine.expert_bandwidth["fp8"] == pytest.approx(
            hopper.bandwidth_fraction * k.moe_bandwidth_fraction / moe
        )
        assert mine.expert_bandwidth["fp4"] == pytest.approx(
            hopper.bandwidth_fraction * k.moe_fp4_bandwidth_fraction / moe
        )
        assert mine.expert_bandwidth["fp4"] > 1.3 * mine.weight_bandwidth["fp4"]
    for acc in (*HOPPER, "mi300x"):
        assert eff[acc].expert_bandwidth == eff[acc].weight_bandwidth
