"""The answer's figure: the trade-off the answer makes. Every finalist layout's paired difference from the best
(its interval at the rule's level) against its latency relative to the best (the ratio within re-timing rounds),
the margin drawn and the answer marked. It draws exactly what the answer rests on (the finalists' paired runs),
not the search's single short runs."""

from __future__ import annotations

import math
import textwrap

import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from explorer.answer import Answer
from explorer.output._plots import empty_figure, new_figure

__all__ = ["evidence_figure"]

_COLORS = {"best": "C2", "within": "C2", "undecided": "C1", "edge": "0.65", "beyond": "0.45"}


def evidence_figure(ans: Answer, batch: int) -> Figure:
    """Paired difference from the best (y) against latency relative to the best (x) for each finalist; green:
    within the margin (filled: the answer), orange: undecided, light grey: at the margin's edge, grey: beyond the
    margin."""
    with sns.axes_style("whitegrid"):
        fig = new_figure(7.0, 5.2)
        ax = fig.subplots()
    best = next((c for c in ans.verdicts if c.verdict == "best"), None)
    if best is None or ans.recommended is None:
        return empty_figure(fig, "no finalist runs: the answer rests on the search alone")
    bpb = best.arch.metric.direction == "minimize"
    scale = 1.0 if bpb else 100.0
    to_best = best.latency_ratio  # best / answer; each layout's ratio to the best is its ratio over this
    for c in ans.verdicts:
        x = c.latency_ratio / to_best if to_best and not math.isnan(c.latency_ratio) else math.nan
        vs = c.versus_best
        y, low, high = (0.0, 0.0, 0.0) if vs is None else (vs.diff * scale, vs.low * scale, vs.high * scale)
        answer = c.arch.key == ans.recommended.key
        ax.errorbar(
            [x],
            [y],
            yerr=[[y - low], [high - y]],
            fmt="*" if answer else "o",
            color=_COLORS[c.verdict],
            mfc=_COLORS[c.verdict] if answer or c.verdict != "within" else "white",
            ms=16 if answer else 8,
            capsize=4,
            lw=1.4,
        )
        ax.annotate(
            ",".join(map(str, c.arch.heads)), (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8
        )
    ax.axhline(-ans.margin * scale, color="C2", ls="--", lw=1)
    ax.text(
        ax.get_xlim()[0],
        -ans.margin * scale,
        " minus the margin",
        va="bottom",
        ha="left",
        fontsize=8,
        color="C2",
    )
    ax.axhline(0.0, color="0.6", lw=0.8)
    ax.set_xscale("log")
    ratio_format = FuncFormatter(lambda v, _: f"{v:.2g}x")
    ax.xaxis.set_major_formatter(ratio_format)
    ax.xaxis.set_minor_formatter(ratio_format)
    unit = "bits per byte" if bpb else "accuracy points"
    ax.set_ylabel(
        f"paired difference from the best ({unit}; higher is better)"
        if not bpb
        else "paired difference from the best (minus bits per byte; higher is better)"
    )
    what = "decoding time per token" if ans.cost_axis == "decode" else f"latency per batch of {batch}"
    ax.set_xlabel(f"{what}, relative to the best (within-round ratio; left is faster)")
    level = f"{100 * (1 - 2 * ans.risk):.3g}%"
    note = (
        f"each finalist's mean paired difference from the most accurate layout with its {level} interval; star: "
        "the answer; green: within the margin, orange: undecided, light grey: at the margin's edge, grey: beyond "
        "the margin"
    )
    fig.suptitle(
        "The trade-off the answer makes\n" + textwrap.fill(note, int(fig.get_figwidth() * 13)), fontsize=10
    )
    return fig
