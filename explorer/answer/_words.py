"""Figures as the answer's sentences write them: probabilities and times."""

from __future__ import annotations

import math


def prob_text(p: float | None) -> str:
    """A probability as the report and the command line write it: "below 1%" and "above 99%" at the ends (a
    rounded 0% or 100% would claim more than was computed), else whole percents rounded down, so a probability
    below the rule's 95% is never written as 95%."""
    if p is None or math.isnan(p):
        return "n/a"
    if p < 0.01:
        return "below 1%"
    if p > 0.99:
        return "above 99%"
    return f"{math.floor(p * 100 + 1e-9):.0f}%"


def minutes_text(runs: int, pace_s: float | None) -> str:
    """``runs`` runs as time at a stage's measured pace ("" when no pace is known yet)."""
    if pace_s is None:
        return ""
    minutes = runs * pace_s / 60
    return f"about {minutes:.0f} minutes" if minutes >= 1.5 else f"about {minutes * 60:.0f} s"
