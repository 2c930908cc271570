"""DeepSeek Sparse Attention's decode module (``fleet.perf.kernel_dsa``): its fixed time fitted on
the measured module tables where the parts have them, stored per part, and charged in every
forward pass of every DSA layer, on DSA models only."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleet.catalog import Catalog
from fleet.perf import kernel_dsa as kd
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate
from fleet.perf.transfer import resolve_efficiency
from fleet.perf.types import Estimate
from tests.fleet.kernel_data import kernel_data, needs_data

MEASURED = ("h100-sxm", "h200-sxm", "b200", "gb200", "b300", "gb300")


@needs_data
@pytest.mark.parametrize("part", MEASURED)
def test_the_module_fits_unseen_shapes(catalog: Catalog, part: str) -> None:
    """Held-out (checkpoint, width, streams, context) shapes within 12% at the median
    (measured 7.6-8.8%); the call term is most of a module's time at decode (61-89 us)."""
    data = kernel_data()
    assert data is not None
    (fit,) = kd.fit_module(data, catalog, part)
    assert fit.held_out_median < 0.12 and fit.rows_held_out > 20
    assert 40.0 < fit.params["call_us"] < 120.0


@needs_data
def test_parts_without_the_table_fit_nothing(catalog: Catalog) -> None:
    data = kernel_data()
    assert data is not None
    assert kd.fit_module(data, catalog, "a100-sxm") == []


def test_the_weights_per_rank_split_by_head(catalog: Catalog) -> None:
    """GLM-5: 25.5M parameters on every rank (the down-projections and the indexer's), 2.33M
    per head (the up-projections and the output projection)."""
    one, eight = kd.module_params(catalog, "glm-5", np.array([1.0, 8.0]))
    assert eight - one == pytest.approx(7 * (2048 * 256 + 512 * 448 + 256 * 6144))
    replicated = 6144 * 2048 + 6144 * (512 + 64) + 2048 * 32 * 128 + 6144 * (128 + 32)
    assert one == pytest.approx(replicated + 2048 * 256 + 512 * 448 + 256 * 6144)
    with pytest.raises(ValueError, match="no DeepSeek Sparse Attention"):
        kd.module_params(catalog, "deepseek-v3", np.array([8.0]))


def _estimate(catalog: Catalog, arrays: CatalogArrays, model: str) -> Estimate:
    configs = make_configs(
        catalog, model=model, accelerator="b200", precision="fp8", tp=8, batch=4, isl=2048,
        osl=512,
    )  # fmt: skip
    return estimate(arrays, configs)


def _without(arrays: CatalogArrays) -> CatalogArrays:
    acc = arrays.accelerators
    zero = np.zeros_like(acc.dsa_call_s)
    return dataclasses.replace(arrays, accelerators=dataclasses.replace(acc, dsa_call_s=zero))


def test_every_dsa_layer_pays_the_call_in_every_forward_pass(
    catalog: Catalog, arrays: CatalogArrays
) -> None:
    call_s = resolve_efficiency(catalog)["b200"].dsa_call_us * 1e-6
    layers = catalog.model("glm-5").num_layers  # 78, every one a DSA layer
    with_call, without = (
        _estimate(catalog, arrays, "glm-5"),
        _estimate(catalog, _without(arrays), "glm-5"),
    )
    added = float(with_call.step_overhead_s[0] - without.step_overhead_s[0])
    assert added == pytest.approx(layers * call_s, rel=1e-9)
    assert float(with_call.step_s[0] - without.step_s[0]) == pytest.approx(added, rel=1e-9)


def test_models_without_dsa_pay_nothing(catalog: Catalog, arrays: CatalogArrays) -> None:
    for model in ("deepseek-v3", "llama-3.1-70b"):
        a, b = _estimate(catalog, arrays, model), _estimate(catalog, _without(arrays), model)
        assert float(a.step_s[0]) == float(b.step_s[0])


def test_each_part_takes_its_own_figure_or_the_familys(catalog: Catalog) -> None:
    eff = resolve_efficiency(catalog)
    for part in MEASURED:
        kernel = catalog.accelerator(part).kernel
        assert kernel is not None and eff[part].dsa_call_us == kernel.dsa_call_us
    # A100 has kernel tables but not this one: the Hopper family's figure (an estimate)
    hopper = sorted(eff[p].dsa_call_us for p in ("h100-sxm", "h200-sxm"))
    assert hopper[0] <= eff["a100-sxm"].dsa_call_us <= hopper[1]
    # Blackwell's module is the faster one (61-69 us against 88-89 us)
    assert eff["b200"].dsa_call_us < 0.85 * eff["h200-sxm"].dsa_call_us
