"""Samplers that never spend a search trial on an architecture the study already holds."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from explorer.spec import SearchSpace, StudySpec, load_spec, spec_from_dict
from explorer.storage import arch_key, report_epoch
from explorer.study._sampling import UniqueSampler, make_sampler

STUDIES = Path(__file__).resolve().parents[2] / "studies"
optuna.logging.set_verbosity(optuna.logging.WARNING)


def quickstart(**changes) -> StudySpec:
    return spec_from_dict(load_spec(STUDIES / "quickstart.toml").to_dict() | changes)


def keys_of(study: optuna.Study, space: SearchSpace) -> list[str]:
    out = []
    for t in study.get_trials():
        s = space.decode(t.params)
        out.append(arch_key(s.config, s.lr))
    return out


@pytest.mark.parametrize("sampler", ["tpe", "random", "qmc", "nsga2"])
def test_no_architecture_twice_until_the_space_is_covered(sampler):
    spec = quickstart(sampler=sampler)
    space = SearchSpace(spec.space)
    study = optuna.create_study(directions=spec.directions(), sampler=make_sampler(spec, 1))

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        c = space.sample(trial).config  # a trade-off with one sweet spot TPE would otherwise keep proposing
        return -abs(sum(c.heads) - 8) / 64, float(sum(c.heads))

    study.optimize(objective, n_trials=space.size())
    keys = keys_of(study, space)
    assert len(set(keys)) == len(keys) == space.size()  # all 36 architectures, each once
    proposals = [t.user_attrs["proposal"] for t in study.get_trials()]
    assert set(proposals) <= {"sampler", "random", "unevaluated"}
    assert all(t.user_attrs["rejected"] >= 0 for t in study.get_trials())


class Stubborn(optuna.samplers.BaseSampler):
    """Always proposes the same point: the worst case for uniqueness."""

    def __init__(self, params):
        self.params = params

    def infer_relative_search_space(self, study, trial):
        return dict(SearchSpace(quickstart().space).distributions)

    def sample_relative(self, study, trial, search_space):
        return dict(self.params)

    def sample_independent(self, study, trial, param_name, param_distribution):
        raise AssertionError("everything is relative here")


def test_repeated_proposals_are_counted_and_replaced_by_an_untaken_architecture():
    spec = quickstart()
    space = SearchSpace(spec.space)
    first = next(space.points())
    sampler = UniqueSampler(Stubborn(first.params), space, seed=0, retries=5)
    study = optuna.create_study(directions=spec.directions(), sampler=sampler)
    study.optimize(lambda t: (0.5, 1.0) if space.sample(t) else None, n_trials=3)
    trials = study.get_trials()
    assert trials[0].user_attrs == {"proposal": "sampler", "rejected": 0}  # the first time it is new
    for t in trials[1:]:  # then every proposal repeats it: 5 rejected, then a random untaken one
        assert t.user_attrs == {"proposal": "unevaluated", "rejected": 5}
    assert len(set(keys_of(study, space))) == 3


def test_enqueued_trials_keep_their_own_parameters():
    spec = quickstart()
    space = SearchSpace(spec.space)
    study = optuna.create_study(directions=spec.directions(), sampler=make_sampler(spec, 1))
    point = list(space.points())[7]
    study.enqueue_trial(point.params)
    trial = study.ask()
    assert space.sample(trial).config == point.config
    assert "proposal" not in trial.user_attrs


def test_make_sampler_wraps_the_named_sampler():
    classes = {
        "tpe": optuna.samplers.TPESampler,
        "nsga2": optuna.samplers.NSGAIISampler,
        "gp": optuna.samplers.GPSampler,
        "random": optuna.samplers.RandomSampler,
        "qmc": optuna.samplers.QMCSampler,
    }
    for name, cls in classes.items():
        sampler = make_sampler(quickstart(sampler=name))
        assert isinstance(sampler, UniqueSampler) and type(sampler.base) is cls


def test_streams_are_reproducible_and_differ():
    spec = quickstart(sampler="random")
    space = SearchSpace(spec.space)

    def first_keys(*stream: int) -> list[str]:
        study = optuna.create_study(directions=spec.directions(), sampler=make_sampler(spec, *stream))
        study.optimize(lambda t: (space.sample(t) and 0.5, 1.0), n_trials=5)
        return keys_of(study, space)

    assert first_keys(3) == first_keys(3)
    assert first_keys(3) != first_keys(4)


def test_nsga2_population_scales_with_the_budget():
    assert make_sampler(quickstart(sampler="nsga2", n_trials=16)).base._population_size == 8
    assert make_sampler(quickstart(sampler="nsga2", n_trials=1000)).base._population_size == 50


def test_tpe_reads_pruned_trials_with_learning_curves_in_a_multi_objective_study():
    # every trial stores its per-epoch quality as intermediate values, and early stopping prunes some: a
    # multi-objective TPE ranks those by study.direction, which a multi-objective study refuses to give
    spec = quickstart(sampler="tpe")
    space = SearchSpace(spec.space)
    study = optuna.create_study(directions=spec.directions(), sampler=make_sampler(spec, 1))

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        c = space.sample(trial).config
        for epoch in range(3):  # the learning curve, as explorer stores it
            report_epoch(trial, epoch, 0.5 + 0.1 * epoch)
        if trial.number % 2:  # stopped at a rung, as early stopping does
            raise optuna.TrialPruned()
        return 0.9 - 0.01 * c.heads[0], float(c.heads[0])

    study.optimize(objective, n_trials=16)  # well past TPE's start-up trials
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.PRUNED) == 8 and optuna.trial.TrialState.FAIL not in states
