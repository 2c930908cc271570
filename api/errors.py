"""The one place where errors become HTTP responses.

Every error answer has the same JSON body, ``ErrorBody``: the status code, a short machine-readable
``error`` kind, a one-line ``detail`` and, when the problem is in one field, that ``field`` (a JSON
path into the request body such as ``$.fleet.pools[0].count``, or the name of a query or path
parameter).

=====================================  ======  ==================================================
raised                                 status  when
=====================================  ======  ==================================================
``fleet.errors.InputError`` (and       422     the body decodes but cannot be planned as asked:
subclasses: unknown ids, catalog                wrong types, unknown fields, negative counts,
errors, ...)                                    unknown accelerator/model ids, too-long horizon,
                                                an SLO no configuration can meet
``litestar`` validation of a query     400     malformed parameters (``?wait=soon``)
or path parameter
``BadBody``: a JSON body that is not   400     invalid UTF-8, nested too deeply, malformed,
JSON, or was cut short                          the client left before sending all of it
``NotAuthorizedException``             401     ``FAREBOX_API_TOKEN`` is set and the bearer token
(``api.security``)                              is missing or wrong
``NotFound``                           404     no plan, report table or route by that name
``IdempotencyConflict``                409     an ``Idempotency-Key`` reused with another body
(``api.services``)
``UnsupportedMediaType``               415     a POST as text/plain or a form (a cross-site
(``api.security``)                              "simple request"); bodies are JSON
``RequestEntityTooLarge``              413     body over ``Settings.max_body_bytes``
``QueueFull``                          503     the plan queue is full; ``Retry-After`` says when
                                                to try again
``StoreFull`` (``api.store``)          507     the store holds ``Settings.max_store_bytes``;
                                                deleting finished plans makes room
``StoreError``, ``sqlite3.Error``      503     the SQLite file is corrupt, unwritable or busy
                                                (``/health`` says the same); logged
anything else                          500     a bug; logged with its traceback
=====================================  ======  ==================================================
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Mapping
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import (
    HTTP_400_BAD_REQUEST,
    HTTP_404_NOT_FOUND,
    HTTP_422_UNPROCESSABLE_ENTITY,
    HTTP_500_INTERNAL_SERVER_ERROR,
    HTTP_503_SERVICE_UNAVAILABLE,
    HTTP_507_INSUFFICIENT_STORAGE,
)
from litestar.types import ExceptionHandlersMap
from msgspec import Struct

from api.store_errors import StoreError, StoreFull, store_error
from fleet.errors import InputError

log = logging.getLogger("farebox.api")

_UNKNOWN_FIELD = re.compile(r"^Object contains unknown field `([^`]*)`$")
_PATH_FIRST = re.compile(r"^(?P<field>\$[^\s:]*): (?P<detail>.+)$", re.DOTALL)


class ErrorBody(Struct, frozen=True, kw_only=True, omit_defaults=True):
    status_code: int
    error: str
    """``invalid_input``, ``bad_request``, ``not_found``, ``too_large``, ``queue_full``,
    ``store``, ``internal``, or the lower-cased HTTP reason for other framework errors."""
    detail: str
    field: str | None = None
    plan_id: str | None = None
    """Set when the error is about a plan that exists (e.g. it failed on its input)."""


class ParameterError(InputError):
    """A bad query or path parameter (the field is its name, not a body path)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class BadBody(Exception):
    """A request body that cannot be read or is not JSON (``api.request``); field ``$``."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"$: {problem}")
        self.detail = f"$: {problem}"


class NotFound(Exception):
    def __init__(self, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


class QueueFull(Exception):
    def __init__(self, queue_max: int, retry_after_s: int, what: str = "plan") -> None:
        super().__init__(f"the {what} queue is full ({queue_max} waiting); retry later")
        self.retry_after_s = retry_after_s


def input_error_body(err: InputError, plan_id: str | None = None) -> ErrorBody:
    """Split ``$.path: problem`` into field and detail."""
    message = str(err)
    match = _PATH_FIRST.match(message)
    return ErrorBody(
        status_code=HTTP_422_UNPROCESSABLE_ENTITY,
        error="invalid_input",
        detail=message,
        field=getattr(err, "field", None) or (match.group("field") if match else None),
        plan_id=plan_id,
    )


def _respond(body: ErrorBody, headers: Mapping[str, str] | None = None) -> Response[ErrorBody]:
    return Response(body, status_code=body.status_code, headers=dict(headers or {}))


def _on_input_error(_: Request[Any, Any, Any], err: InputError) -> Response[ErrorBody]:
    return _respond(input_error_body(err))


def _on_bad_body(_: Request[Any, Any, Any], err: BadBody) -> Response[ErrorBody]:
    return _respond(
        ErrorBody(
            status_code=HTTP_400_BAD_REQUEST, error="bad_request", detail=err.detail, field="$"
        )
    )


def _on_not_found(_: Request[Any, Any, Any], err: NotFound) -> Response[ErrorBody]:
    return _respond(
        ErrorBody(
            status_code=HTTP_404_NOT_FOUND, error="not_found", detail=err.detail, field=err.field
        )
    )


def _on_queue_full(_: Request[Any, Any, Any], err: QueueFull) -> Response[ErrorBody]:
    body = ErrorBody(status_code=HTTP_503_SERVICE_UNAVAILABLE, error="queue_full", detail=str(err))
    return _respond(body, {"Retry-After": str(err.retry_after_s)})


def _on_store_full(_: Request[Any, Any, Any], err: StoreFull) -> Response[ErrorBody]:
    return _respond(
        ErrorBody(status_code=HTTP_507_INSUFFICIENT_STORAGE, error="store_full", detail=str(err))
    )


def _on_store_error(
    request: Request[Any, Any, Any], err: StoreError | sqlite3.Error
) -> Response[ErrorBody]:
    if not isinstance(err, StoreError):
        err = store_error(request.app.state["settings"].db_path, err)
    log.error("%s %s: %s", request.method, request.url.path, err)
    body = ErrorBody(status_code=HTTP_503_SERVICE_UNAVAILABLE, error="store", detail=err.status)
    return _respond(body)


def _on_validation(_: Request[Any, Any, Any], err: ValidationException) -> Response[ErrorBody]:
    """Litestar's own validation (query/path parameters, typed JSON bodies): name the parameter
    or the body path (``$.configs[0].tp``) and the problem."""
    extra = err.extra if isinstance(err.extra, list) else []
    first = extra[0] if extra and isinstance(extra[0], dict) else {}
    field = first.get("key")
    message = str(first.get("message") or err.detail)
    if field is not None and first.get("source") == "body":
        if field == "data" and message == "'data'":  # Litestar's KeyError: no body at all
            message = "empty body; expected a JSON object"
        field = "$" if field == "data" else f"$.{field}"
        if unknown := _UNKNOWN_FIELD.match(message):
            field, message = f"{field}.{unknown.group(1)}", "unknown field"
    detail = f"{field}: {message}" if field else message
    return _respond(
        ErrorBody(status_code=HTTP_400_BAD_REQUEST, error="bad_request", detail=detail, field=field)
    )


def _on_http(request: Request[Any, Any, Any], err: HTTPException) -> Response[ErrorBody]:
    kinds = {
        401: "unauthorized",
        404: "not_found",
        405: "method_not_allowed",
        409: "conflict",
        413: "too_large",
        415: "unsupported_media_type",
    }
    detail = err.detail
    if err.status_code >= 500:
        log.error("%s %s: %d %s", request.method, request.url.path, err.status_code, detail)
    if err.status_code == 413:
        limit = request.route_handler.resolve_request_max_body_size()
        detail = f"request body over the limit of {limit} bytes"
    body = ErrorBody(
        status_code=err.status_code,
        error=kinds.get(err.status_code, "http_error"),
        detail=str(detail),
    )
    return _respond(body, err.headers)


def _on_bug(request: Request[Any, Any, Any], err: Exception) -> Response[ErrorBody]:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=err)
    return _respond(
        ErrorBody(
            status_code=HTTP_500_INTERNAL_SERVER_ERROR,
            error="internal",
            detail=f"internal error ({type(err).__name__}); see the server log",
        )
    )


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    InputError: _on_input_error,
    BadBody: _on_bad_body,
    NotFound: _on_not_found,
    QueueFull: _on_queue_full,
    StoreFull: _on_store_full,
    StoreError: _on_store_error,
    sqlite3.Error: _on_store_error,
    ValidationException: _on_validation,
    HTTPException: _on_http,
    Exception: _on_bug,
}
