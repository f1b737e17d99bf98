"""The search space: fixed distributions, valid configs by construction, coverage, samplers."""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from pathlib import Path

import optuna
import pytest

from explorer.errors import ConfigError
from explorer.layout import ModelConfig, valid_heads
from explorer.layout._schedules import schedule_family
from explorer.spec import SearchSpace, StudySpec, load_spec, spec_from_dict

STUDIES = Path(__file__).resolve().parents[2] / "studies"
COMMITTED = ("quickstart", "gpu-vit", "relations")
N_TRIALS = 300

optuna.logging.set_verbosity(optuna.logging.WARNING)


def committed(name: str) -> StudySpec:
    return load_spec(STUDIES / f"{name}.toml")


def small(**space) -> StudySpec:
    s = {"d_model": [32, 64], "n_layers": [2, 3], "heads": [1, 2, 4, 8, 16], "min_dk": [4, 8]}
    s.update(space)
    return spec_from_dict({"name": "s", "n_trials": 5, "task": {"name": "digits"}, "space": s})


def assert_valid(config: ModelConfig, spec: StudySpec) -> None:
    """The head rules, and the spec's own limits, hold for a config."""
    sp = spec.space
    assert config.d_model in sp.d_model and config.n_layers in sp.n_layers and config.min_dk in sp.min_dk
    assert (
        config.mlp_ratio in sp.mlp_ratio and config.dropout == sp.dropout and config.attention == sp.attention
    )
    valid = valid_heads(config.d_model, config.min_dk)
    assert all(h in valid for h in config.heads), config
    assert all(
        dk >= config.min_dk and dk * h == config.d_model
        for dk, h in zip(config.d_k, config.heads, strict=True)
    )
    assert config.family in sp.families
    if config.family in ("uniform", "free"):  # ramps may pass through valid counts between candidates
        assert set(config.heads) <= set(sp.heads)
    else:
        assert config.heads[0] in sp.heads and config.heads[-1] in sp.heads
    ModelConfig(**config.to_dict())  # the constructor's own checks


def run(spec: StudySpec, sampler: optuna.samplers.BaseSampler):
    """300 trials with dummy objectives; returns the study and the Sampled objects."""
    space = SearchSpace(spec.space)
    out = []

    def objective(trial: optuna.Trial) -> tuple[float, ...]:
        s = space.sample(trial)
        out.append(s)
        c = s.config  # fake trade-off: more heads "more accurate", wider "slower"
        values = [sum(c.heads) / (len(c.heads) * 64), c.d_model * c.n_layers * c.mlp_ratio / 1000, 1.0]
        return tuple(values[: len(spec.directions())])

    study = optuna.create_study(directions=spec.directions(), sampler=sampler)
    study.optimize(objective, n_trials=N_TRIALS)
    return study, space, out


@pytest.mark.parametrize("sampler", ["random", "tpe"])
@pytest.mark.parametrize("name", COMMITTED)
def test_sampling_is_valid_fixed_and_covering(name, sampler):
    spec = committed(name)
    chosen = (
        optuna.samplers.RandomSampler(seed=1) if sampler == "random" else optuna.samplers.TPESampler(seed=0)
    )
    study, space, sampled = run(spec, chosen)
    trials = study.get_trials()
    assert len(trials) == N_TRIALS and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    # the same parameters with the same distributions in every trial
    assert all(t.distributions == space.distributions for t in trials)
    for s, t in zip(sampled, trials, strict=True):
        assert_valid(s.config, spec)
        assert s.params == t.params
        assert space.decode(t.params) == s  # a finished trial's params give back its config
        if "family" in t.params:
            assert s.config.family == t.params["family"]
    assert {s.config.family for s in sampled} == set(spec.space.families)
    assert {s.config.d_model for s in sampled} == set(spec.space.d_model)
    if sampler == "random":  # random sampling sees the whole declared range of every factor
        assert {s.config.n_layers for s in sampled} == set(spec.space.n_layers)
        assert {s.config.min_dk for s in sampled} == set(spec.space.min_dk)
        heads_seen = {h for s in sampled for h in s.config.heads}
        assert set(spec.space.heads) <= heads_seen


def test_tpe_learns_every_factor_through_this_parametrization():
    """A toy score rewarding 8 heads per layer, the increasing family and d_model 256: TPE must find it."""
    spec = committed("gpu-vit")
    space = SearchSpace(spec.space)

    def score(c: ModelConfig) -> float:
        heads = sum(abs(math.log2(h) - 3) for h in c.heads) / len(c.heads)
        return -heads - abs(c.d_model - 256) / 128 + (c.family == "increasing")

    tails = {}
    tpe = optuna.samplers.TPESampler(seed=0, multivariate=True)
    for name, sampler in (("random", optuna.samplers.RandomSampler(seed=0)), ("tpe", tpe)):
        study = optuna.create_study(direction="maximize", sampler=sampler)
        study.optimize(lambda t: score(space.sample(t).config), n_trials=150)
        tails[name] = statistics.mean(t.value for t in study.trials[-50:])
    assert tails["tpe"] > tails["random"] + 1.0, tails


def test_quickstart_parametrization():
    space = SearchSpace(committed("quickstart").space)
    # one width, depth and floor: only the family and one position per layer are suggested
    assert list(space.distributions) == ["family", "heads_q0", "heads_q1"]
    assert isinstance(space.distributions["family"], optuna.distributions.CategoricalDistribution)
    uni = space.decode({"family": "uniform", "heads_q0": 0.99, "heads_q1": 0.5})
    assert uni.config.heads == (16, 16) and uni.config.d_k == (4, 4)
    inc = space.decode({"family": "increasing", "heads_q0": 0.0, "heads_q1": 0.99})
    assert inc.config.heads == (1, 16) and inc.config.family == "increasing"
    assert space.size() == 5 + 10 + 10


def test_free_needs_three_layers_so_depth_becomes_a_position():
    space = SearchSpace(small(families=["uniform", "free"]).space)
    # free cannot use 2 layers: depth is a position among usable ones
    assert "n_layers_q" in space.distributions
    free = space.decode(
        {
            "family": "free",
            "d_model": 64,
            "min_dk": 4,
            "n_layers_q": 0.0,
            "heads_q0": 0.0,
            "heads_q1": 0.0,
            "heads_q2": 0.0,
        }
    )
    assert free.config.n_layers == 3 and free.config.family == "free"


@pytest.mark.parametrize("name", COMMITTED)
def test_points_list_every_configuration_with_params_that_decode_to_it(name):
    spec = (
        committed(name)
        if name != "gpu-vit"
        else small(n_layers=[2, 3], mlp_ratio=[2.0, 4.0], lr=[1e-3, 1e-2])
    )
    space = SearchSpace(spec.space)
    points = list(space.points())
    assert len(points) == space.size()
    assert sorted(p.config.key() for p in points) == sorted(c.key() for c in space.enumerate_configs())
    for p in points:
        assert space.decode(p.params) == p
        assert set(p.params) == set(space.distributions)


def test_gpu_vit_uses_plain_categoricals_where_every_value_is_usable():
    space = SearchSpace(committed("gpu-vit").space)
    for name in ("family", "d_model", "min_dk", "n_layers", "mlp_ratio"):
        assert isinstance(space.distributions[name], optuna.distributions.CategoricalDistribution), name
    assert space.distributions["lr"].log
    assert [f"heads_q{i}" for i in range(6)] == [n for n in space.distributions if n.startswith("heads_q")]


def test_single_valued_factors_are_not_suggested():
    d = committed("relations").to_dict()  # one min_dk, mlp_ratio and lr; two widths
    assert set(SearchSpace(spec_from_dict(d).space).distributions) == {"d_model", "heads_q0"}  # uniform
    d["space"] = d["space"] | {"d_model": [64]}
    assert set(SearchSpace(spec_from_dict(d).space).distributions) == {"heads_q0"}
    d["space"] = d["space"] | {"n_layers": [1, 2], "families": ["uniform", "increasing", "decreasing"]}
    space = SearchSpace(spec_from_dict(d).space)
    assert set(space.distributions) == {"family", "n_layers_q", "heads_q0", "heads_q1"}


@pytest.mark.parametrize("name", ["quickstart", "relations"])
def test_enumeration_matches_size_and_is_valid_and_distinct(name):
    spec = committed(name)
    space = SearchSpace(spec.space)
    configs = list(space.enumerate_configs())
    assert len(configs) == space.size()
    assert len(set(configs)) == len(configs)
    for c in configs:
        assert_valid(c, spec)
    by_family = Counter(c.family for c in configs)
    assert set(by_family) == set(spec.space.families)


def test_size_formula_agrees_with_enumeration_on_a_wider_space():
    spec = small(n_layers=[3, 4, 5], mlp_ratio=[2.0, 4.0])
    space = SearchSpace(spec.space)
    assert space.size() == sum(1 for _ in space.enumerate_configs())
    assert SearchSpace(committed("gpu-vit").space).size() > 100_000  # counted, not built


def test_every_enumerated_config_is_reachable_by_sampling():
    """Random parameter draws decode onto the whole enumerated space: no config is unreachable."""
    space = SearchSpace(committed("quickstart").space)
    rng = random.Random(0)
    seen = set()
    for _ in range(30_000):
        params = {}
        for name, dist in space.distributions.items():
            is_cat = isinstance(dist, optuna.distributions.CategoricalDistribution)
            params[name] = rng.choice(dist.choices) if is_cat else rng.random()
        seen.add(space.decode(params).config)
    assert seen == set(space.enumerate_configs())


def test_ramps_are_never_flat_and_free_is_never_monotone():
    spec = small(n_layers=[2, 3, 4])
    space = SearchSpace(spec.space)
    for c in space.enumerate_configs():
        assert schedule_family(c.heads) == c.family
        if c.family != "uniform":
            assert len(set(c.heads)) > 1


def test_enqueued_params_reproduce_the_config():
    """What a retry after a killed worker does: enqueue a trial's params, get the same config back."""
    spec = committed("quickstart")
    space = SearchSpace(spec.space)
    study = optuna.create_study(directions=spec.directions())
    first = space.sample(study.ask())
    study.enqueue_trial(first.params)
    assert space.sample(study.ask()).config == first.config


def test_decode_rejects_foreign_params():
    space = SearchSpace(committed("quickstart").space)
    with pytest.raises(ConfigError, match="missing"):
        space.decode({"family": "uniform"})
    params = {name: 0.5 for name in space.distributions} | {"family": "free"}
    with pytest.raises(ConfigError, match="family = 'free'"):
        space.decode(params)
