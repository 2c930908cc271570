"""What exists: accelerators, systems and models, loaded from data files with sources."""

from fleet.catalog.load import Catalog, CatalogError, UnknownIdError, load_catalog
from fleet.catalog.schema import (
    BYTES_PER_ELEMENT,
    FOUR_BIT,
    MOE_ROUTINGS,
    MOE_SKEW_EP,
    PRECISIONS,
    Accelerator,
    Model,
    Precision,
    System,
)

__all__ = [
    "BYTES_PER_ELEMENT",
    "FOUR_BIT",
    "MOE_ROUTINGS",
    "MOE_SKEW_EP",
    "PRECISIONS",
    "Accelerator",
    "Catalog",
    "CatalogError",
    "Model",
    "Precision",
    "System",
    "UnknownIdError",
    "load_catalog",
]
