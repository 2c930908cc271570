"""Who may call the API: an optional bearer token, and no cross-site "simple" POSTs.

``guard`` runs on every route before the body is read:

- When ``Settings.api_token`` is set, every ``/v1`` route and the plan viewer (``/plans/{id}``)
  need ``Authorization: Bearer <token>`` (compared in constant time); ``/health``, the OpenAPI
  schema and ``/assets`` stay open. 401 otherwise, with ``WWW-Authenticate: Bearer``.
- A POST whose ``Content-Type`` is one a browser may send cross-site without asking first
  (``text/plain``, ``application/x-www-form-urlencoded``, ``multipart/form-data``: a CORS
  "simple request") is refused with 415: every body of this API is JSON, so such a request can
  only be a mistake or a forged cross-site submission. A JSON POST from another origin needs a
  CORS preflight, which this server never grants.
"""

from __future__ import annotations

import hmac
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import HTTPException, NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler
from litestar.status_codes import HTTP_415_UNSUPPORTED_MEDIA_TYPE

from api.settings import Settings

PROTECTED_PREFIXES = ("/v1", "/plans/")
"""The API and the plan viewer's pages (a browser cannot send the token: with one set, the
viewer answers 401)."""
SIMPLE_CONTENT_TYPES = frozenset(
    {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"}
)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class UnsupportedMediaType(HTTPException):
    status_code = HTTP_415_UNSUPPORTED_MEDIA_TYPE


def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    settings: Settings = connection.app.state["settings"]
    if not connection.url.path.startswith(PROTECTED_PREFIXES):
        return
    if settings.api_token is not None:
        check_token(connection.headers.get("authorization"), settings.api_token)
    if connection.scope.get("method") in _BODY_METHODS:
        media_type = connection.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media_type in SIMPLE_CONTENT_TYPES:
            raise UnsupportedMediaType(
                detail=f"request bodies are JSON: send Content-Type: application/json, "
                f"not {media_type}"
            )


def check_token(header: str | None, token: str) -> None:
    """Raise 401 unless ``header`` is ``Bearer <token>`` (constant-time comparison)."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise NotAuthorizedException(
            detail="this server needs Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise NotAuthorizedException(
            detail="invalid bearer token",
            headers={"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
