"""The accuracy/latency front, its knee and hypervolume, on hand-made tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from explorer.answer import front_mask, hypervolume_2d, hypervolume_history, knee_index, pareto_front
from explorer.answer._pareto import knee


def table(acc, lat) -> pd.DataFrame:
    return pd.DataFrame(
        {"val_accuracy": acc, "latency_ms": lat, "number": range(len(acc)), "key": range(len(acc))}
    )


def test_front_drops_dominated_points():
    t = table([0.7, 0.9, 0.85, 0.95, 0.6], [1.0, 1.5, 2.0, 5.0, 3.0])
    assert list(pareto_front(t)["number"]) == [0, 1, 3]  # fastest first; 2 and 4 are dominated
    assert list(front_mask(t["val_accuracy"], t["latency_ms"])) == [True, True, False, True, False]


@pytest.mark.parametrize(
    ("points", "ref", "expected"),
    [
        ([[0.0, 0.0]], [1.0, 1.0], 1.0),
        ([[0.0, 0.5], [0.5, 0.0]], [1.0, 1.0], 0.75),
        ([[2.0, 2.0]], [1.0, 1.0], 0.0),
    ],
)
def test_hypervolume_2d_hand_computed(points, ref, expected):
    assert hypervolume_2d(points, ref) == pytest.approx(expected)


def test_hypervolume_history_is_monotone():
    t = table([0.5, 0.7, 0.6, 0.9], [1.0, 2.0, 0.5, 3.0])
    h = hypervolume_history(t)
    assert list(h["number"]) == [0, 1, 2, 3] and h["hypervolume"].is_monotonic_increasing
    assert h["hypervolume"].iloc[-1] <= 1.21


def test_knee_is_the_corner_of_an_l_shaped_front():
    t = table([0.5, 0.89, 0.9], [1.0, 1.1, 5.0])
    assert int(knee(pareto_front(t))["number"]) == 1


def test_knee_with_one_or_two_points_is_nearest_the_ideal_corner():
    assert int(knee(table([0.8], [1.0]))["number"]) == 0
    assert int(knee(table([0.5, 0.9], [1.0, 1.2]))["number"]) == 1


def test_knee_index_matches_the_dataframe_version_on_random_fronts():
    rng = np.random.default_rng(0)
    for _ in range(50):
        acc, lat = rng.random(12), rng.random(12)
        t = table(acc, lat)
        front = pareto_front(t)
        on = np.flatnonzero(front_mask(acc, lat))
        assert on[knee_index(acc[on], lat[on], (acc, lat))] == int(knee(front, bounds=t)["number"])


def test_a_front_holding_the_best_of_both_objectives_fills_the_whole_reference_box():
    from explorer.answer import HV_REFERENCE

    df = pd.DataFrame({"number": [0, 1, 2], "val_accuracy": [0.5, 0.9, 0.7], "latency_ms": [2.0, 1.0, 1.5]})
    history = hypervolume_history(df)
    assert history["hypervolume"].iloc[-1] == pytest.approx(HV_REFERENCE[0] * HV_REFERENCE[1])
    assert history["hypervolume"].iloc[0] < history["hypervolume"].iloc[-1]
