"""``/v1/catalog``: the accelerators, systems and models farebox knows, with their sources."""

from __future__ import annotations

from litestar import Controller, get
from litestar.di import NamedDependency

from fleet.catalog.load import Catalog
from fleet.catalog.schema import Accelerator, Model, System


class CatalogController(Controller):
    path = "/v1/catalog"
    tags = ("catalog",)

    @get("/accelerators", operation_id="listAccelerators", summary="Accelerators")
    async def accelerators(self, catalog: NamedDependency[Catalog]) -> tuple[Accelerator, ...]:
        return tuple(catalog.accelerators.values())

    @get("/systems", operation_id="listSystems", summary="Systems (nodes, racks, wafers)")
    async def systems(self, catalog: NamedDependency[Catalog]) -> tuple[System, ...]:
        return tuple(catalog.systems.values())

    @get("/models", operation_id="listModels", summary="Models")
    async def models(self, catalog: NamedDependency[Catalog]) -> tuple[Model, ...]:
        return tuple(catalog.models.values())
