"""The app's ``Request`` class: a body that cannot be read or decoded is the client's fault.

Litestar decodes a typed JSON body (``JSONBody[EstimateRequest]``) in two steps: the bytes into
plain Python values, then those into the Struct. The first step lets three client mistakes escape
as exceptions that would otherwise be 500s: invalid UTF-8 (``UnicodeDecodeError``), nesting
deeper than msgspec's decoder allows (``RecursionError``: ``[[[[...`` 10k deep), and a client that
disconnects before sending the ``Content-Length`` bytes it announced (Litestar raises an
``InternalServerException``). Each becomes ``BadBody``, a 400 naming ``$``.

Only the body decode is wrapped, so a ``RecursionError`` anywhere else is still a bug (500). The
plan body (``POST /v1/plans``) is read raw and decoded by the planner's own decoder, which maps
the same mistakes to its 422 ``InputError``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from litestar import Request
from litestar.exceptions import InternalServerException, SerializationException
from litestar.types import ReceiveMessage

from api.errors import BadBody


class FareboxRequest(Request[Any, Any, Any]):
    async def json(self) -> Any:
        try:
            return await super().json()
        except UnicodeDecodeError as err:
            raise BadBody(f"not valid JSON: invalid UTF-8 at byte {err.start}") from None
        except RecursionError:
            raise BadBody("not valid JSON: nested too deeply for the decoder") from None
        except SerializationException as err:
            raise BadBody(f"not valid JSON: {err.detail}") from None

    async def stream(self) -> AsyncGenerator[bytes, None]:
        receive = self.receive
        disconnected = False

        async def watch() -> ReceiveMessage:
            nonlocal disconnected
            message = await receive()
            disconnected = disconnected or message["type"] == "http.disconnect"
            return message

        self.receive = watch
        try:
            async for chunk in super().stream():
                yield chunk
        except InternalServerException:
            if disconnected:
                raise BadBody(
                    "the client disconnected before sending the whole body (Content-Length)"
                ) from None
            raise
        finally:
            self.receive = receive
