"""``fleet.perf.grid.layouts`` sizes pipelines for the precisions a part can run: asking for
precisions a part cannot run (the planner's default search is bf16, fp8, fp4 on every pool) must
not shrink the stages of the ones it can. Regression: a bf16-only CS-3 was given the stages of
fp4 weights, so Llama 3.1 70B (140 GB in bf16, 44 GB of SRAM per wafer) got pp 1-2 and never fit.
"""

from __future__ import annotations

import numpy as np
import pytest

from fleet.perf.grid import evaluate_grid, layouts

SEARCH = ("bf16", "fp8", "fp4")


def _rows(lay) -> set[tuple[int, int, int, int]]:
    return set(zip(lay.tp.tolist(), lay.pp.tolist(), lay.dp.tolist(), lay.ep.tolist(), strict=True))


@pytest.mark.parametrize(
    ("model", "system"),
    [("llama-3.1-70b", "cs3"), ("llama-3.1-8b", "cs3"), ("llama-3.1-70b", "hgx-h100-8")],
)
def test_unrunnable_precisions_do_not_change_the_layouts(catalog, model, system) -> None:
    acc = catalog.accelerator(catalog.system(system).accelerator)
    runnable = tuple(p for p in SEARCH if acc.runs(p))
    assert _rows(layouts(catalog, model, system, precisions=SEARCH)) == _rows(
        layouts(catalog, model, system, precisions=runnable)
    )


def test_the_70b_fits_on_chained_wafers_under_the_planner_search(catalog, arrays) -> None:
    configs, est = evaluate_grid(
        catalog,
        arrays,
        "llama-3.1-70b",
        "cs3",
        batches=(1, 8, 32),
        precisions=SEARCH,
        isl=1200,
        osl=400,
    )
    fits = est.fits
    assert fits.any()
    # 140 GB of bf16 weights over 44 GB wafers: at least 4 stages, as Cerebras runs it.
    assert np.all(configs.pp[fits] >= 4)
    assert est.tokens_per_s_per_user[fits].max() > 1000


def test_wide_expert_parallel_layouts_span_nodes_and_evaluate(catalog, arrays) -> None:
    """DeepSeek-R1 on 8-GPU H200 nodes: the grid offers attention-DP stages of 16-64 GPUs with the
    widest ep, and the model evaluates them (multi-node EP over InfiniBand) instead of rejecting
    them; a dense model gets none."""
    wide = {r for r in _rows(layouts(catalog, "deepseek-r1", "hgx-h200-8")) if r[0] * r[2] > 8}
    assert {(1, 1, 16, 16), (1, 1, 32, 32), (1, 1, 64, 64)} <= wide
    assert all(tp == 1 and dp == ep for tp, _, dp, ep in wide)
    assert not any(r[0] * r[2] > 8 for r in _rows(layouts(catalog, "llama-3.1-70b", "hgx-h200-8")))
    configs, est = evaluate_grid(
        catalog,
        arrays,
        "deepseek-r1",
        "hgx-h200-8",
        batches=(256,),
        precisions=("fp8",),
        isl=1024,
        osl=1024,
    )
    spans = configs.dp * configs.tp > 8
    assert spans.any() and est.fits[spans].all()
    assert (est.systems_per_replica[spans] >= 2).all()


def test_the_grid_offers_mtp_for_models_that_ship_it(catalog, arrays) -> None:
    """DeepSeek-R1 ships one MTP module (num_nextn_predict_layers = 1) with a published ~85-90%
    acceptance: the grid adds k = 1 at 0.85 to the scenario's options, and at batch 1 it serves
    each user faster than without a draft; Llama (no MTP) gets only the options asked for."""
    configs, est = evaluate_grid(
        catalog,
        arrays,
        "deepseek-r1",
        "hgx-h200-8",
        batches=(1,),
        precisions=("fp8",),
        isl=1024,
        osl=1024,
    )
    mtp = (configs.spec_draft_tokens == 1) & np.isclose(configs.spec_acceptance, 0.85)
    plain = configs.spec_draft_tokens == 0
    assert mtp.any() and plain.any() and (mtp | plain).all()
    ok = est.fits
    assert (
        est.tokens_per_s_per_user[mtp & ok].max()
        > 1.3 * est.tokens_per_s_per_user[plain & ok].max()
    )
    llama, _ = evaluate_grid(
        catalog,
        arrays,
        "llama-3.1-70b",
        "hgx-h200-8",
        batches=(1,),
        precisions=("fp8",),
        isl=1024,
        osl=1024,
    )
    assert (llama.spec_draft_tokens == 0).all()
