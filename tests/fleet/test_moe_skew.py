"""Routing skew of MoE layers (``fleet.perf.kernel_moe_skew``): the catalog's curves are the kernel
tables' measurements, they predict held-out shapes better than balanced routing does, and the
model slows the routed experts' compute by the curve at the row's expert-parallel width."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleet.catalog import MOE_ROUTINGS, MOE_SKEW_EP, Catalog
from fleet.perf import kernel_moe_skew as kms
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate, routing_skew
from fleet.perf.transfer import resolve_efficiency
from tests.fleet.kernel_data import kernel_data, needs_data


@needs_data
@pytest.mark.parametrize("part", kms.PARTS)
def test_the_catalog_curves_are_the_measurements(catalog: Catalog, part: str) -> None:
    data = kernel_data()
    assert data is not None
    measured = kms.measure(data, part)
    assert measured is not None
    kernel = catalog.accelerator(part).kernel
    assert kernel is not None and kernel.moe_routing_skew is not None
    assert "kernel_moe_skew" in catalog.accelerator(part).sources["kernel"]
    for routing in MOE_ROUTINGS:
        stored = kernel.moe_routing_skew.curve(routing)
        assert stored == pytest.approx(measured.skew[routing], rel=5e-3), routing


@needs_data
@pytest.mark.parametrize("part", kms.PARTS)
def test_the_curves_predict_held_out_shapes_better_than_balanced_routing(part: str) -> None:
    """Held-out medians (docs/calibration.md): 10-15% with the skew, 24-39% without."""
    data = kernel_data()
    assert data is not None
    c = kms.measure(data, part)
    assert c is not None
    for routing in MOE_ROUTINGS:
        assert c.calls[routing] > 2000
        assert c.held_out_error[routing] <= 0.16, routing
        assert c.held_out_error[routing] < 0.6 * c.balanced_error[routing], routing
        curve = c.skew[routing]
        assert 1.0 < curve[0] < 1.1  # every rank holds every expert: the kernels' loss only
        assert curve[MOE_SKEW_EP.index(8)] > 1.3  # one node of expert parallelism


def test_the_steeper_power_law_skews_more(catalog: Catalog) -> None:
    kernel = catalog.accelerator("b200").kernel
    assert kernel is not None and kernel.moe_routing_skew is not None
    mild = np.asarray(kernel.moe_routing_skew.curve("power_law_1.01"))
    steep = np.asarray(kernel.moe_routing_skew.curve("power_law_1.2"))
    assert np.all(steep[1:] > mild[1:])


def test_parts_without_tables_take_their_familys_or_none(catalog: Catalog) -> None:
    eff = resolve_efficiency(catalog)
    h100 = eff["h100-sxm"].moe_routing_skew
    assert eff["mi300x"].moe_routing_skew == h100  # a Hopper-transfer estimate
    ones = tuple(tuple(1.0 for _ in MOE_SKEW_EP) for _ in MOE_ROUTINGS)
    published = [
        a.id for a in catalog.accelerators.values() if a.kernel is None and
        a.efficiency.basis not in ("hopper-transfer-estimate",)
    ]  # fmt: skip
    assert published  # parts known by published speeds only
    for acc_id in published:
        assert eff[acc_id].moe_routing_skew == ones, acc_id


def test_routing_skew_interpolates_in_log2_ep(arrays: CatalogArrays) -> None:
    A, M = arrays.accelerators, arrays.models
    a = A.ids.index("b200")
    m = M.ids.index("deepseek-r1")
    curve = A.moe_routing_skew[a, MOE_ROUTINGS.index("power_law_1.01")]
    ep = np.asarray([1.0, 8.0, 3.0, 512.0])
    got = routing_skew(A, M, np.full(4, a), np.full(4, m), ep)
    i2, i4 = MOE_SKEW_EP.index(2), MOE_SKEW_EP.index(4)
    w = np.log2(3.0) - 1.0
    assert got[0] == pytest.approx(curve[0])
    assert got[1] == pytest.approx(curve[MOE_SKEW_EP.index(8)])
    assert got[2] == pytest.approx(curve[i2] * (1 - w) + curve[i4] * w)
    assert got[3] == pytest.approx(curve[-1])  # flat beyond the widest width measured
    dense = M.ids.index("llama-3.1-70b")
    assert routing_skew(A, M, np.asarray([a]), np.asarray([dense]), np.asarray([8.0]))[0] == 1.0


def _r1(catalog: Catalog, ep: int) -> object:
    return make_configs(
        catalog, model=["deepseek-r1"], system=["hgx-b200-8"], tp=[8], ep=[ep],
        precision=["fp8"], batch=[64], isl=[8192], osl=[1024],
    )  # fmt: skip


def test_skew_slows_expert_parallel_prefill_and_not_a_balanced_router(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    balanced = dataclasses.replace(
        arrays,
        models=dataclasses.replace(
            arrays.models, moe_routing=np.full_like(arrays.models.moe_routing, -1)
        ),
    )
    wide = _r1(catalog, 8)
    skewed, even = estimate(arrays, wide), estimate(balanced, wide)  # type: ignore[arg-type]
    # an 8k prompt at ep 8: the experts (compute bound, a part of the pass) take 1.43x their
    # balanced time on the loaded rank; the prefill as a whole ~6% longer
    assert skewed.prefill_s[0] > 1.04 * even.prefill_s[0]
    assert skewed.step_s[0] >= even.step_s[0]
    # tensor parallelism alone: every rank holds every expert, only the kernels' small loss
    # (the curves' 4-5% at width 1 on the experts, which since they run on a roofline of their
    # own are about half of this 8k prefill: 2.1%)
    tp_only = _r1(catalog, 1)
    assert estimate(arrays, tp_only).prefill_s[0] == pytest.approx(  # type: ignore[arg-type]
        estimate(balanced, tp_only).prefill_s[0],
        rel=0.03,  # type: ignore[arg-type]
    )
    dense = make_configs(
        catalog, model=["llama-3.1-70b"], system=["hgx-b200-8"], tp=[8], precision=["fp8"],
        batch=[64], isl=[8192], osl=[1024],
    )  # fmt: skip
    assert estimate(arrays, dense).prefill_s[0] == estimate(balanced, dense).prefill_s[0]
