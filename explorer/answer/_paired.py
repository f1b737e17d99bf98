"""Paired differences: two layouts measured on the same units (a fold of a replicate, one seed shared).

Two layouts trained on the same fold with the same seed see the same training and validation examples in the
same order, so the difference of their scores on that unit is free of the fold's difficulty and of the data
order; what is left is the noise of training two different architectures and of validating them on that fold's
examples. Every comparison of layouts in the report goes through :func:`paired`: the mean of the per-unit
differences, its spread *of that pair's own units* (never pooled with other pairs, whose noise may differ), and
one paired t statistic behind everything said of it: the interval (clipped to the range a difference of scores
can take), the test of no difference, the one-sided tests, and the two one-sided tests of an equivalence margin
(Schuirmann's TOST: a layout is within ``margin`` of another when the one-sided lower bound of (layout - other)
lies above minus the margin, which non-significance never shows). One statistic, so an interval that excludes
zero always comes with p < 0.05, and a verdict never contradicts its interval. Each unit's difference is a
mean over hundreds of validation examples, the case the t distribution is for. :func:`units_needed` says how
many paired units would decide a margin question the current ones leave open, from the measured spread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

MAX_UNITS_NEEDED = 10_000  # beyond this a margin question is called undecidable ("at the margin")


@dataclass(frozen=True)
class PairedDifference:
    """``mean(a - b)`` over the ``n`` units both were measured on, with what the report says about it."""

    diff: float  # mean of the per-unit differences a - b (on the score's scale: higher is better)
    sd: float  # their standard deviation (NaN with one unit)
    n: int
    low: float  # two-sided interval at ``level``, inside [-span, span]
    high: float
    p_value: float  # two-sided paired t test of no difference
    level: float = 0.95
    span: float = math.inf  # the largest difference the scores can show (1 for accuracies)

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether the paired t test rejects "no difference" at ``alpha``."""
        return self.p_value <= alpha

    def p_greater(self) -> float:
        """One-sided p of "a > b" (H0: a - b <= 0)."""
        return self._one_sided(self.diff, "greater")

    def p_less(self) -> float:
        """One-sided p of "a < b"."""
        return self._one_sided(self.diff, "less")

    @property
    def bound(self) -> float:
        """max(|low|, |high|): the largest difference the interval still allows."""
        return max(abs(self.low), abs(self.high))

    @property
    def se(self) -> float:
        return self.sd / math.sqrt(self.n) if self.n > 1 else math.nan

    def _one_sided(self, shifted: float, alternative: str) -> float:
        if self.n < 2 or math.isnan(self.sd):
            return 1.0
        if self.sd == 0:
            return 0.0 if (shifted > 0 if alternative == "greater" else shifted < 0) else 1.0
        t = shifted / self.se
        return float(stats.t.sf(t, self.n - 1) if alternative == "greater" else stats.t.cdf(t, self.n - 1))


def paired(
    a: Sequence[float] | npt.NDArray[np.float64],
    b: Sequence[float] | npt.NDArray[np.float64],
    level: float = 0.95,
    span: float = math.inf,
) -> PairedDifference:
    """The paired difference ``a - b``; ``a[i]`` and ``b[i]`` were measured on the same unit."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) == 0:
        raise ValueError("paired needs two equally long, non-empty sequences")
    d = x - y
    n = len(d)
    diff = float(d.mean())
    sd = float(d.std(ddof=1)) if n > 1 else math.nan
    if n > 1 and sd > 0:
        half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
        low, high = max(diff - half, -span), min(diff + half, span)
        p = float(2 * stats.t.sf(abs(diff) / (sd / math.sqrt(n)), n - 1))
    else:
        low = high = diff
        p = 1.0 if diff == 0 or n < 2 else 0.0
    return PairedDifference(diff, sd, n, low, high, p, level, span)


def units_needed(gap: float, sd: float, margin: float, alpha: float) -> int | None:
    """Paired units at which a one-sided ``1 - alpha`` bound of a mean difference ``gap`` (how much worse,
    spread ``sd`` per unit) would clear ``margin`` on the side ``gap`` lies: below it (within the margin) or
    above it (worse by more). None when that takes more than :data:`MAX_UNITS_NEEDED` (the gap is at the
    margin) or nothing measured a spread."""
    distance = abs(margin - gap)
    if not sd > 0:
        return 2 if distance > 0 and sd == 0 else None
    if distance == 0:
        return None

    # n t_{1-alpha, n-1}^-2 grows with n: the first n with t sd / sqrt(n) < distance, by doubling then bisection
    def clears(n: int) -> bool:
        return float(stats.t.ppf(1 - alpha, n - 1)) * sd / math.sqrt(n) < distance

    hi = 2
    while not clears(hi):
        hi *= 2
        if hi > MAX_UNITS_NEEDED:
            return None
    lo = max(2, hi // 2)
    while lo < hi:
        mid = (lo + hi) // 2
        if clears(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi
