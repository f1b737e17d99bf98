"""The answer's rule: a layout joins the class when its two one-sided test shows it within the margin, the
family of those claims held to alpha together (Holm's step-down), so comparing many layouts lets none in by
chance; the answer is the class's fastest member."""

from __future__ import annotations

import numpy as np

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


def test_verdicts_follow_the_one_sided_tests():
    scores = _grid([0.001, 0.05, 0.009], wobble=1.0)
    classes = classify(scores, MARGIN, ALPHA)
    assert classes.verdicts == (BEST, EQUIVALENT, WORSE, UNDECIDED)
    assert classes.members == [0, 1]


def test_a_clearly_equivalent_faster_layout_is_the_answer():
    scores = _grid([0.001, 0.05], wobble=0.5)
    answer, classes = choose(scores, _times(3), MARGIN, ALPHA, TIE)
    assert classes.members == [0, 1]
    assert answer == 1  # faster than the best and shown within the margin


def test_many_borderline_layouts_are_not_let_in_by_chance():
    # 0.55 points below the best: one such layout alone is shown within the 1-point margin (TOST p about 0.017),
    # six of them are not (Holm holds the first to alpha / 6), so the best stays the answer
    alone = classify(_grid([0.0055], wobble=1.0), MARGIN, ALPHA)
    assert alone.verdicts == (BEST, EQUIVALENT)
    answer, classes = choose(_grid([0.0055] * 6, wobble=1.0), _times(7), MARGIN, ALPHA, TIE)
    assert classes.verdicts == (BEST, *[UNDECIDED] * 6)
    assert answer == 0


def test_holm_steps_down_past_a_decided_layout():
    # one layout far inside the margin passes at alpha / 2; the next (TOST p about 0.034, between alpha / 2 and
    # alpha) is then held to alpha / 1 and passes: Holm's step-down, where Bonferroni (alpha / 2 each) would not
    scores = _grid([0.0, 0.0065], wobble=1.0)
    scores[1] = 0.95 + 0.0001 * UNITS
    assert classify(scores, MARGIN, ALPHA).members == [0, 1, 2]
    assert classify(scores, MARGIN, ALPHA / 2).members == [0, 1]


def test_worse_claims_are_held_together_too():
    # 1.45 points below: worse than the margin on its own test (p about 0.017), not among three such (alpha / 3)
    one = classify(_grid([0.0145], wobble=1.0), MARGIN, ALPHA)
    three = classify(_grid([0.0145] * 3, wobble=1.0), MARGIN, ALPHA)
    assert one.verdicts == (BEST, WORSE)
    assert three.verdicts == (BEST, UNDECIDED, UNDECIDED, UNDECIDED)


def test_one_unit_decides_nothing():
    scores = _grid([0.001], wobble=1.0)[:, :1]
    answer, classes = choose(scores, _times(2), MARGIN, ALPHA, TIE)
    assert classes.verdicts == (BEST, UNDECIDED)
    assert answer == 0


def test_the_adjusted_p_values_say_exactly_where_a_claim_is_made():
    # the report prints each claim's Holm-adjusted p beside its verdict: they may never disagree, and the
    # adjusted p is Holm's step-down (the k-th smallest of m held to alpha / (m - k + 1), stopping at a failure)
    rng = np.random.default_rng(0)
    for _ in range(200):
        gaps = list(rng.uniform(0.0, 0.02, rng.integers(1, 7)))
        scores = _grid(gaps, wobble=float(rng.uniform(0.2, 2.0))) + rng.normal(0, 0.002, (len(gaps) + 1, 5))
        for alpha in (0.05, 0.1):
            c = classify(scores, MARGIN, alpha)
            assert np.isnan(c.p_within[c.best]) and np.isnan(c.p_beyond[c.best])
            for i, verdict in enumerate(c.verdicts):
                if i != c.best:
                    assert (verdict == EQUIVALENT) == (c.p_within[i] <= alpha)
                    assert (verdict == WORSE) == (c.p_beyond[i] <= alpha and c.p_within[i] > alpha)
    from explorer.insight.equivalence import _holm

    raw = np.array([0.01, 0.04, 0.03, 0.5])
    assert np.allclose(_holm(raw), [0.04, 0.09, 0.09, 0.5])  # 4 x 0.01; 3 x 0.03; max(0.09, 2 x 0.04); 0.5
