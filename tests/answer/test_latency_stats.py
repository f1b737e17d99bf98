"""Tests for explorer.answer._latency_stats: where a new timing should fall."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from explorer.answer._latency_stats import block_spread, latency_interval


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
