"""The answer's rule on arrays: the fastest layout the evidence places within the margin of the best, at a
stated risk, and which layouts the next finalist runs should go to.

Given the evidence grid's scores (layouts x units, higher is better, NaN where a layout has no run on a unit) and
the layouts' timings (layouts x re-timing rounds):

1. **The best** is the layout with the highest mean score.
2. **Each layout's probability of being within the margin of the best**, ``P(mu_l >= max_j mu_j - margin)``,
   is bounded from below by ``1 - sum_j P(mu_j - mu_l > margin)``: each term is the posterior probability (flat
   prior, paired t with ``n - 1`` degrees of freedom on the units both ran) that layout ``j`` beats ``l`` by
   more than the margin, which is also the one-sided p value of "``l`` is not within the margin of ``j``". The
   bound holds whatever the dependence between the comparisons and needs no correction for how many layouts are
   compared: a layout far below ``l`` adds nothing to the sum, a layout near the top adds its real share.
3. **Verdicts**: *within* the margin when that probability is at least ``1 - risk``; *beyond* it when the best
   beats the layout by more than the margin with probability at least ``1 - risk`` (the paired interval of
   layout minus best at level ``1 - 2 risk`` lies wholly below minus the margin); else *undecided*.
4. **The answer** is the fastest layout within the margin (the best counts when its own probability reaches
   ``1 - risk``): the lowest median time over rounds, layouts whose within-round time ratio to it (the geometric
   mean over the rounds both were timed in, so a drift of the machine between rounds cancels) is below
   ``1 + tie`` counting as equally fast, the more accurate of those taken. When no layout reaches ``1 - risk``
   the answer is the best, and it is *not decided*.
5. **Where the next runs go** (:func:`next_layouts`, :func:`next_cells`): to the undecided layouts faster than
   the answer (each could become it), to the answer while its own probability is short of ``1 - risk``, and to
   every layout whose comparison with those still carries risk (the best among them), in rounds that grow with
   the evidence. Layouts beyond the margin, and slower layouts that weigh on no open comparison, get no more
   runs. Nothing left open: the answer is decided.

Pure numpy and scipy: :func:`explorer.answer._recommend.answer`, the finalist stage's allocation
(:mod:`explorer.answer._finalists`) and the calibration benchmark all call :func:`decide`, so they can never
disagree on what the rule is.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "BEST",
    "BEYOND",
    "UNDECIDED",
    "WITHIN",
    "Decision",
    "decide",
    "fastest",
    "next_layouts",
    "pair_risks",
    "ratio",
    "row_means",
]

BEST, WITHIN, BEYOND, UNDECIDED = "best", "within", "beyond", "undecided"
NEGLIGIBLE = 0.2  # a comparison carries risk when its term is above this share of the risk (see next_layouts)


@dataclass(frozen=True)
class Decision:
    """Every layout's standing against the best, and the answer (indices into the grid's rows)."""

    best: int
    answer: int
    p_within: tuple[float, ...]  # lower bound of P(within the margin of the best), one per layout
    p_beyond: tuple[float, ...]  # P(the best beats it by more than the margin); NaN for the best
    verdicts: tuple[str, ...]  # best | within | beyond | undecided
    risks: np.ndarray  # [l, j] = P(mu_j - mu_l > margin) (0 on the diagonal)
    decided: bool  # the answer reaches 1 - risk and no faster layout is undecided
    risk: float

    @property
    def members(self) -> list[int]:
        """The layouts placed within the margin (the best among them when its own probability reaches it)."""
        return [i for i, p in enumerate(self.p_within) if p >= 1 - self.risk]


def row_means(x: np.ndarray) -> np.ndarray:
    """Each row's mean over its non-missing cells (NaN for an empty row, which is never the best)."""
    filled = ~np.isnan(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(filled, x, 0.0).sum(axis=1) / filled.sum(axis=1)


def _row_medians(x: np.ndarray) -> np.ndarray:
    if not np.isnan(x).any():
        return np.median(x, axis=1)
    return np.array([np.median(r[~np.isnan(r)]) if (~np.isnan(r)).any() else np.nan for r in x])


def pair_risks(scores: np.ndarray, margin: float) -> np.ndarray:
    """``[l, j]``: the probability that layout ``j`` beats layout ``l`` by more than ``margin`` (paired t on the
    units both ran, flat prior; 1 where they share fewer than two units, since nothing then bounds it; a spread
    of 0 decides by the sign)."""
    filled = ~np.isnan(scores)
    both = filled[:, None, :] & filled[None, :, :]  # [l, j, units]
    n = both.sum(axis=2)
    d = np.where(both, scores[None, :, :] - scores[:, None, :], 0.0)  # j - l on shared units
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = d.sum(axis=2) / n
        var = np.where(both, (d - mean[..., None]) ** 2, 0.0).sum(axis=2) / (n - 1)
        se = np.sqrt(var / n)
        t = (mean - margin) / np.where(se > 0, se, 1.0)
        p = np.where(se > 0, stats.t.cdf(t, np.maximum(n - 1, 1)), np.where(mean > margin, 1.0, 0.0))
    p = np.where(n >= 2, p, 1.0)
    np.fill_diagonal(p, 0.0)
    empty = ~filled.any(axis=1)
    p[:, empty] = 0.0  # a layout with no run threatens none ...
    p[empty, :] = 1.0  # ... and is within nothing
    p[empty, empty] = 0.0
    return p


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


def decide(scores: np.ndarray, times: np.ndarray, margin: float, risk: float, tie: float) -> Decision:
    """The rule (see the module docstring) on a grid of ``scores`` and ``times``."""
    means = row_means(scores)
    best = int(np.argmax(np.where(np.isnan(means), -np.inf, means)))
    risks = pair_risks(scores, margin)
    p_within = np.clip(1.0 - risks.sum(axis=1), 0.0, 1.0)
    p_beyond = risks[:, best].copy()
    p_beyond[best] = np.nan
    verdicts = []
    for i in range(len(scores)):
        if i == best:
            verdicts.append(BEST)
        elif p_within[i] >= 1 - risk:
            verdicts.append(WITHIN)
        elif p_beyond[i] >= 1 - risk or np.isnan(means[i]):
            verdicts.append(BEYOND)
        else:
            verdicts.append(UNDECIDED)
    placed = Decision(
        best,
        best,
        tuple(map(float, p_within)),
        tuple(map(float, p_beyond)),
        tuple(verdicts),
        risks,
        False,
        risk,
    )
    if not placed.members:  # nothing reaches 1 - risk: the best, not decided
        return placed
    answer = fastest(placed.members, times, means, tie)
    decided = not _faster_undecided(answer, verdicts, times, tie)
    return dataclasses.replace(placed, answer=answer, decided=decided)


def _faster_undecided(
    answer: int, verdicts: list[str] | tuple[str, ...], times: np.ndarray, tie: float
) -> list[int]:
    """The undecided layouts faster than ``answer`` by more than the latency tie: each could still become it."""
    return [i for i, v in enumerate(verdicts) if v == UNDECIDED and ratio(times, i, answer) < 1 / (1 + tie)]


def next_layouts(decision: Decision, times: np.ndarray, tie: float) -> list[int]:
    """The layouts the next paired units should go to (see the module docstring); none once decided."""
    if decision.decided:
        return []
    ans, risk = decision.answer, decision.risk
    open_ = _faster_undecided(ans, decision.verdicts, times, tie)
    focus = set(open_)
    if decision.p_within[ans] < 1 - risk or open_:
        focus.add(ans)
    weigh = set(focus)
    for i in focus:  # the layouts whose comparison with a focus layout still carries risk
        weigh |= {j for j in range(len(decision.verdicts)) if decision.risks[i, j] > NEGLIGIBLE * risk}
    weigh.add(decision.best)
    return sorted(i for i in weigh if decision.verdicts[i] != BEYOND)


def next_cells(
    scores: np.ndarray,
    times: np.ndarray,
    margin: float,
    risk: float,
    tie: float,
    start: int,
    step: int,
    left: int,
    ran: np.ndarray | None = None,
    grow: float = 0.0,
) -> list[tuple[int, int]]:
    """The (layout, unit) cells to run next on a grid whose columns are the units in order: first every
    layout's first ``start`` units; then more units for each layout :func:`next_layouts` names, on the same units
    for all of them (the pairing), each also filling any earlier unit it lacks: ``step`` units, or ``grow`` times
    the units they have if that is more (rounds that grow look at the data fewer times, and each look at the
    data is another chance for a layout at the margin's edge to cross it by luck). At most ``left``
    cells (fewer units when the round does not fit); none once the answer is decided or nothing fits. ``ran``
    marks the cells already run (default: those with a score), so a run set apart is not run again."""
    filled = ~np.isnan(scores) if ran is None else ran
    first = [
        (i, u) for i in range(len(scores)) for u in range(start) if u >= scores.shape[1] or not filled[i, u]
    ]
    if first:
        return first[: max(0, left)]
    chosen = next_layouts(decide(scores, times, margin, risk, tie), times, tie)
    if not chosen:
        return []
    have = max(int(np.flatnonzero(filled[i]).max()) + 1 if filled[i].any() else 0 for i in chosen)
    for extra in range(max(step, int(have * grow)), 0, -1):  # the largest round that fits what is left
        cells = [
            (i, u) for i in chosen for u in range(have + extra) if u >= scores.shape[1] or not filled[i, u]
        ]
        if len(cells) <= left:
            return cells
    return []
