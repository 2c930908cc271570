"""``/v1/estimate`` and ``/v1/frontier``: the performance model (``fleet.perf``) over HTTP.

Bodies are decoded by Litestar into the frozen Structs of ``api.perf_wire`` (unknown fields and
out-of-range numbers are 400s naming the field); ids are checked against the catalog with their
path (422). The vectorized model runs in a worker thread, off the event loop: a request is capped
at ``MAX_ROWS`` configurations (estimate) or one model x system grid of at most
``MAX_FRONTIER_CONFIGS`` configurations (frontier), counted before any is evaluated: milliseconds
to about a second of numpy.
"""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK

from api.compute import Compute
from api.errors import ErrorBody
from api.perf_wire import (
    EstimateRequest,
    EstimateResponse,
    FrontierRequest,
    FrontierResponse,
    check_engine,
    check_frontier_size,
    check_model,
    engine_notes,
    resolve_system,
    rows,
    to_configs,
)
from fleet.catalog.load import Catalog
from fleet.perf.arrays import CatalogArrays
from fleet.perf.engines import engine_arrays
from fleet.perf.frontier import frontier
from fleet.perf.model import estimate

UNKNOWN_IDS = {
    413: ResponseSpec(ErrorBody, description="Body over the server's limit"),
    422: ResponseSpec(ErrorBody, description="An id not in the catalog, or no such layout"),
}


class PerfController(Controller):
    path = "/v1"
    tags = ("performance model",)

    @post(
        "/estimate",
        operation_id="estimate",
        status_code=HTTP_200_OK,
        summary="Estimate configurations with the performance model",
        responses=UNKNOWN_IDS,
    )
    async def estimate(
        self,
        catalog: NamedDependency[Catalog],
        arrays: NamedDependency[CatalogArrays],
        compute: NamedDependency[Compute],
        data: JSONBody[EstimateRequest],
    ) -> EstimateResponse:
        def run() -> EstimateResponse:
            check_engine(catalog, data.engine)
            configs = to_configs(catalog, data.configs)
            est = estimate(engine_arrays(catalog, arrays, data.engine), configs)
            return EstimateResponse(
                rows=rows(catalog, configs, est, arrays),
                engine=data.engine,
                engine_notes=engine_notes(catalog, data.engine, configs),
            )

        return await compute.run(run)

    @post(
        "/frontier",
        operation_id="frontier",
        status_code=HTTP_200_OK,
        summary="Throughput-vs-interactivity Pareto frontier of one model on one system",
        responses=UNKNOWN_IDS,
    )
    async def frontier(
        self,
        catalog: NamedDependency[Catalog],
        arrays: NamedDependency[CatalogArrays],
        compute: NamedDependency[Compute],
        data: JSONBody[FrontierRequest],
    ) -> FrontierResponse:
        def run() -> FrontierResponse:
            check_model(catalog, data.model, "$")
            check_engine(catalog, data.engine)
            system = resolve_system(catalog, data.system, data.accelerator, "$")
            check_frontier_size(catalog, data, system)
            front = frontier(
                catalog,
                engine_arrays(catalog, arrays, data.engine),
                data.model,
                system,
                isl=data.isl,
                osl=data.osl,
                precisions=data.precisions,
                batches=data.batches,
                spec=tuple((o.draft_tokens, o.acceptance) for o in data.speculative),
                disaggregated=data.disaggregated,
            )
            return FrontierResponse(
                model=data.model,
                system=system,
                rows=rows(catalog, front.configs, front.estimate, arrays),
                engine=data.engine,
                engine_notes=engine_notes(catalog, data.engine, front.configs),
                layouts=front.layouts,
            )

        return await compute.run(run)
