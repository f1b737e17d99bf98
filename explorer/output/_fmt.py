"""Numbers and layouts as the report writes them: the one place figures become text.

Quality is written in the task's terms: validation accuracy in percent with differences in points, or
validation bits per byte (a loss, lower is better) with differences in bits per byte.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from explorer.answer import (
    Answer,
    Architecture,
    CostAxis,
    Evidence,
    Interval,
    PairedDifference,
    attention_kind,
    prob_text as prob,
)
from explorer.measurements import QualityMetric


def pct(x: float | None) -> str:
    return "n/a" if x is None or pd.isna(x) else f"{x * 100:.2f}"


def num(x: float | None, fmt: str = ".3g") -> str:
    return "n/a" if x is None or pd.isna(x) else format(x, fmt)


def heads(heads: Sequence[int]) -> str:
    return ",".join(map(str, heads))


def kv_text(a: Architecture) -> str:
    """(heads, kv_heads) per layer, e.g. "8/2,8/2", and the kind of attention."""
    pairs = ",".join(f"{h}/{k}" for h, k in zip(a.heads, a.kv_heads, strict=True))
    return f"{pairs} ({attention_kind(a.config)})"


def is_bpb(metric: QualityMetric) -> bool:
    return metric.direction == "minimize"


def quality_value(metric: QualityMetric, x: float | None) -> str:
    """One quality figure: "85.21%" (accuracy) or "3.412" (bits per byte)."""
    return num(x, ".3f") if is_bpb(metric) else f"{pct(x)}%"


def quality_column(metric: QualityMetric) -> str:
    """The short column name of the quality in tables."""
    return "val bits/byte" if is_bpb(metric) else "val acc (%)"


def interval_text(metric: QualityMetric, i: Interval) -> str:
    if is_bpb(metric):
        return f"{num(i.estimate, '.3f')} [{num(i.low, '.3f')}, {num(i.high, '.3f')}] bits/byte"
    return f"{pct(i.estimate)}% [{pct(i.low)}, {pct(i.high)}]"


def diff_text(metric: QualityMetric, d: float, low: float | None = None, high: float | None = None) -> str:
    if is_bpb(metric):
        span = "" if low is None else f" [{low:+.3f}, {high:+.3f}]"
        return f"{d:+.3f} bits per byte{span}"
    span = "" if low is None else f" [{low * 100:+.2f}, {high * 100:+.2f}]"  # type: ignore[operator]
    return f"{d * 100:+.2f} points{span}"


def quality_text(a: Architecture) -> str:
    return interval_text(a.metric, a.quality)


def latency_text(a: Architecture, axis: CostAxis = CostAxis.LATENCY) -> str:
    i = a.cost(axis)
    if i is None:
        return "not measured"
    return f"{num(i.estimate)} ms [{num(i.low)}, {num(i.high)}]"


def runs_text(a: Architecture, evidence: Evidence) -> str:
    if evidence is Evidence.FINALISTS:
        return f"mean of {a.n} run{'s' * (a.n != 1)} of a fixed {epochs_text(a.epochs)}"
    return f"one run of {epochs_text(a.epochs)}"


def epochs_text(epochs: float) -> str:
    """``epochs`` as a count of epochs: "1 epoch", "40 epochs"."""
    return f"{epochs:.0f} epoch{'s' * (round(epochs) != 1)}"


def score_diff_text(metric: QualityMetric, d: PairedDifference) -> str:
    """A paired difference of scores (higher is better) in the metric's terms, with its 95% interval: points
    of accuracy, or bits per byte (where a lower loss is the better score, so the signs flip back)."""
    if is_bpb(metric):
        return diff_text(metric, -d.diff, -d.high, -d.low)
    return diff_text(metric, d.diff, d.low, d.high)


def margin_text(metric: QualityMetric, margin: float) -> str:
    """The answer's margin in words: "1 point" of accuracy, or "0.02 bits per byte"."""
    if is_bpb(metric):
        return f"{margin:.3g} bits per byte"
    pts = margin * 100
    return f"{pts:g} point{'s' * (pts != 1)}"


def mib(n_bytes: float | None) -> str:
    """Bytes as MiB, three significant figures."""
    return num(None if n_bytes is None else n_bytes / 2**20, ".3g")


def claim(ans: Answer) -> str:
    """What the answer is, in the rule's words: the fastest layout placed within the margin, and how sure."""
    margin = margin_text(ans.best.metric, ans.margin) if ans.best else "the margin"
    p = ans.confidence if ans.confidence is not None else math.nan
    asked = f"{num(100 * (1 - ans.risk), '.3g')}%"
    if ans.placed and ans.decided:
        return (
            f"the fastest layout placed within {margin} of the best, with probability {prob(p)} (the rule asks "
            f"{asked}); "
            + (
                "no finalist is faster"
                if ans.next_faster is None
                else "the next faster finalist is placed beyond the margin or at its edge (layouts are tested in "
                "order of latency)"
            )
            + ", so the answer is decided."
        )
    if ans.placed and ans.contradicted:
        assert ans.check is not None
        return (
            f"the fastest layout placed within {margin} of the best, with probability {prob(p)} (the rule asks "
            f"{asked}), at {ans.check.epochs} epochs; the runs trained {ans.check.long} epochs contradict that "
            "verdict (the horizon check below), so the answer is not decided."
        )
    if ans.placed:
        return (
            f"the fastest layout placed within {margin} of the best so far, with probability {prob(p)} (the rule "
            f"asks {asked}); the next faster finalist is still undecided, so the answer is not decided."
        )
    return (
        f"the most accurate layout; no layout is yet placed within {margin} of the best with probability "
        f"{asked} (this one: {prob(p)}), so the answer is not decided."
    )
