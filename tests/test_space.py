"""The search space: fixed distributions, valid configs by construction, coverage, samplers."""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from pathlib import Path

import optuna
import pytest

from explorer.engine.config import ModelConfig, schedule_family, valid_heads
from explorer.errors import ConfigError
from explorer.search.space import SearchSpace, make_sampler
from explorer.search.spec import StudySpec, load_spec, spec_from_dict

STUDIES = Path(__file__).resolve().parent.parent / "studies"
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
    space = SearchSpace.from_spec(spec)
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
    chosen = optuna.samplers.RandomSampler(seed=1) if sampler == "random" else make_sampler(spec)
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
    # no trial wasted: the rejected + repaired fraction (required < 5%) is 0 by construction
    bad = sum(s.rejected + s.repaired for s in sampled)
    assert bad / N_TRIALS < 0.05 and bad == 0
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
    space = SearchSpace.from_spec(spec)

    def score(c: ModelConfig) -> float:
        heads = sum(abs(math.log2(h) - 3) for h in c.heads) / len(c.heads)
        return -heads - abs(c.d_model - 256) / 128 + (c.family == "increasing")

    tails = {}
    for name, sampler in (("random", optuna.samplers.RandomSampler(seed=0)), ("tpe", make_sampler(spec))):
        study = optuna.create_study(direction="maximize", sampler=sampler)
        study.optimize(lambda t: score(space.sample(t).config), n_trials=150)
        tails[name] = statistics.mean(t.value for t in study.trials[-50:])
    assert tails["tpe"] > tails["random"] + 1.0, tails


def test_quickstart_parametrization():
    space = SearchSpace.from_spec(committed("quickstart"))
    # free needs 3 layers and the spec lists 2 and 3, so depth is a position among the usable depths
    assert list(space.distributions) == [
        "family", "d_model", "min_dk", "n_layers_q", "heads_q0", "heads_q1", "heads_q2",
    ]  # fmt: skip
    assert isinstance(space.distributions["family"], optuna.distributions.CategoricalDistribution)
    free = space.decode({"family": "free", "d_model": 64, "min_dk": 4, "n_layers_q": 0.0, "heads_q0": 0.0,
                         "heads_q1": 0.0, "heads_q2": 0.0})  # fmt: skip
    assert free.config.n_layers == 3 and free.config.family == "free"
    uni = space.decode({"family": "uniform", "d_model": 64, "min_dk": 4, "n_layers_q": 0.0, "heads_q0": 0.99,
                        "heads_q1": 0.5, "heads_q2": 0.5})  # fmt: skip
    assert uni.config.heads == (16, 16) and uni.config.d_k == (4, 4)


def test_gpu_vit_uses_plain_categoricals_where_every_value_is_usable():
    space = SearchSpace.from_spec(committed("gpu-vit"))
    for name in ("family", "d_model", "min_dk", "n_layers", "mlp_ratio"):
        assert isinstance(space.distributions[name], optuna.distributions.CategoricalDistribution), name
    assert space.distributions["lr"].log
    assert [f"heads_q{i}" for i in range(6)] == [n for n in space.distributions if n.startswith("heads_q")]


def test_single_valued_factors_are_not_suggested():
    d = committed("relations").to_dict()  # one d_model, min_dk, mlp_ratio and lr
    assert set(SearchSpace.from_spec(spec_from_dict(d)).distributions) == {"heads_q0"}  # uniform, 2 layers
    d["space"] = d["space"] | {"n_layers": [1, 2], "families": ["uniform", "increasing", "decreasing"]}
    space = SearchSpace.from_spec(spec_from_dict(d))
    assert set(space.distributions) == {"family", "n_layers_q", "heads_q0", "heads_q1"}


@pytest.mark.parametrize("name", ["quickstart", "relations"])
def test_enumeration_matches_size_and_is_valid_and_distinct(name):
    spec = committed(name)
    space = SearchSpace.from_spec(spec)
    configs = list(space.enumerate_configs())
    assert len(configs) == space.size()
    assert len(set(configs)) == len(configs)
    for c in configs:
        assert_valid(c, spec)
    by_family = Counter(c.family for c in configs)
    assert set(by_family) == set(spec.space.families)


def test_size_formula_agrees_with_enumeration_on_a_wider_space():
    spec = small(n_layers=[3, 4, 5], mlp_ratio=[2.0, 4.0])
    space = SearchSpace.from_spec(spec)
    assert space.size() == sum(1 for _ in space.enumerate_configs())
    assert SearchSpace.from_spec(committed("gpu-vit")).size() > 100_000  # counted, not built


def test_every_enumerated_config_is_reachable_by_sampling():
    """Random parameter draws decode onto the whole enumerated space: no config is unreachable."""
    space = SearchSpace.from_spec(committed("quickstart"))
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
    space = SearchSpace.from_spec(spec)
    for c in space.enumerate_configs():
        assert schedule_family(c.heads) == c.family
        if c.family != "uniform":
            assert len(set(c.heads)) > 1


def test_enqueued_params_reproduce_the_config():
    """What a retry after a killed worker does: enqueue a trial's params, get the same config back."""
    spec = committed("quickstart")
    space = SearchSpace.from_spec(spec)
    study = optuna.create_study(directions=spec.directions(), sampler=make_sampler(spec))
    first = space.sample(study.ask())
    study.enqueue_trial(first.params)
    assert space.sample(study.ask()).config == first.config


def test_decode_rejects_foreign_params():
    space = SearchSpace.from_spec(committed("quickstart"))
    with pytest.raises(ConfigError, match="missing"):
        space.decode({"family": "uniform"})
    params = {name: 0.5 for name in space.distributions} | {"family": "uniform", "d_model": 48, "min_dk": 4}
    with pytest.raises(ConfigError, match="d_model = 48"):
        space.decode(params)


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("tpe", optuna.samplers.TPESampler),
        ("nsga2", optuna.samplers.NSGAIISampler),
        ("gp", optuna.samplers.GPSampler),
        ("random", optuna.samplers.RandomSampler),
        ("qmc", optuna.samplers.QMCSampler),
    ],
)
def test_make_sampler_returns_the_named_class(name, cls):
    d = committed("quickstart").to_dict() | {"sampler": name}
    sampler = make_sampler(spec_from_dict(d))
    assert type(sampler) is cls


def test_make_sampler_seeds_reproducibly_and_streams_differ():
    spec = spec_from_dict(committed("quickstart").to_dict() | {"sampler": "random"})
    space = SearchSpace.from_spec(spec)

    def first_params(stream: int) -> list[dict]:
        study = optuna.create_study(directions=spec.directions(), sampler=make_sampler(spec, stream))
        return [space.sample(study.ask()).params for _ in range(5)]

    assert first_params(0) == first_params(0)
    assert first_params(1) == first_params(1)
    assert first_params(0) != first_params(1)


def test_qmc_workers_share_one_even_sequence():
    """Two workers (streams 1 and 2) asking in turn cover a 4-architecture space evenly: Sobol points are shared
    through the study, so after the first (random) trial each block of 4 points holds every architecture once."""
    spec = spec_from_dict(committed("relations").to_dict() | {"sampler": "qmc"})
    space = SearchSpace.from_spec(spec)
    assert space.size() == 4
    study = optuna.create_study(directions=spec.directions())
    samplers = [make_sampler(spec, 1), make_sampler(spec, 2)]
    heads = []
    for i in range(9):
        study.sampler = samplers[i % 2]
        trial = study.ask()
        heads.append(space.sample(trial).config.heads[0])
        study.tell(trial, [0.5, 1.0])
    counts = {h: heads[1:].count(h) for h in (1, 2, 4, 8)}
    assert counts == {1: 2, 2: 2, 4: 2, 8: 2}, heads


def test_nsga2_population_scales_with_the_budget():
    d = committed("quickstart").to_dict() | {"sampler": "nsga2"}
    assert make_sampler(spec_from_dict(d | {"n_trials": 16}))._population_size == 8
    assert make_sampler(spec_from_dict(d | {"n_trials": 1000}))._population_size == 50
