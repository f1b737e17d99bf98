"""Seaborn figures for the report, drawn from the architecture tables of :mod:`explorer.answer._tables`.

Every function takes DataFrames and returns a bare :class:`matplotlib.figure.Figure` (no pyplot state, rendered
with Agg by :func:`save_png`). Quality is drawn in the task's terms (``metric``: validation accuracy in percent,
or validation bits per byte, lower is better); the latency axis is the forward pass, or decoding time per token
where that is the study's objective (``cost="decode_ms"``). One point is one architecture (its runs averaged).
Built to stay readable at
1,000 architectures: small translucent markers, rasterized point clouds, legends outside the axes. Group means
carry seaborn's 95% percentile-bootstrap interval (fixed seed), which stays inside the data's range.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from explorer.analysis import DK_FLOOR
from explorer.measurements import QUALITY_METRICS, QualityMetric
from explorer.output._plot_data import (
    FAMILY_ORDER,
    KneePoint,
    ParetoData,
    effect_data,
    pareto_data,
    quality,
    shows_bpb,
)

CLASSIFICATION = QUALITY_METRICS["classification"]


def _quality_label(metric: QualityMetric | None) -> str:
    return "validation bits per byte (lower is better)" if shows_bpb(metric) else "validation accuracy (%)"


DPI = 110
FAMILY_MARKERS = {"uniform": "o", "increasing": "^", "decreasing": "v", "free": "s"}
MAX_HEATMAP_ROWS = 40  # beyond this the Pareto heatmap shows an evenly spaced subset


def save_png(fig: Figure, path: str | Path) -> Path:
    """Render ``fig`` to a PNG with Agg and return the path."""
    FigureCanvasAgg(fig).print_png(str(path))
    return Path(path)


def new_figure(w: float, h: float) -> Figure:
    """A bare constrained-layout figure of ``w`` x ``h`` inches at the report's resolution."""
    return Figure(figsize=(w, h), dpi=DPI, layout="constrained")


def _marker_style(n: int) -> tuple[float, float]:
    """Marker area and alpha that keep a cloud of ``n`` points readable."""
    if n <= 100:
        return 36.0, 0.85
    if n <= 400:
        return 18.0, 0.6
    return 9.0, 0.45


_ERRORBAR = ("ci", 95)  # seaborn's percentile bootstrap of the mean (seeded below): inside the data's range
_SEED = 0


def _latency_label(batch: int | None, cost: str = "latency_ms") -> str:
    if cost == "decode_ms":
        return "decoding time (ms per generated token, median)"
    return f"latency (ms per batch of {batch}, median)" if batch else "latency (ms per batch, median)"


def empty_figure(fig: Figure, text: str) -> Figure:
    """``fig`` with its axes hidden and ``text`` in the middle: a figure with nothing to draw."""
    ax = fig.axes[0] if fig.axes else fig.add_subplot()
    ax.set_axis_off()
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes)
    return fig


def pareto_figure(
    archs: pd.DataFrame,
    front: pd.DataFrame,
    knee: pd.Series | None = None,
    finalists: pd.DataFrame | None = None,
    batch: int | None = None,
    metric: QualityMetric | None = None,
    cost: str = "latency_ms",
) -> Figure:
    """Quality vs latency of every searched architecture (colour: most heads in a layer, marker: schedule
    family), the search's Pareto front, and the finalists' means with their 95% intervals."""
    with sns.axes_style("whitegrid"):
        fig = new_figure(10, 6)
        ax = fig.add_subplot()
    if archs.empty:
        return empty_figure(fig, "no architecture finished its search budget")
    data = pareto_data(archs, front, knee, finalists, metric, cost)
    size, alpha = _marker_style(len(data.points))
    handles = _draw_architectures(ax, data, size, alpha)
    if len(data.front):
        handles.append(_draw_front(ax, data, size))
    if data.finalists is not None:
        handles.append(_draw_finalists(ax, data.finalists))
    if data.knee is not None:
        handles.append(_draw_knee(ax, data.knee))
    _pareto_axes(ax, data, handles, batch, metric)
    return fig


def _draw_architectures(ax: Axes, data: ParetoData, size: float, alpha: float) -> list[Any]:
    """The searched architectures as a point cloud (over-budget ones as crosses); returns the legend entries."""
    x, levels, fams = data.x, data.levels, data.families
    colors = dict(zip(levels, sns.color_palette("viridis", len(levels)), strict=True))
    handles: list[Any] = [Line2D([], [], ls="", label="most heads in a layer")]
    handles += [Line2D([], [], ls="", marker="o", color=colors[h], label=str(h)) for h in levels]
    handles += [Line2D([], [], ls="", label="schedule")]
    markers = {f: FAMILY_MARKERS.get(f, "D") for f in fams}
    handles += [Line2D([], [], ls="", marker=markers[f], color="0.3", label=f) for f in fams]
    if len(data.feasible):
        sns.scatterplot(
            data=data.feasible,
            x=x,
            y="acc",
            hue="heads_max",
            hue_order=levels,
            palette=colors,
            style="family",
            markers=markers,
            style_order=fams,
            s=size,
            alpha=alpha,
            linewidth=0,
            legend=False,
            rasterized=True,
            ax=ax,
        )
    infeas = data.infeasible
    if len(infeas):
        ax.scatter(infeas[x], infeas["acc"], marker="x", s=size, color="0.6", lw=0.8, rasterized=True)
        handles.append(Line2D([], [], ls="", marker="x", color="0.6", label=f"over budget ({len(infeas)})"))
    return handles


def _draw_front(ax: Axes, data: ParetoData, size: float) -> Line2D:
    """The search's Pareto front as a step line to the slowest architecture, its points circled."""
    f, fy = data.front, data.front["acc"].to_numpy()
    x = np.append(f[data.x].to_numpy(), data.points[data.x].max())
    ax.step(x, np.append(fy, fy[-1]), where="post", color="black", lw=1.4, zorder=3)
    ax.scatter(f[data.x], fy, s=size * 2.5, facecolor="none", edgecolor="black", zorder=4)
    return Line2D([], [], color="black", marker="o", mfc="none", label=f"search front ({len(f)})")


def _draw_finalists(ax: Axes, finalists: pd.DataFrame) -> Line2D:
    """Each finalist's mean with its 95% intervals on both axes, labelled with its layout."""
    fx, fy = finalists["x"].to_numpy(), finalists["y"].to_numpy()
    ax.errorbar(
        fx,
        fy,
        xerr=[fx - finalists["x_low"].to_numpy(), finalists["x_high"].to_numpy() - fx],
        yerr=[fy - finalists["y_low"].to_numpy(), finalists["y_high"].to_numpy() - fy],
        fmt="D",
        color="C1",
        ms=6,
        capsize=3,
        lw=1,
        zorder=5,
    )
    for label, x_, y_ in zip(finalists["label"], fx, fy, strict=True):
        ax.annotate(label, (x_, y_), xytext=(5, -10), textcoords="offset points", fontsize=8, color="C1")
    return Line2D([], [], ls="", marker="D", color="C1", label="finalists: mean over seeds,\n95% intervals")


def _draw_knee(ax: Axes, knee: KneePoint) -> Line2D:
    """The recommended architecture as a star, annotated in the top left corner."""
    ax.scatter([knee.x], [knee.y], marker="*", s=260, color="crimson", edgecolor="white", zorder=6)
    ax.annotate(
        knee.text,
        xy=(knee.x, knee.y),
        xytext=(0.03, 0.97),
        textcoords="axes fraction",
        va="top",
        fontsize=9,
        bbox={"boxstyle": "round", "fc": "white", "ec": "crimson"},
        arrowprops={"arrowstyle": "->", "color": "crimson", "lw": 1},
        zorder=7,
    )
    return Line2D([], [], ls="", marker="*", ms=12, color="crimson", label="recommended")


def _pareto_axes(
    ax: Axes, data: ParetoData, handles: list[Any], batch: int | None, metric: QualityMetric | None
) -> None:
    """Log cost axis where the costs span more than 20x, the legend outside the axes, labels and title."""
    if data.log_x:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_xlabel(_latency_label(batch, data.x))
    ax.set_ylabel(_quality_label(metric))
    ax.set_title(
        f"{_what(metric)} vs latency: {len(data.points)} architectures searched, {len(data.front)} on the search's "
        "Pareto front"
    )


def _effect_figure(
    df: pd.DataFrame,
    x: str,
    xlabel: str,
    title: str,
    order: Sequence[Any] | None = None,
    shade_below: float | None = None,
    floors: Sequence[float] = (),
    metric: QualityMetric | None = None,
) -> Figure:
    """Rows: quality and latency (and decoding time, when measured); columns: d_model. Grey dots are
    architectures, the line their mean with a 95% bootstrap interval."""
    data = effect_data(df, x, order, metric)
    styles = {
        "acc": (_quality_label(metric), "C0"),
        "latency_ms": (_latency_label(None), "C3"),
        "decode_ms": (_latency_label(None, "decode_ms"), "C4"),
    }
    rows = [(column, *styles[column]) for column in data.columns]
    with sns.axes_style("whitegrid"):
        fig = new_figure(max(3.3 * len(data.widths) + 0.8, 6), 3.25 * len(rows))
        axes = fig.subplots(len(rows), len(data.widths), sharey="row", squeeze=False)
    if data.points.empty:
        return empty_figure(fig, f"no architecture has {x}")
    levels = data.levels
    size = 3.0 if len(data.points) <= 400 else 1.8
    for j, w in enumerate(data.widths):
        g = data.points if w is None else data.points[data.points["d_model"] == w]
        for i, (column, ylabel, color) in enumerate(rows):
            ax = axes[i][j]
            _draw_effect(ax, g, x, column, levels, color, size)
            _mark_floors(ax, levels, shade_below, floors)
            ax.set_xlabel(xlabel if i == len(rows) - 1 else "")
            ax.set_ylabel(ylabel if j == 0 else "")
            ax.tick_params(axis="x", labelsize=8, rotation=0 if len(levels) <= 8 else 45)
            if i == 0:
                where = (
                    f"d_model = {int(w)} ({len(g)} architectures)"
                    if w is not None
                    else f"{len(g)} architectures"
                )
                ax.set_title(where, fontsize=10)
    width = int(fig.get_figwidth() * 13)  # characters that fit across the figure at this font size
    fig.suptitle(title + "\n" + textwrap.fill(_effect_note(shade_below, floors), width), fontsize=11)
    return fig


def _draw_effect(
    ax: Axes, g: pd.DataFrame, x: str, column: str, levels: list[Any], color: str, size: float
) -> None:
    """One panel: every architecture as a grey dot, and their mean per level with its bootstrap interval."""
    sns.stripplot(
        data=g,
        x=x,
        y=column,
        order=levels,
        color="0.55",
        size=size,
        alpha=0.5,
        jitter=0.25,
        ax=ax,
        rasterized=True,
        zorder=1,
    )
    if len(g):
        sns.pointplot(
            data=g,
            x=x,
            y=column,
            order=levels,
            errorbar=_ERRORBAR,
            seed=_SEED,
            color=color,
            markersize=5,
            capsize=0.15,
            err_kws={"linewidth": 1.4},
            linewidth=1.4,
            ax=ax,
        )


def _mark_floors(ax: Axes, levels: list[Any], shade_below: float | None, floors: Sequence[float]) -> None:
    """Shade the levels below ``shade_below`` and draw a dashed line at each floor that splits the levels."""
    if shade_below is not None:
        k = sum(float(v) < shade_below for v in levels)
        if k:
            ax.axvspan(-0.5, k - 0.5, color="crimson", alpha=0.08, lw=0)
    for fl in floors:
        k = sum(float(v) < fl for v in levels)
        if 0 < k < len(levels):
            ax.axvline(k - 0.5, color="black", ls="--", lw=1)


def _effect_note(shade_below: float | None, floors: Sequence[float]) -> str:
    note = "dots: architectures; line: mean with 95% bootstrap interval"
    if shade_below is not None:
        note += f"; shaded: below {shade_below:g} (the tutorial's d_k floor)"
    if floors:
        note += f"; dashed: the study's floor(s) {', '.join(f'{f:g}' for f in floors)}"
    return note


def _what(metric: QualityMetric | None) -> str:
    return "Bits per byte" if shows_bpb(metric) else "Accuracy"


def heads_figure(df: pd.DataFrame, metric: QualityMetric | None = None) -> Figure:
    """Quality and latency against the largest per-layer head count, per d_model."""
    return _effect_figure(
        df,
        "heads_max",
        "heads (most in any layer)",
        f"{_what(metric)} and latency by head count",
        metric=metric,
    )


def dk_figure(df: pd.DataFrame, floors: Sequence[float] = (), metric: QualityMetric | None = None) -> Figure:
    """Quality and latency against the smallest d_k of each trial, with the tutorial's and the study's floors marked."""
    return _effect_figure(
        df,
        "dk_min",
        "d_k (smallest in any layer)",
        f"{_what(metric)} and latency by head width d_k",
        shade_below=DK_FLOOR,
        floors=floors,
        metric=metric,
    )


def family_figure(df: pd.DataFrame, metric: QualityMetric | None = None) -> Figure:
    """Quality and latency per schedule family (uniform, increasing, decreasing, free), per d_model."""
    return _effect_figure(
        df,
        "family",
        "schedule family",
        f"{_what(metric)} and latency by head schedule",
        FAMILY_ORDER,
        metric=metric,
    )


KV_ORDER = ("multi-query", "grouped-query", "multi-head", "mixed")


def kv_figure(df: pd.DataFrame, metric: QualityMetric | None = None) -> Figure:
    """Quality, latency and decoding time by kind of attention: multi-query (one key/value head), grouped-query
    and multi-head (as many key/value heads as query heads), per d_model."""
    return _effect_figure(
        df,
        "attention_kind",
        "key/value heads",
        f"{_what(metric)}, latency and decoding time by key/value heads",
        KV_ORDER,
        metric=metric,
    )


def heads_heatmap(
    front: pd.DataFrame, metric: QualityMetric | None = None, cost: str = "latency_ms"
) -> Figure:
    """Per-layer head counts of the Pareto trials (rows, fastest at the top), colour on a log scale."""
    f = front.sort_values(cost)
    shown = f
    if len(f) > MAX_HEATMAP_ROWS:
        shown = f.iloc[np.linspace(0, len(f) - 1, MAX_HEATMAP_ROWS).round().astype(int)]
    heads = [list(h) for h in shown["heads"]] if "heads" in shown else []
    width = max((len(h) for h in heads), default=0)
    mat = pd.DataFrame(
        [h + [np.nan] * (width - len(h)) for h in heads],
        columns=[f"layer {i + 1}" for i in range(width)],
        index=[
            f"#{int(n)}  d{int(d)}  "
            + (f"{q:.3f} b/B" if shows_bpb(metric) else f"{q:.1f}%")
            + f"  {t:.3g} ms"
            for n, d, q, t in zip(
                shown["number"], shown["d_model"], quality(shown, metric), shown[cost], strict=True
            )
        ],
    )
    fig = new_figure(max(4.5, 1.0 * width + 4.0), max(3.0, 0.28 * len(mat) + 1.6))
    if mat.empty:
        return empty_figure(fig, "no architecture on the front")
    ax = fig.add_subplot()
    sns.heatmap(
        mat,
        annot=True,
        fmt=".0f",
        cmap="viridis",
        norm=LogNorm(vmin=1, vmax=max(2.0, np.nanmax(mat.to_numpy()))),
        mask=mat.isna(),
        linewidths=0.5,
        linecolor="white",
        cbar_kws={"label": "heads (log scale)"},
        ax=ax,
        annot_kws={"fontsize": 8},
    )
    levels = sorted({int(v) for v in np.unique(mat.to_numpy()[~np.isnan(mat.to_numpy())])})
    cbar = ax.collections[0].colorbar
    assert cbar is not None  # the heatmap draws its colour bar
    cbar.set_ticks(levels, labels=[str(v) for v in levels])
    cbar.ax.minorticks_off()
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("layer (input side first)")
    ax.set_ylabel("front architecture, fastest first")
    sub = f", {len(mat)} of {len(f)} shown" if len(f) > len(mat) else ""
    ax.set_title(
        f"Heads per layer on the Pareto front ({len(f)} architectures{sub})\nrow: trial, d_model, "
        f"{'val bits per byte' if shows_bpb(metric) else 'val accuracy'}, latency",
        fontsize=10,
    )
    return fig
