"""Statistics for small samples of bounded values: accuracies, a few seeds per architecture, repeated timings.

The project's one statistics module. Accuracies are fractions in [0, 1] measured on ``n_eval`` examples, so a
run that scores 270/270 is data, not a degenerate case: every interval here stays inside the range of its values
and has positive width where the docstring says so. Comparisons use permutation tests (exact when the splits
can be enumerated) and percentile bootstrap intervals; no normality is assumed except where stated. Pure
functions over numpy, scipy and the standard library; nothing is printed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy import stats
from scipy.special import expit, logit

__all__ = [
    "Comparison",
    "Interval",
    "Spread",
    "accuracy_mean_ci",
    "accuracy_rerun_interval",
    "accuracy_se",
    "block_spread",
    "bootstrap_diff_ci",
    "compare",
    "kendall_tau",
    "latency_interval",
    "log_spread",
    "logit_spread",
    "mean_difference",
    "median_ci",
    "minimum_detectable_effect",
    "mean_ci",
    "raw_spread",
    "rerun_interval",
    "permutation_test",
    "pool",
    "proportion_ci",
    "stratified_permutation_test",
]

_ALTERNATIVES = ("two-sided", "greater", "less")
_EPS = np.finfo(float).eps * 100  # relative tolerance for ties in a null distribution (as scipy uses)
_CHUNK = 2000  # Monte Carlo resamples drawn at once

Strata = Sequence[tuple[Sequence[float], Sequence[float]]]


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


def _t(level: float, df: int) -> float:
    return float(stats.t.ppf(0.5 + level / 2, df))


def _check_alternative(alternative: str) -> None:
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, not {alternative!r}")


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


def accuracy_se(p: float, n: int) -> float:
    """Binomial standard error sqrt(p (1 - p) / n), with p clipped to [0.5/n, 1 - 0.5/n] so it is never 0."""
    if n < 1:
        raise ValueError(f"need n >= 1, got {n}")
    q = min(max(p, 0.5 / n), 1 - 0.5 / n)
    return math.sqrt(q * (1 - q) / n)


Spread = tuple[float, int]  # a standard deviation and its degrees of freedom


def pool(spreads: Sequence[Spread]) -> Spread | None:
    """The pooled standard deviation of several groups' spreads (weighted by their degrees of freedom)."""
    df = sum(d for _, d in spreads if d > 0)
    if df == 0:
        return None
    return math.sqrt(sum(d * sd**2 for sd, d in spreads if d > 0) / df), df


def _logits(values: Sequence[float], n_eval: int) -> tuple[np.ndarray, np.ndarray]:
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
    half = _t(level, df) * s * math.sqrt(1 / m + extra)
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
    elif (
        se is not None and se > 0
    ):  # one run (or identical ones): the run's own noise over its evaluation split
        half = float(stats.norm.ppf(0.5 + level / 2)) * se * math.sqrt(1 / m + extra)
        return Interval(
            est, est - half, est + half, m, f"{what} from one run's standard error over its split"
        )
    else:
        return Interval(est, est, est, m, f"{what}: no spread to use (one run, no standard error recorded)")
    half = _t(level, int(df)) * s * math.sqrt(1 / m + extra)
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
    quantile = _t(level, df)
    if floor > s:
        # The floor is a spread known from the timer's blocks, not estimated from these few timings: a normal
        # quantile goes with it (a t with their 2 degrees of freedom would multiply a 7% floor into +-37%).
        s, quantile = floor, float(stats.norm.ppf(0.5 + level / 2))
        method += f", spread floored at the timer's own block spread ({100 * floor:.1f}%, normal quantile)"
    if s == 0:  # a timer too coarse to see any spread
        return Interval(est, 0.99 * est, 1.01 * est, len(x), method + ", no spread: +-1% floor")
    half = quantile * s * math.sqrt(1 + 1 / m)
    return Interval(est, math.exp(center - half), math.exp(center + half), len(x), method)


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


def _diff_of_means(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def permutation_test(
    a: Sequence[float],
    b: Sequence[float],
    alternative: str = "two-sided",
    n_resamples: int = 20000,
    seed: int = 0,
) -> tuple[float, bool]:
    """Permutation test of mean(a) - mean(b) (``scipy.stats.permutation_test``, independent samples).

    Returns (p_value, exact). All splits are enumerated (exact=True) when comb(n_a + n_b, n_a) <=
    ``n_resamples``; otherwise that many random splits are drawn (seeded) and p = (1 + #as extreme) / (1 + R).
    ``"greater"`` tests a > b.
    """
    _check_alternative(alternative)
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) < 1 or len(y) < 1:
        raise ValueError("permutation_test needs at least one value in each group")
    res = stats.permutation_test(
        (x, y),
        _diff_of_means,
        permutation_type="independent",
        vectorized=True,
        n_resamples=n_resamples,
        alternative=alternative,
        rng=seed,
    )
    return float(res.pvalue), math.comb(len(x) + len(y), len(x)) <= n_resamples


def _clean(strata: Strata) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Strata as (a, b, weight n_a n_b / (n_a + n_b)); raises unless each side has a value."""
    out = []
    for a, b in strata:
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        if len(x) < 1 or len(y) < 1:
            raise ValueError("every stratum needs at least one value on each side")
        out.append((x, y, len(x) * len(y) / (len(x) + len(y))))
    if not out:
        raise ValueError("need at least one stratum")
    return out


def _p_value(null: np.ndarray, obs: float, scale: float, alternative: str, exact: bool) -> float:
    gamma = _EPS * max(abs(obs), scale)
    adj = 0 if exact else 1
    less = (np.count_nonzero(null <= obs + gamma) + adj) / (len(null) + adj)
    greater = (np.count_nonzero(null >= obs - gamma) + adj) / (len(null) + adj)
    p = {"less": less, "greater": greater, "two-sided": 2 * min(less, greater)}[alternative]
    return float(min(max(p, 0.0), 1.0))


def stratified_permutation_test(
    strata: Strata,
    alternative: str = "two-sided",
    n_resamples: int = 20000,
    seed: int = 0,
) -> tuple[float, float, bool]:
    """Permutation test of a difference of means that permutes labels within each stratum only.

    Returns (statistic, p_value, exact). Statistic: sum_s w_s (mean(a_s) - mean(b_s)) / sum_s w_s with
    w_s = n_a n_b / (n_a + n_b). The product of the within-stratum splits is enumerated when it has
    <= ``n_resamples`` elements; otherwise ``n_resamples`` random within-stratum permutations
    (``default_rng(seed)``) give p = (1 + #as extreme) / (1 + R), never 0. P-values follow scipy's conventions
    (ties within 100 eps relative; two-sided = 2 min(one-sided), at most 1), so one stratum gives exactly
    :func:`permutation_test`'s p when exact, and agrees up to resampling noise otherwise.
    """
    _check_alternative(alternative)
    clean = _clean(strata)
    total_w = sum(w for _, _, w in clean)
    scale = max(float(np.max(np.abs(np.concatenate([x, y])))) for x, y, _ in clean)
    exact = math.prod(math.comb(len(x) + len(y), len(x)) for x, y, _ in clean) <= n_resamples
    rng = np.random.default_rng(seed)
    obs, null = 0.0, np.zeros(1 if exact else n_resamples)
    for x, y, w in clean:
        pooled, na, nb = np.concatenate([x, y]), len(x), len(y)
        total = pooled.sum()
        obs = obs + w * (x.sum() / na - (total - x.sum()) / nb)
        if exact:
            sums = pooled[np.array(list(combinations(range(na + nb), na)))].sum(axis=1)
            null = (null[:, None] + w * (sums / na - (total - sums) / nb)[None, :]).ravel()
        else:
            for start in range(0, n_resamples, _CHUNK):
                rows = min(_CHUNK, n_resamples - start)
                sums = rng.permuted(np.tile(pooled, (rows, 1)), axis=1)[:, :na].sum(axis=1)
                null[start : start + rows] += w * (sums / na - (total - sums) / nb)
    stat = obs / total_w
    return float(stat), _p_value(null / total_w, stat, scale, alternative, exact), exact


def _bootstrap(
    clean: list[tuple[np.ndarray, np.ndarray, float]],
    level: float,
    n_resamples: int,
    seed: int,
    bounds: tuple[float, float] | None,
) -> tuple[float, float]:
    """Percentile interval of the weighted mean difference, each side of each stratum resampled on its own."""
    rng = np.random.default_rng(seed)
    acc = np.zeros(n_resamples)
    for x, y, w in clean:
        mx = x[rng.integers(0, len(x), size=(n_resamples, len(x)))].mean(axis=1)
        my = y[rng.integers(0, len(y), size=(n_resamples, len(y)))].mean(axis=1)
        acc += w * (mx - my)
    low, high = np.quantile(acc / sum(w for _, _, w in clean), [(1 - level) / 2, (1 + level) / 2])
    if bounds is not None:
        lo, hi = bounds
        if not lo < hi:
            raise ValueError(f"bounds must satisfy lo < hi, got {bounds}")
        low, high = max(low, lo - hi), min(high, hi - lo)
    return float(low), float(high)


def bootstrap_diff_ci(
    a: Sequence[float],
    b: Sequence[float],
    level: float = 0.95,
    n_resamples: int = 10000,
    seed: int = 0,
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """Two-sample percentile bootstrap interval for mean(a) - mean(b); estimate = the observed difference.

    Each group is resampled with replacement on its own (``default_rng(seed)``). A group with a single value
    contributes no resampling variance (its mean never changes): the interval then reflects the other group only,
    and is a point when both have one value. ``bounds=(lo, hi)``, the range of each value, clips the interval to
    [lo - hi, hi - lo].
    """
    clean = _clean([(a, b)])
    x, y, _ = clean[0]
    low, high = _bootstrap(clean, level, n_resamples, seed, bounds)
    diff = float(x.mean() - y.mean())
    return Interval(diff, low, high, len(x) + len(y), f"percentile bootstrap, {n_resamples} resamples")


def _mde(var_factor: float, splits: int, sd: float, alpha: float, power: float, alternative: str) -> float:
    _check_alternative(alternative)
    if sd < 0:
        raise ValueError(f"sd must be >= 0, got {sd}")
    if (1 if alternative != "two-sided" else 2) / splits > alpha:
        return math.inf
    if sd == 0:
        return 0.0
    z = stats.norm.ppf(1 - alpha / 2 if alternative == "two-sided" else 1 - alpha) + stats.norm.ppf(power)
    return float(z * sd * math.sqrt(var_factor))


def minimum_detectable_effect(
    n_a: int,
    n_b: int,
    sd: float,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: str = "two-sided",
) -> float:
    """Smallest true difference of means that a level-``alpha`` test detects with probability ``power``.

    Normal approximation: (z_{1-alpha} + z_{power}) sd sqrt(1/n_a + 1/n_b), alpha halved when two-sided; 0.0 for
    sd == 0 (no noise). Returns ``math.inf`` when even the most extreme of the comb(n_a + n_b, n_a) splits
    cannot give an exact permutation p <= alpha (1/comb > alpha one-sided, 2/comb two-sided): no effect,
    however large, is detectable then.
    """
    if n_a < 1 or n_b < 1:
        raise ValueError("need n_a >= 1 and n_b >= 1")
    return _mde(1 / n_a + 1 / n_b, math.comb(n_a + n_b, n_a), sd, alpha, power, alternative)


@dataclass(frozen=True)
class Comparison:
    """Architecture-level comparison of a against b over strata, built by :func:`compare`.

    ``diff`` = ``mean_a`` - ``mean_b``, weighted means over the kept strata (weights of
    :func:`stratified_permutation_test`); [``low``, ``high``] its stratified bootstrap interval; ``p_value`` and
    ``exact`` from the stratified permutation test of ``alternative`` (``"greater"``: a > b); ``n_a``, ``n_b``
    values and ``strata`` strata kept; ``mde`` the minimum detectable effect (alpha 0.05, power 0.8, pooled
    within-group sd): NaN when no group has two values, inf when the splits are too few to ever give p <= 0.05.
    """

    diff: float
    low: float
    high: float
    p_value: float
    exact: bool
    n_a: int
    n_b: int
    strata: int
    mean_a: float
    mean_b: float
    mde: float
    alternative: str

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether p_value <= alpha."""
        return self.p_value <= alpha

    @property
    def bound(self) -> float:
        """max(|low|, |high|): the largest difference the data still allow."""
        return max(abs(self.low), abs(self.high))


def compare(
    strata: Strata,
    alternative: str = "greater",
    level: float = 0.95,
    seed: int = 0,
    bounds: tuple[float, float] | None = (0.0, 1.0),
) -> Comparison:
    """Compare a with b over strata: stratified permutation p-value and stratified bootstrap interval.

    Strata with an empty side are dropped (ValueError if none is left). The interval is two-sided at ``level``
    whatever ``alternative``: each side of each stratum is resampled and combined with the weights of
    :func:`stratified_permutation_test`, then clipped to [lo - hi, hi - lo] when ``bounds`` is given. The MDE
    uses the test's alternative and the variance of the weighted difference, sd^2 / sum_s w_s.
    """
    kept = [(a, b) for a, b in strata if len(a) > 0 and len(b) > 0]
    if not kept:
        raise ValueError("compare needs at least one stratum with values on both sides")
    clean = _clean(kept)
    stat, p, exact = stratified_permutation_test(kept, alternative, seed=seed)
    low, high = _bootstrap(clean, level, 10000, seed, bounds)
    total_w = sum(w for _, _, w in clean)
    mean_a = sum(w * x.mean() for x, _, w in clean) / total_w
    mean_b = sum(w * y.mean() for _, y, w in clean) / total_w
    groups = [g for x, y, _ in clean for g in (x, y)]
    dof = sum(len(g) - 1 for g in groups)
    sd = math.sqrt(sum(((g - g.mean()) ** 2).sum() for g in groups) / dof) if dof > 0 else math.nan
    splits = math.prod(math.comb(len(x) + len(y), len(x)) for x, y, _ in clean)
    mde = _mde(1 / total_w, splits, 0.0 if math.isnan(sd) else sd, 0.05, 0.8, alternative)
    if math.isnan(sd) and not math.isinf(mde):
        mde = math.nan
    n_a, n_b = sum(len(x) for x, _, _ in clean), sum(len(y) for _, y, _ in clean)
    return Comparison(
        stat, low, high, p, exact, n_a, n_b, len(clean), float(mean_a), float(mean_b), mde, alternative
    )


def mean_difference(
    a: Sequence[float], b: Sequence[float], pooled: Spread | None = None, level: float = 0.95
) -> Comparison:
    """mean(a) - mean(b) for two small samples (a few seeds each) with a t interval and a two-sided t test.

    The spread is ``pooled`` (a standard deviation on the values' own scale with its degrees of freedom, pooled
    over more groups measured the same way) when given, else the two samples' pooled spread (n_a + n_b - 2
    df). With three seeds a side an exact permutation test can never reach p < 0.05 two-sided (its smallest p is
    2/20); pooling the seed spread over several architectures gives the test the degrees of freedom it needs,
    under the stated assumption that seeds vary alike across them. ``exact`` is False; ``mde`` is the t-based
    minimum detectable effect at alpha 0.05 and power 0.8.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) < 1 or len(y) < 1:
        raise ValueError("mean_difference needs at least one value on each side")
    if pooled is not None and pooled[1] > 0:
        sd, df = pooled
    else:
        df = len(x) + len(y) - 2
        ss = float(((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum())
        sd = math.sqrt(ss / df) if df > 0 else math.nan
    diff = float(x.mean() - y.mean())
    se = sd * math.sqrt(1 / len(x) + 1 / len(y)) if df > 0 else math.nan
    if not se > 0:  # no spread at all, or nothing to estimate it from
        p = 1.0 if diff == 0 or math.isnan(se) else 0.0
        low = high = diff
        mde = math.nan if math.isnan(se) else 0.0
    else:
        half = _t(level, int(df)) * se
        low, high = diff - half, diff + half
        p = float(2 * stats.t.sf(abs(diff) / se, df))
        mde = (_t(0.95, int(df)) + float(stats.t.ppf(0.8, df))) * se
    return Comparison(
        diff, low, high, p, False, len(x), len(y), 1, float(x.mean()), float(y.mean()), mde, "two-sided"
    )


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Kendall's tau-b and its p-value (``scipy.stats.kendalltau``); (nan, nan) with fewer than 3 points."""
    if len(x) != len(y):
        raise ValueError("x and y must have the same length")
    if len(x) < 3:
        return (math.nan, math.nan)
    res = stats.kendalltau(x, y)
    return (float(res.statistic), float(res.pvalue))
