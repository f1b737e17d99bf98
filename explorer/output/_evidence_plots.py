"""The answer's figure: the trade-off the answer makes. Every finalist layout's paired difference from the best
(its interval at the rule's level) against its latency relative to the best (the ratio within re-timing rounds),
the margin drawn and the answer marked. It draws exactly what the answer rests on (the finalists' paired runs),
not the search's single short runs. The curves figure: the finalists' validation curves at the grid's horizon."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence

import numpy as np
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from explorer.answer import Answer, CostAxis, Evidence, Verdict, at_horizon, learning_curves
from explorer.output._plots import empty_figure, new_figure
from explorer.storage import TrialRecord

_COLORS = {
    Verdict.BEST: "C2",
    Verdict.WITHIN: "C2",
    Verdict.UNDECIDED: "C1",
    Verdict.EDGE: "0.65",
    Verdict.BEYOND: "0.45",
    Verdict.UNTESTED: "0.8",
}


def evidence_figure(ans: Answer, batch: int) -> Figure:
    """Paired difference from the best (y) against latency relative to the best (x) for each finalist; green:
    within the margin (filled: the answer), orange: undecided, light grey: at the margin's edge, grey: beyond the
    margin."""
    with sns.axes_style("whitegrid"):
        fig = new_figure(7.0, 5.2)
        ax = fig.subplots()
    best = next((c for c in ans.verdicts if c.verdict is Verdict.BEST), None)
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
            mfc=_COLORS[c.verdict] if answer or c.verdict is not Verdict.WITHIN else "white",
            ms=16 if answer else 8,
            capsize=4,
            lw=1.4,
        )
        ax.annotate(
            ",".join(map(str, c.arch.heads)), (x, y), textcoords="offset points", xytext=(6, 6), fontsize=8
        )
    ax.axhline(-ans.margin * scale, color="C2", ls="--", lw=1)
    # the margin's label outside the axes, on the right, where no layout's label reaches: the x range leaves
    # room inside for the labels beside the points
    ax.margins(x=0.12)
    ax.text(
        1.01,
        -ans.margin * scale,
        "minus the\nmargin",
        transform=ax.get_yaxis_transform(),
        va="center",
        ha="left",
        fontsize=8,
        color="C2",
        clip_on=False,
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
    what = "decoding time per token" if ans.cost_axis == CostAxis.DECODE else f"latency per batch of {batch}"
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


def curves_figure(ans: Answer, records: Sequence[TrialRecord]) -> Figure:
    """Each finalist layout's validation curve over its grid runs (mean, and the band from its lowest to its
    highest run), the epoch where the mean reaches the noise of its best marked; the horizon check's longer runs
    dashed."""
    with sns.axes_style("whitegrid"):
        fig = new_figure(7.0, 4.6)
        ax = fig.subplots()
    h = ans.horizon
    if h is None or ans.evidence is not Evidence.FINALISTS:
        return empty_figure(fig, "no finalist runs: no learning curves to draw")
    keys = [a.key for a in ans.candidates]
    curves = learning_curves(at_horizon(records, h), keys)
    if not curves:
        return empty_figure(fig, "no finished finalist run at the grid's horizon")
    bpb = ans.candidates[0].metric.direction == "minimize"
    scale = 1.0 if bpb else 100.0
    names = {a.key: ",".join(map(str, a.heads)) for a in ans.candidates}
    checked = learning_curves(records, keys, h.check_epochs) if ans.check is not None else []
    palette = sns.color_palette("colorblind", len(curves))
    colors = {c.key: palette[i] for i, c in enumerate(curves)}
    for c in curves:
        x = np.arange(1, c.epochs + 1)
        color = colors[c.key]
        ax.fill_between(x, np.array(c.low) * scale, np.array(c.high) * scale, color=color, alpha=0.08, lw=0)
        ax.plot(x, np.array(c.mean) * scale, color=color, lw=1.6, label=f"{names[c.key]} ({c.runs} runs)")
        ax.plot([c.plateau], [c.mean[c.plateau - 1] * scale], "o", color=color, ms=6, mec="white")
    for c in checked:
        x = np.arange(1, c.epochs + 1)
        ax.plot(x, np.array(c.mean) * scale, color=colors.get(c.key, "0.4"), lw=1.1, ls="--")
    ax.axvline(max(c.epochs for c in curves), color="0.5", lw=0.8, ls=":")
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation bits per byte (lower is better)" if bpb else "validation accuracy (%)")
    means = np.concatenate([np.array(c.mean) for c in (*curves, *checked)]) * scale
    top = means.max() if not bpb else means.min()
    lo, hi = np.percentile(means, 20), top  # the part of the curves where layouts differ
    pad = max(0.5, 0.15 * abs(hi - lo))
    ax.set_ylim(*sorted((lo - pad, hi + pad)) if not bpb else sorted((hi - pad, lo + pad)))
    # outside the axes, right of them: the curves keep the whole plot
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    note = (
        f"mean over each layout's runs at the grid's {max(c.epochs for c in curves)} epochs (band: lowest to highest run); dot: the "
        "first epoch within one standard error of the mean curve's best"
        + (f"; dashed: the horizon check's runs at {h.check_epochs} epochs" if checked else "")
    )
    fig.suptitle(
        "Did the finalists finish learning?\n" + textwrap.fill(note, int(fig.get_figwidth() * 13)),
        fontsize=10,
    )
    return fig
