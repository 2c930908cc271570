"""``/health``: the database answers and how busy the solver pool is (503 when it does not)."""

from __future__ import annotations

import logging
import sqlite3

from litestar import Controller, Response, get
from litestar.di import NamedDependency
from litestar.status_codes import HTTP_200_OK, HTTP_503_SERVICE_UNAVAILABLE

from api.services import PlanService
from api.store import PlanStatus
from api.wire import Health

log = logging.getLogger("farebox.api")


class HealthController(Controller):
    path = "/health"
    tags = ("health",)

    @get("/", operation_id="health", summary="Liveness and queue depth")
    async def health(self, plans: NamedDependency[PlanService]) -> Response[Health]:
        settings = plans.settings
        try:
            counts = await plans.counts()
        except sqlite3.Error as err:
            log.error("health: database error: %s", err)
            return Response(
                Health(
                    status=f"database error: {err}",
                    workers=settings.workers,
                    running=0,
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
