"""Intel Arc Pro B60 (Xe2, PCIe): measured with vLLM only, so its factors move from Hopper's by
the ratio of its vLLM kernels to Hopper's vLLM kernels (its own ``family_kernel`` block), BF16
math only, FP8/FP4 weight-only, and estimates on its 8-GPU PCIe server."""

from __future__ import annotations

import math

import msgspec
import pytest

from fleet.catalog import Catalog
from fleet.perf import kernel_vllm as kv
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.explain import describe_problem
from fleet.perf.model import estimate
from fleet.perf.transfer import resolve_efficiency
from fleet.perf.types import Bound, Problem
from tests.fleet.kernel_data import kernel_data, needs_data

PART = "b60"
FIGURE_TOLERANCE = 0.02


def _stored(block: msgspec.Struct | None) -> dict[str, float]:
    assert block is not None
    out = {k: v for k, v in msgspec.structs.asdict(block).items() if v is not None}
    flops = out.pop("gemm_flops_fraction")
    out.update({f"gemm_flops_fraction.{k}": v for k, v in msgspec.structs.asdict(flops).items()
                if v is not None})  # fmt: skip
    return out


@needs_data
def test_kernel_blocks_reproduce_from_the_vllm_tables(catalog: Catalog) -> None:
    data = kernel_data()
    assert data is not None
    acc = catalog.accelerator(PART)
    fits = kv.fit_part(data, acc, *kv.VLLM_PARTS[PART])
    family = {a: catalog.accelerator(a) for a in acc.efficiency.transfer_from}
    for stored, fitted in (
        (_stored(acc.kernel), kv.figures(fits, fp8_math=False)),
        (_stored(acc.family_kernel), kv.reference(data, family)),
    ):
        assert set(stored) == set(fitted)
        for name, value in fitted.items():
            assert stored[name] == pytest.approx(value, rel=FIGURE_TOLERANCE), name


@needs_data
def test_held_out_shapes(catalog: Catalog) -> None:
    """Held-out medians on B60's vLLM 0.26.0 tables and Hopper's vLLM 0.24.0 ones, at the other
    parts' bounds (regime GEMMs 12%, decode attention 35%, prefill attention and collectives
    25%), except the all-shape GEMM fits (reported, no figure comes from them), bounded at what
    Hopper's vLLM FP8 tables measure, 23-27%: 30%. Measured: B60 regime GEMMs 1.4-7.6%, decode
    attention 2.3%, prefill attention 10.1%, all-reduce 19.6%; Hopper's 3.9-11.4%, 6.9-9.6%,
    14.2-14.8%, 9.5-10.7%."""
    data = kernel_data()
    assert data is not None
    bound = {
        "compute": 0.12, "decode": 0.12, "gemm": 0.30, "attention": 0.35, "context": 0.25,
        "all-reduce": 0.25,
    }  # fmt: skip
    parts = {PART: kv.VLLM_PARTS[PART], **kv.REFERENCE}
    for acc_id, (system, version) in parts.items():
        for f in kv.fit_part(data, catalog.accelerator(acc_id), system, version):
            words = f.kernel.split()
            key = words[-1] if words[-1] in bound else words[0]
            key = "attention" if words[0] == "decode" else key
            assert f.rows_held_out > 0 and f.rows_fit > f.rows_held_out, f
            assert f.held_out_median <= bound[key], f


def test_precisions_are_what_its_kernels_run(catalog: Catalog) -> None:
    acc = catalog.accelerator(PART)
    assert acc.native_precisions == ("bf16",)
    assert acc.weight_only_precisions == ("fp8", "fp4")
    assert acc.default_precision == "bf16"
    assert acc.kernel is not None and acc.kernel.gemm_flops_fraction.fp8 is None
    assert acc.kernel.moe_bandwidth_fraction is None  # power-law routed MoE rows only
    system = catalog.system_named("b60")  # the package's system id
    assert system.accelerator == PART and catalog.default_system(PART).id == system.id


def test_factors_move_by_its_vllm_kernels_against_hoppers(catalog: Catalog) -> None:
    eff = resolve_efficiency(catalog)
    hopper, mine = eff["h100-sxm"], eff[PART]
    acc = catalog.accelerator(PART)
    k, fam = acc.kernel, acc.family_kernel
    assert k is not None and fam is not None
    stream = k.gemm_bandwidth_fraction / fam.gemm_bandwidth_fraction
    assert mine.weight_bandwidth["bf16"] == pytest.approx(
        min(1.0, hopper.weight_bandwidth["bf16"] * stream)
    )
    # 4-bit weights: Hopper's weight-only 4-bit run figure at the same ratio (a caveat).
    assert mine.weight_bandwidth["fp4"] == pytest.approx(hopper.weight_bandwidth["fp4"] * stream)
    assert mine.expert_bandwidth == mine.weight_bandwidth  # no MoE figure
    assert mine.kv_bandwidth_fraction == pytest.approx(
        hopper.kv_bandwidth_fraction
        * k.attention_bandwidth_fraction  # type: ignore[operator]
        / fam.attention_bandwidth_fraction  # type: ignore[operator]
    )
    assert mine.flops_fraction["bf16"] == pytest.approx(
        min(1.0, hopper.flops_fraction["bf16"] * k.gemm_flops_fraction.bf16
            / fam.gemm_flops_fraction.bf16)
    )  # fmt: skip
    assert math.isnan(mine.flops_fraction["fp8"]) and math.isnan(mine.flops_fraction["fp4"])
    # The vLLM all-reduce's ~70 us small-message cost lands in the per-collective overhead.
    assert mine.collective_overhead_us > hopper.collective_overhead_us + 50.0
    # Against Hopper's TensorRT-LLM figures the same ratio would differ: the block matters.
    h100 = catalog.accelerator("h100-sxm").kernel
    assert h100 is not None and h100.gemm_bandwidth_fraction != fam.gemm_bandwidth_fraction


def test_estimates_on_its_server(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Llama 3.1 8B on one card at batch 1: memory bound at its weight-streaming rate; FP8
    weights (dequantized, BF16 math) stream 8-bit bytes at the same fraction; an FP8 KV cache
    is refused (no FP8 math); Llama 3.1 70B FP8 does not fit 2 cards, and over 8 pays the
    vLLM all-reduce."""
    bf16, fp8 = (
        estimate(arrays, make_configs(
            catalog, model="llama-3.1-8b", accelerator=PART, precision=p, tp=1, batch=1
        ))
        for p in ("bf16", "fp8")
    )  # fmt: skip
    for e in (bf16, fp8):
        assert e.problem[0] == Problem.OK and e.bound[0] == Bound.MEMORY
    assert 0.5 < fp8.step_memory_s[0] / bf16.step_memory_s[0] < 0.6
    kv_fp8 = make_configs(
        catalog, model="llama-3.1-8b", accelerator=PART, precision="bf16", kv_precision="fp8",
        tp=1, batch=1,
    )  # fmt: skip
    refused = estimate(arrays, kv_fp8)
    assert refused.problem[0] == Problem.PRECISION_UNSUPPORTED
    assert describe_problem(catalog, kv_fp8, refused, 0) == (
        "kv precision: b60 has no native fp8 support for the KV cache"
    )
    big = estimate(arrays, make_configs(
        catalog, model="llama-3.1-70b", accelerator=PART, precision="fp8", tp=8, batch=16
    ))  # fmt: skip
    assert big.problem[0] == Problem.OK
    assert big.step_comm_s[0] > 0.3 * big.step_s[0]
    small = estimate(arrays, make_configs(
        catalog, model="llama-3.1-70b", accelerator=PART, precision="fp8", tp=2, batch=16
    ))  # fmt: skip
    assert small.problem[0] == Problem.DOES_NOT_FIT
