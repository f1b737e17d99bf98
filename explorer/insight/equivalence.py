"""The answer's rule on arrays: the best layout's equivalence class, and the class member a user ships.

Given the evidence grid's scores (layouts x units, higher is better, NaN where a layout has no run on a unit) and
the layouts' timings (layouts x re-timing rounds):

1. **the best** is the layout with the highest mean score;
2. each other layout is compared with it on the units both ran (:mod:`explorer.insight.paired`) by the two
   one-sided tests of the margin (not by a non-significant difference): **equivalent** when the test of
   "layout - best <= -margin" rejects, **worse** when the test of "layout - best >= -margin" rejects, else
   **undecided**. Each family of claims (the equivalent ones, the worse ones) is held to ``alpha`` together by
   Holm's step-down procedure (Holm 1979): with several layouts compared, tests each held to ``alpha`` alone
   would let some layout in by chance, and the fastest member, the one a user ships, is the one most likely to
   be there by a false claim. The class is the best and its equivalent layouts;
3. **the answer** is the class's fastest member: the lowest median time over rounds, where members whose
   within-round time ratio to it (the geometric mean over the rounds both were timed in, so a drift of the
   machine between rounds cancels) is below ``1 + tie`` count as equally fast, and the more accurate of those is
   taken.

:func:`choose` is this rule, used both by :func:`explorer.insight.recommend.answer` and, on resampled grids, by
the confidence (:mod:`explorer.insight.confidence`), so the two can never disagree on what the rule is.
"""

from __future__ import annotations

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
    "strictest_alpha",
]

BEST, EQUIVALENT, WORSE, UNDECIDED = "best", "equivalent", "worse", "undecided"
VERDICTS = (BEST, EQUIVALENT, WORSE, UNDECIDED)


@dataclass(frozen=True)
class Classes:
    """Every layout's verdict against the best (indices into the grid's rows)."""

    best: int
    verdicts: tuple[str, ...]  # one per layout: best | equivalent | worse | undecided
    # Holm-adjusted p of "within the margin" and of "worse by more than it", one per layout (NaN where untested):
    # a claim is made exactly where its adjusted p is at most alpha
    p_within: tuple[float, ...]
    p_beyond: tuple[float, ...]

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
    tested = [i for i in range(len(scores)) if i != best and n[i] >= 2 and not np.isnan(mean[i])]
    within = _holm(_tost_p(mean[tested] + margin, sd[tested], n[tested]))
    beyond = _holm(_tost_p(-(mean[tested] + margin), sd[tested], n[tested]))
    verdicts = [WORSE if np.isnan(means[i]) else UNDECIDED for i in range(len(scores))]
    verdicts[best] = BEST
    p_within, p_beyond = np.full(len(scores), np.nan), np.full(len(scores), np.nan)
    for k, i in enumerate(tested):
        p_within[i], p_beyond[i] = within[k], beyond[k]
        verdicts[i] = EQUIVALENT if within[k] <= alpha else WORSE if beyond[k] <= alpha else UNDECIDED
    return Classes(best, tuple(verdicts), tuple(map(float, p_within)), tuple(map(float, p_beyond)))


def _tost_p(shifted: np.ndarray, sd: np.ndarray, n: np.ndarray) -> np.ndarray:
    """One-sided p of H0 "shifted <= 0" from a mean ``shifted`` (the difference moved by the margin), its
    spread ``sd`` over ``n`` paired units (t with n - 1 degrees of freedom; a spread of 0 decides by the sign)."""
    se = sd / np.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, shifted / np.where(se > 0, se, 1.0), 0.0)
    return np.where(se > 0, stats.t.sf(t, n - 1), np.where(shifted > 0, 0.0, 1.0))


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm's (1979) step-down adjusted p values: the k-th smallest of m is max over j <= k of (m - j + 1) times
    the j-th smallest, capped at 1. Rejecting where the adjusted p is at most alpha is Holm's procedure: the
    k-th smallest held to alpha / (m - k + 1), the first that fails stopping it."""
    order = np.argsort(p, kind="stable")
    steps = (len(p) - np.arange(len(p))) * p[order]
    adjusted = np.empty(len(p))
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(steps)) if len(p) else steps
    return adjusted


def strictest_alpha(alpha: float, compared: int) -> float:
    """The level Holm's first step holds the smallest of ``compared`` p values to: a layout that clears it is
    decided whatever the others show."""
    return alpha / max(1, compared)


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
    """The answer's row and every layout's verdict: the fastest member of the best's class."""
    classes = classify(scores, margin, alpha)
    return fastest(classes.members, times, row_means(scores), tie), classes
