"""MoE grouped GEMMs at prefill sizes read slower than the model's rates for experts
(``fleet.perf.kernel_moe_prefill``, a measurement docs/calibration.md reports, not a model term):
the figures there come from this module, and these are the properties they rest on."""

from __future__ import annotations

import pytest

from fleet.catalog.load import Catalog
from fleet.perf import kernel_moe_prefill as mp
from fleet.perf.transfer import resolve_efficiency
from tests.fleet.kernel_data import kernel_data, needs_data


@needs_data
@pytest.mark.parametrize("part", ["h200-sxm", "b200"])
@pytest.mark.parametrize("dtype", ["bf16", "fp8_block"])
def test_prefill_sized_moe_calls_run_slower_than_the_model_rates(
    catalog: Catalog, part: str, dtype: str
) -> None:
    data = kernel_data()
    assert data is not None
    c = mp.check(data, catalog, part, dtype)
    assert c is not None and c.calls > 1000
    # every form's time is too short, the fully overlapped roofline most of all
    assert c.forms["max"].signed < -0.15
    assert c.forms["max"].signed < c.forms["roof"].signed < c.forms["sum"].signed < 0.0
    # no overlap of the experts' streaming and compute fits unseen shapes better than full
    # overlap (than the smooth roofline too, except BF16 on B200: 19.4% against 18.4%)
    assert c.forms["sum"].held_out < c.forms["max"].held_out


@needs_data
def test_no_check_without_a_peak_for_the_precision(catalog: Catalog) -> None:
    data = kernel_data()
    assert data is not None
    assert mp.check(data, catalog, "h200-sxm", "fp4") is None
    assert mp.check(data, catalog, "b200", "fp4") is not None


@needs_data
@pytest.mark.parametrize("part", ["h200-sxm", "b200"])
@pytest.mark.parametrize("kind", ["bf16", "fp8_block"])
def test_fitted_prefill_fraction_is_below_the_dense_one_and_fits_held_out_shapes_better(
    catalog: Catalog, part: str, kind: str
) -> None:
    """docs/calibration.md: at >= 1,024 tokens the grouped GEMMs reach 0.14-0.40 of the peak
    against the dense 0.44-0.78, and the fitted fraction predicts the held-out quarter's
    latencies no worse than the dense one (23-51% against 24-62%)."""
    data = kernel_data()
    assert data is not None
    efficiency = resolve_efficiency(catalog)
    f = mp.fit(data, catalog.accelerator(part), kind, efficiency[part])
    assert f is not None and f.calls > 1000
    dense = efficiency[part].flops_fraction[mp.PRECISION[kind]]
    assert 0.1 < f.fraction < 0.6 * dense
    assert f.held_out_median <= f.dense_held_out_median


@needs_data
def test_the_four_bit_kind_is_the_geometric_mean_of_its_two_tables(catalog: Catalog) -> None:
    data = kernel_data()
    assert data is not None
    acc = catalog.accelerator("b200")
    eff = resolve_efficiency(catalog)["b200"]
    four = mp.fit(data, acc, "fp4", eff)
    assert four is not None
    parts = [mp._fit_dtype(data, acc, d, 0.3) for d in mp.KIND_DTYPES["fp4"]]
    assert all(p is not None for p in parts)
    product = 1.0
    for p in parts:
        assert p is not None
        product *= p[0].params["flops_fraction"]
    assert four.fraction == pytest.approx(product ** (1 / len(parts)))
    assert "fp4" not in mp.terms(data, catalog)["h200-sxm"]  # no FP4 peak on Hopper
