"""Fixtures of the fleet tests: the measured serving runs, loaded once per session."""

from __future__ import annotations

import pytest

from fleet.catalog.load import Catalog
from fleet.perf.measured import MeasuredRuns, load_measured
from tests.fleet.measured_runs import MEASURED_CSV


@pytest.fixture(scope="session")
def runs(catalog: Catalog) -> MeasuredRuns:
    return load_measured(catalog, MEASURED_CSV)
