"""The study-level figures of the report: search progress (hypervolume) and the attention benchmark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from explorer.answer import HV_REFERENCE
from explorer.output._plots import empty_figure, new_figure


def hypervolume_figure(history: pd.DataFrame) -> Figure:
    """Hypervolume of the accuracy/latency front after each completed trial."""
    with sns.axes_style("whitegrid"):
        fig = new_figure(8, 4.2)
        ax = fig.add_subplot()
    if history.empty:
        return empty_figure(fig, "no completed trial")
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
    fig = new_figure(7, 4.5)
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
    ax.text(
        0.99,
        0.98,
        "bar: median, whisker: ±IQR/2\nlabel: speed-up vs serial",
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize=8,
    )
    ax.set_xlabel("implementation")
    ax.set_ylabel("time per forward pass (ms)")
    return fig
