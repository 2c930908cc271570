"""The held-out errors over several draws of the held-out quarter, against the issue's bars.

One seeded quarter of the run series moves the medians by several points (docs/calibration.md,
"How much one held-out draw says"); these tests hold the median over twelve draws to the bars.
"""

from __future__ import annotations

import numpy as np
import pytest

from fleet.catalog import load_catalog
from fleet.perf.arrays import build_arrays
from fleet.perf.calibrate import SEED, held_out_check
from fleet.perf.held_out_spread import FIGURES, MAX_SEEDS, Draw, draws, main, markdown
from fleet.perf.measured import load_measured
from tests.fleet.measured_runs import MEASURED_CSV, needs_runs

pytestmark = needs_runs

DRAWS = 12


@pytest.fixture(scope="module")
def spread() -> tuple[list[Draw], np.ndarray]:
    catalog = load_catalog()
    runs = load_measured(catalog, MEASURED_CSV)
    results = draws(build_arrays(catalog), runs, catalog, DRAWS)
    return results, np.median(np.asarray([d.figures for d in results]), axis=0)


def _median(spread: tuple[list[Draw], np.ndarray], name: str) -> float:
    names = [n for n, _ in FIGURES]
    return float(spread[1][names.index(name)])


def test_the_first_draw_is_the_canonical_check(spread) -> None:  # type: ignore[no-untyped-def]
    results, _ = spread
    assert [d.seed for d in results] == list(range(SEED, SEED + DRAWS))
    catalog = load_catalog()
    runs = load_measured(catalog, MEASURED_CSV)
    _, table = held_out_check(build_arrays(catalog), runs, catalog)
    held = next(t for t in table if t.group == "held-out")
    assert results[0].rows == held.rows
    assert results[0].figures[:3] == (held.tpot_median, held.tput_median, held.ttft_median)


def test_draws_differ(spread) -> None:  # type: ignore[no-untyped-def]
    """Each seed draws another quarter: the held-out row counts are not all the same."""
    results, _ = spread
    assert len({d.rows for d in results}) > 1


@pytest.mark.parametrize(
    "name",
    [
        "TPOT, each run at its engine",
        "tokens/s per GPU, each run at its engine",
        "TTFT, each run at its engine",
        "tokens/s per GPU, pooled factors",
        # 12.5% before each MoE layer's routed-expert call took its measured fixed time; 11.2%
        "TPOT, pooled factors",
    ],
)
def test_median_over_draws_within_the_bar(spread, name: str) -> None:  # type: ignore[no-untyped-def]
    bar = dict(FIGURES)[name]
    assert _median(spread, name) <= bar


def test_pooled_tpot_and_throughput_hold_over_draws(spread) -> None:  # type: ignore[no-untyped-def]
    """The pooled figures the single-draw test used to hold, on the median over draws: TPOT
    11.2% and tokens/s per GPU 9.3% since the MoE layers' measured call time (12.5% and 9.4%
    before, on the same twelve draws); not to lose more than half a point of. (11.4% and 9.1%
    since InferenceX's runs are read at their drawn lengths, fleet.perf.protocol; 11.5% and 9.0%
    since the routed experts' prefill compute follows the measured MoE form, 2026-11-25.)"""
    assert _median(spread, "TPOT, pooled factors") <= 0.115 + 0.005
    assert _median(spread, "tokens/s per GPU, pooled factors") <= 0.090 + 0.005


@pytest.mark.xfail(
    strict=True,
    reason="known gap: at the pooled factors the median over draws is 32.6% TTFT (34.2% "
    "before the MoE compute form; docs/known-gaps.md); runs of a named engine are scored at "
    "its terms (24.1%)",
)
@pytest.mark.parametrize("name", ["TTFT, pooled factors"])
def test_pooled_median_over_draws_within_the_bar(spread, name: str) -> None:  # type: ignore[no-untyped-def]
    assert _median(spread, name) <= dict(FIGURES)[name]


def test_markdown_counts_draws_over_each_bar(spread) -> None:  # type: ignore[no-untyped-def]
    results, _ = spread
    text = markdown(results)
    assert f"over {DRAWS} draws" in text
    values = np.asarray([d.figures for d in results])
    for j, (name, bar) in enumerate(FIGURES):
        line = next(row for row in text.splitlines() if row.startswith(f"| {name} |"))
        assert line.endswith(f"| {int((values[:, j] > bar).sum())} of {DRAWS} |")


def test_seed_count_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    catalog = load_catalog()
    runs = load_measured(catalog, MEASURED_CSV)
    with pytest.raises(ValueError, match="seeds"):
        draws(build_arrays(catalog), runs, catalog, MAX_SEEDS + 1)
    assert main(["--seeds", "0"]) == 2
    assert "--seeds: 0 is outside" in capsys.readouterr().err
