"""The answer's rule on arrays: the best layout's equivalence class, and the class member a user ships.

Given the evidence grid's scores (layouts x units, higher is better, NaN where a layout has no run on a unit) and
the layouts' timings (layouts x re-timing rounds):

1. **the best** is the layout with the highest mean score;
2. each other layout is compared with it on the units both ran (:mod:`explorer.insight.paired`): **equivalent**
   when the one-sided ``1 - alpha`` lower bound of (layout - best) lies above ``-margin`` (the two one-sided
   tests; not a non-significant difference), **worse** when the upper bound lies below ``-margin``, else
   **undecided**; the class is the best and its equivalent layouts;
3. **the answer** is the fastest of the layouts whose equivalence holds for the whole family of comparisons:
   the same two one-sided tests, held to ``alpha`` for all of them together by Holm's step-down procedure
   (Holm 1979). Picking the fastest member of the class is a selection among several tests, and the fastest
   member is the one most likely to be there by a false claim; each class member is shown on its own test, the
   layout a user ships is shown with the family-wise error controlled. With few units this is usually the best
   itself. Fastest is the lowest median time over rounds, where layouts whose within-round time ratio to it
   (the geometric mean over the rounds both were timed in, so a drift of the machine between rounds cancels) is
   below ``1 + tie`` count as equally fast, and the more accurate of those is taken.

:func:`choose` is this rule, used both by :func:`explorer.insight.recommend.answer` and, on resampled grids, by
the confidence (:mod:`explorer.insight.confidence`), so the two can never disagree on what the rule is.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "BEST",
    "EQUIVALENT",
    "UNDECIDED",
    "VERDICTS",
    "WORSE",
    "Classes",
    "choose",
    "classify",
    "fastest",
    "ratio",
    "row_means",
]

BEST, EQUIVALENT, WORSE, UNDECIDED = "best", "equivalent", "worse", "undecided"
VERDICTS = (BEST, EQUIVALENT, WORSE, UNDECIDED)


@dataclass(frozen=True)
class Classes:
    """Every layout's verdict against the best (indices into the grid's rows)."""

    best: int
    verdicts: tuple[str, ...]  # one per layout: best | equivalent | worse | undecided
    family: tuple[int, ...] = ()  # the best and the layouts shown equivalent with the family-wise error held

    @property
    def members(self) -> list[int]:
        """The class: the best and the layouts equivalent to it."""
        return [i for i, v in enumerate(self.verdicts) if v in (BEST, EQUIVALENT)]


def row_means(x: np.ndarray) -> np.ndarray:
    """Each row's mean over its non-missing cells (NaN for an empty row, which is never the best)."""
    filled = ~np.isnan(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(filled, x, 0.0).sum(axis=1) / filled.sum(axis=1)


def _row_medians(x: np.ndarray) -> np.ndarray:
    if not np.isnan(x).any():
        return np.median(x, axis=1)
    return np.array([np.median(r[~np.isnan(r)]) if (~np.isnan(r)).any() else np.nan for r in x])


def classify(scores: np.ndarray, margin: float, alpha: float) -> Classes:
    """Verdicts of every layout against the best (see the module docstring); rows without a score are worse."""
    means = row_means(scores)
    best = int(np.argmax(np.where(np.isnan(means), -np.inf, means)))
    d = scores - scores[best]  # [layouts, units]; NaN where either is missing
    filled = ~np.isnan(d)
    n = filled.sum(axis=1)
    mean = row_means(d)
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.where(filled, (d - mean[:, None]) ** 2, 0.0).sum(axis=1) / (n - 1))
    t = _t_quantiles(1 - alpha, n)
    half = t * sd / np.sqrt(np.maximum(n, 1))
    verdicts = []
    for i in range(len(scores)):
        if i == best:
            verdicts.append(BEST)
        elif n[i] < 2:
            verdicts.append(UNDECIDED if not np.isnan(means[i]) else WORSE)
        elif mean[i] - half[i] > -margin:
            verdicts.append(EQUIVALENT)
        elif mean[i] + half[i] < -margin:
            verdicts.append(WORSE)
        else:
            verdicts.append(UNDECIDED)
    return Classes(best, tuple(verdicts), _holm(mean, sd, n, best, margin, alpha))


def _holm(
    mean: np.ndarray, sd: np.ndarray, n: np.ndarray, best: int, margin: float, alpha: float
) -> tuple[int, ...]:
    """The best and the layouts whose two one-sided tests (H0: layout - best <= -margin) Holm's step-down
    procedure rejects at family-wise ``alpha``: the k-th smallest of m p values is held to alpha / (m - k + 1),
    and the first that fails stops it. Every layout with two or more paired units counts in m."""
    tested = [i for i in range(len(mean)) if i != best and n[i] >= 2 and not np.isnan(mean[i])]
    if not tested:
        return (best,)
    se = sd[tested] / np.sqrt(n[tested])
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (mean[tested] + margin) / se
    p = np.where(
        se > 0,
        stats.t.sf(np.where(se > 0, t, 0.0), n[tested] - 1),
        np.where(mean[tested] + margin > 0, 0.0, 1.0),
    )
    shown = [best]
    for k, j in enumerate(np.argsort(p, kind="stable")):
        if p[j] > alpha / (len(tested) - k):
            break
        shown.append(tested[j])
    return tuple(sorted(shown))


@functools.lru_cache(maxsize=256)
def _t_quantile(q: float, df: int) -> float:
    return float(stats.t.ppf(q, df))


def _t_quantiles(q: float, n: np.ndarray) -> np.ndarray:
    """t quantiles for ``n - 1`` degrees of freedom (NaN below two units), cached: the confidence calls this
    a thousand times with the same few counts."""
    return np.array([_t_quantile(q, int(k) - 1) if k >= 2 else np.nan for k in n])


def ratio(times: np.ndarray, a: int, b: int) -> float:
    """Time of layout ``a`` over layout ``b``: the geometric mean of their ratios within the rounds both were
    timed in (NaN when none)."""
    both = ~np.isnan(times[a]) & ~np.isnan(times[b]) & (times[a] > 0) & (times[b] > 0)
    if not both.any():
        return math.nan
    return float(np.exp(np.mean(np.log(times[a, both]) - np.log(times[b, both]))))


def fastest(members: list[int], times: np.ndarray, scores_mean: np.ndarray, tie: float) -> int:
    """The fastest of ``members``; those within ``1 + tie`` of it (within-round ratio) count as equally fast
    and the one with the highest mean score among them is taken."""
    medians = _row_medians(times[members])
    order = [members[i] for i in np.argsort(np.where(np.isnan(medians), np.inf, medians), kind="stable")]
    quickest = order[0]
    tied = [m for m in order if m == quickest or ratio(times, m, quickest) <= 1 + tie]
    return max(tied, key=lambda m: (scores_mean[m], -order.index(m)))


def choose(
    scores: np.ndarray, times: np.ndarray, margin: float, alpha: float, tie: float
) -> tuple[int, Classes]:
    """The answer's row and every layout's verdict: the fastest layout shown equivalent to the best with the
    family-wise error held (see the module docstring)."""
    classes = classify(scores, margin, alpha)
    return fastest(list(classes.family), times, row_means(scores), tie), classes
