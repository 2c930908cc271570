"""The plan viewer: an HTML page per plan with interactive charts, the charts as PNG, and the
browser assets (Plotly, Swagger UI) served from the installed wheels so that nothing is fetched
from a CDN.

- ``api.viewer.assets``: the asset table and ``GET /assets/{name}``;
- ``api.viewer.view``: a done plan, its scenario and what the charts need, computed once per plan;
- ``api.viewer.figures``: Plotly figure specs (plain JSON) of a view;
- ``api.viewer.page``: the HTML page;
- ``api.viewer.controller``: ``GET /plans/{id}`` (HTML) and
  ``GET /v1/plans/{id}/charts/{name}.png``.
"""
