"""``/health``: the store serves (read and write, on a fresh connection) and how busy the solver
pool is. 503 when the store is corrupt, unwritable or busy: ``status`` says which and names the
file (``store unwritable: /data/farebox.sqlite: attempt to write a readonly database ...``)."""

from __future__ import annotations

import logging

from litestar import Controller, Response, get
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.status_codes import HTTP_200_OK, HTTP_503_SERVICE_UNAVAILABLE

from api.services import PlanService
from api.store_errors import StoreError
from api.store_records import PlanStatus
from api.wire import Health

log = logging.getLogger("farebox.api")


class HealthController(Controller):
    path = "/health"
    tags = ("health",)

    @get(
        "/",
        operation_id="health",
        summary="Liveness, store status and queue depth",
        responses={503: ResponseSpec(Health, description="The store is corrupt or unwritable")},
    )
    async def health(self, plans: NamedDependency[PlanService]) -> Response[Health]:
        settings = plans.settings
        try:
            counts = await plans.check_store()
        except StoreError as err:
            log.error("health: %s", err)
            return Response(
                Health(
                    status=err.status,
                    workers=settings.workers,
                    running=plans.runner.running,
                    queued=0,
                    queue_max=settings.queue_max,
                ),
                status_code=HTTP_503_SERVICE_UNAVAILABLE,
            )
        return Response(
            Health(
                status="ok",
                workers=settings.workers,
                running=plans.runner.running,
                queued=counts[PlanStatus.QUEUED],
                queue_max=settings.queue_max,
            ),
            status_code=HTTP_200_OK,
        )
