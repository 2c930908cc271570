"""A sweep's charts, as PNG files beside its tables (matplotlib, Agg), read from its frames.

The first swept path is the x axis (its values in order; text values evenly spaced); each
combination of the other paths' values is one line (the first ``MAX_SERIES`` are drawn).

- ``margin.png``: margin over the horizon; with Monte Carlo samples also the p5-p95 band and the
  p50 of the fixed plan's margin under demand error.
- ``prices.png``: the chosen price multiplier per (family, tier), one panel each.
- ``pools.png``: peak systems used per pool, one panel each, the pool's size dotted.
- ``samples.png`` (Monte Carlo, at most ``MAX_HISTOGRAMS`` points): histograms of margin and
  SLO-miss hours across samples.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import polars as pl
from matplotlib.ticker import MaxNLocator

from planner.report.charts import DPI, money, tier_colors
from planner.sweep.frames import SAMPLE_COLUMNS
from planner.sweep.grid import format_value
from planner.sweep.run import SweepResult

MAX_SERIES = 8
MAX_PANELS = 9
MAX_HISTOGRAMS = 4


def _axis(result: SweepResult, points: pl.DataFrame) -> tuple[str, list[float], list[str]]:
    """(label, x per point, tick labels) from the first swept path."""
    if not result.specs:
        return "point", [0.0] * points.height, []
    spec = result.specs[0]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in spec.values):
        xs = [float(o.point.values[0]) for o in result.outcomes]  # type: ignore[arg-type]
        return spec.path, xs, []
    labels = points.get_column(spec.path).unique(maintain_order=True).to_list()
    position = {label: float(i) for i, label in enumerate(labels)}
    return spec.path, [position[v] for v in points.get_column(spec.path).to_list()], labels


def _series(result: SweepResult) -> dict[str, list[int]]:
    """Point indices per combination of the other paths' values, in grid order."""
    out: dict[str, list[int]] = {}
    for o in result.outcomes:
        rest = zip(result.specs[1:], o.point.values[1:], strict=True)
        key = " ".join(f"{s.path}={format_value(v)}" for s, v in rest) or result.scenario
        out.setdefault(key, []).append(o.point.index)
    return dict(list(out.items())[:MAX_SERIES])


def _finish(fig: plt.Figure, ax: plt.Axes, label: str, ticks: list[str], path: Path) -> Path:
    for a in fig.axes:
        a.spines[["top", "right"]].set_visible(False)
        a.set_xlabel(label)
        if ticks:
            a.set_xticks(range(len(ticks)), ticks, rotation=30, ha="right", fontsize=7)
    handles, labels = ax.get_legend_handles_labels()
    if handles and len(labels) > 1:
        fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.08 if len(labels) > 1 else 0, 1, 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def margin_chart(result: SweepResult, points: pl.DataFrame, path: Path) -> Path:
    label, xs, ticks = _axis(result, points)
    colors = tier_colors(list(_series(result)))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    mc = bool(result.monte_carlo.samples)
    for name, idx in _series(result).items():
        rows = points.filter(pl.col("point").is_in(idx)).sort("point")
        x = [xs[i] for i in idx]
        ax.plot(
            x,
            rows["margin_usd"].fill_null(float("nan")),
            marker="o",
            color=colors[name],
            label=name,
        )
        if mc and rows["margin_usd_p50"].null_count() < rows.height:
            ax.fill_between(
                x,
                rows["margin_usd_p5"].fill_null(float("nan")),
                rows["margin_usd_p95"].fill_null(float("nan")),
                color=colors[name],
                alpha=0.15,
            )
            ax.plot(
                x, rows["margin_usd_p50"].fill_null(float("nan")), ls="--", color=colors[name], lw=1
            )
    ax.axhline(0, color="grey", lw=0.5)
    ax.yaxis.set_major_formatter(lambda v, _: money(v))
    title = f"{result.scenario}: margin over the horizon"
    if mc:
        mcs = result.monte_carlo
        title += f"\nband p5-p95, dashed p50: fixed plan, demand CV {mcs.demand_cv:g}"
        title += f" per {mcs.scope}, {mcs.samples} samples"
    ax.set_title(title, fontsize=10)
    ax.set_ylabel("USD")
    return _finish(fig, ax, label, ticks, path)


def _panels(n: int) -> tuple[plt.Figure, list[plt.Axes]]:
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for a in flat[n:]:
        a.set_visible(False)
    return fig, flat[:n]


def prices_chart(
    result: SweepResult, points: pl.DataFrame, prices: pl.DataFrame, path: Path
) -> Path:
    label, xs, ticks = _axis(result, points)
    series = _series(result)
    colors = tier_colors(list(series))
    products = prices.select("family", "tier").unique(maintain_order=True).rows()[:MAX_PANELS]
    fig, axes = _panels(max(1, len(products)))
    for ax, (family, tier) in zip(axes, products, strict=False):
        for name, idx in series.items():
            rows = prices.filter(
                (pl.col("family") == family) & (pl.col("tier") == tier) & pl.col("point").is_in(idx)
            ).sort("point")
            ax.plot(
                [xs[i] for i in rows["point"]],
                rows["multiplier"],
                marker="o",
                color=colors[name],
                label=name,
            )
        ax.set_title(f"{family} / {tier}", fontsize=9)
        ax.set_ylabel("price multiplier")
    fig.suptitle(f"{result.scenario}: chosen price multipliers", fontsize=10)
    return _finish(fig, axes[0], label, ticks, path)


def pools_chart(result: SweepResult, points: pl.DataFrame, pools: pl.DataFrame, path: Path) -> Path:
    label, xs, ticks = _axis(result, points)
    series = _series(result)
    colors = tier_colors(list(series))
    names = pools.get_column("pool").unique(maintain_order=True).to_list()[:MAX_PANELS]
    fig, axes = _panels(max(1, len(names)))
    for ax, pool in zip(axes, names, strict=False):
        for name, idx in series.items():
            rows = pools.filter((pl.col("pool") == pool) & pl.col("point").is_in(idx)).sort("point")
            x = [xs[i] for i in rows["point"]]
            ax.plot(x, rows["systems_used_peak"], marker="o", color=colors[name], label=name)
            ax.plot(x, rows["systems_max"], ls=":", color=colors[name], lw=1)
        ax.set_title(pool, fontsize=9)
        ax.set_ylabel("systems (peak used; dotted: pool)")
    fig.suptitle(f"{result.scenario}: pool usage", fontsize=10)
    return _finish(fig, axes[0], label, ticks, path)


def samples_chart(result: SweepResult, samples: pl.DataFrame, path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    shown = samples.get_column("point").unique(maintain_order=True).to_list()[:MAX_HISTOGRAMS]
    colors = tier_colors([str(p) for p in shown])
    for ax, column in zip(axes, SAMPLE_COLUMNS[:2], strict=True):
        for point in shown:
            values = samples.filter(pl.col("point") == point).get_column(column)
            ax.hist(values, bins=40, alpha=0.5, color=colors[str(point)], label=f"point {point}")
        ax.set_xlabel(column)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].xaxis.set_major_locator(MaxNLocator(5))
    axes[0].xaxis.set_major_formatter(lambda v, _: money(v))
    axes[0].set_ylabel("samples")
    mc = result.monte_carlo
    fig.suptitle(
        f"{result.scenario}: fixed plan under demand error (CV {mc.demand_cv:g} per "
        f"{mc.scope}, {mc.samples} samples)",
        fontsize=10,
    )
    if len(shown) > 1:
        axes[0].legend(fontsize=7, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def write_charts(result: SweepResult, frames: dict[str, pl.DataFrame], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    points = frames["points"]
    written = [
        margin_chart(result, points, out_dir / "margin.png"),
        prices_chart(result, points, frames["prices"], out_dir / "prices.png"),
        pools_chart(result, points, frames["pools"], out_dir / "pools.png"),
    ]
    if "samples" in frames and 0 < len(result.outcomes) <= MAX_HISTOGRAMS:
        written.append(samples_chart(result, frames["samples"], out_dir / "samples.png"))
    return written
