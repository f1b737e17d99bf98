"""How sure the answer is: the share of simulated re-runs of the study in which the rule names a member of this
answer's class.

A re-run trains every finalist on new units (folds cut afresh, new seeds) and times them in new rounds, then
applies the same rule (:func:`explorer.insight.equivalence.choose`). It is simulated from this study's own
evidence: its units are drawn with replacement (whole columns of the evidence grid, so the pairing of layouts on a
unit is kept) and its timing rounds likewise, and each layout's drawn runs (and, on the log scale, its drawn timings) are then shifted so that its mean
departs from this study's mean by sqrt(2) times the resample's departure. The shift is what makes it a *re-run*
rather than a resample: a re-run's means differ from this study's by the error of both studies, not of one
(with a flat prior on the true means, the predictive spread of a new study's mean is twice the variance of this
one's). Resampling alone treats this study's means as the truth and overstates how often a re-run keeps its
ranking, most where two layouts are close. The confidence is the share of :data:`ROUNDS` simulated re-runs whose
answer is a member of this run's class.

``benchmarks/calibration.py`` checks the figure against whole real re-runs of the README's study, and
``benchmarks/confidence_simulation.py`` against simulated studies of known truth, ties included.

What it does not simulate: a re-run's search, which may bring other layouts into the finalists (the ladder
keeps most of them the same), and a machine that is slower or faster on another day.
"""

from __future__ import annotations

import numpy as np

from explorer.insight.equivalence import choose, row_means

__all__ = ["ROUNDS", "rerun_confidence"]

ROUNDS = 1000  # simulated re-runs behind the confidence figure
PREDICTIVE = np.sqrt(2.0) - 1.0  # the extra shift of a resample's means that makes it a re-run (module docstring)


def rerun_confidence(
    scores: np.ndarray,
    times: np.ndarray,
    members: list[int],
    margin: float,
    alpha: float,
    tie: float,
    seed: int = 0,
) -> float:
    """The share of simulated re-runs (see the module docstring) whose answer lies in ``members``."""
    rng = np.random.default_rng(seed)
    units, rounds = scores.shape[1], times.shape[1]
    inside = set(members)
    base = row_means(scores)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_base = row_means(np.log(times))
    hits = 0
    for _ in range(ROUNDS):
        s = scores[:, rng.integers(0, units, units)]
        s = s + PREDICTIVE * (row_means(s) - base)[:, None]  # a re-run's error on top of this study's
        t = times[:, rng.integers(0, rounds, rounds)] if rounds > 1 else times
        if rounds > 1:  # the same for the times, on the log scale the rule compares them on
            t = t * np.exp(PREDICTIVE * (row_means(np.log(t)) - log_base))[:, None]
        if np.all(np.isnan(row_means(s))):
            continue
        answer, _ = choose(s, t, margin, alpha, tie)
        hits += answer in inside
    return hits / ROUNDS
