"""The performance model: catalog arrays + configurations in, estimates out (vectorized)."""

from fleet.perf.arrays import CatalogArrays, build_arrays
from fleet.perf.configs import make_configs
from fleet.perf.model import estimate
from fleet.perf.types import Bound, Configs, Estimate, Problem

__all__ = [
    "Bound",
    "CatalogArrays",
    "Configs",
    "Estimate",
    "Problem",
    "build_arrays",
    "estimate",
    "make_configs",
]
