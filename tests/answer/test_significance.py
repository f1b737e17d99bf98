"""Tests for explorer.answer._significance: p-values match scipy and hand counts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from explorer.answer import compare, kendall_tau
from explorer.answer._significance import permutation_test, stratified_permutation_test


def test_permutation_test_exact_hand_case():
    p, exact = permutation_test([3, 4, 5], [0, 1, 2], alternative="greater")
    assert p == pytest.approx(1 / 20) and exact
    p_less, _ = permutation_test([3, 4, 5], [0, 1, 2], alternative="less")
    assert p_less == pytest.approx(1.0)


def test_permutation_test_matches_scipy_monte_carlo():
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.3, 1, 15), rng.normal(0, 1, 15)
    p, exact = permutation_test(a, b, n_resamples=5000, seed=7)
    ref = stats.permutation_test(
        (a, b),
        lambda x, y, axis: x.mean(axis=axis) - y.mean(axis=axis),
        vectorized=True,
        n_resamples=5000,
        rng=7,
    )
    assert not exact
    assert p == ref.pvalue
    p_g, _ = permutation_test(a, b, alternative="greater", n_resamples=5000)
    p_l, _ = permutation_test(a, b, alternative="less", n_resamples=5000)
    t_sign = stats.ttest_ind(a, b).statistic > 0
    assert (p_g < p_l) == t_sign


def test_permutation_test_identical_groups():
    p, exact = permutation_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    assert p == 1.0 and exact
    with pytest.raises(ValueError):
        permutation_test([], [1.0])


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
@pytest.mark.parametrize(
    "a,b",
    [([3, 4, 5], [0, 1, 2]), ([0.81, 0.83, 0.8, 0.86], [0.79, 0.8, 0.82]), ([1.0, 2.0], [1.0, 2.0, 2.0])],
)
def test_stratified_one_stratum_equals_permutation_test(a, b, alternative):
    stat, p, exact = stratified_permutation_test([(a, b)], alternative)
    ref_p, ref_exact = permutation_test(a, b, alternative)
    assert p == ref_p and exact == ref_exact
    assert stat == pytest.approx(np.mean(a) - np.mean(b))


def test_stratified_one_stratum_monte_carlo_close_to_permutation_test():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.4, 1, 12), rng.normal(0, 1, 12)
    _, p, exact = stratified_permutation_test([(a, b)], n_resamples=20000)
    ref_p, ref_exact = permutation_test(a, b, n_resamples=20000)
    assert not exact and not ref_exact
    assert p == pytest.approx(ref_p, abs=0.015)
    assert p > 0


def test_stratified_matches_brute_force_two_strata():
    s1, s2 = ([0.9, 0.7, 0.8], [0.6, 0.65]), ([0.5, 0.55], [0.4, 0.52, 0.45])
    stat, p, exact = stratified_permutation_test([s1, s2], alternative="greater")
    assert exact
    w1, w2 = 6 / 5, 6 / 5

    def splits(a, b):
        pooled = list(a) + list(b)
        for idx in itertools.combinations(range(len(pooled)), len(a)):
            xa = [pooled[i] for i in idx]
            xb = [pooled[i] for i in range(len(pooled)) if i not in idx]
            yield np.mean(xa) - np.mean(xb)

    null = [(w1 * d1 + w2 * d2) / (w1 + w2) for d1 in splits(*s1) for d2 in splits(*s2)]
    obs = (w1 * (np.mean(s1[0]) - np.mean(s1[1])) + w2 * (np.mean(s2[0]) - np.mean(s2[1]))) / (w1 + w2)
    assert stat == pytest.approx(obs)
    assert len(null) == 100
    assert p == pytest.approx(np.mean(np.array(null) >= obs - 1e-12))


def test_stratified_opposite_effects_cancel():
    up = ([1.0, 1.1, 1.2, 1.3], [0.0, 0.1, 0.2, 0.3])
    down = ([0.0, 0.1, 0.2, 0.3], [1.0, 1.1, 1.2, 1.3])
    stat, p, exact = stratified_permutation_test([up, down])
    assert abs(stat) < 1e-12 and p > 0.5 and exact  # 70 * 70 = 4900 splits
    _, p_mc, exact_mc = stratified_permutation_test([up, down], n_resamples=1000)
    assert not exact_mc and p_mc > 0.5


def test_stratified_monte_carlo_never_zero():
    a, b = list(np.arange(10.0, 20.0)), list(np.arange(10.0))
    _, p, exact = stratified_permutation_test([(a, b), (a, b)], alternative="greater", n_resamples=999)
    assert not exact and p == pytest.approx(1 / 1000)


def test_compare_interval_is_the_bootstrap_and_narrows_with_more_values():
    rng = np.random.default_rng(2)
    a, b = rng.uniform(0.7, 0.9, 6), rng.uniform(0.6, 0.8, 6)
    c = compare([(a, b)], alternative="two-sided")
    assert c.diff == pytest.approx(a.mean() - b.mean())
    assert c.low <= c.diff <= c.high and -1.0 <= c.low < c.high <= 1.0
    big = compare([(rng.uniform(0.7, 0.9, 60), rng.uniform(0.6, 0.8, 60))], alternative="two-sided")
    assert big.high - big.low < c.high - c.low


def test_compare_interval_is_clipped_to_the_bounds():
    c = compare([([1.0, 0.0], [0.0, 1.0])], bounds=(0.0, 0.5))
    assert c.low >= -0.5 and c.high <= 0.5
    unclipped = compare([([1.0, 0.0], [0.0, 1.0])], bounds=None)
    assert unclipped.low < -0.5


def test_compare_single_values_give_a_point_interval():
    c = compare([([0.8], [0.7])])
    assert c.low == pytest.approx(0.1) and c.high == pytest.approx(0.1)


def test_compare_mde_is_the_normal_approximation():
    rng = np.random.default_rng(5)
    a, b = rng.normal(0.8, 0.02, 10), rng.normal(0.7, 0.02, 20)
    ss = ((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()
    sd = math.sqrt(ss / (len(a) + len(b) - 2))  # the pooled within-group spread
    two_sided = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * sd * math.sqrt(1 / 10 + 1 / 20)
    assert compare([(a, b)], alternative="two-sided").mde == pytest.approx(two_sided)
    one_sided = (stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * sd * math.sqrt(1 / 10 + 1 / 20)
    assert compare([(a, b)], alternative="greater").mde == pytest.approx(one_sided)


def test_compare_mde_is_inf_when_no_split_reaches_alpha_and_zero_without_noise():
    assert compare([([0.8, 0.9], [0.5, 0.6])], alternative="greater").mde == math.inf  # 1/6 > 0.05
    assert compare([([0.8, 0.9, 1.0], [0.5, 0.6, 0.7])], alternative="greater").mde < math.inf  # 1/20
    assert compare([([0.9, 0.9, 0.9], [0.5, 0.5, 0.5])], alternative="greater").mde == 0.0


def test_compare_planted_effect():
    rng = np.random.default_rng(4)
    b = rng.uniform(0.6, 0.7, 5)
    a = b + 0.1 + rng.normal(0, 0.005, 5)
    c = compare([(a, b)])
    assert c.significant() and c.exact and c.p_value <= 0.05
    assert c.low > 0  # the interval excludes 0
    assert c.diff == pytest.approx(a.mean() - b.mean())
    assert c.mean_a == pytest.approx(a.mean()) and c.mean_b == pytest.approx(b.mean())
    assert (c.n_a, c.n_b, c.strata, c.alternative) == (5, 5, 1, "greater")
    assert 0 < c.mde < math.inf


def test_compare_no_effect():
    rng = np.random.default_rng(6)
    a, b = rng.uniform(0.6, 0.8, 5), rng.uniform(0.6, 0.8, 5)
    c = compare([(a, b)], alternative="two-sided")
    assert not c.significant()
    assert c.low < 0 < c.high
    assert c.bound >= abs(c.diff) and c.bound == max(abs(c.low), abs(c.high))


def test_compare_drops_empty_strata():
    a, b = [0.8, 0.82, 0.85], [0.7, 0.72, 0.71]
    c = compare([(a, b), ([], [0.5]), ([0.9], [])])
    ref = compare([(a, b)])
    assert c.strata == 1 and (c.n_a, c.n_b) == (3, 3)
    assert (c.diff, c.p_value, c.low, c.high) == (ref.diff, ref.p_value, ref.low, ref.high)
    with pytest.raises(ValueError):
        compare([([], [0.5]), ([0.9], [])])


def test_compare_mde_inf_with_two_per_side():
    c = compare([([0.8, 0.9], [0.5, 0.6])], alternative="two-sided")
    assert c.mde == math.inf and not c.significant()


def test_compare_weighted_means_over_strata():
    s1, s2 = ([0.9, 0.8], [0.7]), ([0.5, 0.6, 0.55], [0.4, 0.45, 0.5])
    c = compare([s1, s2])
    w1, w2 = 2 / 3, 9 / 6
    assert c.mean_a == pytest.approx((w1 * 0.85 + w2 * 0.55) / (w1 + w2))
    assert c.mean_b == pytest.approx((w1 * 0.7 + w2 * 0.45) / (w1 + w2))
    assert c.diff == pytest.approx(c.mean_a - c.mean_b)
    assert -1.0 <= c.low <= c.high <= 1.0


def test_kendall_tau_matches_scipy():
    x, y = [1, 2, 3, 4, 5, 6], [2, 1, 4, 3, 6, 6]
    ref = stats.kendalltau(x, y)
    assert kendall_tau(x, y) == pytest.approx((ref.statistic, ref.pvalue))
    tau, p = kendall_tau([1, 2], [2, 1])
    assert math.isnan(tau) and math.isnan(p)


def test_compare_returns_a_comparison_of_two_sides_over_strata():
    from explorer.answer import Comparison

    c = compare([([0.9, 0.92, 0.91, 0.93], [0.8, 0.82, 0.81, 0.79])])
    assert isinstance(c, Comparison) and (c.n_a, c.n_b, c.strata) == (4, 4, 1)
    assert (
        abs(c.diff - (c.mean_a - c.mean_b)) < 1e-12
        and c.low <= c.diff <= c.high
        and c.alternative == "greater"
    )
