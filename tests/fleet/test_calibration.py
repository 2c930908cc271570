"""The calibration bound: the catalog's Hopper efficiency factors reproduce the measured runs.

Recomputes the errors of TPOT and tokens/s per GPU on the measured H100/H200 serving runs (read
from shared/reference/measured_calibration.csv beside the repo; what they are:
fleet/perf/measured.py) with the factors in fleet/data/accelerators.toml (not re-fitted) and
checks the medians (docs/calibration.md publishes the tables).
"""

from __future__ import annotations

import numpy as np
import pytest

from fleet.catalog import load_catalog
from fleet.perf.arrays import build_arrays
from fleet.perf.calibrate import (
    HOPPER,
    errors,
    held_out_check,
    held_out_series,
    multi_node_duplicates,
    summarize,
)
from fleet.perf.measured import load_measured
from tests.fleet.measured_runs import MEASURED_CSV, needs_runs

pytestmark = needs_runs


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    catalog = load_catalog()
    runs = load_measured(catalog, MEASURED_CSV)
    err = errors(build_arrays(catalog), runs, catalog)
    return catalog, runs, err


def test_median_errors_within_15_percent(result) -> None:  # type: ignore[no-untyped-def]
    _, runs, err = result
    assert len(runs) == 1112
    assert len(err.rows) > 1000  # only over-capacity runs are left out
    assert "OVER_SCALE_UP" not in err.excluded  # multi-node tp / ep layouts are evaluated
    assert np.median(np.abs(err.tpot)) <= 0.15
    assert np.median(np.abs(err.tokens_per_s_per_gpu)) <= 0.15


def test_no_model_is_off_by_a_factor(result) -> None:  # type: ignore[no-untyped-def]
    """Per (model, accelerator) the median error stays below 60% (backends differ by 10-30%)."""
    catalog, runs, err = result
    for s in summarize(err, runs, catalog):
        assert s.tpot_median < 0.6, s
        assert s.tput_median < 0.6, s


def test_hopper_factors_are_the_fitted_ones() -> None:
    catalog = load_catalog()
    effs = {catalog.accelerator(a).efficiency for a in HOPPER}
    assert len(effs) == 1, "h100-sxm and h200-sxm share one fitted set"
    for a in HOPPER:
        assert "docs/calibration.md" in catalog.accelerator(a).sources["efficiency"]


def test_multi_node_duplicates_are_left_out_of_the_fit(result) -> None:  # type: ignore[no-untyped-def]
    """The 41 rows labelled with 16- or 64-GPU layouts repeat 4-8 GPU runs: evaluated and
    reported, never fitted (fleet.perf.calibrate.multi_node_duplicates)."""
    catalog, runs, err = result
    dup = multi_node_duplicates(runs, catalog)
    assert int(dup.sum()) == 41
    c = runs.configs
    assert (c.tp * c.dp * c.pp)[dup].min() > 8
    assert set(np.asarray(runs.model_ids)[dup]) == {"deepseek-r1", "gpt-oss-120b"}
    assert err.duplicate.sum() == 41  # all are evaluated (none is rejected)
    groups = {s.group: s for s in summarize(err, runs, catalog)}
    assert groups["overall"].rows == len(err.rows) - 41
    assert groups["multi-node labels (not fitted)"].rows == 41


def test_held_out_split_keeps_series_together(result) -> None:  # type: ignore[no-untyped-def]
    _, runs, err = result
    rows = err.rows[~err.duplicate]
    held = held_out_series(runs, rows)
    assert 0.15 < held.mean() < 0.35
    assert (held_out_series(runs, rows) == held).all()  # seeded
    c = runs.configs
    series: dict[tuple, set[bool]] = {}
    for i, h in zip(rows, held, strict=True):
        layout = tuple(
            int(x[i]) for x in (c.weight_precision, c.tp, c.dp, c.ep, c.pp, c.isl, c.osl)
        )
        key = (runs.model_ids[i], runs.system_ids[i], runs.backend[i], *layout)
        series.setdefault(key, set()).add(bool(h))
    assert all(len(sides) == 1 for sides in series.values())


def test_held_out_draw_does_not_depend_on_the_rows_evaluated(result) -> None:  # type: ignore[no-untyped-def]
    """The quarter is drawn over every run series in the file: a row keeps its side whether the
    model evaluates every run or only some (a capacity change must not re-draw the split)."""
    _, runs, err = result
    every = np.arange(len(runs.model_ids))
    side = held_out_series(runs, every)
    some = err.rows[::3]
    assert (held_out_series(runs, some) == side[some]).all()
    assert (held_out_series(runs, some, seed=7) != held_out_series(runs, some)).any()


def test_refit_holds_on_held_out_series(result) -> None:  # type: ignore[no-untyped-def]
    """Re-fitted on three quarters of the run series, scored on the rest (docs/calibration.md):
    TTFT 27.3%, TPOT 15.9%, tokens/s per GPU 10.0% on the canonical draw (drawn over every run
    series in the file since 2026-11-24; the earlier draw, over the series the model evaluated,
    read 28.2% / 13.6% / 11.7%). TTFT is held to the issue's bar, 30%. One draw moves TPOT by
    several points (9.3-16.1% over twelve draws), so TPOT and tokens/s per GPU are held on the
    median over draws (tests/fleet/test_held_out_spread.py), not on this draw."""
    catalog, runs, _ = result
    _, table = held_out_check(build_arrays(catalog), runs, catalog)
    held = next(s for s in table if s.group == "held-out")
    assert held.rows > 150
    assert held.ttft_median <= 0.30


ENGINE_HELD_OUT = {"trtllm": (134, 0.14), "vllm": (44, 0.085), "sglang": (36, 0.305)}
"""Held-out rows per engine on the canonical draw and the median absolute TPOT error they reach
at the pooled factors and scheduler (13.8%, 8.2%, 30.0% since the MoE streaming and call terms
are fitted on decode-sized calls; 14.9%, 9.2%, 29.5% before; on the draw before 2026-11-24, over
the series the model evaluated: 113 / 68 / 28 rows at 17.3%, 6.6%, 33.1%)."""


def test_held_out_tpot_by_engine(result) -> None:  # type: ignore[no-untyped-def]
    catalog, runs, _ = result
    _, table = held_out_check(build_arrays(catalog), runs, catalog)
    groups = {s.group: s for s in table}
    assert (
        sum(groups[f"held-out engine {e}"].rows for e in ENGINE_HELD_OUT) == groups["held-out"].rows
    )
    for engine, (rows, bar) in ENGINE_HELD_OUT.items():
        g = groups[f"held-out engine {engine}"]
        assert g.rows == rows and g.tpot_median <= bar, (engine, g)


def test_the_catalog_factors_reproduce_from_the_fit() -> None:
    """``python -m fleet.perf.calibrate --hold layer_overhead_us=0`` gives the catalog's Hopper
    factors to the digits the catalog writes, each with its 1-sd error (the held one 0)."""
    from fleet.perf.calibrate import FACTOR_NAMES, fit_with_errors

    catalog = load_catalog()
    runs = load_measured(catalog, MEASURED_CSV)
    factors, sd = fit_with_errors(
        build_arrays(catalog), runs, catalog, held={"layer_overhead_us": 0.0}
    )
    stored = catalog.accelerator(HOPPER[0]).efficiency
    for name in FACTOR_NAMES:
        assert factors[name] == pytest.approx(getattr(stored, name), rel=0.006, abs=1e-9), name
    assert sd["layer_overhead_us"] == 0.0
    assert 0.0 < sd["bandwidth_fraction"] < 0.05 and 0.0 < sd["collective_overhead_us"] < 5.0


def test_a_bad_hold_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from fleet.perf.calibrate import main

    with pytest.raises(SystemExit) as exc:
        main(["--hold", "layer_overhead=0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("--hold: 'layer_overhead=0': expected NAME=VALUE")
    assert err.count("\n") == 1


def test_held_out_refit_keeps_held_factors(result) -> None:  # type: ignore[no-untyped-def]
    """``calibrate --held-out --hold NAME=VALUE`` re-fits the fit series with the factor held, as
    the catalog's own fit holds ``layer_overhead_us`` at 0 (the hold was once dropped there, so
    the held-out check re-fitted a factor the catalog does not). Held elsewhere than 0, and the
    free fit's value differs, so a dropped hold fails here."""
    catalog, runs, _ = result
    arrays = build_arrays(catalog)
    free, _ = held_out_check(arrays, runs, catalog)
    held, _ = held_out_check(arrays, runs, catalog, held={"layer_overhead_us": 40.0})
    assert held["layer_overhead_us"] == 40.0
    assert abs(free["layer_overhead_us"] - 40.0) > 10.0
    assert held["step_overhead_us"] != free["step_overhead_us"]
