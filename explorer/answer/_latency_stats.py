"""Intervals for timings: where the median of a new, independent timing of the same model should fall.

Timings are positive and spread multiplicatively, so they are compared on the log scale; the timer's own
block-to-block spread is a floor for the spread between a few timings. Pure functions over numpy and scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from explorer.answer._intervals import Interval, Spread, t_quantile


def log_spread(medians: Sequence[float]) -> Spread:
    """Spread of timings on the log scale with its degrees of freedom (0 for one timing)."""
    x = np.asarray(medians, dtype=float)
    return (float(np.log(x).std(ddof=1)), len(x) - 1) if len(x) > 1 else (0.0, 0)


def block_spread(medians: Sequence[float], iqrs: Sequence[float]) -> float:
    """The timer's own spread as a log-scale standard deviation: the median over timings of IQR / median of
    their block times, / 1.349 (the IQR of a normal distribution in standard deviations); 0 with no IQR.

    A floor for :func:`latency_interval`: fresh-process re-timings of one model minutes apart agreed within
    +-0.8% where 20 later timings in new processes spread over -2%..+6% (benchmarks/deploy.md, 10:55); the
    block-to-block spread of one timing is of that larger order.
    """
    ratios = [i / m for m, i in zip(medians, iqrs, strict=True) if m > 0 and i >= 0]
    return float(np.median(ratios)) / 1.349 if ratios else 0.0


def latency_interval(
    medians: Sequence[float],
    level: float = 0.95,
    within: Sequence[float] | None = None,
    pooled: Spread | None = None,
    floor: float = 0.0,
) -> Interval:
    """Prediction interval (ms) for the median a new, independent timing (say, in a fresh process) would give.

    From m timings (each a median) with some spread: on the log scale, mean +- t_{m-1} s sqrt(1 + 1/m), mapped
    back with exp. With one timing, or all equal, the spread s comes from ``within`` (the timer's own block times
    of that measurement), with m = len(within), centred on the log of the estimate; if that spread is exactly 0
    the interval is the estimate +- 1%. ``pooled`` (a log-scale spread pooled over several architectures timed
    the same way, with its degrees of freedom) replaces the timings' own when given. Returns an
    :class:`Interval` whose estimate is the median of ``medians``; raises ValueError for a non-positive time or
    when there is no spread to use.

    ``floor`` (a log-scale standard deviation) is the least spread used: a few timings taken minutes apart can
    agree more closely than a timing taken later will, when the machine's speed drifts on a longer scale (see
    :func:`block_spread`). The method says when the floor set the width.
    """
    x = np.asarray(medians, dtype=float)
    if x.size < 1 or not np.all(x > 0):
        raise ValueError("latency_interval needs one or more positive timings")
    est = float(np.median(x))
    logs = np.log(x)
    s = float(logs.std(ddof=1)) if len(x) > 1 else 0.0
    df = len(x) - 1
    if pooled is not None and pooled[1] > 0 and pooled[0] > 0:
        s, df = pooled
        m, center = len(x), float(logs.mean())
        method = (
            f"log-scale t prediction interval, {len(x)} timing(s), spread pooled over the finalists ({df} df)"
        )
    elif s > 0:
        m, center, method = len(x), float(logs.mean()), f"log-scale t prediction interval, {len(x)} timings"
    else:
        w = np.asarray(within if within is not None else [], dtype=float)
        if len(w) < 2:
            raise ValueError("latency_interval needs at least two timings or the block times of one (within)")
        if not np.all(w > 0):
            raise ValueError("block times must be positive")
        m, center, s = len(w), math.log(est), float(np.log(w).std(ddof=1))
        df = m - 1
        method = f"log-scale t prediction interval from the {m} block times of one timing"
    quantile = t_quantile(level, df)
    if floor > s:
        # The floor is a spread known from the timer's blocks, not estimated from these few timings: a normal
        # quantile goes with it (a t with their 2 degrees of freedom would multiply a 7% floor into +-37%).
        s, quantile = floor, float(stats.norm.ppf(0.5 + level / 2))
        method += f", spread floored at the timer's own block spread ({100 * floor:.1f}%, normal quantile)"
    if s == 0:  # a timer too coarse to see any spread
        return Interval(est, 0.99 * est, 1.01 * est, len(x), method + ", no spread: +-1% floor")
    half = quantile * s * math.sqrt(1 + 1 / m)
    return Interval(est, math.exp(center - half), math.exp(center + half), len(x), method)
