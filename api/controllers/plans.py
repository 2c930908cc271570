"""``/v1/plans``: submit a scenario, follow its plan, fetch its report, cancel or delete it.

``POST /v1/plans`` validates the whole scenario (schema, references, catalog ids, limits) before
anything is stored: a bad one is a 422 naming the field and nothing is queued. A good one is
committed to the database and answered 202 with its id and ``Location``; with ``?wait=S`` the
answer waits up to S seconds and is 201 with the plan when the solve finished in time (422 when it
failed on its input, e.g. an SLO that no configuration meets). Solving happens in worker
processes (``api.jobs``); when the queue is full the answer is 503 with ``Retry-After``, decided
before the body is read. An ``Idempotency-Key`` header makes a retried POST safe: the same key and
the same body answer 200 with the plan the first request created (even when the queue is full);
the same key with another body is a 409. Keys are stored with their plan and survive restarts.

The body is JSON, or the scenario TOML file itself sent as ``Content-Type: application/toml``:
both go through the planner's one decoder and checks, so errors are the same (a TOML syntax error
is a 422 naming the line and column); the request is stored as JSON either way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, Operation, Reference, RequestBody
from litestar.params import FromPath, HeaderParameter, QueryParameter
from litestar.status_codes import (
    HTTP_200_OK,
    HTTP_201_CREATED,
    HTTP_202_ACCEPTED,
    HTTP_204_NO_CONTENT,
    HTTP_422_UNPROCESSABLE_ENTITY,
)

from api.errors import ErrorBody, NotFound, input_error_body
from api.services import TOML, PlanService, check_idempotency_key, scenario_format
from api.store_records import SEQ_MAX, FailureKind, PlanStatus
from api.wire import PlanPage, PlanResource, encode_plan_resource, plan_href, plan_info
from fleet.errors import InputError
from planner.scenario.schema import Scenario

JSON = "application/json"
PARQUET = "application/vnd.apache.parquet"


@dataclass
class _ScenarioBody(Operation):
    """The request body is decoded by the planner's own strict decoder (the same one that reads
    TOML files), not by the framework; this documents it as ``Scenario`` in the OpenAPI schema."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description="A scenario: the schema of a scenario TOML file, as JSON, or the TOML "
            "file itself with Content-Type: application/toml. Dates (meta.start_date) are "
            "YYYY-MM-DD strings in JSON, TOML local dates in TOML.",
            content={
                JSON: OpenAPIMediaType(schema=Reference("#/components/schemas/Scenario")),
                TOML: OpenAPIMediaType(schema=Reference("#/components/schemas/Scenario")),
            },
        )


NO_PLAN = {404: ResponseSpec(ErrorBody, description="No plan by that id")}


class PlanController(Controller):
    path = "/v1/plans"
    tags = ("plans",)

    @post(
        "/",
        operation_id="createPlan",
        operation_class=_ScenarioBody,
        status_code=HTTP_202_ACCEPTED,
        summary="Submit a scenario for planning",
        responses={
            200: ResponseSpec(PlanResource, description="Idempotent replay: the key's plan"),
            201: ResponseSpec(PlanResource, description="Finished within ?wait="),
            409: ResponseSpec(ErrorBody, description="Idempotency-Key used with another body"),
            413: ResponseSpec(ErrorBody, description="Body over the server's limit"),
            422: ResponseSpec(ErrorBody, description="The scenario cannot be planned as asked"),
            503: ResponseSpec(ErrorBody, description="Queue full; see Retry-After"),
            507: ResponseSpec(
                ErrorBody, description="The store is at its size limit; delete plans to make room"
            ),
        },
    )
    async def create(
        self,
        request: Request[Any, Any, Any],
        plans: NamedDependency[PlanService],
        idempotency_key: Annotated[
            str | None,
            HeaderParameter(
                name="Idempotency-Key",
                description="Repeat a POST safely: the same key and body answer the plan the "
                "first one created (200); the same key with another body is a 409.",
            ),
        ] = None,
        wait: Annotated[
            float | None,
            QueryParameter(
                ge=0,
                description="Seconds to wait for the plan; 201 when done.",
                schema_extra={"minimum": 0},  # Litestar drops a float's bound when optional
            ),
        ] = None,
        time_limit_s: Annotated[
            float | None,
            QueryParameter(
                gt=0,
                description="Solver time limit; default: the scenario's.",
                schema_extra={"exclusiveMinimum": 0},
            ),
        ] = None,
    ) -> Response[PlanResource]:
        plans.check_wait(wait)
        key = check_idempotency_key(idempotency_key)
        if key is None:  # a replay is answered even when the queue is full
            await plans.check_queue()  # before the body is read, let alone decoded
        body, fmt = await request.body(), scenario_format(request.headers.get("content-type"))
        record, replayed = await plans.submit(body, time_limit_s, key, fmt)
        status = HTTP_200_OK if replayed else HTTP_202_ACCEPTED
        headers = {"Location": plan_href(record.id)}
        if replayed:
            headers["Idempotent-Replayed"] = "true"
        if wait:
            record = await plans.wait(record.id, wait)
            if record.status == PlanStatus.FAILED and record.failure_kind == FailureKind.INPUT:
                error = input_error_body(InputError(record.reason or ""), plan_id=record.id)
                return Response(
                    error,  # type: ignore[arg-type]
                    status_code=HTTP_422_UNPROCESSABLE_ENTITY,
                    headers=headers,
                )
            finished = (PlanStatus.DONE, PlanStatus.FAILED, PlanStatus.CANCELLED)
            if record.status in finished and not replayed:
                status = HTTP_201_CREATED
        return await _resource(plans, record.id, status, headers)

    @get("/", operation_id="listPlans", summary="Plans, newest first")
    async def list_plans(
        self,
        plans: NamedDependency[PlanService],
        limit: Annotated[int, QueryParameter(ge=1, le=200)] = 50,
        cursor: Annotated[
            int | None,
            QueryParameter(ge=1, le=SEQ_MAX, description="next_cursor of the previous page"),
        ] = None,
        status: Annotated[PlanStatus | None, QueryParameter()] = None,
    ) -> PlanPage:
        records, next_cursor = await plans.page(limit, cursor, status)
        return PlanPage(items=tuple(plan_info(r) for r in records), next_cursor=next_cursor)

    @get(
        "/{plan_id:str}",
        operation_id="getPlan",
        summary="A plan's status; the plan once done",
        responses=NO_PLAN,
    )
    async def read(
        self, plans: NamedDependency[PlanService], plan_id: FromPath[str]
    ) -> Response[PlanResource]:
        return await _resource(plans, plan_id, HTTP_200_OK)

    @get(
        "/{plan_id:str}/scenario",
        operation_id="getPlanScenario",
        summary="The scenario a plan was asked with, as stored",
        responses=NO_PLAN,
    )
    async def scenario(
        self, plans: NamedDependency[PlanService], plan_id: FromPath[str]
    ) -> Response[Scenario]:
        return Response(await plans.request(plan_id), media_type=JSON)  # type: ignore[arg-type]

    @get(
        "/{plan_id:str}/report/{file_name:str}",
        operation_id="getPlanReportTable",
        summary="One table of a done plan's report, as Parquet ({table}.parquet)",
        media_type=PARQUET,
        responses={
            404: ResponseSpec(ErrorBody, description="No such plan, or table, or not done yet")
        },
    )
    async def report(
        self, plans: NamedDependency[PlanService], plan_id: FromPath[str], file_name: FromPath[str]
    ) -> Response[bytes]:
        table, dot, suffix = file_name.rpartition(".")
        if not dot or suffix != "parquet":
            raise NotFound(
                f"report files are named {{table}}.parquet, not {file_name!r}", field="file_name"
            )
        data = await plans.report(plan_id, table)
        return Response(
            data,
            media_type=PARQUET,
            headers={"Content-Disposition": f'attachment; filename="{plan_id}-{file_name}"'},
        )

    @delete(
        "/{plan_id:str}",
        operation_id="cancelOrDeletePlan",
        summary="Cancel a queued or running plan (200); delete a finished one (204)",
        status_code=HTTP_200_OK,
        responses={204: ResponseSpec(None, description="Deleted"), **NO_PLAN},
    )
    async def remove(
        self, plans: NamedDependency[PlanService], plan_id: FromPath[str]
    ) -> Response[PlanResource | None]:
        record = await plans.cancel_or_delete(plan_id)
        if record is None:
            return Response(None, status_code=HTTP_204_NO_CONTENT)
        return await _resource(plans, plan_id, HTTP_200_OK)  # type: ignore[return-value]


async def _resource(
    plans: PlanService, plan_id: str, status: int, headers: dict[str, str] | None = None
) -> Response[PlanResource]:
    """The plan resource as JSON, with the stored plan spliced in without re-encoding."""
    record, tables = await plans.get_with_reports(plan_id)
    return Response(
        encode_plan_resource(record, tables),  # type: ignore[arg-type]
        status_code=status,
        media_type=JSON,
        headers=headers or {},
    )
