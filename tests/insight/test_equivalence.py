"""The answer's rule: the class is shown by two one-sided tests per layout; the layout shipped is the fastest of
those whose equivalence holds for the whole family of comparisons (Holm), so the fastest member is not the one
most likely to be in the class by a false claim."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.insight.equivalence import BEST, EQUIVALENT, UNDECIDED, WORSE, choose, classify

MARGIN, ALPHA, TIE = 0.01, 0.05, 0.05
UNITS = np.array([0.0, 0.004, -0.004, 0.002, -0.002])  # the per-unit wobble of a paired difference


def _grid(gaps: list[float], wobble: float) -> np.ndarray:
    """The best at 0.95 and layouts ``gaps`` below it, each difference wobbling by ``wobble`` x UNITS."""
    rows = [np.full(5, 0.95)]
    for k, gap in enumerate(gaps):
        rows.append(0.95 - gap + wobble * np.roll(UNITS, k))
    return np.array(rows)


def _times(n: int) -> np.ndarray:
    """The best is the slowest; each later row is faster than the one before."""
    return np.array([[10.0 - i] * 3 for i in range(n)])


def test_verdicts_follow_the_one_sided_bounds():
    scores = _grid([0.001, 0.05, 0.009], wobble=1.0)
    classes = classify(scores, MARGIN, ALPHA)
    assert classes.verdicts == (BEST, EQUIVALENT, WORSE, UNDECIDED)
    assert classes.members == [0, 1]


def test_a_clearly_equivalent_faster_layout_is_the_answer():
    scores = _grid([0.001, 0.05], wobble=0.5)
    answer, classes = choose(scores, _times(3), MARGIN, ALPHA, TIE)
    assert classes.family == (0, 1)
    assert answer == 1  # faster than the best and shown within the margin for the family


def test_a_member_shown_only_on_its_own_test_is_not_shipped():
    # six faster layouts, each 0.55 points below the best with the same spread: each one's own test shows it
    # within the 1-point margin (lower bound about -0.84 points), Holm's smallest threshold (alpha / 6) does not
    scores = _grid([0.0055] * 6, wobble=1.0)
    answer, classes = choose(scores, _times(7), MARGIN, ALPHA, TIE)
    assert classes.members == list(range(7))
    assert classes.family == (0,)
    assert answer == 0


def test_holm_steps_down_past_a_decided_layout():
    # one layout far inside the margin passes at alpha / 2; the next (TOST p about 0.034, between alpha / 2 and
    # alpha) is then held to alpha / 1 and passes: Holm's step-down, where Bonferroni (alpha / 2 for both) would not
    scores = _grid([0.0, 0.0065], wobble=1.0)
    scores[1] = 0.95 + 0.0001 * UNITS
    _, classes = choose(scores, _times(3), MARGIN, ALPHA, TIE)
    assert classes.family == (0, 1, 2)
    _, stricter = choose(scores, _times(3), MARGIN, ALPHA / 2, TIE)  # as if each were held to alpha / 2
    assert stricter.family == (0, 1)


@pytest.mark.parametrize("units", [1])
def test_one_unit_decides_nothing(units):
    scores = _grid([0.001], wobble=1.0)[:, :units]
    answer, classes = choose(scores, _times(2), MARGIN, ALPHA, TIE)
    assert classes.verdicts == (BEST, UNDECIDED)
    assert classes.family == (0,) and answer == 0
