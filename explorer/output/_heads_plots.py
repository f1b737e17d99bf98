"""Figures of the per-head analysis (explorer.measure._probe, explorer.analysis._heads): importance, masking curves, attention maps, statistics.

Each function takes the tables and arrays that explorer.analysis._heads computes and returns a matplotlib Figure (no
pyplot state), in the style of explorer/output/_plots.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from explorer.analysis import TOLERANCE
from explorer.output._plots import DPI


def _fig(w: float, h: float) -> Figure:
    return Figure(figsize=(w, h), dpi=DPI, layout="constrained")


def _grid(values: Sequence[np.ndarray]) -> np.ndarray:
    """Ragged per-layer vectors as a ``[layers, max heads]`` matrix padded with NaN."""
    width = max(len(v) for v in values)
    return np.array(
        [np.pad(np.asarray(v, float), (0, width - len(v)), constant_values=np.nan) for v in values]
    )


def importance_figure(importance: Sequence[np.ndarray], needed: Sequence[int] | None = None) -> Figure:
    """Heatmap of head importance, one row per layer (L2-normalized per layer; blank = no such head)."""
    mat = _grid(importance)
    labels = [
        f"layer {i + 1}" + (f" (needs {needed[i]}/{len(v)})" if needed is not None else "")
        for i, v in enumerate(importance)
    ]
    fig = _fig(max(5.0, 0.55 * mat.shape[1] + 3.2), 0.45 * len(mat) + 1.6)
    ax = fig.add_subplot()
    sns.heatmap(
        pd.DataFrame(mat, index=labels, columns=[str(h) for h in range(mat.shape[1])]),
        mask=np.isnan(mat),
        annot=mat.shape[1] <= 16,
        fmt=".2f",
        cmap="rocket_r",
        vmin=0,
        linewidths=0.5,
        linecolor="white",
        cbar_kws={"label": "importance (L2-norm. per layer)"},
        annot_kws={"fontsize": 7},
        ax=ax,
    )
    ax.set_xlabel("head")
    ax.set_ylabel("")
    ax.set_title(
        "Head importance (Michel et al., 2019)\nexpected |dL/d mask| per head over the validation split",
        fontsize=10,
    )
    return fig


def masking_figure(
    curve: pd.DataFrame, layer_curves: pd.DataFrame | None = None, tolerance: float = TOLERANCE
) -> Figure:
    """Validation accuracy as heads are masked: across layers (left) and one layer at a time (right)."""
    panels = 1 if layer_curves is None else 2
    with sns.axes_style("whitegrid"):
        fig = _fig(5.2 * panels, 4.0)
        axes = fig.subplots(1, panels, squeeze=False)[0]
    base = float(curve["accuracy"].iloc[0]) * 100
    c = curve.assign(acc=curve["accuracy"] * 100)
    sns.lineplot(data=c, x="n_masked", y="acc", marker="o", markersize=4, ax=axes[0])
    axes[0].set_title("All layers, least important head first", fontsize=10)
    axes[0].set_xlabel("heads masked")
    if layer_curves is not None:
        lc = layer_curves.assign(acc=layer_curves["accuracy"] * 100, layer=layer_curves["layer"] + 1)
        sns.lineplot(
            data=lc,
            x="n_masked",
            y="acc",
            hue="layer",
            marker="o",
            markersize=4,
            palette="viridis",
            ax=axes[1],
        )
        axes[1].set_title("One layer at a time (others intact)", fontsize=10)
        axes[1].set_xlabel("heads masked in the layer")
    for ax in axes:
        ax.axhline(base - tolerance * 100, color="0.4", ls="--", lw=1, label=f"-{tolerance * 100:g} point")
        ax.set_ylabel("validation accuracy (%)")
    axes[-1].legend(fontsize=8, title="layer" if layer_curves is not None else None)
    return fig


def attention_figure(
    maps: Sequence[np.ndarray], images: np.ndarray | None = None, labels: Sequence[str] | None = None
) -> Figure:
    """Attention maps of a few inputs: one row per (input, layer), one column per head.

    ``maps`` holds one ``[n, H, T, T]`` array per layer. With ``images`` (``[n, side, side]``, e.g. digits) each
    cell overlays the attention each patch receives (mean over query patches), on the patch grid upsampled to the
    image; without, each cell is the ``T x T`` map (rows: queries, columns: keys).
    """
    n, n_layers, width = maps[0].shape[0], len(maps), max(m.shape[1] for m in maps)
    fig = _fig(1.25 * width + 1.4, 1.25 * n * n_layers + 0.6)
    axes = fig.subplots(n * n_layers, width, squeeze=False)
    for i in range(n):
        for layer, m in enumerate(maps):
            row = axes[i * n_layers + layer]
            for h, ax in enumerate(row):
                ax.set_xticks([])
                ax.set_yticks([])
                if h >= m.shape[1]:
                    ax.set_axis_off()
                    continue
                if images is not None:
                    side, T = images.shape[-1], m.shape[-1]
                    g = math.isqrt(T)
                    received = m[i, h].mean(axis=0).reshape(g, g)  # attention each key patch gets
                    ax.imshow(images[i], cmap="gray_r", extent=(0, side, side, 0))
                    ax.imshow(
                        np.kron(received, np.ones((side // g, side // g))),
                        cmap="magma",
                        alpha=0.55,
                        extent=(0, side, side, 0),
                    )
                else:
                    sns.heatmap(
                        m[i, h],
                        cmap="magma",
                        vmin=0,
                        cbar=False,
                        square=True,
                        xticklabels=False,
                        yticklabels=False,
                        ax=ax,
                    )
                if i == 0 and layer == 0:
                    ax.set_title(f"head {h}", fontsize=8)
            tag = labels[i] if labels is not None else f"input {i}"
            row[0].set_ylabel(f"{tag}\nlayer {layer + 1}", fontsize=8)
    kind = (
        "attention received per patch (mean over queries)" if images is not None else "query x key maps"
    ) + ", colour scaled per cell"
    fig.suptitle(f"Attention per head: {kind}", fontsize=10)
    return fig


def attention_stats_figure(stats: pd.DataFrame) -> Figure:
    """Per head, grouped by layer: attention entropy (uniform = log T, dashed) and mean similarity to the
    other heads of its layer (JS similarity, 1 = identical maps)."""
    s = stats.assign(layer=stats["layer"] + 1)
    with sns.axes_style("whitegrid"):
        fig = _fig(10, 4.0)
        ax1, ax2 = fig.subplots(1, 2)
    sns.barplot(data=s, x="layer", y="entropy", hue="head", palette="crest", legend=False, ax=ax1)
    ax1.axhline(float(s["uniform_entropy"].iloc[0]), color="0.4", ls="--", lw=1)
    ax1.set_ylabel("mean attention entropy (nats)")
    ax1.set_title("Entropy per head (dashed: uniform attention)", fontsize=10)
    sns.barplot(data=s, x="layer", y="similarity_mean", hue="head", palette="crest", legend=False, ax=ax2)
    ax2.set_ylim(0, 1.02)
    ax2.set_ylabel("mean JS similarity to other heads")
    ax2.set_title("Redundancy: similarity of each head's maps to its layer's others", fontsize=10)
    return fig


# --------------------------------------------------------------------------------------------- one trial
