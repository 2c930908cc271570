"""MoE grouped GEMMs at prefill sizes read slower than the model's rates for experts
(``fleet.perf.kernel_moe_prefill``, a measurement docs/calibration.md reports, not a model term):
the figures there come from this module, and these are the properties they rest on."""

from __future__ import annotations

import pytest

from fleet.catalog.load import Catalog
from fleet.perf import kernel_moe_prefill as mp
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
