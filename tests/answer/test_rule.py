"""The answer's rule on arrays: the probability bound, the verdicts, the fastest layout within the margin, and
where the next paired runs go."""

from __future__ import annotations

import numpy as np
from scipy import stats

from explorer.answer import BEST, BEYOND, UNDECIDED, WITHIN, decide, next_cells, next_layouts, pair_risks

MARGIN, RISK, TIE = 0.01, 0.05, 0.05


def grid(means, sd, units, seed=0):
    rng = np.random.default_rng(seed)
    unit = rng.normal(0, 0.02, units)  # a fold's difficulty moves every layout alike
    return np.array([m + unit + rng.normal(0, sd, units) for m in means])


def test_each_term_is_the_paired_t_posterior_and_the_bound_sums_them():
    scores = grid([0.95, 0.945, 0.90], 0.004, 8)
    risks = pair_risks(scores, MARGIN)
    d = scores[0] - scores[1]  # layout 0 beating layout 1 by more than the margin
    t = (d.mean() - MARGIN) / (d.std(ddof=1) / np.sqrt(len(d)))
    assert np.isclose(risks[1, 0], stats.t.cdf(t, len(d) - 1))
    decision = decide(scores, np.array([[3.0], [2.0], [1.0]]), MARGIN, RISK, TIE)
    assert np.isclose(decision.p_within[1], 1 - risks[1].sum())
    assert decision.verdicts == (BEST, WITHIN, BEYOND)


def test_the_answer_is_the_fastest_layout_within_and_a_tie_in_latency_takes_the_more_accurate():
    scores = grid([0.95, 0.948, 0.947], 0.002, 10)
    times = np.array([[3.0, 3.1], [1.50, 1.52], [1.45, 1.47]])  # 2 is faster than 1, within the 5% tie
    d = decide(scores, times, MARGIN, RISK, TIE)
    assert d.verdicts[1] == d.verdicts[2] == WITHIN and d.answer == 1 and d.decided
    slow = decide(scores, np.array([[1.0], [2.0], [3.0]]), MARGIN, RISK, TIE)
    assert slow.answer == 0  # the best is also the fastest


def test_more_layouts_near_the_top_lower_the_probability_far_ones_do_not():
    base = grid([0.95, 0.945], 0.006, 6)
    near = np.vstack([base, base[0] + 0.001])  # another layout as good as the best
    far = np.vstack([base, base[0] - 0.05])  # one far below
    p = decide(base, np.ones((2, 1)), MARGIN, RISK, TIE).p_within[1]
    assert decide(near, np.ones((3, 1)), MARGIN, RISK, TIE).p_within[1] < p
    assert np.isclose(decide(far, np.ones((3, 1)), MARGIN, RISK, TIE).p_within[1], p, atol=1e-3)


def test_without_a_layout_placed_within_the_answer_is_the_best_and_not_decided():
    scores = grid([0.95, 0.949], 0.03, 2)  # two noisy runs: nothing is shown
    d = decide(scores, np.array([[2.0], [1.0]]), MARGIN, RISK, TIE)
    assert d.answer == d.best and not d.decided and d.verdicts[1 - d.best] == UNDECIDED


def test_runs_go_where_they_decide_and_stop_once_decided():
    # 0: best and slow; 1: close and faster (open); 2: far below and fastest (beyond); 3: slower than 0, lower
    scores = grid([0.95, 0.945, 0.85, 0.93], 0.008, 3)
    times = np.array([[3.0], [1.5], [1.0], [4.0]])
    d = decide(scores, times, MARGIN, RISK, TIE)
    assert d.verdicts[2] == BEYOND and d.verdicts[1] == UNDECIDED
    chosen = next_layouts(d, times, TIE)
    assert 1 in chosen and 0 in chosen and 2 not in chosen
    cells = next_cells(scores, times, MARGIN, RISK, TIE, start=3, step=2, left=100)
    assert {i for i, _ in cells} == set(chosen) and {u for _, u in cells} == {
        3,
        4,
    }  # paired, on the same units
    short = next_cells(scores, times, MARGIN, RISK, TIE, start=3, step=2, left=len(chosen))
    assert sorted(short) == [(i, 3) for i in chosen]  # a round that does not fit shrinks to fewer units
    decided = grid([0.95, 0.80], 0.002, 6)
    assert next_cells(decided, np.array([[2.0], [1.0]]), MARGIN, RISK, TIE, 3, 2, 100) == []


def test_the_first_cells_are_every_layout_on_its_first_units_and_a_run_set_apart_is_not_run_again():
    empty = np.full((3, 0), np.nan)
    first = next_cells(empty, np.ones((3, 1)), MARGIN, RISK, TIE, start=3, step=2, left=100)
    assert sorted(first) == [(i, u) for i in range(3) for u in range(3)]
    scores = grid([0.95, 0.9, 0.85], 0.002, 3)
    scores[1, 2] = np.nan  # collapsed: set apart, but it ran
    ran = np.ones_like(scores, dtype=bool)
    assert all(
        cell != (1, 2) for cell in next_cells(scores, np.ones((3, 1)), MARGIN, RISK, TIE, 3, 2, 100, ran)
    )


def test_rounds_grow_with_the_evidence():
    scores = grid([0.95, 0.942, 0.93], 0.006, 10, seed=1)
    times = np.array([[3.0], [1.5], [4.0]])
    assert decide(scores, times, MARGIN, RISK, TIE).verdicts[1] == UNDECIDED
    cells = next_cells(scores, times, MARGIN, RISK, TIE, start=3, step=2, left=100, grow=0.5)
    assert cells and {u for _, u in cells} == set(range(10, 15))  # half the 10 units they have
    assert {u for _, u in next_cells(scores, times, MARGIN, RISK, TIE, 3, 2, 100)} == {10, 11}
