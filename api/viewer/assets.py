"""Browser assets served by the app from the wheels that ship them (no CDN, works offline).

- Plotly's bundle, ``plotly/package_data/plotly.min.js`` of the ``plotly`` wheel (MIT): the plan
  viewer's charts. Only the file is used; the Python package is never imported.
- Swagger UI's dist files, ``swagger_ui/static/`` of the ``swagger-ui-py`` wheel (Apache-2.0,
  Swagger UI 5.x, which renders OpenAPI 3.1): the OpenAPI UI at ``/schema``.

Files are located with ``importlib.util.find_spec`` (the packages are not imported) and answered
with a day of caching; ``GET /assets/{name}`` serves only the names in ``ASSETS``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from litestar import Controller, get
from litestar.params import FromPath
from litestar.response import File

from api.errors import NotFound

PREFIX = "/assets"


@dataclass(frozen=True, slots=True)
class Asset:
    package: str
    path: str
    """Inside the package's folder."""
    media_type: str


ASSETS = {
    "plotly.min.js": Asset("plotly", "package_data/plotly.min.js", "text/javascript"),
    "swagger-ui-bundle.js": Asset("swagger_ui", "static/swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui-standalone-preset.js": Asset(
        "swagger_ui", "static/swagger-ui-standalone-preset.js", "text/javascript"
    ),
    "swagger-ui.css": Asset("swagger_ui", "static/swagger-ui.css", "text/css"),
}


def url(name: str) -> str:
    """Where the app serves asset ``name``."""
    assert name in ASSETS, name
    return f"{PREFIX}/{name}"


@cache
def asset_file(name: str) -> Path:
    """The installed file of asset ``name``; LookupError when its package is not installed."""
    asset = ASSETS[name]
    spec = importlib.util.find_spec(asset.package)
    if spec is None or not spec.submodule_search_locations:
        raise LookupError(f"package {asset.package!r} is not installed (a farebox dependency)")
    path = Path(next(iter(spec.submodule_search_locations))) / asset.path
    if not path.is_file():
        raise LookupError(f"{path}: missing from the installed {asset.package!r} package")
    return path


class AssetController(Controller):
    path = PREFIX
    include_in_schema = False

    @get("/{name:str}", sync_to_thread=False)
    def asset(self, name: FromPath[str]) -> File:
        if name not in ASSETS:
            raise NotFound(f"no asset {name!r}", field="name")
        return File(
            asset_file(name),
            media_type=ASSETS[name].media_type,
            content_disposition_type="inline",
            headers={"Cache-Control": "public, max-age=86400"},
        )
