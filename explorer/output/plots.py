"""Seaborn figures for the report, drawn from the architecture tables of :mod:`explorer.insight.tables`.

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
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from explorer.engine.measures import QUALITY_METRICS, QualityMetric
from explorer.insight.rules import DK_FLOOR

__all__ = [
    "dk_figure",
    "empty_figure",
    "family_figure",
    "heads_figure",
    "heads_heatmap",
    "kv_figure",
    "new_figure",
    "pareto_figure",
    "save_png",
]

CLASSIFICATION = QUALITY_METRICS["classification"]


def _bpb(metric: QualityMetric | None) -> bool:
    return metric is not None and metric.direction == "minimize"


def _quality(df: pd.DataFrame, metric: QualityMetric | None, col: str = "val_accuracy") -> pd.Series:
    """The column to draw as quality: accuracy in percent, or bits per byte (``col`` names the accuracy one)."""
    if _bpb(metric):
        return df[col.replace("val_accuracy", "quality").replace("val_", "quality_")]
    return df[col] * 100


def _quality_label(metric: QualityMetric | None) -> str:
    return "validation bits per byte (lower is better)" if _bpb(metric) else "validation accuracy (%)"


DPI = 110
FAMILY_MARKERS = {"uniform": "o", "increasing": "^", "decreasing": "v", "free": "s"}
FAMILY_ORDER = ("uniform", "increasing", "decreasing", "free")
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


def _text(heads: Any) -> str:
    return ",".join(map(str, heads)) if isinstance(heads, tuple | list) else str(heads)


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
    c = archs.copy()
    c["acc"] = _quality(c, metric)
    lat, lo, hi = cost, cost.replace("_ms", "_low"), cost.replace("_ms", "_high")
    feas = c[c["feasible"].fillna(True).astype(bool)]
    size, alpha = _marker_style(len(c))
    with sns.axes_style("whitegrid"):
        fig = new_figure(10, 6)
        ax = fig.add_subplot()
    if c.empty:
        return empty_figure(fig, "no architecture finished its search budget")
    levels = sorted(int(h) for h in c["heads_max"].dropna().unique())
    colors = dict(zip(levels, sns.color_palette("viridis", len(levels)), strict=True))
    handles: list[Any] = [Line2D([], [], ls="", label="most heads in a layer")]
    handles += [Line2D([], [], ls="", marker="o", color=colors[h], label=str(h)) for h in levels]
    fams = [f for f in FAMILY_ORDER if f in set(c["family"].dropna())]
    handles += [Line2D([], [], ls="", label="schedule")]
    markers = {f: FAMILY_MARKERS.get(f, "D") for f in fams}
    handles += [Line2D([], [], ls="", marker=markers[f], color="0.3", label=f) for f in fams]
    if len(feas):
        sns.scatterplot(
            data=feas, x=lat, y="acc", hue="heads_max", hue_order=levels, palette=colors,
            style="family", markers=markers, style_order=fams, s=size, alpha=alpha, linewidth=0, legend=False,
            rasterized=True, ax=ax,
        )  # fmt: skip
    infeas = c[~c.index.isin(feas.index)]
    if len(infeas):
        ax.scatter(infeas[lat], infeas["acc"], marker="x", s=size, color="0.6", lw=0.8, rasterized=True)
        handles.append(Line2D([], [], ls="", marker="x", color="0.6", label=f"over budget ({len(infeas)})"))
    if len(front):
        f = front.sort_values(lat)
        fy = _quality(f, metric).to_numpy()
        x = np.append(f[lat].to_numpy(), c[lat].max())
        y = np.append(fy, fy[-1])
        ax.step(x, y, where="post", color="black", lw=1.4, zorder=3)
        ax.scatter(
            f[lat],
            fy,
            s=size * 2.5,
            facecolor="none",
            edgecolor="black",
            zorder=4,
        )
        handles.append(
            Line2D([], [], color="black", marker="o", mfc="none", label=f"search front ({len(front)})")
        )
    if finalists is not None and len(finalists):
        fx, fy = finalists[lat].to_numpy(), _quality(finalists, metric).to_numpy()
        f_lo, f_hi = (
            _quality(finalists, metric, "val_low").to_numpy(),
            _quality(finalists, metric, "val_high"),
        )
        ax.errorbar(
            fx, fy,
            xerr=[fx - finalists[lo].to_numpy(), finalists[hi].to_numpy() - fx],
            yerr=[fy - f_lo, f_hi.to_numpy() - fy],
            fmt="D", color="C1", ms=6, capsize=3, lw=1, zorder=5,
        )  # fmt: skip
        for r, x_, y_ in zip(finalists.itertuples(), fx, fy, strict=True):
            label = _text(r.heads) + (
                f" kv {_text(r.kv_heads)}" if "kv_heads" in finalists and r.kv_heads != r.heads else ""
            )
            ax.annotate(label, (x_, y_), xytext=(5, -10), textcoords="offset points", fontsize=8, color="C1")
        handles.append(
            Line2D([], [], ls="", marker="D", color="C1", label="finalists: mean over seeds,\n95% intervals")
        )
    if knee is not None:
        kx = knee[lat]
        ky = knee["quality"] if _bpb(metric) else knee["val_accuracy"] * 100
        kv = (
            f", kv heads {_text(knee['kv_heads'])}"
            if "kv_heads" in knee and knee["kv_heads"] != knee["heads"]
            else ""
        )
        value = f"{ky:.3f} bits/byte" if _bpb(metric) else f"{ky:.2f}%"
        ax.scatter([kx], [ky], marker="*", s=260, color="crimson", edgecolor="white", zorder=6)
        ax.annotate(
            f"recommended: heads {_text(knee['heads'])}{kv} (d_model {int(knee['d_model'])})\n"
            f"{value} at {kx:.3g} ms",
            xy=(kx, ky), xytext=(0.03, 0.97), textcoords="axes fraction", va="top", fontsize=9,
            bbox={"boxstyle": "round", "fc": "white", "ec": "crimson"},
            arrowprops={"arrowstyle": "->", "color": "crimson", "lw": 1}, zorder=7,
        )  # fmt: skip
        handles.append(Line2D([], [], ls="", marker="*", ms=12, color="crimson", label="recommended"))
    if c[lat].max() / max(c[lat].min(), 1e-12) > 20:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_xlabel(_latency_label(batch, lat))
    ax.set_ylabel(_quality_label(metric))
    what = "Bits per byte" if _bpb(metric) else "Accuracy"
    ax.set_title(
        f"{what} vs latency: {len(c)} architectures searched, {len(front)} on the search's Pareto front"
    )
    return fig


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
    c = df.dropna(subset=[x]).copy()
    c["acc"] = _quality(c, metric)
    widths = (
        sorted(c["d_model"].dropna().unique()) if "d_model" in c and c["d_model"].notna().any() else [None]
    )
    rows = [("acc", _quality_label(metric), "C0"), ("latency_ms", _latency_label(None), "C3")]
    if "decode_ms" in c and c["decode_ms"].notna().any():
        rows.append(("decode_ms", _latency_label(None, "decode_ms"), "C4"))
    with sns.axes_style("whitegrid"):
        fig = new_figure(max(3.3 * len(widths) + 0.8, 6), 3.25 * len(rows))
        axes = fig.subplots(len(rows), len(widths), sharey="row", squeeze=False)
    if c.empty:
        return empty_figure(fig, f"no architecture has {x}")
    present = set(c[x])
    levels = [v for v in order if v in present] + sorted(present - set(order)) if order else sorted(present)
    size = 3.0 if len(c) <= 400 else 1.8
    for j, w in enumerate(widths):
        g = c if w is None else c[c["d_model"] == w]
        for i, (metric, ylabel, color) in enumerate(rows):
            ax = axes[i][j]
            sns.stripplot(
                data=g, x=x, y=metric, order=levels, color="0.55", size=size, alpha=0.5, jitter=0.25,
                ax=ax, rasterized=True, zorder=1,
            )  # fmt: skip
            if len(g):
                sns.pointplot(
                    data=g, x=x, y=metric, order=levels, errorbar=_ERRORBAR, seed=_SEED, color=color, markersize=5,
                    capsize=0.15, err_kws={"linewidth": 1.4}, linewidth=1.4, ax=ax,
                )  # fmt: skip
            if shade_below is not None:
                k = sum(float(v) < shade_below for v in levels)
                if k:
                    ax.axvspan(-0.5, k - 0.5, color="crimson", alpha=0.08, lw=0)
            for fl in floors:
                k = sum(float(v) < fl for v in levels)
                if 0 < k < len(levels):
                    ax.axvline(k - 0.5, color="black", ls="--", lw=1)
            ax.set_xlabel(xlabel if i == len(rows) - 1 else "")
            ax.set_ylabel(ylabel if j == 0 else "")
            ax.tick_params(axis="x", labelsize=8, rotation=0 if len(levels) <= 8 else 45)
            if i == 0:
                ax.set_title(
                    f"d_model = {int(w)} ({len(g)} architectures)"
                    if w is not None
                    else f"{len(g)} architectures",
                    fontsize=10,
                )
    note = "dots: architectures; line: mean with 95% bootstrap interval"
    if shade_below is not None:
        note += f"; shaded: below {shade_below:g} (the folklore floor)"
    if floors:
        note += f"; dashed: the study's floor(s) {', '.join(f'{f:g}' for f in floors)}"
    width = int(fig.get_figwidth() * 13)  # characters that fit across the figure at this font size
    fig.suptitle(title + "\n" + textwrap.fill(note, width), fontsize=11)
    return fig


def _what(metric: QualityMetric | None) -> str:
    return "Bits per byte" if _bpb(metric) else "Accuracy"


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
    """Quality and latency against the smallest d_k of each trial, with the folklore and study floors marked."""
    return _effect_figure(
        df, "dk_min", "d_k (smallest in any layer)", f"{_what(metric)} and latency by head width d_k",
        shade_below=DK_FLOOR, floors=floors, metric=metric,
    )  # fmt: skip


def family_figure(df: pd.DataFrame, metric: QualityMetric | None = None) -> Figure:
    """Quality and latency per schedule family (uniform, increasing, decreasing, free), per d_model."""
    return _effect_figure(
        df, "family", "schedule family", f"{_what(metric)} and latency by head schedule", FAMILY_ORDER,
        metric=metric,
    )  # fmt: skip


KV_ORDER = ("multi-query", "grouped-query", "multi-head", "mixed")


def kv_figure(df: pd.DataFrame, metric: QualityMetric | None = None) -> Figure:
    """Quality, latency and decoding time by kind of attention: multi-query (one key/value head), grouped-query
    and multi-head (as many key/value heads as query heads), per d_model."""
    return _effect_figure(
        df, "attention_kind", "key/value heads",
        f"{_what(metric)}, latency and decoding time by key/value heads",
        KV_ORDER, metric=metric,
    )  # fmt: skip


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
            f"#{int(n)}  d{int(d)}  " + (f"{q:.3f} b/B" if _bpb(metric) else f"{q:.1f}%") + f"  {t:.3g} ms"
            for n, d, q, t in zip(
                shown["number"], shown["d_model"], _quality(shown, metric), shown[cost], strict=True
            )
        ],
    )
    fig = new_figure(max(4.5, 1.0 * width + 4.0), max(3.0, 0.28 * len(mat) + 1.6))
    if mat.empty:
        return empty_figure(fig, "no architecture on the front")
    ax = fig.add_subplot()
    sns.heatmap(
        mat, annot=True, fmt=".0f", cmap="viridis", norm=LogNorm(vmin=1, vmax=max(2.0, np.nanmax(mat.to_numpy()))),
        mask=mat.isna(), linewidths=0.5, linecolor="white", cbar_kws={"label": "heads (log scale)"}, ax=ax,
        annot_kws={"fontsize": 8},
    )  # fmt: skip
    levels = sorted({int(v) for v in np.unique(mat.to_numpy()[~np.isnan(mat.to_numpy())])})
    cbar = ax.collections[0].colorbar
    cbar.set_ticks(levels, labels=[str(v) for v in levels])
    cbar.ax.minorticks_off()
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("layer (input side first)")
    ax.set_ylabel("front architecture, fastest first")
    sub = f", {len(mat)} of {len(f)} shown" if len(f) > len(mat) else ""
    ax.set_title(
        f"Heads per layer on the Pareto front ({len(f)} architectures{sub})\nrow: trial, d_model, "
        f"{'val bits per byte' if _bpb(metric) else 'val accuracy'}, latency",
        fontsize=10,
    )
    return fig
