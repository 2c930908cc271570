"""``/v1/catalog``: the accelerators, systems, models and serving engines farebox knows, with their
sources.

The catalog does not change while the server runs, so each list is encoded to JSON once when the
app is built (``EncodedCatalog``) and served as bytes; the OpenAPI schema still describes the
catalog types.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from litestar import Controller, Response, get
from litestar.di import NamedDependency

from fleet.catalog.engines import Engine
from fleet.catalog.load import Catalog
from fleet.catalog.schema import Accelerator, Model, System

JSON = "application/json"


@dataclass(frozen=True, slots=True)
class EncodedCatalog:
    accelerators: bytes
    systems: bytes
    models: bytes
    engines: bytes

    @classmethod
    def of(cls, catalog: Catalog) -> EncodedCatalog:
        return cls(
            accelerators=msgspec.json.encode(tuple(catalog.accelerators.values())),
            systems=msgspec.json.encode(tuple(catalog.systems.values())),
            models=msgspec.json.encode(tuple(catalog.models.values())),
            engines=msgspec.json.encode(tuple(catalog.engines.values())),
        )


class CatalogController(Controller):
    path = "/v1/catalog"
    tags = ("catalog",)

    @get("/accelerators", operation_id="listAccelerators", summary="Accelerators")
    async def accelerators(
        self, catalog_json: NamedDependency[EncodedCatalog]
    ) -> Response[tuple[Accelerator, ...]]:
        return Response(catalog_json.accelerators, media_type=JSON)  # type: ignore[arg-type]

    @get("/systems", operation_id="listSystems", summary="Systems (nodes, racks, wafers)")
    async def systems(
        self, catalog_json: NamedDependency[EncodedCatalog]
    ) -> Response[tuple[System, ...]]:
        return Response(catalog_json.systems, media_type=JSON)  # type: ignore[arg-type]

    @get("/models", operation_id="listModels", summary="Models")
    async def models(
        self, catalog_json: NamedDependency[EncodedCatalog]
    ) -> Response[tuple[Model, ...]]:
        return Response(catalog_json.models, media_type=JSON)  # type: ignore[arg-type]

    @get(
        "/engines",
        operation_id="listEngines",
        summary='Serving engines and their multipliers on the pooled factors (besides "any")',
    )
    async def engines(
        self, catalog_json: NamedDependency[EncodedCatalog]
    ) -> Response[tuple[Engine, ...]]:
        return Response(catalog_json.engines, media_type=JSON)  # type: ignore[arg-type]
