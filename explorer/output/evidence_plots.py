"""The answer's figure: every finalist layout's cross-validated quality and latency with their 95% intervals, the
equivalence class and the answer marked. It draws exactly what the answer rests on (the finalists' paired runs),
not the search's single short runs."""

from __future__ import annotations

import textwrap

import seaborn as sns
from matplotlib.figure import Figure

from explorer.insight.recommend import Answer
from explorer.output.plots import empty_figure, new_figure

__all__ = ["evidence_figure"]

_COLORS = {"best": "C2", "equivalent": "C2", "undecided": "C1", "worse": "0.45"}


def evidence_figure(ans: Answer, batch: int) -> Figure:
    """Quality (top) and latency (bottom) of each candidate, ordered by its largest head count then by
    latency; green: the class (filled: the answer), orange: undecided, grey: worse by more than the margin."""
    with sns.axes_style("whitegrid"):
        fig = new_figure(max(6.0, 0.75 * len(ans.verdicts) + 2.5), 6.4)
        top, bottom = fig.subplots(2, 1, sharex=True)
    if not ans.verdicts:
        return empty_figure(fig, "no finalist runs: the answer rests on the search alone")
    cands = sorted(ans.verdicts, key=lambda c: (max(c.arch.heads), c.arch.latency.estimate))
    bpb = cands[0].arch.metric.direction == "minimize"
    scale = 1.0 if bpb else 100.0
    rec = ans.recommended.key if ans.recommended else None
    for x, c in enumerate(cands):
        q, lat = c.arch.quality, c.arch.cost(ans.cost_axis) or c.arch.latency
        face = _COLORS[c.verdict] if c.arch.key == rec or c.verdict not in ("best", "equivalent") else "white"
        for ax, i in ((top, q), (bottom, lat)):
            k = scale if ax is top else 1.0
            ax.errorbar([x], [i.estimate * k], yerr=[[(i.estimate - i.low) * k], [(i.high - i.estimate) * k]],
                        fmt="o", color=_COLORS[c.verdict], mfc=face, ms=8, capsize=4, lw=1.4)  # fmt: skip
    if ans.best is not None and not bpb:
        edge = (ans.best.quality.estimate - ans.margin) * scale
        top.axhline(edge, color="C2", ls="--", lw=1)
        top.text(-0.4, edge, "the best minus the margin", va="bottom", ha="left", fontsize=8, color="C2")
    top.set_ylabel("validation bits per byte" if bpb else "cross-validated accuracy (%)")
    what = "decoding (ms per token)" if ans.cost_axis == "decode" else f"latency (ms per batch of {batch})"
    bottom.set_ylabel(what)
    bottom.set_xticks(range(len(cands)), [",".join(map(str, c.arch.heads)) for c in cands], rotation=30)
    bottom.set_xlabel("heads per layer")
    note = ("finalist layouts, each a mean over its paired runs with its 95% interval; green: the answer's class "
            "(filled: the answer), orange: undecided, grey: worse by more than the margin")  # fmt: skip
    fig.suptitle("What the answer rests on\n" + textwrap.fill(note, int(fig.get_figwidth() * 13)), fontsize=10)
    return fig
