"""A check the kernel-transfer parts share: at batch 1 a decode step streams the weights, so it is
memory bound and its memory term is H100's for the same bytes times the ratio of the datasheet
bandwidths x weight-streaming fractions."""

from __future__ import annotations

import pytest

from fleet.catalog import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate
from fleet.perf.transfer import resolve_efficiency
from fleet.perf.types import Bound, Estimate, Problem


def streams_like_h100(
    catalog: Catalog, arrays: CatalogArrays, accelerator: str, model: str, precision: str, tp: int
) -> Estimate:
    """Assert the batch-1 decode step of ``model`` on ``accelerator`` streams its weights at the
    part's rate relative to H100's (within 1%); the estimate, for further checks."""
    est = estimate(arrays, make_configs(
        catalog, model=model, accelerator=accelerator, precision=precision, tp=tp, batch=1
    ))  # fmt: skip
    assert est.problem[0] == Problem.OK
    assert est.bound[0] == Bound.MEMORY
    ref = estimate(arrays, make_configs(
        catalog, model=model, accelerator="h100-sxm", precision=precision, tp=tp, batch=1
    ))  # fmt: skip
    eff = resolve_efficiency(catalog)
    rate = {
        a: catalog.accelerator(a).memory_bandwidth_bytes_per_s * eff[a].weight_bandwidth[precision]  # type: ignore[index]
        for a in (accelerator, "h100-sxm")
    }
    assert est.step_memory_s[0] / ref.step_memory_s[0] == pytest.approx(
        rate["h100-sxm"] / rate[accelerator], rel=0.01
    )
    return est
