"""``farebox frontier`` holds its grid to the API's ``MAX_FRONTIER_CONFIGS`` before evaluating
it: 100 ``--spec`` options once took 12 s and 4.5 GB."""

from __future__ import annotations

import pytest

import fleet.perf.frontier
from api.cli import main
from api.cli.frontier import check_size
from api.perf_wire import MAX_FRONTIER_CONFIGS
from fleet.catalog.load import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.frontier import DEFAULT_BATCHES, frontier_size, supported_precisions
from fleet.perf.grid import evaluate_grid

WIDE = ["--model", "qwen3-30b-a3b", "--system", "groqrack"]  # the catalog's widest grid


def _forbidden(*_: object, **__: object) -> None:
    raise AssertionError("the frontier was evaluated before it was refused")


def test_too_many_spec_options_are_refused_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet.perf.frontier, "frontier", _forbidden)
    specs = [a for k in range(100) for a in ("--spec", f"{1 + k % 16}:{0.3 + k / 1000:.3f}")]
    code = main(["frontier", *WIDE, *specs])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1, err
    assert err.startswith("farebox frontier: error: --spec: this frontier would evaluate "), err
    assert "101 speculative options" in err
    assert f"over the limit of {MAX_FRONTIER_CONFIGS:,}" in err


@pytest.mark.parametrize("disaggregated", [False, True])
def test_default_frontiers_are_within_the_limit(catalog: Catalog, disaggregated: bool) -> None:
    for model in ("qwen3-30b-a3b", "deepseek-r1", "llama-3.1-70b"):
        for system in ("groqrack", "gb200-nvl72", "hgx-h100-8"):
            check_size(catalog, model, system, None, [(0, 0.0)], disaggregated)


def test_the_count_is_the_grid_evaluated(catalog: Catalog, arrays: CatalogArrays) -> None:
    """deepseek-r1 has an MTP module: the frontier adds its draft to the options asked for."""
    spec = [(0, 0.0), (2, 0.6), (2, 0.6), (0, 0.9)]
    n = frontier_size(catalog, "deepseek-r1", "hgx-h200-8", spec=spec)
    configs, _ = evaluate_grid(
        catalog,
        arrays,
        "deepseek-r1",
        "hgx-h200-8",
        batches=DEFAULT_BATCHES,
        precisions=supported_precisions(catalog, "hgx-h200-8"),
        isl=1024,
        osl=256,
        spec=spec,
    )
    assert n == len(configs) > 0
