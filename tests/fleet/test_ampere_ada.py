"""A100 SXM (Ampere) and L40S (Ada, PCIe): factors moved from Hopper's by their own kernel
figures, precisions only where their kernel tables measure one, and estimates on their servers."""

from __future__ import annotations

import math

import pytest

from fleet.catalog import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.explain import describe_problem
from fleet.perf.model import estimate
from fleet.perf.transfer import resolve_efficiency
from fleet.perf.types import Bound, Problem
from tests.fleet.streaming import streams_like_h100

HOPPER = ("h100-sxm", "h200-sxm")


def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def test_precisions_are_the_ones_their_kernels_measure(catalog: Catalog) -> None:
    a100, l40s = catalog.accelerator("a100-sxm"), catalog.accelerator("l40s")
    assert a100.native_precisions == ("bf16", "int8") and a100.weight_only_precisions == ("int4",)
    assert l40s.native_precisions == ("bf16", "fp8", "int8") and not l40s.weight_only_precisions
    assert a100.default_precision == "bf16" and l40s.default_precision == "fp8"
    assert a100.kernel is not None and l40s.kernel is not None
    assert a100.kernel.gemm_flops_fraction.fp8 is None  # no FP8 GEMM table on A100
    assert a100.kernel.moe_bandwidth_fraction is None  # no balanced-routing MoE rows
    assert l40s.kernel.gemm_flops_fraction.fp4 is None


def test_factors_move_from_hoppers_by_their_kernels(catalog: Catalog) -> None:
    eff = resolve_efficiency(catalog)
    hopper = eff["h100-sxm"]
    fam = [catalog.accelerator(h).kernel for h in HOPPER]
    a100 = catalog.accelerator("a100-sxm").kernel
    l40s = catalog.accelerator("l40s").kernel
    assert a100 is not None and l40s is not None and all(k is not None for k in fam)
    fam_fp8 = _geo([k.gemm_flops_fraction.fp8 for k in fam])  # type: ignore[union-attr,misc]
    fam_bf16 = _geo([k.gemm_flops_fraction.bf16 for k in fam])  # type: ignore[union-attr]
    fam_stream = _geo([k.gemm_bandwidth_fraction for k in fam])  # type: ignore[union-attr]
    a = eff["a100-sxm"]
    assert a.basis == "kernel-transfer"
    # INT8 from A100's own W8A8 GEMMs against Hopper's 8-bit (FP8) kernels and run figure.
    int8 = a100.gemm_flops_fraction.int8
    assert int8 is not None
    assert a.flops_fraction["int8"] == pytest.approx(hopper.flops_fraction["fp8"] * int8 / fam_fp8)
    assert a.flops_fraction["bf16"] == pytest.approx(
        min(1.0, hopper.flops_fraction["bf16"] * a100.gemm_flops_fraction.bf16 / fam_bf16)
    )
    # No FP8 or FP4 kernel on A100: no figure is made up for them.
    assert math.isnan(a.flops_fraction["fp8"]) and math.isnan(a.flops_fraction["fp4"])
    # INT4 weight-only streams at its own measured kernel, not Hopper's 4-bit run figure.
    assert a100.gemm_int4_bandwidth_fraction is not None
    assert a.weight_bandwidth["int4"] == pytest.approx(
        hopper.bandwidth_fraction * a100.gemm_int4_bandwidth_fraction / fam_stream
    )
    # KV reads and experts, unmeasured on A100, follow its GEMM weight-streaming ratio.
    stream = a100.gemm_bandwidth_fraction / fam_stream
    assert a.kv_bandwidth_fraction == pytest.approx(hopper.kv_bandwidth_fraction * stream)
    assert a.expert_bandwidth == a.weight_bandwidth
    assert a.state_bandwidth_fraction == hopper.state_bandwidth_fraction
    s = eff["l40s"]
    assert math.isnan(s.flops_fraction["fp4"]) and not math.isnan(s.flops_fraction["fp8"])
    # PCIe: the all-reduce kernels reach a quarter of Hopper's NVLink fraction.
    assert s.link_bandwidth_fraction < 0.3 * hopper.link_bandwidth_fraction
    assert s.step_overhead_us == hopper.step_overhead_us


@pytest.mark.parametrize(
    ("accelerator", "model", "precision", "tp"),
    [("a100-sxm", "llama-3.1-70b", "bf16", 4), ("l40s", "llama-3.1-8b", "fp8", 1)],
)
def test_small_batch_fits_and_streams_weights(
    catalog: Catalog,
    arrays: CatalogArrays,
    accelerator: str,
    model: str,
    precision: str,
    tp: int,
) -> None:
    """At batch 1 a decode step reads every weight and little else: memory bound, and its memory
    term is H100's for the same bytes times the ratio of the datasheet rates x weight-streaming
    fractions (KV reads, at another fraction, are under 1% of the bytes here)."""
    est = streams_like_h100(catalog, arrays, accelerator, model, precision, tp)
    assert est.step_s[0] > est.step_memory_s[0]


def test_a100_refuses_fp8_naming_the_field(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog, model="llama-3.1-70b", accelerator="a100-sxm", precision="fp8", tp=4, batch=16
    )
    est = estimate(arrays, configs)
    assert est.problem[0] == Problem.PRECISION_UNSUPPORTED
    assert describe_problem(catalog, configs, est, 0) == (
        "precision: a100-sxm runs fp8 weights neither natively nor weight-only"
    )
    # Its KV cache cannot be FP8 either (INT8 weights keep a BF16 cache by default).
    kv = make_configs(
        catalog, model="llama-3.1-70b", accelerator="a100-sxm", precision="int8",
        kv_precision="fp8", tp=4, batch=16,
    )  # fmt: skip
    kv_est = estimate(arrays, kv)
    assert kv_est.problem[0] == Problem.PRECISION_UNSUPPORTED
    assert describe_problem(catalog, kv, kv_est, 0) == (
        "kv precision: a100-sxm has no native fp8 support for the KV cache"
    )
    ok = estimate(arrays, make_configs(
        catalog, model="llama-3.1-70b", accelerator="a100-sxm", precision="int8", tp=4, batch=16
    ))  # fmt: skip
    assert ok.problem[0] == Problem.OK


def test_llama_70b_on_each_server(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Llama 3.1 70B at batch 16: four A100s stream BF16 weights over NVLink, memory bound; eight
    L40S hold FP8 weights with room to spare but all-reduce over PCIe at 0.11 of 32 GB/s, so the
    step is collective bound (the measured all-reduce among 8 is slower still:
    docs/calibration.md)."""
    a100 = make_configs(
        catalog, model="llama-3.1-70b", accelerator="a100-sxm", precision="bf16", tp=4, batch=16
    )
    l40s = make_configs(
        catalog, model="llama-3.1-70b", accelerator="l40s", precision="fp8", tp=8, batch=16
    )
    a, s = estimate(arrays, a100), estimate(arrays, l40s)
    assert a.problem[0] == Problem.OK and s.problem[0] == Problem.OK
    assert a.bound[0] == Bound.MEMORY
    assert s.bound[0] == Bound.COMMUNICATION
    assert s.step_comm_s[0] > s.step_memory_s[0] > 0
