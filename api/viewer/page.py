"""The plan viewer's HTML: one self-contained page per plan (styles inline, figures as JSON in
the page, ``plotly.min.js`` from ``/assets``), and the 404 page.

Order, top to bottom: warnings (and a failed plan's reason or an infeasible plan's reasons),
the summary (status, gap, money, idle cost), the price card, revenue and served by tier, the
utilization heatmap, the frontier with the chosen points, pool usage. A plan still queued or
running shows its status and progress and reloads itself every ``REFRESH_S`` seconds.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from api.store_records import PlanStatus
from api.viewer import assets
from api.viewer.figures import Figure
from api.viewer.view import View
from api.wire import plan_href
from planner.report.charts import money

REFRESH_S = 5
CHARTS_PNG = ("tiers", "utilization", "frontier")
_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#f6f7f9}
main{max-width:1280px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:17px;margin:28px 0 8px}
.sub{color:#666;font-size:13px}.sub a{color:#36c}
.warn{background:#fff4d6;border:1px solid #e6c25c;border-radius:6px;padding:8px 14px;margin:12px 0}
.warn.bad{background:#fde2e1;border-color:#d9534f}
.warn ul{margin:4px 0;padding-left:20px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{background:white;border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:120px}
.card b{display:block;font-size:18px}.card span{color:#666;font-size:12px}
table{border-collapse:collapse;background:white;font-size:13px}
th,td{border:1px solid #ddd;padding:4px 10px;text-align:right}
th:first-child,td:first-child,th.l,td.l{text-align:left}th{background:#f0f2f5}
.chart{background:white;border:1px solid #ddd;border-radius:6px;margin:8px 0;min-height:200px}
"""


def _doc(title: str, body: str, *, head: str = "") -> str:
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<link rel='icon' href='data:,'><title>{escape(title)}</title>"
        f"<style>{_STYLE}</style>{head}</head><body><main>{body}</main></body></html>"
    )


def not_found_page(plan_id: str, detail: str) -> str:
    return _doc(
        "plan not found - farebox",
        f"<h1>No plan {escape(plan_id)!s}</h1><p class='sub'>{escape(detail)}. Plans are "
        "created with <code>POST /v1/plans</code>; <a href='/v1/plans'>list them</a>.</p>",
    )


def _card(label: str, value: str, elem_id: str) -> str:
    return (
        f"<div class='card' id='{elem_id}'><span>{escape(label)}</span><b>{escape(value)}</b></div>"
    )


def _warnings(view: View) -> str:
    parts = []
    record, plan = view.record, view.plan
    if record.status in (PlanStatus.FAILED, PlanStatus.CANCELLED):
        parts.append(
            f"<div class='warn bad' id='failure'><b>{escape(record.status.value)}</b>"
            f"{': ' + escape(record.reason) if record.reason else ''}</div>"
        )
    if plan is not None and plan.reasons:
        items = "".join(f"<li>{escape(r)}</li>" for r in plan.reasons)
        parts.append(f"<div class='warn bad' id='reasons'><b>Why</b><ul>{items}</ul></div>")
    if view.notes:
        items = "".join(f"<li>{escape(n)}</li>" for n in view.notes)
        parts.append(f"<div class='warn' id='viewer-notes'><ul>{items}</ul></div>")
    if plan is not None and plan.warnings:
        items = "".join(f"<li>{escape(w)}</li>" for w in plan.warnings)
        parts.append(
            f"<div class='warn' id='warnings'><b>{len(plan.warnings)} warning"
            f"{'s' if len(plan.warnings) != 1 else ''}</b><ul>{items}</ul></div>"
        )
    return "".join(parts)


def _summary(view: View) -> str:
    plan = view.plan
    if plan is None:
        return ""
    idle = sum(p.idle_cost_usd for p in view.pools)
    cards = [
        _card("status", plan.status.value, "status"),
        _card("optimality gap", f"{plan.gap:.2%}", "gap"),
        _card("revenue", money(plan.revenue_usd), "revenue"),
        _card("cost (systems used)", money(plan.cost_usd), "cost"),
        _card("margin", f"{money(plan.margin_usd)} ({plan.margin_fraction:.1%})", "margin"),
        _card("penalty", money(plan.penalty_usd), "penalty"),
        _card("idle systems' cost (not in cost)", money(idle), "idle-cost"),
        _card("horizon", f"{plan.periods} x {plan.period_hours:g} h", "horizon"),
        _card("build + solve", f"{plan.build_s:.1f} s + {plan.solve_s:.1f} s", "time"),
    ]
    return f"<div class='cards'>{''.join(cards)}</div><p class='sub'>{escape(plan.message)}</p>"


def _price_card(view: View) -> str:
    plan = view.plan
    if plan is None or not plan.prices:
        return ""
    head = (
        "<tr><th>family</th><th class='l'>tier</th><th class='l'>served by</th>"
        "<th>multiplier</th><th>reference</th><th>$/M input</th><th>$/M output</th>"
        "<th class='l'>precisions</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{escape(p.family)}</td><td class='l'>{escape(p.tier)}</td>"
        f"<td class='l'>{escape(p.variant)}</td><td>{p.multiplier:g}x</td>"
        f"<td>{p.reference_multiplier:g}x</td><td>${p.usd_per_m_input_tokens:,.3f}</td>"
        f"<td>${p.usd_per_m_output_tokens:,.3f}</td>"
        f"<td class='l'>{escape(', '.join(p.precisions))}</td></tr>"
        for p in plan.prices
    )
    return f"<h2>Price card</h2><table id='price-card'>{head}{rows}</table>"


def _pool_table(view: View) -> str:
    head = (
        "<tr><th>pool</th><th class='l'>system</th><th>$/system-hour</th><th>used sys-h</th>"
        "<th>idle sys-h</th><th>cost (used)</th><th>idle cost</th><th>revenue</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{escape(p.pool)}</td><td class='l'>{escape(p.system)}</td>"
        f"<td>${p.usd_per_system_hour:,.2f}</td><td>{p.used_system_hours:,.0f}</td>"
        f"<td>{p.idle_system_hours:,.0f}</td><td>{money(p.cost_usd)}</td>"
        f"<td>{money(p.idle_cost_usd)}</td><td>{money(p.revenue_usd)}</td></tr>"
        for p in view.pools
    )
    return f"<table id='pool-table'>{head}{rows}</table>"


def _chart(elem_id: str) -> str:
    return f"<div class='chart' id='{elem_id}'></div>"


def _charts(view: View, figures: dict[str, Figure]) -> str:
    if not figures:
        return ""
    frontier = [k for k in figures if k.startswith("frontier-")]
    png = " · ".join(
        f"<a href='{plan_href(view.record.id)}/charts/{name}.png'>{name}.png</a>"
        for name in CHARTS_PNG
    )
    return "".join(
        [
            f"<h2>Revenue and served by tier</h2><p class='sub'>As PNG: {png}</p>",
            _chart("tiers"),
            "<h2>Utilization</h2>",
            _chart("utilization"),
            "<h2>Frontier and the chosen operating points</h2>",
            "".join(_chart(k) for k in frontier),
            "<h2>Pool usage</h2>",
            _chart("pools"),
            _pool_table(view),
        ]
    )


def _figures_script(figures: dict[str, Figure]) -> str:
    if not figures:
        return ""
    data = json.dumps(figures, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return (
        f"<script src='{assets.url('plotly.min.js')}'></script>"
        f"<script type='application/json' id='figures'>{data}</script>"
        "<script>(function(){const figs=JSON.parse(document.getElementById('figures')"
        ".textContent);for(const [id,f] of Object.entries(figs)){Plotly.newPlot(id,f.data,"
        "f.layout,{responsive:true,displaylogo:false});}document.body.dataset.charts="
        "Object.keys(figs).length;})();</script>"
    )


def plan_page(view: View, figures: dict[str, Figure]) -> str:
    record = view.record
    href = plan_href(record.id)
    status = record.status.value
    links = " · ".join(
        [
            f"<a href='{href}'>JSON</a>",
            f"<a href='{href}/scenario'>scenario</a>",
            "<a href='/schema'>API</a>",
        ]
    )
    body = [
        f"<h1>{escape(view.scenario.meta.name)}</h1>",
        f"<p class='sub'>plan <code>{escape(record.id)}</code> · <b id='plan-status'>"
        f"{escape(status)}</b> · {links}</p>",
        _warnings(view),
    ]
    head = ""
    if record.status in (PlanStatus.QUEUED, PlanStatus.RUNNING):
        head = f"<meta http-equiv='refresh' content='{REFRESH_S}'>"
        progress = _progress(record.progress)
        body.append(f"<p>The plan is {escape(status)}{progress}; this page reloads itself.</p>")
    body += [_summary(view), _price_card(view), _charts(view, figures), _figures_script(figures)]
    return _doc(f"{view.scenario.meta.name} - farebox plan", "".join(body), head=head)


def _progress(raw: str | None) -> str:
    if not raw:
        return ""
    try:
        progress: dict[str, Any] = json.loads(raw)
    except ValueError:
        return ""
    return escape(f" ({progress.get('elapsed_s', 0):.0f} s: {progress.get('message', '')})")
