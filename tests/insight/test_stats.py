"""Tests for explorer.insight.stats: intervals stay in range, p-values match scipy and hand counts."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from explorer.insight.stats import (
    Interval,
    accuracy_mean_ci,
    accuracy_se,
    block_spread,
    bootstrap_diff_ci,
    compare,
    kendall_tau,
    latency_interval,
    median_ci,
    minimum_detectable_effect,
    permutation_test,
    proportion_ci,
    stratified_permutation_test,
)


@pytest.mark.parametrize("k,n", [(0, 10), (10, 10), (7, 20), (270, 270)])
@pytest.mark.parametrize("method", ["wilson", "exact"])
def test_proportion_ci_matches_scipy(k, n, method):
    low, high = proportion_ci(k, n, method=method)
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method=method)
    assert (low, high) == pytest.approx((ref.low, ref.high))
    assert 0.0 <= low < high <= 1.0


def test_proportion_ci_rejects_bad_input():
    with pytest.raises(ValueError):
        proportion_ci(0, 0)
    with pytest.raises(ValueError):
        proportion_ci(5, 4)


def test_accuracy_se_never_zero():
    assert accuracy_se(0.7, 100) == pytest.approx(math.sqrt(0.7 * 0.3 / 100))
    assert accuracy_se(1.0, 270) == pytest.approx(math.sqrt((0.5 / 270) * (1 - 0.5 / 270) / 270))
    assert accuracy_se(0.0, 270) > 0


def test_accuracy_mean_ci_all_perfect_stays_inside():
    ci = accuracy_mean_ci([1.0, 1.0, 1.0], 270)
    assert ci.estimate == 1.0
    assert 0.0 < ci.low < ci.high <= 1.0 and ci.contains(1.0)
    assert ci.width > 0
    assert ci.n == 3 and "logit" in ci.method


def test_accuracy_mean_ci_contains_mean():
    vals = [0.8, 0.82, 0.85]
    ci = accuracy_mean_ci(vals, 270)
    assert ci.estimate == pytest.approx(np.mean(vals))
    assert ci.contains(np.mean(vals))
    assert 0.0 < ci.low < ci.high < 1.0


def test_accuracy_mean_ci_one_value_is_wilson():
    ci = accuracy_mean_ci([0.9], 270)
    assert (ci.low, ci.high) == pytest.approx(proportion_ci(243, 270))
    assert ci.estimate == 0.9 and ci.n == 1 and "Wilson" in ci.method


def test_accuracy_mean_ci_narrows_with_more_seeds():
    pattern = [0.80, 0.84]
    few = accuracy_mean_ci(pattern * 2, 270)
    many = accuracy_mean_ci(pattern * 10, 270)
    assert many.width < few.width
    same3 = accuracy_mean_ci([0.9] * 3, 270)
    same10 = accuracy_mean_ci([0.9] * 10, 270)
    assert 0 < same10.width < same3.width


def test_accuracy_mean_ci_rejects_out_of_range():
    with pytest.raises(ValueError):
        accuracy_mean_ci([1.2], 10)
    with pytest.raises(ValueError):
        accuracy_mean_ci([], 10)


def test_latency_interval_basic():
    ci = latency_interval([10.0, 10.4, 9.8, 10.1, 10.2])
    assert 0 < ci.low < ci.estimate < ci.high
    assert ci.estimate == 10.1 and ci.n == 5
    logs = np.log([10.0, 10.4, 9.8, 10.1, 10.2])
    half = stats.t.ppf(0.975, 4) * logs.std(ddof=1) * math.sqrt(1 + 1 / 5)
    assert ci.high == pytest.approx(math.exp(logs.mean() + half))


def test_latency_interval_needs_spread():
    with pytest.raises(ValueError, match="at least two timings or the block times of one"):
        latency_interval([5.0, 5.0, 5.0])
    with pytest.raises(ValueError, match="at least two timings"):
        latency_interval([5.0])
    with pytest.raises(ValueError):
        latency_interval([5.0, -1.0])


def test_latency_interval_uses_block_times():
    within = [4.8, 5.0, 5.1, 5.3, 4.9, 5.0]
    ci = latency_interval([5.0], within=within)
    s = np.log(within).std(ddof=1)
    half = stats.t.ppf(0.975, 5) * s * math.sqrt(1 + 1 / 6)
    assert (ci.low, ci.high) == pytest.approx((5.0 * math.exp(-half), 5.0 * math.exp(half)))
    assert ci.low < 5.0 < ci.high and "block times" in ci.method
    wider = latency_interval([5.0, 5.0], within=[4.0, 5.0, 6.5])
    assert wider.width > ci.width


def test_latency_interval_zero_spread_floor():
    ci = latency_interval([2.0], within=[2.0, 2.0, 2.0])
    assert (ci.low, ci.high) == pytest.approx((1.98, 2.02))


def test_latency_interval_predicts_a_new_timing():
    rng = np.random.default_rng(1)
    draws = rng.lognormal(mean=np.log(8.0), sigma=0.1, size=(2000, 6))
    hits = sum(latency_interval(row[:5]).contains(row[5]) for row in draws)
    assert 0.90 <= hits / 2000 <= 0.99


def test_block_spread_is_the_median_robust_spread_of_the_block_times():
    assert block_spread([10.0, 10.0, 10.0], [1.349, 2.698, 4.047]) == pytest.approx(0.2)
    assert block_spread([5.0], [0.0]) == 0.0 and block_spread([], []) == 0.0


def test_a_latency_floor_widens_only_intervals_narrower_than_it():
    medians = [10.0, 10.01, 9.99]
    tight = latency_interval(medians)
    floored = latency_interval(medians, floor=0.05)
    logs = np.log(medians)
    # a known spread takes a normal quantile (a t with the timings' 2 df would inflate it 2.2x)
    half = stats.norm.ppf(0.975) * 0.05 * math.sqrt(1 + 1 / 3)
    assert (floored.low, floored.high) == pytest.approx(
        (math.exp(logs.mean() - half), math.exp(logs.mean() + half))
    )
    assert (
        floored.width > 10 * tight.width
        and "floored at the timer's own block spread (5.0%, normal quantile)" in floored.method
    )
    wide = [8.0, 10.0, 12.0]
    assert latency_interval(wide, floor=0.05) == latency_interval(wide)  # its own spread is already larger


def test_a_floored_interval_covers_a_timing_taken_after_the_machine_drifted():
    """Timings minutes apart share the machine's state (a common offset, sd 3%); a timing taken later meets
    another state. Without the floor the few close timings give an interval that misses it far more than 5% of
    the time; floored at the blocks' own spread (4% here), it covers at least 90%."""
    rng = np.random.default_rng(2)
    hits = {False: 0, True: 0}
    trials = 2000
    for _ in range(trials):
        now = np.log(0.5) + rng.normal(0, 0.03)
        timings = np.exp(now + rng.normal(0, 0.004, size=3))
        later = np.exp(np.log(0.5) + rng.normal(0, 0.03) + rng.normal(0, 0.004))
        for floored in (False, True):
            hits[floored] += latency_interval(timings, floor=0.04 if floored else 0.0).contains(later)
    assert hits[False] / trials < 0.5 and hits[True] / trials >= 0.9


def test_median_ci_hand_case():
    x = [7.0, 1.0, 9.0, 3.0, 5.0, 2.0, 8.0, 10.0, 4.0, 6.0]
    ci = median_ci(x)
    assert (ci.low, ci.high) == (2.0, 9.0)  # 0-based order statistics 1 and 8
    assert ci.estimate == 5.5
    assert "97.9% coverage with 10 samples" in ci.method
    assert 1 - 2 * (1 + 10) / 1024 == pytest.approx(0.9785, abs=1e-4)


def test_median_ci_few_samples_uses_range():
    ci = median_ci([3.0, 1.0, 4.0, 2.0])
    assert (ci.low, ci.high) == (1.0, 4.0)
    assert ci.method == "order statistics, 87.5% coverage with 4 samples"


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


def test_bootstrap_diff_ci():
    rng = np.random.default_rng(2)
    a, b = rng.uniform(0.7, 0.9, 6), rng.uniform(0.6, 0.8, 6)
    ci = bootstrap_diff_ci(a, b, bounds=(0.0, 1.0))
    assert ci.estimate == pytest.approx(a.mean() - b.mean())
    assert ci.contains(ci.estimate) and -1.0 <= ci.low < ci.high <= 1.0
    big = bootstrap_diff_ci(rng.uniform(0.7, 0.9, 60), rng.uniform(0.6, 0.8, 60), bounds=(0.0, 1.0))
    assert big.width < ci.width


def test_bootstrap_diff_ci_bounds_clip():
    ci = bootstrap_diff_ci([1.0, 0.0], [0.0, 1.0], bounds=(0.0, 0.5))
    assert ci.low >= -0.5 and ci.high <= 0.5
    unclipped = bootstrap_diff_ci([1.0, 0.0], [0.0, 1.0])
    assert unclipped.low < -0.5


def test_bootstrap_single_values_are_a_point():
    ci = bootstrap_diff_ci([0.8], [0.7])
    assert ci.low == pytest.approx(0.1) and ci.high == pytest.approx(0.1)


def test_minimum_detectable_effect():
    expected = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * 2.0 * math.sqrt(1 / 10 + 1 / 20)
    assert minimum_detectable_effect(10, 20, 2.0) == pytest.approx(expected)
    one_sided = (stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * 2.0 * math.sqrt(1 / 10 + 1 / 20)
    assert minimum_detectable_effect(10, 20, 2.0, alternative="greater") == pytest.approx(one_sided)
    assert minimum_detectable_effect(2, 2, 1.0) == math.inf
    assert minimum_detectable_effect(2, 2, 1.0, alternative="greater") == math.inf  # 1/6 > 0.05
    assert minimum_detectable_effect(3, 3, 1.0, alternative="greater") < math.inf  # 1/20 <= 0.05
    assert minimum_detectable_effect(10, 10, 0.0) == 0.0
    with pytest.raises(ValueError):
        minimum_detectable_effect(5, 5, -1.0)


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


def test_interval_helpers():
    iv = Interval(0.5, 0.4, 0.7, 3, "x")
    assert iv.width == pytest.approx(0.3) and iv.contains(0.4) and not iv.contains(0.71)
