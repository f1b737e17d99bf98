"""Tests for explorer.answer._intervals: intervals stay in range and match scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from explorer.answer import Interval
from explorer.answer._intervals import accuracy_mean_ci, median_ci, proportion_ci


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


def test_interval_helpers():
    iv = Interval(0.5, 0.4, 0.7, 3, "x")
    assert iv.width == pytest.approx(0.3) and iv.contains(0.4) and not iv.contains(0.71)
