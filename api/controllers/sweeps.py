"""``/v1/sweeps``: submit a what-if sweep, follow it, fetch its tables and charts, cancel it.

``POST /v1/sweeps`` takes a scenario and the sweep's settings (``api.sweep_worker.SweepRequest``:
the ``farebox sweep`` flags as fields) and checks all of it, every grid point included, before
queueing, on the same bounded compute threads as a plan's checks (the limits the grid's shape
decides come before any point is built): a bad request is a 422 naming the field, a full queue a
503 (decided before the body is read). The answer is 202 with the sweep's id and ``Location``;
``?wait=S`` waits up to S seconds for it to finish (201 when it did). ``GET /v1/sweeps/{id}`` has
its status, progress and, once done, its tables as row objects; ``GET
/v1/sweeps/{id}/files/{name}`` one of its files (``points.parquet``, ``prices.parquet``,
``pools.parquet``, ``samples.parquet``, ``margin.png``, ``prices.png``, ``pools.png``,
``samples.png``). Running the sweep is ``api.sweeps``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, Operation, Reference, RequestBody
from litestar.params import FromPath, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_202_ACCEPTED

from api.compute import Compute
from api.errors import ErrorBody, ParameterError
from api.sweeps import FINISHED, SweepResource, SweepService, sweep_href

MEDIA = {"parquet": "application/vnd.apache.parquet", "png": "image/png"}
NO_SWEEP = {404: ResponseSpec(ErrorBody, description="No sweep by that id")}


@dataclass
class _SweepBody(Operation):
    """The body is decoded by the sweep's own strict decoder; documented as ``SweepRequest``."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description="A scenario and what to sweep: the fields of SweepRequest.",
            content={
                "application/json": OpenAPIMediaType(
                    schema=Reference("#/components/schemas/SweepRequest")
                )
            },
        )


class SweepController(Controller):
    path = "/v1/sweeps"
    tags = ("sweeps",)

    @post(
        "/",
        operation_id="createSweep",
        operation_class=_SweepBody,
        status_code=HTTP_202_ACCEPTED,
        summary="Submit a what-if sweep (a grid of scenarios, Monte Carlo over demand error)",
        responses={
            201: ResponseSpec(SweepResource, description="Finished within ?wait="),
            413: ResponseSpec(ErrorBody, description="Body over the server's limit"),
            422: ResponseSpec(ErrorBody, description="The sweep cannot run as asked"),
            503: ResponseSpec(ErrorBody, description="Queue full; see Retry-After"),
        },
    )
    async def create(
        self,
        request: Request[Any, Any, Any],
        sweeps: NamedDependency[SweepService],
        compute: NamedDependency[Compute],
        wait: Annotated[
            float | None,
            QueryParameter(
                ge=0,
                description="Seconds to wait for the sweep; 201 when done.",
                schema_extra={"minimum": 0},
            ),
        ] = None,
    ) -> Response[SweepResource]:
        limit = sweeps.settings.max_wait_s
        if wait is not None and wait > limit:
            raise ParameterError("wait", f"must be <= {limit:g} s")
        sweeps.check_queue()  # before the body is read
        resource = await sweeps.submit(await request.body(), compute)
        status = HTTP_202_ACCEPTED
        if wait:
            resource = await sweeps.wait(resource.id, wait)
            if resource.status in FINISHED:
                status = HTTP_201_CREATED
        return Response(resource, status_code=status, headers={"Location": sweep_href(resource.id)})

    @get(
        "/{sweep_id:str}",
        operation_id="getSweep",
        summary="A sweep's status; its tables once done",
        responses=NO_SWEEP,
    )
    async def read(
        self, sweeps: NamedDependency[SweepService], sweep_id: FromPath[str]
    ) -> SweepResource:
        return sweeps.resource(sweep_id)

    @get(
        "/{sweep_id:str}/files/{name:str}",
        operation_id="getSweepFile",
        summary="A done sweep's table (Parquet) or chart (PNG)",
        media_type="application/octet-stream",
        responses={404: ResponseSpec(ErrorBody, description="No such sweep or file, or not done")},
    )
    async def file(
        self, sweeps: NamedDependency[SweepService], sweep_id: FromPath[str], name: FromPath[str]
    ) -> Response[bytes]:
        data = sweeps.file(sweep_id, name)
        media = MEDIA.get(name.rpartition(".")[2], "application/octet-stream")
        return Response(
            data,
            media_type=media,
            headers={"Content-Disposition": f'attachment; filename="{sweep_id}-{name}"'},
        )

    @delete(
        "/{sweep_id:str}",
        operation_id="cancelOrDeleteSweep",
        summary="Cancel a queued or running sweep (200); forget a finished one (204)",
        status_code=HTTP_200_OK,
        responses={204: ResponseSpec(None, description="Deleted"), **NO_SWEEP},
    )
    async def remove(
        self, sweeps: NamedDependency[SweepService], sweep_id: FromPath[str]
    ) -> Response[SweepResource | None]:
        resource = sweeps.cancel(sweep_id)
        if resource is None:
            return Response(None, status_code=204)
        return Response(resource, status_code=HTTP_200_OK)
