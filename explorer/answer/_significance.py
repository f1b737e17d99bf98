"""Is a difference real? Tests and intervals for a difference of means over a few seeds a side.

Permutation tests (exact when the splits can be enumerated; a stratified one permutes within each stratum only),
percentile bootstrap intervals, the minimum detectable effect, and :func:`compare` that puts them together for
two architectures; no normality is assumed except where stated (the MDE's normal approximation). Pure functions
over numpy and scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import cast

import numpy as np
import numpy.typing as npt
from scipy import stats

_ALTERNATIVES = ("two-sided", "greater", "less")
_EPS = np.finfo(float).eps * 100  # relative tolerance for ties in a null distribution (as scipy uses)
_CHUNK = 2000  # Monte Carlo resamples drawn at once

Strata = Sequence[tuple[Sequence[float], Sequence[float]]]


def _check_alternative(alternative: str) -> None:
    if alternative not in _ALTERNATIVES:
        raise ValueError(f"alternative must be one of {_ALTERNATIVES}, not {alternative!r}")


def _diff_of_means(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], axis: int = -1
) -> npt.NDArray[np.float64]:
    return cast(npt.NDArray[np.float64], np.mean(x, axis=axis) - np.mean(y, axis=axis))


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


def _clean(strata: Strata) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]]:
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


def _p_value(null: npt.NDArray[np.float64], obs: float, scale: float, alternative: str, exact: bool) -> float:
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
    clean: list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]],
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


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Kendall's tau-b and its p-value (``scipy.stats.kendalltau``); (nan, nan) with fewer than 3 points."""
    if len(x) != len(y):
        raise ValueError("x and y must have the same length")
    if len(x) < 3:
        return (math.nan, math.nan)
    res = stats.kendalltau(x, y)
    return (float(res.statistic), float(res.pvalue))
