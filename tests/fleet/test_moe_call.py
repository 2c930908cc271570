"""Each MoE layer's routed-expert call takes a fixed kernel time per forward pass: native FP4
experts at the call term of the MXFP4 kernel their streaming figure comes from, 8/16-bit
experts at the 8/16-bit kernels' term, weight-only 4-bit experts (Hopper) none, their fitted
streaming figure holding it."""

from __future__ import annotations

import pytest

from fleet.catalog import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate
from fleet.perf.transfer import resolve_efficiency


def _overhead_beyond_the_step(
    catalog: Catalog, arrays: CatalogArrays, model: str, accelerator: str, precision: str
) -> float:
    """A batch-4 estimate's per-step overhead less the part's fixed step and per-layer terms:
    what the MoE layers add."""
    configs = make_configs(
        catalog, model=model, accelerator=accelerator, precision=precision, batch=4
    )
    est = estimate(arrays, configs)
    acc, i = arrays.accelerators, list(catalog.accelerators).index(accelerator)
    units = arrays.models.layer_units[configs.model[0]]
    fixed = acc.step_overhead_s[i] + acc.layer_overhead_s[i] * units
    return float(est.step_overhead_s[0] - fixed)


def _moe_layers(arrays: CatalogArrays, catalog: Catalog, model: str) -> int:
    return int(arrays.models.moe_layers[list(catalog.models).index(model)])


@pytest.mark.parametrize("part", ["b200", "gb200", "b300", "gb300"])
def test_native_fp4_experts_take_their_own_kernels_call_time(
    catalog: Catalog, arrays: CatalogArrays, part: str
) -> None:
    eff = resolve_efficiency(catalog)[part]
    kernel = catalog.accelerator(part).kernel
    assert kernel is not None and kernel.moe_fp4_call_us is not None
    assert eff.moe_fp4_call_us == kernel.moe_fp4_call_us
    # the two kernels differ (MXFP4 ~26 us against ~30 us), so the test can tell which is charged
    assert abs(eff.moe_fp4_call_us - eff.moe_call_us) > 2.0
    layers = _moe_layers(arrays, catalog, "gpt-oss-120b")
    fp4 = _overhead_beyond_the_step(catalog, arrays, "gpt-oss-120b", part, "fp4")
    assert fp4 == pytest.approx(layers * eff.moe_fp4_call_us * 1e-6, rel=1e-9)
    fp8 = _overhead_beyond_the_step(catalog, arrays, "gpt-oss-120b", part, "fp8")
    assert fp8 == pytest.approx(layers * eff.moe_call_us * 1e-6, rel=1e-9)


def test_weight_only_four_bit_experts_take_no_call_time(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    assert _overhead_beyond_the_step(catalog, arrays, "gpt-oss-120b", "h200-sxm", "fp4") == (
        pytest.approx(0.0, abs=1e-12)
    )
    eff = resolve_efficiency(catalog)["h200-sxm"]
    # without an MXFP4 kernel figure FP4 falls back on the 8/16-bit one
    assert catalog.accelerator("h200-sxm").kernel.moe_fp4_call_us is None  # type: ignore[union-attr]
    assert eff.moe_fp4_call_us == eff.moe_call_us
