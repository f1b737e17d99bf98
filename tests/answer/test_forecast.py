"""The forecast of what deciding costs: the stage's own allocation run forward on studies drawn from the
posterior, its figures a function of the grid, and calibrated against studies that go on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from explorer.answer._forecast import DRAWS, Forecast, forecast, unit_covariance
from explorer.answer._rule import Rule, decide, next_cells

RULE = Rule(margin=0.01, risk=0.05, tie=0.05, edge=0.0025, start=3, step=2)
TIMES = np.array([[2.0, 2.0], [1.4, 1.4], [1.0, 1.0]])  # the best slowest, then two faster layouts


def grid(means, sd, units, seed, shared=0.01):
    """Scores of layouts with true ``means`` on ``units`` units: a unit effect every layout shares (the pairing)
    plus each run's own noise ``sd``."""
    rng = np.random.default_rng(seed)
    return np.asarray(means)[:, None] + rng.normal(0, shared, units) + rng.normal(0, sd, (len(means), units))


def run(scores, draws=DRAWS, rule=RULE, budget=60):
    return forecast(scores, TIMES[: len(scores)], ~np.isnan(scores), rule, budget, draws=draws)


def test_a_forecast_is_a_function_of_the_grid():
    scores = grid([0.96, 0.955, 0.94], 0.008, 3, seed=1)
    a, b = run(scores), run(scores.copy())
    assert a is not None and a == b and a.draws > 10
    assert list(a.runs) == sorted(a.runs) and a.median <= a.likely  # quantiles in order


def test_a_decided_grid_costs_nothing_and_a_grid_without_spread_is_not_forecast():
    decided = grid([0.96, 0.959, 0.90], 0.001, 8, seed=2, shared=0.001)
    assert decide(decided, TIMES, RULE).decided
    found = run(decided)
    assert found is not None and found.likely == 0 and found.median == 0
    assert run(decided[:, :1]) is None  # one unit a layout: no spread to draw from


def test_a_comparison_nearer_the_margin_and_noisier_costs_more():
    clear = run(grid([0.96, 0.958, 0.93], 0.004, 3, seed=3))
    close = run(grid([0.96, 0.951, 0.93], 0.012, 3, seed=3))
    assert clear is not None and close is not None
    assert clear.median < close.median and clear.likely < close.likely


def test_without_an_edge_a_layout_at_the_margin_has_no_affordable_budget():
    """No indifference zone and a layout exactly at the margin: no number of runs decides it, and the forecast
    says so rather than naming a budget."""
    common = np.random.default_rng(4).normal(0, 0.01, 4)
    scores = np.array([0.96 + common, 0.95 + common + np.array([0.004, -0.004, 0.004, -0.004])])  # gap: 0.01
    found = run(scores, rule=RULE.with_edge(0.0), budget=10)
    assert found is not None and found.likely is None and found.decided_share < 0.8


def test_the_simulated_studies_run_the_stages_own_rounds():
    """The first simulated round is the round the stage would queue now: a forecast never names fewer runs than
    that round (a --budget of the forecast always moves the study)."""
    scores = grid([0.96, 0.954, 0.94], 0.01, 3, seed=5)
    first = next_cells(scores, TIMES, RULE, 10**6)
    found = run(scores)
    assert first and found is not None and min(found.runs) >= len(first)


def test_the_quantiles_count_undecided_studies_as_beyond_every_budget():
    f = Forecast((10.0, 20.0, 30.0, math.inf, math.inf), cap=100, pace_s=30.0)
    assert f.median == 30 and f.likely is None and f.decided_share == pytest.approx(0.6)
    assert f.minutes(f.median) == pytest.approx(15.0)
    assert Forecast((10.0, 20.0, 30.0, 40.0, 50.0), cap=100).likely == 40


def test_the_unit_covariance_is_positive_semidefinite_and_keeps_the_pairing():
    scores = grid([0.96, 0.955, 0.94], 0.002, 6, seed=6, shared=0.02)
    cov = unit_covariance(scores)
    assert np.linalg.eigvalsh(cov).min() >= -1e-12
    corr = cov / np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
    assert corr[0, 1] > 0.8  # the shared unit effect dominates: layouts rise and fall together


@pytest.mark.slow
def test_studies_that_go_on_decide_within_the_forecast_budget_about_as_often_as_it_says():
    """Calibration in miniature (benchmarks/decisions.py scores it at scale): from a grid of 3 units, the study
    goes on with fresh units from the truth under the stage's own rounds; the share decided within the
    forecast's 80th percentile is near 80%."""
    truth = np.array([0.96, 0.953, 0.94])
    hits, n = 0, 24
    for seed in range(n):
        rng = np.random.default_rng(100 + seed)

        def unit(rng=rng):
            return truth + rng.normal(0, 0.01) + rng.normal(0, 0.008, 3)

        scores = np.stack([unit() for _ in range(3)], axis=1)
        found = run(scores, draws=32)
        assert found is not None
        spent = 0
        while True:
            cells = next_cells(scores, TIMES, RULE, 10**6)
            if not cells or spent > 2000:
                break
            width = max(u for _, u in cells) + 1
            if width > scores.shape[1]:
                scores = np.hstack([scores, np.full((3, width - scores.shape[1]), np.nan)])
            draws = {u: unit() for u in {u for _, u in cells}}
            for i, u in cells:
                scores[i, u] = draws[u][i]
            spent += len(cells)
        hits += found.likely is not None and spent <= found.likely
    assert 0.55 <= hits / n <= 1.0, hits


def test_a_forecast_does_not_depend_on_the_order_of_the_layouts():
    """The stage and the answer list the finalists in different orders; both must forecast the same figures."""
    scores = grid([0.96, 0.955, 0.94], 0.008, 3, seed=7)
    order = [2, 0, 1]
    a = forecast(scores, TIMES, ~np.isnan(scores), RULE, 60)
    b = forecast(scores[order], TIMES[order], ~np.isnan(scores[order]), RULE, 60)
    assert a is not None and a == b
