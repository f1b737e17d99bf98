"""Readable Optuna params beside the sampled positions: each layer's head count (and key/value heads, width,
depth where positions encode them), equal to what the positions decode to, with fixed choices."""

from __future__ import annotations

import optuna
import pytest

from explorer.spec import SearchSpace, spec_from_dict
from explorer.study._sampling import make_sampler, suggest_readable

optuna.logging.set_verbosity(optuna.logging.WARNING)

SPACES = {
    "fixed base": {"d_model": [64], "n_layers": [2], "heads": [1, 2, 4, 8, 16], "min_dk": 4},
    "free, two depths": {"d_model": [48], "n_layers": [2, 3], "heads": [1, 2, 3, 4, 6], "min_dk": 4},
    "kv heads": {
        "d_model": [64],
        "n_layers": [2],
        "heads": [2, 4, 8],
        "kv_heads": [1, 2, 4],
        "kv_per_layer": True,
    },
    "two widths": {"d_model": [32, 96], "n_layers": [2], "heads": [1, 2, 3, 4, 8], "min_dk": 8},
}


def spec(space: dict, sampler: str = "tpe"):
    return spec_from_dict(
        {
            "name": "r",
            "n_trials": 8,
            "sampler": sampler,
            "task": {"name": "digits", "epochs": 2},
            "space": space,
        }
    )


@pytest.mark.parametrize("name", SPACES)
def test_every_point_carries_readable_values_its_config_has(name):
    space = SearchSpace(spec(SPACES[name]).space)
    assert {n for n in space.readable if n.startswith("heads_layer")} == {
        f"heads_layer{i}" for i in range(max(space.space.n_layers))
    }
    for point in space.points():
        c = point.config
        assert [point.readable[f"heads_layer{i}"] for i in range(len(c.heads))] == list(c.heads)
        if c.kv_heads is not None and "kv_heads_layer0" in space.readable:
            assert [point.readable[f"kv_heads_layer{i}"] for i in range(len(c.heads))] == list(c.kv_heads)
        for key, value in point.readable.items():
            assert value in space.readable[key].choices
    if name == "free, two depths":  # free needs 3 layers: depth is a position, its readable value beside it
        assert "n_layers_q" in space.distributions and space.readable["n_layers"].choices == (2, 3)
        assert {p.readable["n_layers"] for p in space.points()} == {2, 3}


@pytest.mark.parametrize("sampler", ["tpe", "random", "nsga2"])
def test_a_study_records_head_counts_as_params_and_importance_reads_them(sampler):
    s = spec(SPACES["free, two depths"], sampler)
    space = SearchSpace(s.space)
    study = optuna.create_study(directions=s.directions(), sampler=make_sampler(s, 1, space=space))

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        sampled = space.sample(trial)
        suggest_readable(trial, sampled, space)
        c = sampled.config
        return float(min(c.heads)), float(sum(c.heads))

    study.optimize(objective, n_trials=20)
    for t in study.trials:
        heads = space.decode(t.params).config.heads
        assert [t.params[f"heads_layer{i}"] for i in range(len(heads))] == list(heads)
        assert (
            "heads_layer0" in t.distributions
            and t.distributions["heads_layer0"] == space.readable["heads_layer0"]
        )
    readable = [n for n in space.readable if n.startswith("heads_layer")]
    importance = optuna.importance.get_param_importances(
        study, params=readable[:2], target=lambda t: t.values[0]
    )
    assert set(importance) == {"heads_layer0", "heads_layer1"}


def test_a_retry_enqueued_with_its_params_keeps_its_readable_values():
    s = spec(SPACES["fixed base"])
    space = SearchSpace(s.space)
    study = optuna.create_study(directions=s.directions(), sampler=make_sampler(s, 1, space=space))
    point = next(p for p in space.points() if p.config.heads == (16, 4))
    study.enqueue_trial(point.params | point.readable)
    trial = study.ask()
    sampled = space.sample(trial)
    suggest_readable(trial, sampled, space)
    assert sampled.config.heads == (16, 4) and trial.params["heads_layer0"] == 16
