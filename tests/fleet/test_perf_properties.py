"""Hypothesis properties of the performance model over random valid configurations."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.catalog import PRECISIONS, Catalog, load_catalog
from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.grid import layouts
from fleet.perf.model import estimate
from fleet.perf.types import Configs, Problem

CATALOG: Catalog = load_catalog()
ARRAYS: CatalogArrays = build_arrays(CATALOG)
HBM_SYSTEMS = [
    s.id
    for s in CATALOG.systems.values()
    if CATALOG.accelerators[s.accelerator].memory_kind == "hbm"
]
LAYOUTS = {
    (m, s): layouts(CATALOG, m, s, precisions=("fp8",)) for m in CATALOG.models for s in HBM_SYSTEMS
}


@st.composite
def configs(draw: st.DrawFn, batches: int = 6) -> Configs:
    """A random (model, system, layout, precision, lengths) at several increasing batch sizes."""
    model = draw(st.sampled_from(list(CATALOG.models)))
    system = draw(st.sampled_from(HBM_SYSTEMS))
    lay = LAYOUTS[(model, system)]
    if len(lay) == 0:
        system, lay = "hgx-h200-8", LAYOUTS[(model, "hgx-h200-8")]
    i = draw(st.integers(0, len(lay) - 1))
    acc = CATALOG.accelerator(CATALOG.system(system).accelerator)
    precision = draw(st.sampled_from([p for p in PRECISIONS if acc.runs(p)]))
    batch = np.cumsum(draw(st.lists(st.integers(1, 64), min_size=batches, max_size=batches)))
    k = draw(st.sampled_from([0, 0, 2, 4]))
    return make_configs(
        CATALOG,
        model=model,
        system=system,
        tp=lay.tp[i],
        pp=lay.pp[i],
        dp=lay.dp[i],
        ep=lay.ep[i],
        precision=precision,
        batch=batch,
        isl=draw(st.sampled_from([128, 1024, 8192])),
        osl=draw(st.sampled_from([64, 512, 2048])),
        spec_draft_tokens=k,
        spec_acceptance=draw(st.floats(0.3, 0.9)) if k else 0.0,
    )


@settings(max_examples=80, deadline=None)
@given(configs())
def test_more_batch_more_throughput_less_speed_until_memory_binds(c: Configs) -> None:
    est = estimate(ARRAYS, c)
    fit = est.fits
    per_device = est.tokens_per_s_per_device[fit]
    per_user = est.tokens_per_s_per_user[fit]
    assert np.all(np.diff(per_device) >= -1e-9 * per_device[:-1])
    assert np.all(np.diff(per_user) <= 1e-9 * per_user[:-1])
    # Once a batch does not fit, no larger batch fits.
    if (~fit).any():
        assert not fit[np.argmax(~fit) :].any()


@settings(max_examples=60, deadline=None)
@given(configs(batches=2), st.floats(1.01, 4.0))
def test_more_bandwidth_never_slower(c: Configs, factor: float) -> None:
    acc = ARRAYS.accelerators
    faster = dataclasses.replace(
        ARRAYS,
        accelerators=dataclasses.replace(
            acc, memory_bandwidth_bytes_per_s=acc.memory_bandwidth_bytes_per_s * factor
        ),
    )
    base, fast = estimate(ARRAYS, c), estimate(faster, c)
    ok = base.problem <= Problem.DOES_NOT_FIT
    assert np.all(fast.tpot_s[ok] <= base.tpot_s[ok] * (1 + 1e-12))
    assert np.all(fast.ttft_floor_s[ok] <= base.ttft_floor_s[ok] * (1 + 1e-12))


@settings(max_examples=80, deadline=None)
@given(configs(batches=3))
def test_never_faster_than_bandwidth_roofline(c: Configs) -> None:
    """A decode step streams every non-expert weight of a device at least once, at peak rate."""
    est = estimate(ARRAYS, c)
    ok = est.problem <= Problem.DOES_NOT_FIT
    M = ARRAYS.models
    m = c.model
    wbytes = np.asarray(
        [{"bf16": 2, "fp8": 1, "fp4": 0.5, "int8": 1, "int4": 0.5}[p] for p in PRECISIONS]
    )
    dense_bytes = wbytes[c.weight_precision] * M.replicated_params[m] / c.tp / c.pp
    peak = ARRAYS.accelerators.memory_bandwidth_bytes_per_s[ARRAYS.systems.accelerator[c.system]]
    floor_s = c.pp * dense_bytes / peak
    assert np.all(est.step_s[ok] >= floor_s[ok])
    assert np.all(est.step_s[ok] >= np.maximum(est.step_memory_s, est.step_compute_s)[ok])
    assert np.all(est.tpot_s[ok] * est.tokens_per_step[ok] >= est.step_s[ok] * (1 - 1e-12))


@settings(max_examples=80, deadline=None)
@given(configs(batches=4))
def test_fits_iff_memory_within_usable(c: Configs) -> None:
    est = estimate(ARRAYS, c)
    valid = est.problem <= Problem.DOES_NOT_FIT
    within = est.memory_bytes_per_device <= est.usable_bytes_per_device
    assert np.array_equal(est.fits, valid & within)
    assert np.array_equal(est.problem == Problem.DOES_NOT_FIT, valid & ~within)


@settings(max_examples=40, deadline=None)
@given(configs(batches=1))
def test_max_batch_is_the_largest_that_fits(c: Configs) -> None:
    est = estimate(ARRAYS, c)
    if est.problem[0] > Problem.DOES_NOT_FIT or est.max_batch[0] < 1:
        return
    edge = dataclasses.replace(
        c, batch=np.asarray([est.max_batch[0], est.max_batch[0] + c.dp[0]], dtype=np.int64)
    )
    for f in dataclasses.fields(Configs):
        if f.name != "batch":
            edge = dataclasses.replace(edge, **{f.name: np.repeat(getattr(c, f.name), 2)})
    at = estimate(ARRAYS, edge)
    assert at.fits.tolist() == [True, False]


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("a", [0.0, 0.5, 0.8, 1.0])
def test_accepted_tokens_per_step(k: int, a: float) -> None:
    c = make_configs(
        CATALOG,
        model="llama-3.1-8b",
        accelerator="h100-sxm",
        batch=1,
        spec_draft_tokens=k,
        spec_acceptance=a,
    )
    expected = k + 1 if a == 1.0 else (1 - a ** (k + 1)) / (1 - a)
    assert estimate(ARRAYS, c).tokens_per_step[0] == pytest.approx(expected)
