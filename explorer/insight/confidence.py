"""How sure the answer is: the share of resampled re-runs of the evidence in which the rule names a member of
this answer's class.

A re-run trains every finalist on new units (folds cut afresh, new seeds) and times them in new rounds, then
applies the same rule (:func:`explorer.insight.equivalence.choose`). It is simulated by resampling this study's
own units with replacement (whole columns of the evidence grid, so the pairing of layouts on a unit is kept) and
its timing rounds, and applying the rule to each resample: the confidence is the share of :data:`ROUNDS` resamples
whose answer is a member of this run's class (Efron's bootstrap probability of a selection).
``benchmarks/calibration.py`` checks it against whole real re-runs, and ``benchmarks/confidence_simulation.py``
against simulated studies of known truth: where the best layout leads the next by a standard error of their
difference or more, the stated and observed shares agree within a few points; where two layouts are tied, the
resamples keep this run's ranking more often than a re-run does, and the figure overstates (about 78% stated
against 49% observed in that simulation): the report's verdicts then show the tie as "undecided".

What it does not simulate: a re-run's search, which may bring other layouts into the finalists (the ladder
keeps most of them the same), and a machine that is slower or faster on another day.
"""

from __future__ import annotations

import numpy as np

from explorer.insight.equivalence import choose, row_means

__all__ = ["ROUNDS", "rerun_confidence"]

ROUNDS = 1000  # resampled re-runs behind the confidence figure


def rerun_confidence(
    scores: np.ndarray,
    times: np.ndarray,
    members: list[int],
    margin: float,
    alpha: float,
    tie: float,
    seed: int = 0,
) -> float:
    """The share of resampled re-runs (see the module docstring) whose answer lies in ``members``."""
    rng = np.random.default_rng(seed)
    units, rounds = scores.shape[1], times.shape[1]
    inside = set(members)
    hits = 0
    for _ in range(ROUNDS):
        s = scores[:, rng.integers(0, units, units)]
        t = times[:, rng.integers(0, rounds, rounds)] if rounds > 1 else times
        if np.all(np.isnan(row_means(s))):
            continue
        answer, _ = choose(s, t, margin, alpha, tie)
        hits += answer in inside
    return hits / ROUNDS
