"""Intervals for small samples: a few seeds per architecture, accuracies measured on a split of ``n_eval``.

Accuracies are fractions in [0, 1] measured on ``n_eval`` examples, so a run that scores 270/270 is data, not a
degenerate case: every interval here stays inside the range of its values and has positive width where the
docstring says so (logit-scale t intervals, Wilson for one run). Unbounded metrics (bits per byte) get t
intervals on their own scale. Timings: :mod:`explorer.answer._latency_stats`; tests of a difference:
:mod:`explorer.answer._significance`. Pure functions over numpy and scipy; nothing is printed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats
from scipy.special import expit, logit


@dataclass(frozen=True)
class Interval:
    """A point ``estimate`` (not always inside, see the builder) with an interval [``low``, ``high``].

    ``n`` is the number of values it rests on (seeds, timings, samples); ``method`` a short phrase saying how it
    was computed.
    """

    estimate: float
    low: float
    high: float
    n: int
    method: str

    @property
    def width(self) -> float:
        """high - low."""
        return self.high - self.low

    def contains(self, x: float) -> bool:
        """Whether low <= x <= high."""
        return self.low <= x <= self.high


def t_quantile(level: float, df: int) -> float:
    """The two-sided ``level`` quantile of Student's t with ``df`` degrees of freedom."""
    return float(stats.t.ppf(0.5 + level / 2, df))


def proportion_ci(successes: int, n: int, level: float = 0.95, method: str = "wilson") -> tuple[float, float]:
    """Interval (low, high) for a binomial proportion, inside [0, 1], of positive width for n >= 1.

    ``method`` is ``"wilson"`` (the score interval, in closed form: the report computes hundreds of them) or
    ``"exact"`` (Clopper-Pearson, from beta quantiles); both equal scipy's ``binomtest(...).proportion_ci``.
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need n >= 1 and 0 <= successes <= n, got {successes}/{n}")
    if method not in ("wilson", "exact"):
        raise ValueError(f"method must be 'wilson' or 'exact', not {method!r}")
    k, alpha = float(successes), 1 - level
    if method == "exact":
        low = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
        high = 1.0 if k == n else float(stats.beta.ppf(1 - alpha / 2, k + 1, n - k))
        return low, high
    z = float(stats.norm.ppf(1 - alpha / 2))
    center = (k + z * z / 2) / (n + z * z)
    half = z / (n + z * z) * math.sqrt(k * (n - k) / n + z * z / 4)
    return max(0.0, center - half), min(1.0, center + half)


Spread = tuple[float, int]  # a standard deviation and its degrees of freedom


def pool(spreads: Sequence[Spread]) -> Spread | None:
    """The pooled standard deviation of several groups' spreads (weighted by their degrees of freedom)."""
    df = sum(d for _, d in spreads if d > 0)
    if df == 0:
        return None
    return math.sqrt(sum(d * sd**2 for sd, d in spreads if d > 0) / df), df


def _logits(values: Sequence[float], n_eval: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    v = np.asarray(values, dtype=float)
    if v.size < 1 or n_eval < 1 or np.any((v < 0) | (v > 1)) or np.any(np.isnan(v)):
        raise ValueError("need one or more accuracies in [0, 1] and n_eval >= 1")
    k = np.round(v * n_eval)
    return v, logit((k + 0.5) / (n_eval + 1))


def logit_spread(values: Sequence[float], n_eval: int) -> Spread:
    """Seed-to-seed spread of accuracies on the logit scale (smoothed as in :func:`accuracy_mean_ci`), with its
    degrees of freedom (0 for a single value): what :func:`pool` combines across architectures."""
    _, z = _logits(values, n_eval)
    return (float(z.std(ddof=1)), len(z) - 1) if len(z) > 1 else (0.0, 0)


def _logit_interval(
    values: Sequence[float], n_eval: int, level: float, pooled: Spread | None, extra: float, what: str
) -> Interval:
    v, z = _logits(values, n_eval)
    m = len(v)
    k = np.round(v * n_eval)
    if pooled is not None and pooled[1] > 0 and pooled[0] > 0:
        s, df = pooled
        method = (
            f"t on the logit scale, {m} seed{'s' * (m != 1)}, seed spread pooled over the finalists ({df} df)"
        )
    elif m > 1:
        s, df = float(z.std(ddof=1)), m - 1
        method = f"t on the logit scale, {m} seeds"
        if s == 0:
            s = math.sqrt(1 / (k[0] + 0.5) + 1 / (n_eval - k[0] + 0.5))
            method += f", all equal: binomial spread of one run on {n_eval} examples"
    else:
        low, high = proportion_ci(int(k[0]), n_eval, level)
        if extra:  # one run: the binomial noise of a new run as well as of this one
            se = math.sqrt(1 / (k[0] + 0.5) + 1 / (n_eval - k[0] + 0.5))
            half = float(stats.norm.ppf(0.5 + level / 2)) * se * math.sqrt(2)
            low, high = float(expit(z[0] - half)), float(expit(z[0] + half))
        return Interval(float(v[0]), low, high, 1, f"{what} of one run on {n_eval} examples (binomial)")
    half = t_quantile(level, df) * s * math.sqrt(1 / m + extra)
    est = float(v.mean())
    center = float(z.mean())
    low, high = min(float(expit(center - half)), est), max(float(expit(center + half)), est)
    return Interval(est, low, high, m, method)


def accuracy_mean_ci(
    values: Sequence[float], n_eval: int, level: float = 0.95, pooled: Spread | None = None
) -> Interval:
    """Interval for an architecture's mean accuracy over seeds, each accuracy measured on ``n_eval`` examples.

    One value: the Wilson interval of that run. Two or more: accuracies are smoothed to (k + 0.5) / (n_eval + 1),
    k = round(v * n_eval), and a t interval for the mean logit is mapped back with the logistic function, so it
    lies inside (0, 1). Its spread is ``pooled`` (a seed spread pooled over several architectures, with its
    degrees of freedom: :func:`pool` of :func:`logit_spread`) when given, else the seeds' own (m - 1 df); if all
    seeds agree, the binomial SE of one run on the logit scale, sqrt(1/(k+0.5) + 1/(n_eval-k+0.5)), stands in,
    so the width is never zero. The estimate is the plain mean of ``values``; the interval is widened to include
    it (all-perfect seeds would otherwise put 1.0 just above an interval the smoothing keeps off the boundary).
    """
    return _logit_interval(values, n_eval, level, pooled, 0.0, "Wilson interval")


def accuracy_rerun_interval(
    values: Sequence[float], n_eval: int, n_new: int = 3, level: float = 0.95, pooled: Spread | None = None
) -> Interval:
    """Prediction interval for the mean accuracy of ``n_new`` fresh seeds of the same architecture: what a user
    who re-runs it should see. As :func:`accuracy_mean_ci`, with the half-width's sqrt(1/m) widened to
    sqrt(1/m + 1/n_new)."""
    return _logit_interval(values, n_eval, level, pooled, 1.0 / n_new, "prediction interval")


def raw_spread(values: Sequence[float]) -> Spread:
    """Seed-to-seed spread of an unbounded metric (bits per byte) on its own scale, with its degrees of freedom
    (0 for a single value): what :func:`pool` combines across architectures for :func:`mean_ci`."""
    x = np.asarray(values, dtype=float)
    return (float(x.std(ddof=1)), len(x) - 1) if len(x) > 1 else (0.0, 0)


def _raw_interval(
    values: Sequence[float], level: float, pooled: Spread | None, se: float | None, extra: float, what: str
) -> Interval:
    x = np.asarray(values, dtype=float)
    if x.size < 1 or np.any(np.isnan(x)):
        raise ValueError("need one or more values, none NaN")
    m, est = len(x), float(x.mean())
    if pooled is not None and pooled[1] > 0 and pooled[0] > 0:
        s, df = pooled
        method = f"t, {m} seed{'s' * (m != 1)}, seed spread pooled over the finalists ({df} df)"
    elif m > 1 and float(x.std(ddof=1)) > 0:
        s, df = float(x.std(ddof=1)), m - 1
        method = f"t, {m} seeds"
    elif se is not None and se > 0:
        # one run (or identical ones): the run's own noise over its evaluation split
        half = float(stats.norm.ppf(0.5 + level / 2)) * se * math.sqrt(1 / m + extra)
        return Interval(
            est, est - half, est + half, m, f"{what} from one run's standard error over its split"
        )
    else:
        return Interval(est, est, est, m, f"{what}: no spread to use (one run, no standard error recorded)")
    half = t_quantile(level, int(df)) * s * math.sqrt(1 / m + extra)
    return Interval(est, est - half, est + half, m, method)


def mean_ci(
    values: Sequence[float], level: float = 0.95, pooled: Spread | None = None, se: float | None = None
) -> Interval:
    """Interval for an architecture's mean over seeds of an unbounded metric (validation bits per byte).

    A t interval on the metric's own scale: its spread is ``pooled`` (:func:`pool` of :func:`raw_spread` over
    several architectures) when given, else the seeds' own (m - 1 df). With one run, or seeds that all agree,
    the normal interval from ``se``, the standard error of the run's value over its evaluation split (the
    spread of its per-window losses), stands in; with neither the interval is the point itself.
    """
    return _raw_interval(values, level, pooled, se, 0.0, "normal interval")


def rerun_interval(
    values: Sequence[float],
    n_new: int = 3,
    level: float = 0.95,
    pooled: Spread | None = None,
    se: float | None = None,
) -> Interval:
    """Prediction interval for the mean of ``n_new`` fresh seeds (an unbounded metric): :func:`mean_ci` with
    sqrt(1/m) widened to sqrt(1/m + 1/n_new) (with one run, the split's noise of a new run as well)."""
    return _raw_interval(values, level, pooled, se, 1.0 / n_new, "prediction interval")


def median_ci(samples: Sequence[float], level: float = 0.95) -> Interval:
    """Distribution-free interval for a median from order statistics; estimate = the sample median.

    The sorted pair (x_(j), x_(n-1-j)), 0-based, covers the median with probability 1 - 2 P(B <= j),
    B ~ binomial(n, 1/2); the narrowest pair with coverage >= ``level`` is returned. With too few samples for
    that, (min, max) is returned and its actual coverage stated in ``method``.
    """
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n < 1:
        raise ValueError("median_ci needs at least one sample")
    j = 0
    while j + 1 <= (n - 1) // 2 and 1 - 2 * stats.binom.cdf(j + 1, n, 0.5) >= level:
        j += 1
    coverage = 1 - 2 * float(stats.binom.cdf(j, n, 0.5))
    method = f"order statistics, {100 * coverage:.1f}% coverage with {n} samples"
    return Interval(float(np.median(x)), float(x[j]), float(x[n - 1 - j]), n, method)
