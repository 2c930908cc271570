"""The OpenAPI document says exactly what the decoders accept, and ``OPTIONS`` tells the truth.

Litestar 2.25 derives component schemas from msgspec Structs lossily: a constrained variadic
tuple (``Annotated[tuple[ConfigSpec, ...], Meta(min_length=1)]``) becomes ``items: {oneOf:
[ConfigSpec, {}]}``, which accepts anything, and constraints on items (``tuple[PositiveInt, ...]``)
are dropped. msgspec generates the JSON Schema of its own decoders, so the render plugins of
``render_plugins`` serve the document with every Struct component replaced by msgspec's (the
names are the same: the class names). The schema fuzzer of tests/api/test_schemathesis.py then
checks the API against a document that is true.

Litestar also answers ``OPTIONS`` on a path served by several handlers with only the methods of
the first one registered (``Allow: OPTIONS, POST`` on ``/v1/plans``, which also has ``GET``):
``allow_every_method`` rewrites that header from the app's route map.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from litestar import Request
from litestar.datastructures import MutableScopeHeaders
from litestar.openapi.plugins import (
    JsonRenderPlugin,
    OpenAPIRenderPlugin,
    SwaggerRenderPlugin,
)
from litestar.types import Message, Scope

from api.viewer import assets


def render_plugins(types: Sequence[type[msgspec.Struct]]) -> list[OpenAPIRenderPlugin]:
    """Swagger UI at ``/schema`` and JSON at ``/schema/openapi.json``, each rendering the
    document with msgspec's schema of ``types`` (and of every Struct they contain) in place of
    Litestar's components of the same name.

    Swagger UI's files come from ``/assets`` (the ``swagger-ui-py`` wheel, ``api.viewer.assets``),
    not from a CDN, so the UI works offline; no favicon is fetched. (Redoc was dropped: no wheel
    ships its bundle without a web framework attached, and from a CDN it was blank offline.)"""
    _, components = msgspec.json.schema_components(
        types, ref_template="#/components/schemas/{name}"
    )

    class Swagger(SwaggerRenderPlugin):
        def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
            return super().render(request, _with(openapi_schema, components))

    class Json(JsonRenderPlugin):
        def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
            return super().render(request, _with(openapi_schema, components))

    swagger = Swagger(
        path="/",
        js_url=assets.url("swagger-ui-bundle.js"),
        css_url=assets.url("swagger-ui.css"),
        standalone_preset_js_url=assets.url("swagger-ui-standalone-preset.js"),
        favicon="<link rel='icon' href='data:,'>",
    )
    return [swagger, Json()]


def _with(document: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    schemas = {**document.get("components", {}).get("schemas", {}), **components}
    return {**document, "components": {**document.get("components", {}), "schemas": schemas}}


async def allow_every_method(message: Message, scope: Scope) -> None:
    """A ``before_send`` hook: the ``Allow`` of Litestar's automatic OPTIONS answer lists every
    method of the path."""
    if message["type"] != "http.response.start" or scope.get("method") != "OPTIONS":
        return
    routes = scope["litestar_app"].route_handler_method_map
    methods = {m for path in scope["route_handler"].paths for m in routes.get(path, ())}
    if methods:
        MutableScopeHeaders.from_message(message)["allow"] = ", ".join(sorted(methods))
