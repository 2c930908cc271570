"""``GET /plans/{id}``: the plan viewer page; ``GET /v1/plans/{id}/charts/{name}.png``: the
report's charts (``planner.report.charts``, the same PNGs ``farebox report`` writes).

An unknown plan id is a 404 page (HTML) on the viewer and the API's 404 body on the PNG route.
Views are built off the event loop (``Compute``) and cached per done plan (``ViewCache``); the
PNGs of a view are drawn once, all together by ``write_charts``, under a lock (pyplot's state is
global to the process), and kept with the view.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from litestar import Controller, Response, get
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath
from litestar.status_codes import HTTP_404_NOT_FOUND

from api.errors import ErrorBody, NotFound
from api.services import PlanService
from api.store_records import PlanStatus
from api.viewer.figures import figures
from api.viewer.page import CHARTS_PNG, not_found_page, plan_page
from api.viewer.view import View, ViewCache, build_view

HTML = "text/html"
PNG = "image/png"
_DRAWING = threading.Lock()


async def load_view(plans: PlanService, views: ViewCache, plan_id: str) -> View:
    """The view of plan ``plan_id`` (NotFound when there is none)."""
    record = await plans.get(plan_id)
    if record.status == PlanStatus.DONE and (cached := views.get(plan_id)) is not None:
        return cached
    record = await plans.get(plan_id, with_plan=True)
    request = await plans.request(plan_id)
    view = await plans.compute.run(build_view, record, request, plans.catalog, plans.arrays)
    views.put(view)
    return view


def draw_pngs(view: View) -> dict[str, bytes]:
    """The view's report charts as PNG bytes by name (drawn once per view)."""
    from planner.report.charts import write_charts

    with _DRAWING:
        if not view.png and view.plan is not None:
            with tempfile.TemporaryDirectory(prefix="farebox-charts-") as tmp:
                curves = list(view.curves) or None
                for path in write_charts(view.plan, view.frames, Path(tmp), curves=curves):
                    view.png[path.stem] = path.read_bytes()
        return dict(view.png)


class ViewerController(Controller):
    path = "/"

    @get("/plans/{plan_id:str}", include_in_schema=False, media_type=HTML)
    async def page(
        self,
        plans: NamedDependency[PlanService],
        views: NamedDependency[ViewCache],
        plan_id: FromPath[str],
    ) -> Response[str]:
        try:
            view = await load_view(plans, views, plan_id)
        except NotFound as err:
            return Response(
                not_found_page(plan_id, err.detail), status_code=HTTP_404_NOT_FOUND, media_type=HTML
            )
        figs = await plans.compute.run(figures, view)
        return Response(plan_page(view, figs), media_type=HTML)

    @get(
        "/v1/plans/{plan_id:str}/charts/{file_name:str}",
        operation_id="getPlanChart",
        summary="A chart of a done plan's report, as PNG (tiers.png, utilization.png, "
        "frontier.png)",
        tags=("plans",),
        media_type=PNG,
        responses={
            404: ResponseSpec(ErrorBody, description="No such plan or chart, or not done yet")
        },
    )
    async def chart(
        self,
        plans: NamedDependency[PlanService],
        views: NamedDependency[ViewCache],
        plan_id: FromPath[str],
        file_name: FromPath[str],
    ) -> Response[bytes]:
        name, dot, suffix = file_name.rpartition(".")
        if not dot or suffix != "png" or name not in CHARTS_PNG:
            raise NotFound(
                f"charts are {', '.join(n + '.png' for n in CHARTS_PNG)}, not {file_name!r}",
                field="file_name",
            )
        view = await load_view(plans, views, plan_id)
        if view.plan is None:
            raise NotFound(
                f"plan {plan_id!r} is {view.record.status}; its charts exist once it is done",
                field="plan_id",
            )
        pngs = await plans.compute.run(draw_pngs, view)
        if name not in pngs:
            why = (
                "it has no assignments (nothing to chart)"
                if not view.charted
                else "its frontier could not be placed on the search grid"
            )
            raise NotFound(f"plan {plan_id!r} has no {name}.png: {why}", field="file_name")
        return Response(
            pngs[name],
            media_type=PNG,
            headers={"Content-Disposition": f'inline; filename="{plan_id}-{name}.png"'},
        )
