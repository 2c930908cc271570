"""The Litestar application: ``create_app(settings) -> Litestar``.

The factory builds every service once (settings from the environment when not given, the catalog,
the SQLite store, the job runner) and hands them to the controllers by dependency injection. The
database is opened and the job runner (forkserver + dispatcher) is started by the app's lifespan,
i.e. inside the process that serves requests — granian imports this factory in its own worker
process(es) — and never at import time.

Routes: ``/v1/plans`` (api.controllers.plans), ``/v1/sweeps`` (api.controllers.sweeps),
``/v1/catalog/*``, ``/v1/estimate`` and ``/v1/frontier`` (api.controllers.perf), ``/health``; the
plan viewer ``/plans/{id}`` and the charts as PNG (api.viewer), browser assets at ``/assets``
(served from the wheels that ship them); OpenAPI at ``/schema`` (Swagger UI there, JSON at
``/schema/openapi.json``). ``api.security.guard`` checks every request before its body is read:
the bearer token when one is set, and no CORS-simple POSTs.
Its components are msgspec's own schemas of the wire types (``api.openapi``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme

from api.compute import Compute
from api.controllers.catalog import CatalogController, EncodedCatalog
from api.controllers.health import HealthController
from api.controllers.perf import PerfController
from api.controllers.plans import PlanController
from api.controllers.sweeps import SweepController
from api.errors import EXCEPTION_HANDLERS, ErrorBody
from api.jobs import JobRunner
from api.openapi import allow_every_method, render_plugins
from api.perf_wire import EstimateRequest, EstimateResponse, FrontierRequest, FrontierResponse
from api.request import FareboxRequest
from api.security import guard
from api.services import PlanService
from api.settings import Settings
from api.store import Store
from api.sweep_worker import SweepRequest
from api.sweeps import SweepResource, SweepService
from api.viewer.assets import AssetController
from api.viewer.controller import ViewerController
from api.viewer.view import ViewCache
from api.wire import Health, PlanPage, PlanResource
from fleet.catalog.engines import Engine
from fleet.catalog.load import load_catalog
from fleet.catalog.schema import Accelerator, Model, System
from fleet.perf.arrays import build_arrays
from planner.scenario.schema import Scenario

API_VERSION = "1.0.0"
WIRE_TYPES = (
    Scenario,
    PlanResource,
    PlanPage,
    SweepRequest,
    SweepResource,
    Health,
    ErrorBody,
    EstimateRequest,
    EstimateResponse,
    FrontierRequest,
    FrontierResponse,
    Accelerator,
    System,
    Model,
    Engine,
)
"""Every Struct on the wire; the OpenAPI document describes them with msgspec's own schemas."""
log = logging.getLogger("farebox.api")


async def _watch_parent(parent_pid: int, every_s: float = 1.0) -> None:
    """granian's workers outlive a SIGKILLed main process and would keep serving (and solving)
    unsupervised; when the parent is gone, stop like on SIGTERM: running plans go back to the
    queue and the next ``farebox serve`` runs them."""
    while os.getppid() == parent_pid:
        await asyncio.sleep(every_s)
    log.error("parent process %d is gone; shutting down", parent_pid)
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.sleep(30)
    os._exit(1)  # the graceful stop hung


def _bearer_security(settings: Settings) -> dict[str, Any]:
    """OpenAPI: declare the bearer token when the server requires one (``api.security``)."""
    if settings.api_token is None:
        return {}
    return {
        "security": [{"bearer": []}],
        "components": Components(
            security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
        ),
    }


def create_app(settings: Settings | None = None) -> Litestar:
    settings = settings if settings is not None else Settings.from_env(os.environ)
    catalog = load_catalog(settings.catalog_dir)
    store = Store(settings.db_path)
    runner = JobRunner(store, settings)
    arrays = build_arrays(catalog)
    catalog_json = EncodedCatalog.of(catalog)
    compute = Compute(settings.compute_threads)
    plans = PlanService(store, runner, catalog, arrays, settings, compute)
    sweeps = SweepService(settings, catalog)
    views = ViewCache()

    @asynccontextmanager
    async def lifespan(_: Litestar) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(store.initialize)
        await runner.start()
        await sweeps.start()
        watchdog = (
            asyncio.create_task(_watch_parent(settings.parent_pid)) if settings.parent_pid else None
        )
        try:
            yield
        finally:
            if watchdog is not None:
                watchdog.cancel()
            await sweeps.stop()
            await runner.stop()

    return Litestar(
        route_handlers=[
            PlanController,
            SweepController,
            CatalogController,
            PerfController,
            HealthController,
            ViewerController,
            AssetController,
        ],
        dependencies={
            "plans": Provide(lambda: plans, use_cache=True, sync_to_thread=False),
            "sweeps": Provide(lambda: sweeps, use_cache=True, sync_to_thread=False),
            "catalog": Provide(lambda: catalog, use_cache=True, sync_to_thread=False),
            "arrays": Provide(lambda: arrays, use_cache=True, sync_to_thread=False),
            "catalog_json": Provide(lambda: catalog_json, use_cache=True, sync_to_thread=False),
            "compute": Provide(lambda: compute, use_cache=True, sync_to_thread=False),
            "views": Provide(lambda: views, use_cache=True, sync_to_thread=False),
        },
        exception_handlers=EXCEPTION_HANDLERS,
        guards=[guard],
        request_max_body_size=settings.max_body_bytes,
        request_class=FareboxRequest,
        before_send=[allow_every_method],
        lifespan=[lifespan],
        state=State({"settings": settings}),
        openapi_config=OpenAPIConfig(
            title="farebox",
            version=API_VERSION,
            description=(
                "Plan an LLM inference fleet and price its service tiers: submit a scenario, "
                "follow the plan, download its Parquet report; query the catalogs and the "
                "performance model."
            ),
            path="/schema",
            render_plugins=render_plugins(WIRE_TYPES),
            **_bearer_security(settings),
        ),
    )
