"""RTX PRO 6000 Blackwell Server Edition (GB202, PCIe): factors moved from Hopper's by its own
kernel figures, FP4 native, precisions only where its kernel tables measure one, and estimates
on its 8-GPU PCIe server."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fleet.catalog import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.explain import describe_problem
from fleet.perf.model import estimate
from fleet.perf.score import score
from fleet.perf.transfer import resolve_efficiency
from fleet.perf.types import Bound, Problem
from tests.fleet.streaming import streams_like_h100
from tests.fleet.test_score import HEADER

PART = "rtx-pro-6000-server"
HOPPER = ("h100-sxm", "h200-sxm")


def _geo(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def test_catalog_entry_and_server(catalog: Catalog) -> None:
    acc = catalog.accelerator(PART)
    assert acc.native_precisions == ("bf16", "fp8", "fp4") and not acc.weight_only_precisions
    assert acc.peak_tflops.int8 is None  # no INT8 GEMM in any of the part's tables
    assert acc.kernel is not None
    assert acc.kernel.gemm_flops_fraction.fp4 is not None
    assert acc.kernel.gemm_fp4_bandwidth_fraction is not None
    assert acc.kernel.moe_fp4_bandwidth_fraction is not None
    assert acc.kernel.mamba_conv_bandwidth_fraction is not None  # it has a Mamba2 table
    system = catalog.system_named("rtx_pro_6000_server")  # the package's system id
    assert system.accelerator == PART and system.devices_per_system == 8
    assert catalog.default_system(PART).id == system.id
    # PCIe Gen5 x16 one way, twice L40S's Gen4 link
    assert (
        acc.scale_up_bandwidth_bytes_per_s
        == 2 * catalog.accelerator("l40s").scale_up_bandwidth_bytes_per_s
    )


def test_factors_move_from_hoppers_by_its_kernels(catalog: Catalog) -> None:
    eff = resolve_efficiency(catalog)
    hopper, mine = eff["h100-sxm"], eff[PART]
    fam = [catalog.accelerator(h).kernel for h in HOPPER]
    k = catalog.accelerator(PART).kernel
    assert k is not None and all(f is not None for f in fam)
    fam_fp8 = _geo([f.gemm_flops_fraction.fp8 for f in fam])  # type: ignore[union-attr,misc]
    fam_stream = _geo([f.gemm_bandwidth_fraction for f in fam])  # type: ignore[union-attr]
    fam_moe = _geo([f.moe_bandwidth_fraction for f in fam])  # type: ignore[union-attr,misc]
    assert mine.basis == "kernel-transfer"
    # Native FP4 math against Hopper's FP8 kernels and run figure.
    fp4 = k.gemm_flops_fraction.fp4
    assert fp4 is not None
    assert mine.flops_fraction["fp4"] == pytest.approx(hopper.flops_fraction["fp8"] * fp4 / fam_fp8)
    # Dense NVFP4 weights stream at their own decode-regime kernel, not Hopper's 4-bit runs.
    assert k.gemm_fp4_bandwidth_fraction is not None
    assert mine.weight_bandwidth["fp4"] == pytest.approx(
        hopper.bandwidth_fraction * k.gemm_fp4_bandwidth_fraction / fam_stream
    )
    assert mine.weight_bandwidth["fp4"] < mine.weight_bandwidth["fp8"]
    # Routed experts by the MoE kernels (BF16 / per-tensor FP8 only: block FP8 is a caveat).
    assert mine.expert_bandwidth["fp8"] == pytest.approx(
        min(1.0, hopper.weight_bandwidth["fp8"] * k.moe_bandwidth_fraction / fam_moe)  # type: ignore[operator]
    )
    # PCIe Gen5: the all-reduce kernels reach ~60% of Hopper's NVLink fraction (L40S: a quarter).
    assert 0.3 * hopper.link_bandwidth_fraction < mine.link_bandwidth_fraction
    assert mine.link_bandwidth_fraction < 0.7 * hopper.link_bandwidth_fraction
    assert mine.link_bandwidth_fraction > 2 * eff["l40s"].link_bandwidth_fraction
    # Mamba2 conv and linear-attention state: its own measured figures, not Hopper's.
    assert mine.mamba_conv_bandwidth_fraction == k.mamba_conv_bandwidth_fraction
    assert mine.state_bandwidth_fraction == k.state_bandwidth_fraction
    assert mine.step_overhead_us == hopper.step_overhead_us


@pytest.mark.parametrize(("model", "precision", "tp"), [
    ("llama-3.1-70b", "fp8", 2), ("llama-3.1-8b", "bf16", 1),
])  # fmt: skip
def test_small_batch_fits_and_streams_weights(
    catalog: Catalog, arrays: CatalogArrays, model: str, precision: str, tp: int
) -> None:
    """At batch 1 a decode step reads every weight and little else: memory bound, and its memory
    term is H100's for the same bytes times the ratio of datasheet rates x weight-streaming
    fractions."""
    streams_like_h100(catalog, arrays, PART, model, precision, tp)


def test_llama_70b_over_two_gpus(catalog: Catalog, arrays: CatalogArrays) -> None:
    """Llama 3.1 70B at batch 16 over 2 GPUs: memory bound in every precision that fits; native
    NVFP4 halves FP8's weight bytes but streams them at 0.69x FP8's rate, so its decode step
    is ~3/4 of FP8's, not half; the PCIe all-reduce costs a fifth of the step."""
    est = {}
    for p in ("bf16", "fp8", "fp4"):
        c = make_configs(
            catalog, model="llama-3.1-70b", accelerator=PART, precision=p, tp=2, batch=16
        )
        e = estimate(arrays, c)
        assert e.problem[0] == Problem.OK, p
        assert e.bound[0] == Bound.MEMORY, p
        est[p] = e
    fp8, fp4 = est["fp8"], est["fp4"]
    assert 0.6 < fp4.step_memory_s[0] / fp8.step_memory_s[0] < 0.85
    assert fp4.step_comm_s[0] == pytest.approx(fp8.step_comm_s[0])
    assert 0.1 < fp8.step_comm_s[0] / fp8.step_s[0] < 0.3
    assert est["bf16"].step_s[0] > fp8.step_s[0] > fp4.step_s[0]


def test_gpt_oss_120b_on_one_gpu(catalog: Catalog, arrays: CatalogArrays) -> None:
    """gpt-oss-120b's MXFP4 experts fit one 96 GB card; its decode is memory bound."""
    c = make_configs(
        catalog, model="gpt-oss-120b", accelerator=PART, precision="fp4", tp=1, batch=16
    )
    e = estimate(arrays, c)
    assert e.problem[0] == Problem.OK
    assert e.bound[0] == Bound.MEMORY
    assert e.step_comm_s[0] == 0


def test_int8_and_int4_are_refused_naming_the_field(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    for p in ("int8", "int4"):
        configs = make_configs(
            catalog, model="llama-3.1-70b", accelerator=PART, precision=p, tp=2, batch=16
        )
        est = estimate(arrays, configs)
        assert est.problem[0] == Problem.PRECISION_UNSUPPORTED, p
        assert describe_problem(catalog, configs, est, 0) == (
            f"precision: {PART} runs {p} weights neither natively nor weight-only"
        )


def test_the_packages_system_names_are_scored(tmp_path: Path, catalog: Catalog) -> None:
    """Rows of a serving log naming the package's system ids (invented figures in its format)
    are scored on these servers, not counted as an unknown system."""
    rows = [
        "silicon_concurrency=16,trtllm,meta-llama/Llama-3.1-70B,rtx_pro_6000_server,agg,1024,"
        "1024,fp8,fp8,16,2,1,,1,1,,,,,,,,,,,,,,,300,35",
        "silicon_concurrency=8,vllm,meta-llama/Llama-3.1-8B,b60,agg,1024,1024,bf16,bf16,8,1,1,,"
        "1,1,,,,,,,,,,,,,,,200,45",
    ]
    path = tmp_path / "log.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    result = score(catalog, path)
    assert not result.uncovered
    assert sorted(result.scored.accelerator.tolist()) == ["b60", PART]
