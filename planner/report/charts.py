"""Charts of the weekly capacity report, as PNG files beside the Parquet (matplotlib, Agg).

- ``utilization.png``: heatmap of pool x hour, the share of each pool's available systems in use;
  hours with no available system (an outage) are hatched grey.
- ``tiers.png``: revenue per hour and served output tokens/s by tier, stacked, with the demand
  the chosen prices bring as a line (the gap between line and area is demand left unserved).
- ``frontier.png``: the throughput-vs-interactivity frontier (output tokens/s per device against
  tokens/s per user) of the (model, system) pairs that carry the most traffic, every configuration
  of the search grid in grey, with the operating points the plan chose marked per tier.

Charts read the report's frames (``planner.report.frames``), so they show exactly what the
Parquet holds; the frontier needs the performance model's curves (``planner.report.operating``).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from planner.plan.schema import Plan
from planner.report.operating import Curve
from planner.solve.tables import SECONDS_PER_HOUR

TIER_COLORS = ("#4C72B0", "#55A868", "#DD8452", "#C44E52", "#8172B3", "#937860")
"""Tiers in the order they first appear in the plan's prices; batch/standard/fast in most files."""
DPI = 150


def _style(fig: Figure) -> None:
    for ax in fig.axes:
        ax.spines[["top", "right"]].set_visible(False)


def tier_colors(tiers: list[str]) -> dict[str, str]:
    return {t: TIER_COLORS[i % len(TIER_COLORS)] for i, t in enumerate(tiers)}


def _day_ticks(ax: plt.Axes, period_start: list, hours: float) -> None:
    """Ticks at each day's midnight ('Mon 05'); every 3 hours ('06:00') on horizons of <= 2 days."""
    ticks, labels = [], []
    short = len(period_start) * hours <= 48
    for i, ts in enumerate(period_start):
        if ts.hour == 0 and ts.minute == 0:
            ticks.append(i * hours)
            labels.append(ts.strftime("%a %d"))
        elif short and ts.hour % 3 == 0 and ts.minute == 0:
            ticks.append(i * hours)
            labels.append(ts.strftime("%H:%M"))
    step = max(1, len(ticks) // 14)
    ax.set_xticks(ticks[::step], labels[::step])


def money(value: float) -> str:
    """$812, $45.3k, $1.27M."""
    if abs(value) >= 1e6:
        return f"${value / 1e6:,.2f}M"
    if abs(value) >= 1e4:
        return f"${value / 1e3:,.1f}k"
    return f"${value:,.0f}"


def _rate_unit(peak: float) -> tuple[float, str]:
    """Scale and name for tokens/s axes."""
    for scale, name in ((1e6, "millions"), (1e3, "thousands")):
        if peak >= scale:
            return scale, name
    return 1.0, ""


def utilization_heatmap(
    usage: pl.DataFrame, period_start: list, period_hours: float, scenario: str, path: Path
) -> Path:
    """``usage``: one row per (pool, period) with systems_available and systems_used."""
    pools = usage.get_column("pool").unique(maintain_order=True).to_list()
    periods = int(usage.select(pl.col("period").max()).item()) + 1
    grid = np.full((len(pools), periods), np.nan)
    row_of = {p: i for i, p in enumerate(pools)}
    for pool, period, available, used in usage.select(
        "pool", "period", "systems_available", "systems_used"
    ).iter_rows():
        if available > 0:
            grid[row_of[pool], period] = used / available
    mean = np.nanmean(np.where(np.isnan(grid), 0.0, grid), axis=1)
    height = 1.6 + 0.32 * len(pools)
    fig, ax = plt.subplots(figsize=(13, height), layout="constrained")
    extent = (0, periods * period_hours, len(pools), 0)
    ax.add_patch(
        plt.Rectangle(
            (0, 0),
            periods * period_hours,
            len(pools),
            facecolor="#DDDDDD",
            hatch="///",
            edgecolor="#AAAAAA",
            linewidth=0,
            zorder=0,
        )
    )
    cmap = plt.get_cmap("YlGnBu")
    image = ax.imshow(
        np.ma.masked_invalid(grid),
        aspect="auto",
        cmap=cmap,
        vmin=0,
        vmax=1,
        interpolation="nearest",
        extent=extent,
        zorder=1,
    )
    ax.set_yticks(
        np.arange(len(pools)) + 0.5, [f"{p}  ({m:.0%})" for p, m in zip(pools, mean, strict=True)]
    )
    _day_ticks(ax, period_start, period_hours)
    ax.set_xlabel("hour of the horizon (ticks at midnight)")
    ax.set_title(
        f"{scenario}: share of available systems in use, by pool and hour "
        "(mean in brackets; hatched = none available)",
        loc="left",
        fontsize=11,
    )
    bar = fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
    bar.set_label("systems used / available")
    bar.ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    _style(fig)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def tiers_over_time(demand: pl.DataFrame, tiers: list[str], scenario: str, path: Path) -> Path:
    """``demand``: the report's ``demand`` frame (per period, family, tier)."""
    by = (
        demand.group_by("period", "tier")
        .agg(
            pl.col("period_start").first(),
            pl.col("revenue_usd").sum(),
            pl.col("served_output_tokens").sum(),
            pl.col("demand_output_tokens").sum(),
        )
        .sort("period")
    )
    periods = int(demand.select(pl.col("period").max()).item()) + 1
    span = pl.col("period_start").max() - pl.col("period_start").min()
    hours = (
        float(
            demand.select(span.dt.total_seconds()).item() / SECONDS_PER_HOUR / max(periods - 1, 1)
        )
        if periods > 1
        else 1.0
    )
    x = np.arange(periods + 1) * hours  # period edges: the last period drawn to its end
    colors = tier_colors(tiers)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(13, 6.5), sharex=True, layout="constrained")
    rev, served, wanted = [], [], []
    for tier in tiers:
        rows = by.filter(pl.col("tier") == tier)
        series = np.zeros((3, periods))
        idx = rows.get_column("period").to_numpy()
        series[0, idx] = rows.get_column("revenue_usd").to_numpy() / hours
        seconds = hours * SECONDS_PER_HOUR
        series[1, idx] = rows.get_column("served_output_tokens").to_numpy() / seconds
        series[2, idx] = rows.get_column("demand_output_tokens").to_numpy() / seconds
        series = np.concatenate([series, series[:, -1:]], axis=1)
        rev.append(series[0])
        served.append(series[1])
        wanted.append(series[2])
    week_rev = [r[:-1].sum() * hours for r in rev]
    labels = [f"{t}  ({money(w)})" for t, w in zip(tiers, week_rev, strict=True)]
    scale, unit = _rate_unit(float(np.max(np.sum(wanted, axis=0), initial=0.0)))
    served = [series / scale for series in served]
    wanted = [series / scale for series in wanted]
    top.stackplot(x, rev, labels=labels, colors=[colors[t] for t in tiers], alpha=0.85, step="post")
    top.set_ylabel("revenue, USD per hour")
    top.set_ylim(0, 1.25 * float(np.max(np.sum(rev, axis=0), initial=0.0)) or 1.0)
    top.yaxis.set_major_formatter(matplotlib.ticker.StrMethodFormatter("${x:,.0f}"))
    top.legend(loc="upper left", ncols=len(tiers), frameon=False, title="tier (total revenue)")
    top.set_title(f"{scenario}: revenue and served output tokens by tier", loc="left", fontsize=11)
    bottom.stackplot(
        x,
        served,
        colors=[colors[t] for t in tiers],
        alpha=0.85,
        step="post",
        labels=[f"served: {t}" for t in tiers],
    )
    bottom.step(
        x,
        np.sum(wanted, axis=0),
        where="post",
        color="black",
        linewidth=1.0,
        label="demand arriving at chosen prices (batch may be served later in its window)",
    )
    bottom.set_ylim(0, 1.25 * float(np.max(np.sum(wanted, axis=0), initial=0.0)) or 1.0)
    bottom.set_ylabel(f"output tokens/s{', ' + unit if unit else ''}")
    bottom.legend(loc="upper left", frameon=False, ncols=len(tiers) + 1)
    period_start = (
        demand.sort("period").get_column("period_start").unique(maintain_order=True).to_list()
    )
    _day_ticks(bottom, period_start, hours)
    bottom.set_xlim(0, periods * hours)
    _style(fig)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def frontier_chart(curves: list[Curve], tiers: list[str], scenario: str, path: Path) -> Path:
    """One panel per curve: the grid in grey, the Pareto frontier, the chosen points."""
    n = len(curves)
    cols = min(n, 2)
    rows = -(-n // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(6.5 * cols, 4.6 * rows), layout="constrained", squeeze=False
    )
    colors = tier_colors(tiers)
    for ax, curve in zip(axes.flat, curves, strict=False):
        ax.scatter(
            curve.grid_user,
            curve.grid_device,
            s=6,
            color="#BBBBBB",
            linewidths=0,
            label="search grid (fits)",
        )
        ax.plot(
            curve.frontier_user,
            curve.frontier_device,
            color="#333333",
            linewidth=1.4,
            label="Pareto frontier",
        )
        labels: dict[tuple[float, float], dict[str, list[str]]] = {}
        for point in curve.points:  # earlier tiers drawn larger: coinciding points stay visible
            rank = tiers.index(point.tier) if point.tier in tiers else 0
            xy = (point.tokens_per_s_per_user, point.tokens_per_s_per_device)
            ax.scatter(
                *xy,
                s=max(150 - 50 * rank, 40),
                color=colors.get(point.tier, "#000000"),
                edgecolor="black",
                zorder=3 + rank,
                linewidths=0.6,
            )
            labels.setdefault(xy, {}).setdefault(point.label, []).append(point.tier)
        legend_lines = []
        for n_label, (xy, texts) in enumerate(labels.items(), start=1):
            ax.annotate(
                str(n_label),
                xy,
                textcoords="offset points",
                xytext=(7, 4),
                fontsize=8,
                fontweight="bold",
            )
            legend_lines.append(
                f"{n_label}  " + "; ".join(f"{', '.join(t)}: {c}" for c, t in texts.items())
            )
        ax.text(
            0.02,
            0.02,
            "\n".join(legend_lines),
            transform=ax.transAxes,
            fontsize=7,
            va="bottom",
            ha="left",
            family="monospace",
            bbox={"facecolor": "white", "edgecolor": "#CCCCCC", "alpha": 0.9},
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        for axis in (ax.xaxis, ax.yaxis):
            axis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
            axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("output tokens/s per user")
        ax.set_ylabel("output tokens/s per device")
        ax.set_title(
            f"{curve.model} on {curve.system} (isl {curve.isl}, osl {curve.osl})",
            fontsize=10,
            loc="left",
        )
        ax.grid(True, which="major", color="#EEEEEE")
        for tier, floor in curve.tier_floors:
            ax.axvline(floor, color=colors.get(tier, "#000000"), linestyle="--", linewidth=0.9)
            ax.annotate(
                f"{tier} floor {floor:g}",
                (floor, 0.98),
                xycoords=("data", "axes fraction"),
                va="top",
                rotation=90,
                fontsize=7,
                color=colors.get(tier, "#000000"),
                xytext=(-9, 0),
                textcoords="offset points",
            )
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    shown = [t for t in tiers if any(p.tier == t for c in curves for p in c.points)]
    handles = [
        plt.Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            color=colors[t],
            markeredgecolor="k",
            label=f"chosen for {t}",
        )
        for t in shown
    ]
    handles += [
        plt.Line2D([], [], color="#333333", label="Pareto frontier"),
        plt.Line2D([], [], marker="o", linestyle="", color="#BBBBBB", label="other configurations"),
    ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(len(handles), 2 * cols),
        frameon=False,
    )
    fig.suptitle(
        f"{scenario}: throughput vs interactivity, with the plan's operating points",
        x=0.01,
        ha="left",
        fontsize=11,
    )
    _style(fig)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def write_charts(
    plan: Plan,
    frames: dict[str, pl.DataFrame],
    out_dir: Path,
    *,
    curves: list[Curve] | None = None,
) -> list[Path]:
    """The report's charts under ``out_dir``; the frontier only when ``curves`` are given.

    A plan without assignments (infeasible) has nothing to chart: no files.
    """
    if not plan.assignments:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    tiers = list(dict.fromkeys(p.tier for p in plan.prices))
    demand = frames["demand"]
    period_start = (
        demand.sort("period").get_column("period_start").unique(maintain_order=True).to_list()
    )
    usage = pl.DataFrame(
        {
            "pool": [u.pool for u in plan.pool_usage],
            "period": [u.period for u in plan.pool_usage],
            "systems_available": [u.systems_available for u in plan.pool_usage],
            "systems_used": [u.systems_used for u in plan.pool_usage],
        }
    )
    written = [
        utilization_heatmap(
            usage, period_start, plan.period_hours, plan.scenario, out_dir / "utilization.png"
        ),
        tiers_over_time(demand, tiers, plan.scenario, out_dir / "tiers.png"),
    ]
    if curves:
        written.append(frontier_chart(curves, tiers, plan.scenario, out_dir / "frontier.png"))
    return written
