"""Seaborn figures for the report, drawn from the architecture tables of :mod:`explorer.insight.tables`.

Every function takes DataFrames and returns a bare :class:`matplotlib.figure.Figure` (no pyplot state, rendered
with Agg by :func:`save_png`). One point is one architecture (its runs averaged). Built to stay readable at
1,000 architectures: small translucent markers, rasterized point clouds, legends outside the axes. Group means
carry seaborn's 95% percentile-bootstrap interval (fixed seed), which stays inside the data's range.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
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

from explorer.insight.pareto import HV_REFERENCE
from explorer.insight.rules import DK_FLOOR

__all__ = [
    "bench_figure",
    "dk_figure",
    "family_figure",
    "heads_figure",
    "heads_heatmap",
    "hypervolume_figure",
    "pareto_figure",
    "save_png",
]

DPI = 110
FAMILY_MARKERS = {"uniform": "o", "increasing": "^", "decreasing": "v", "free": "s"}
FAMILY_ORDER = ("uniform", "increasing", "decreasing", "free")
MAX_HEATMAP_ROWS = 40  # beyond this the Pareto heatmap shows an evenly spaced subset


def save_png(fig: Figure, path: str | Path) -> Path:
    """Render ``fig`` to a PNG with Agg and return the path."""
    FigureCanvasAgg(fig).print_png(str(path))
    return Path(path)


def _figure(w: float, h: float) -> Figure:
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


def _latency_label(batch: int | None) -> str:
    return f"latency (ms per batch of {batch}, median)" if batch else "latency (ms per batch, median)"


def _empty(fig: Figure, text: str) -> Figure:
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
) -> Figure:
    """Accuracy vs latency of every searched architecture (colour: most heads in a layer, marker: schedule
    family), the search's Pareto front, and the finalists' means with their 95% intervals."""
    c = archs.copy()
    c["acc"] = c["val_accuracy"] * 100
    feas = c[c["feasible"].fillna(True).astype(bool)]
    size, alpha = _marker_style(len(c))
    with sns.axes_style("whitegrid"):
        fig = _figure(10, 6)
        ax = fig.add_subplot()
    if c.empty:
        return _empty(fig, "no architecture finished its search budget")
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
            data=feas, x="latency_ms", y="acc", hue="heads_max", hue_order=levels, palette=colors,
            style="family", markers=markers, style_order=fams, s=size, alpha=alpha, linewidth=0, legend=False,
            rasterized=True, ax=ax,
        )  # fmt: skip
    infeas = c[~c.index.isin(feas.index)]
    if len(infeas):
        ax.scatter(
            infeas["latency_ms"], infeas["acc"], marker="x", s=size, color="0.6", lw=0.8, rasterized=True
        )
        handles.append(Line2D([], [], ls="", marker="x", color="0.6", label=f"over budget ({len(infeas)})"))
    if len(front):
        f = front.sort_values("latency_ms")
        x = np.append(f["latency_ms"].to_numpy(), c["latency_ms"].max())
        y = np.append(f["val_accuracy"].to_numpy() * 100, f["val_accuracy"].iloc[-1] * 100)
        ax.step(x, y, where="post", color="black", lw=1.4, zorder=3)
        ax.scatter(
            f["latency_ms"],
            f["val_accuracy"] * 100,
            s=size * 2.5,
            facecolor="none",
            edgecolor="black",
            zorder=4,
        )
        handles.append(
            Line2D([], [], color="black", marker="o", mfc="none", label=f"search front ({len(front)})")
        )
    if finalists is not None and len(finalists):
        fx, fy = finalists["latency_ms"].to_numpy(), finalists["val_accuracy"].to_numpy() * 100
        ax.errorbar(
            fx, fy,
            xerr=[fx - finalists["latency_low"].to_numpy(), finalists["latency_high"].to_numpy() - fx],
            yerr=[fy - finalists["val_low"].to_numpy() * 100, finalists["val_high"].to_numpy() * 100 - fy],
            fmt="D", color="C1", ms=6, capsize=3, lw=1, zorder=5,
        )  # fmt: skip
        for r in finalists.itertuples():
            ax.annotate(_text(r.heads), (r.latency_ms, r.val_accuracy * 100), xytext=(5, -10),
                        textcoords="offset points", fontsize=8, color="C1")  # fmt: skip
        handles.append(
            Line2D([], [], ls="", marker="D", color="C1", label="finalists: mean over seeds,\n95% intervals")
        )
    if knee is not None:
        kx, ky = knee["latency_ms"], knee["val_accuracy"] * 100
        ax.scatter([kx], [ky], marker="*", s=260, color="crimson", edgecolor="white", zorder=6)
        ax.annotate(
            f"recommended: heads {_text(knee['heads'])} (d_model {int(knee['d_model'])})\n{ky:.2f}% at {kx:.3g} ms",
            xy=(kx, ky), xytext=(0.03, 0.97), textcoords="axes fraction", va="top", fontsize=9,
            bbox={"boxstyle": "round", "fc": "white", "ec": "crimson"},
            arrowprops={"arrowstyle": "->", "color": "crimson", "lw": 1}, zorder=7,
        )  # fmt: skip
        handles.append(Line2D([], [], ls="", marker="*", ms=12, color="crimson", label="recommended"))
    if c["latency_ms"].max() / max(c["latency_ms"].min(), 1e-12) > 20:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_xlabel(_latency_label(batch))
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title(
        f"Accuracy vs latency: {len(c)} architectures searched, {len(front)} on the search's Pareto front"
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
) -> Figure:
    """Rows: accuracy and latency; columns: d_model. Grey dots are architectures, the line their mean with a 95%
    bootstrap interval."""
    c = df.dropna(subset=[x]).copy()
    c["acc"] = c["val_accuracy"] * 100
    widths = (
        sorted(c["d_model"].dropna().unique()) if "d_model" in c and c["d_model"].notna().any() else [None]
    )
    with sns.axes_style("whitegrid"):
        fig = _figure(max(3.3 * len(widths) + 0.8, 6), 6.5)
        axes = fig.subplots(2, len(widths), sharey="row", squeeze=False)
    if c.empty:
        return _empty(fig, f"no architecture has {x}")
    present = set(c[x])
    levels = [v for v in order if v in present] + sorted(present - set(order)) if order else sorted(present)
    size = 3.0 if len(c) <= 400 else 1.8
    rows = (("acc", "validation accuracy (%)", "C0"), ("latency_ms", _latency_label(None), "C3"))
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
            ax.set_xlabel(xlabel if i == 1 else "")
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


def heads_figure(df: pd.DataFrame) -> Figure:
    """Accuracy and latency against the largest per-layer head count, per d_model."""
    return _effect_figure(df, "heads_max", "heads (most in any layer)", "Accuracy and latency by head count")


def dk_figure(df: pd.DataFrame, floors: Sequence[float] = ()) -> Figure:
    """Accuracy and latency against the smallest d_k of each trial, with the folklore and study floors marked."""
    return _effect_figure(
        df, "dk_min", "d_k (smallest in any layer)", "Accuracy and latency by head width d_k", shade_below=DK_FLOOR,
        floors=floors,
    )  # fmt: skip


def family_figure(df: pd.DataFrame) -> Figure:
    """Accuracy and latency per schedule family (uniform, increasing, decreasing, free), per d_model."""
    return _effect_figure(
        df, "family", "schedule family", "Accuracy and latency by head schedule", FAMILY_ORDER
    )


def heads_heatmap(front: pd.DataFrame) -> Figure:
    """Per-layer head counts of the Pareto trials (rows, fastest at the top), colour on a log scale."""
    f = front.sort_values("latency_ms")
    shown = f
    if len(f) > MAX_HEATMAP_ROWS:
        shown = f.iloc[np.linspace(0, len(f) - 1, MAX_HEATMAP_ROWS).round().astype(int)]
    heads = [list(h) for h in shown["heads"]] if "heads" in shown else []
    width = max((len(h) for h in heads), default=0)
    mat = pd.DataFrame(
        [h + [np.nan] * (width - len(h)) for h in heads],
        columns=[f"layer {i + 1}" for i in range(width)],
        index=[
            f"#{int(r.number)}  d{int(r.d_model)}  {r.val_accuracy * 100:.1f}%  {r.latency_ms:.3g} ms"
            for r in shown.itertuples()
        ],
    )
    fig = _figure(max(4.5, 1.0 * width + 4.0), max(3.0, 0.28 * len(mat) + 1.6))
    if mat.empty:
        return _empty(fig, "no architecture on the front")
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
        f"Heads per layer on the Pareto front ({len(f)} architectures{sub})\nrow: trial, d_model, val accuracy, latency",
        fontsize=10,
    )
    return fig


def hypervolume_figure(history: pd.DataFrame) -> Figure:
    """Hypervolume of the accuracy/latency front after each completed trial."""
    with sns.axes_style("whitegrid"):
        fig = _figure(8, 4.2)
        ax = fig.add_subplot()
    if history.empty:
        return _empty(fig, "no completed trial")
    ax.step(history["number"], history["hypervolume"], where="post", color="C2", lw=1.6)
    ax.set_xlabel("trial number")
    ax.set_ylabel("hypervolume (normalized, max 1.21)")
    ax.set_ylim(0, max(1.25, history["hypervolume"].max() * 1.05))
    ax.set_title(
        "Search progress: hypervolume of the Pareto front\n"
        f"objectives min-max normalized over the study (0 = best), reference point {HV_REFERENCE}",
        fontsize=10,
    )
    return fig


def bench_figure(bench: Sequence[Mapping[str, Any]]) -> Figure:
    """The attention benchmark: time per implementation (median, IQR whiskers) with speed-up labels."""
    df = pd.DataFrame(list(bench))
    if "speedup_vs_serial" not in df and (df["impl"] == "serial").any():
        df["speedup_vs_serial"] = df.loc[df["impl"] == "serial", "median_ms"].iloc[0] / df["median_ms"]
    for col in ("batch", "seq_len", "d_model", "heads", "device", "threads"):
        if col not in df:
            df[col] = "?"
    if "iqr_ms" not in df:
        df["iqr_ms"] = 0.0
    fig = _figure(7, 4.5)
    ax = fig.add_subplot()
    sns.barplot(data=df, x="impl", y="median_ms", hue="impl", legend=False, ax=ax, errorbar=None)
    ax.errorbar(
        range(len(df)), df["median_ms"], yerr=df["iqr_ms"] / 2, fmt="none", ecolor="black", capsize=4, lw=1
    )
    for i, (t, s) in enumerate(zip(df["median_ms"], df["speedup_vs_serial"], strict=True)):
        ax.annotate(f"{s:.2f}x", (i, t), xytext=(0, 6), textcoords="offset points", ha="center", va="bottom")
    ax.margins(y=0.15)
    r = df.iloc[0]
    ax.set_title(
        f"Self-attention forward, B={r.batch} T={r.seq_len} d_model={r.d_model} heads={r.heads}\n"
        f"{r.device}, {r.threads} thread(s)",
        fontsize=10,
    )
    ax.text(0.99, 0.98, "bar: median, whisker: ±IQR/2\nlabel: speed-up vs serial", transform=ax.transAxes,
            ha="right", va="top", fontsize=8)  # fmt: skip
    ax.set_xlabel("implementation")
    ax.set_ylabel("time per forward pass (ms)")
    return fig
