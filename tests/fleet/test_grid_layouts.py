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
