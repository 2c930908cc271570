"""Plotly figure specs (plain JSON-able dicts: ``{"data": [...], "layout": {...}}``) of a plan
view, drawn in the browser by the ``plotly.min.js`` the app serves (``api.viewer.assets``).

The same four pictures as the report's PNG charts (``planner.report.charts``), interactive:

- ``utilization``: pool x period heatmap of systems used / available (grey = none available);
- ``tiers``: revenue per hour and served output tokens/s by tier, stacked, with the demand the
  chosen prices bring as a line;
- ``frontier-N``: one per curve of ``planner.report.operating``: the search grid, its Pareto
  frontier and the configurations the plan chose, per tier (log-log);
- ``pools``: system-hours used and idle per pool, with what they cost.

Colours and money formatting are the PNG charts' (``tier_colors``, ``money``).
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any

import numpy as np

from api.viewer.view import View
from planner.report.charts import money, tier_colors
from planner.report.operating import Curve

Figure = dict[str, Any]
MAX_GRID_POINTS = 4000
"""Grey search-grid points drawn per frontier panel; a larger grid is thinned evenly (the
frontier and the chosen points are always drawn whole)."""
_FONT = {"family": "system-ui, sans-serif", "size": 12}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 14}},
        "font": _FONT,
        "margin": {"l": 70, "r": 20, "t": 48, "b": 48},
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "hovermode": "closest",
        **extra,
    }


def _round(values: np.ndarray | list[float], digits: int = 4) -> list[float | None]:
    """Floats to ``digits`` significant digits (None, JSON null, where not finite): smaller
    pages, same picture."""
    out: list[float | None] = []
    for v in np.asarray(values, dtype=np.float64).tolist():
        out.append(float(f"{v:.{digits}g}") if np.isfinite(v) else None)
    return out


def period_starts(view: View) -> list[str]:
    assert view.plan is not None
    t0 = datetime.combine(view.start, time())
    step = timedelta(hours=view.plan.period_hours)
    return [(t0 + p * step).isoformat() for p in range(view.plan.periods)]


def tiers_of(view: View) -> list[str]:
    assert view.plan is not None
    return list(dict.fromkeys(p.tier for p in view.plan.prices))


def utilization(view: View) -> Figure:
    plan = view.plan
    assert plan is not None
    pools = [p.id for p in view.scenario.fleet.pools]
    row = {p: i for i, p in enumerate(pools)}
    z: list[list[float | None]] = [[None] * plan.periods for _ in pools]
    used: list[list[int]] = [[0] * plan.periods for _ in pools]
    available: list[list[int]] = [[0] * plan.periods for _ in pools]
    for u in plan.pool_usage:
        i = row[u.pool]
        used[i][u.period], available[i][u.period] = u.systems_used, u.systems_available
        if u.systems_available > 0:
            z[i][u.period] = round(u.systems_used / u.systems_available, 4)
    custom = [
        [[used[i][p], available[i][p]] for p in range(plan.periods)] for i in range(len(pools))
    ]
    trace = {
        "type": "heatmap",
        "x": period_starts(view),
        "y": pools,
        "z": z,
        "customdata": custom,
        "zmin": 0,
        "zmax": 1,
        "colorscale": "YlGnBu",
        "reversescale": True,
        "hoverongaps": False,
        "colorbar": {"title": {"text": "used / available"}, "tickformat": ".0%"},
        "hovertemplate": "%{y}<br>%{x}<br>%{z:.0%} in use "
        "(%{customdata[0]} of %{customdata[1]} systems)<extra></extra>",
    }
    return {
        "data": [trace],
        "layout": _layout(
            "Share of available systems in use, by pool and period (grey: none available)",
            height=160 + 26 * len(pools),
            plot_bgcolor="#D0D0D0",  # shows through the gaps (None) of the heatmap
            yaxis={"autorange": "reversed", "automargin": True},
            xaxis={"type": "date"},
        ),
    }


def tiers(view: View) -> Figure:
    plan = view.plan
    assert plan is not None
    names = tiers_of(view)
    colors = tier_colors(names)
    x = period_starts(view)
    rev = {t: np.zeros(plan.periods) for t in names}
    served = {t: np.zeros(plan.periods) for t in names}
    demand = np.zeros(plan.periods)
    for f in plan.flows:
        if f.tier in rev:
            rev[f.tier][f.period] += f.revenue_usd / plan.period_hours
            served[f.tier][f.period] += f.served_tokens_per_s
        demand[f.period] += f.demand_tokens_per_s
    data: list[dict[str, Any]] = []
    for t in names:
        total = float(rev[t].sum() * plan.period_hours)
        common = {
            "type": "scatter",
            "x": x,
            "mode": "lines",
            "line": {"shape": "hv", "width": 0.5, "color": colors[t]},
            "fillcolor": colors[t],
            "legendgroup": t,
        }
        data.append(
            {
                **common,
                "y": _round(rev[t]),
                "stackgroup": "revenue",
                "name": f"{t} ({money(total)})",
                "hovertemplate": f"{t}: $%{{y:,.0f}}/h<extra></extra>",
            }
        )
        data.append(
            {
                **common,
                "y": _round(served[t]),
                "stackgroup": "served",
                "yaxis": "y2",
                "showlegend": False,
                "name": f"served: {t}",
                "hovertemplate": f"{t}: %{{y:,.0f}} output tokens/s served<extra></extra>",
            }
        )
    data.append(
        {
            "type": "scatter",
            "x": x,
            "y": _round(demand),
            "yaxis": "y2",
            "mode": "lines",
            "line": {"shape": "hv", "color": "black", "width": 1.2},
            "name": "demand at the chosen prices",
            "hovertemplate": "demand: %{y:,.0f} output tokens/s<extra></extra>",
        }
    )
    return {
        "data": data,
        "layout": _layout(
            "Revenue per hour and served output tokens/s by tier (legend: total revenue)",
            height=520,
            xaxis={"type": "date", "anchor": "y2"},
            yaxis={"domain": [0.55, 1.0], "title": {"text": "USD per hour"}, "tickprefix": "$"},
            yaxis2={"domain": [0.0, 0.45], "title": {"text": "output tokens/s"}},
            legend={"orientation": "h", "y": -0.08, "x": 0, "yanchor": "top"},
            hovermode="x unified",
        ),
    }


def _thin(n: int) -> np.ndarray:
    if n <= MAX_GRID_POINTS:
        return np.arange(n)
    return np.linspace(0, n - 1, MAX_GRID_POINTS).round().astype(np.int64)


def frontier(curve: Curve, tiers: list[str]) -> Figure:
    colors = tier_colors(tiers)
    keep = _thin(len(curve.grid_user))
    data: list[dict[str, Any]] = [
        {
            "type": "scattergl" if len(keep) > 1500 else "scatter",
            "mode": "markers",
            "x": _round(curve.grid_user[keep]),
            "y": _round(curve.grid_device[keep]),
            "marker": {"size": 4, "color": "#BBBBBB"},
            "name": "search grid (fits)",
            "hoverinfo": "skip",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "x": _round(curve.frontier_user),
            "y": _round(curve.frontier_device),
            "line": {"color": "#333333", "width": 1.6},
            "name": "Pareto frontier",
            "hovertemplate": "%{x:,.0f} tok/s per user, %{y:,.0f} tok/s per device"
            "<extra>frontier</extra>",
        },
    ]
    for tier in dict.fromkeys(p.tier for p in curve.points):
        points = [p for p in curve.points if p.tier == tier]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": _round([p.tokens_per_s_per_user for p in points]),
                "y": _round([p.tokens_per_s_per_device for p in points]),
                "text": [f"{p.label} ({p.served_share:.0%} of served)" for p in points],
                "marker": {
                    "size": 13,
                    "color": colors.get(tier, "#000000"),
                    "line": {"color": "black", "width": 1},
                },
                "name": f"chosen for {tier}",
                "hovertemplate": "%{text}<br>%{x:,.0f} tok/s per user, "
                f"%{{y:,.0f}} tok/s per device<extra>{tier}</extra>",
            }
        )
    shapes = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": floor,
            "x1": floor,
            "y0": 0,
            "y1": 1,
            "line": {"color": colors.get(tier, "#000000"), "dash": "dash", "width": 1},
        }
        for tier, floor in curve.tier_floors
    ]
    return {
        "data": data,
        "layout": _layout(
            f"{curve.model} on {curve.system} (isl {curve.isl}, osl {curve.osl}): "
            "throughput vs interactivity",
            height=420,
            xaxis={"type": "log", "title": {"text": "output tokens/s per user"}},
            yaxis={"type": "log", "dtick": 1, "title": {"text": "output tokens/s per device"}},
            shapes=shapes,
            annotations=[
                {
                    "x": np.log10(floor),
                    "y": 1,
                    "xref": "x",
                    "yref": "paper",
                    "text": f"{tier} floor {floor:g}",
                    "showarrow": False,
                    "textangle": -90,
                    "xanchor": "right",
                    "yanchor": "top",
                    "font": {"size": 10, "color": colors.get(tier, "#000000")},
                }
                for tier, floor in curve.tier_floors
            ],
        ),
    }


def pools(view: View) -> Figure:
    names = [p.pool for p in view.pools]
    used = [p.used_system_hours for p in view.pools]
    idle = [p.idle_system_hours for p in view.pools]
    used_text = [f"{money(p.cost_usd)} paid" for p in view.pools]
    idle_text = [f"{money(p.idle_cost_usd)} if owned" for p in view.pools]
    bar = {"type": "bar", "orientation": "h", "y": names, "textposition": "inside"}
    return {
        "data": [
            {
                **bar,
                "x": _round(used),
                "name": "used system-hours (the plan's cost)",
                "marker": {"color": "#4C72B0"},
                "text": used_text,
                "hovertemplate": "%{y}: %{x:,.0f} system-hours used, %{text}<extra></extra>",
            },
            {
                **bar,
                "x": _round(idle),
                "name": "idle system-hours (their cost at the pool's price)",
                "marker": {"color": "#CCCCCC"},
                "text": idle_text,
                "hovertemplate": "%{y}: %{x:,.0f} system-hours idle, %{text}<extra></extra>",
            },
        ],
        "layout": _layout(
            "Pool usage over the horizon: system-hours used and idle",
            barmode="stack",
            height=140 + 30 * len(names),
            yaxis={"autorange": "reversed", "automargin": True},
            xaxis={"title": {"text": "system-hours"}},
            legend={"orientation": "h", "y": -0.25, "x": 0, "traceorder": "normal"},
        ),
    }


def figures(view: View) -> dict[str, Figure]:
    """Every figure of a view with something to chart, by element id."""
    if not view.charted:
        return {}
    names = tiers_of(view)
    out = {"utilization": utilization(view), "tiers": tiers(view), "pools": pools(view)}
    for i, curve in enumerate(view.curves):
        out[f"frontier-{i}"] = frontier(curve, names)
    return out
