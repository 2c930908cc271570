"""Prefix caching in the performance model: a cached prefix skips prefill work only; its KV is
held by every stream and read every decode step like the rest of the prompt."""

from __future__ import annotations

import numpy as np
import pytest

from fleet.catalog import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.configs import make_configs
from fleet.perf.explain import describe_problem
from fleet.perf.grid import evaluate_grid
from fleet.perf.model import estimate
from fleet.perf.types import Estimate, Problem

ISL, OSL = 6000, 600
# (model, accelerator, precision, tp, batch): an HBM node and an SRAM wafer, where KV bounds batch.
CASES = [
    ("llama-3.1-70b", "h100-sxm", "fp8", 8, 32),
    ("llama-3.1-8b", "wse3", "bf16", 1, 16),
]


def _est(catalog: Catalog, arrays: CatalogArrays, case: tuple, isl: int, cached: int) -> Estimate:
    model, acc, precision, tp, batch = case
    configs = make_configs(
        catalog,
        model=model,
        accelerator=acc,
        precision=precision,
        tp=tp,
        batch=batch,
        isl=isl,
        osl=OSL,
        prefix_cached_tokens=cached,
    )
    est = estimate(arrays, configs)
    assert est.problem[0] == Problem.OK, case
    return est


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}@{c[1]}")
def test_cached_prefix_saves_prefill_only(
    catalog: Catalog, arrays: CatalogArrays, case: tuple
) -> None:
    none = _est(catalog, arrays, case, ISL, 0)
    half = _est(catalog, arrays, case, ISL, ISL // 2)
    # prefill work drops: the lone prefill, the TTFT floor, and the prefills fused into each step
    assert half.prefill_s[0] < 0.9 * none.prefill_s[0]
    assert half.ttft_floor_s[0] < none.ttft_floor_s[0]
    assert half.aggregated_step_s[0] < none.aggregated_step_s[0]
    assert half.tokens_per_s_per_replica[0] > none.tokens_per_s_per_replica[0]
    # what the prefix still costs is unchanged: memory held, batch room, the pure decode step
    for name in (
        "kv_bytes_per_device",
        "memory_bytes_per_device",
        "max_batch",
        "step_s",
        "step_memory_s",
    ):
        assert getattr(half, name)[0] == getattr(none, name)[0], name


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}@{c[1]}")
def test_cached_prefix_is_not_a_shorter_prompt(
    catalog: Catalog, arrays: CatalogArrays, case: tuple
) -> None:
    """Against the old modelling (the prompt shortened by the cached part): same prefilled
    tokens, but more KV held and read, hence a smaller max batch and a slower decode step; the
    prefill attends over the whole context, so it is no faster than the short prompt's."""
    cached = ISL // 2
    real = _est(catalog, arrays, case, ISL, cached)
    short = _est(catalog, arrays, case, ISL - cached, 0)
    assert real.kv_bytes_per_device[0] > 1.2 * short.kv_bytes_per_device[0]
    assert real.max_batch[0] < short.max_batch[0]
    assert real.step_memory_s[0] > short.step_memory_s[0]
    assert real.step_s[0] > short.step_s[0]
    assert real.prefill_s[0] >= short.prefill_s[0]


def test_cached_prefix_bounds(catalog: Catalog, arrays: CatalogArrays) -> None:
    configs = make_configs(
        catalog,
        model="llama-3.1-8b",
        accelerator="h100-sxm",
        isl=1000,
        prefix_cached_tokens=[-1, 0, 999, 1000, 5000],
    )
    est = estimate(arrays, configs)
    bad = Problem.BAD_LAYOUT
    assert est.problem.tolist() == [bad, Problem.OK, Problem.OK, bad, bad]
    assert "prefix_cached_tokens" in describe_problem(catalog, configs, est, 3) or ""
    assert np.isnan(est.ttft_floor_s[[0, 3, 4]]).all()


def test_grid_threads_cached_tokens(catalog: Catalog, arrays: CatalogArrays) -> None:
    kwargs = dict(batches=(1, 16), precisions=("fp8",), isl=4000, osl=400)
    plain_c, plain = evaluate_grid(catalog, arrays, "llama-3.1-8b", "hgx-h100-8", **kwargs)
    cached_c, cached = evaluate_grid(
        catalog, arrays, "llama-3.1-8b", "hgx-h100-8", prefix_cached_tokens=3000, **kwargs
    )
    assert (cached_c.prefix_cached_tokens == 3000).all()
    assert (plain_c.prefix_cached_tokens == 0).all()
    np.testing.assert_array_equal(cached.max_batch, plain.max_batch)
    assert (cached.ttft_floor_s < plain.ttft_floor_s).all()
