"""Fixtures shared by every test package: the catalog and its performance-model arrays, loaded
once per session (both are immutable)."""

from __future__ import annotations

import pytest

from fleet.catalog.load import Catalog, load_catalog
from fleet.perf.arrays import CatalogArrays, build_arrays


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="session")
def arrays(catalog: Catalog) -> CatalogArrays:
    return build_arrays(catalog)
