"""Searching key/value heads and head widths: every sampled pair is valid by construction, the distributions are
fixed, points() lists every architecture exactly once with parameters that decode to it."""

from __future__ import annotations

import itertools

import optuna
import pytest

from explorer.layout import ModelConfig, kv_layout, kv_params
from explorer.spec import SearchSpace, spec_from_dict

optuna.logging.set_verbosity(optuna.logging.WARNING)


def space(**over) -> SearchSpace:
    s = {
        "d_model": [64],
        "n_layers": [2],
        "heads": [2, 4, 8],
        "kv_heads": [1, 2, 4, 8],
        "families": ["uniform"],
    }
    s.update(over)
    spec = spec_from_dict({"name": "kv", "n_trials": 5, "task": {"name": "text"}, "space": s})
    return SearchSpace(spec.space)


def expected_pairs(heads, kv, layers=2):
    return {((h,) * layers, (k,) * layers) for h in heads for k in kv if h % k == 0}


def test_one_shared_position_gives_every_uniform_pair_once():
    sp = space()
    assert list(sp.distributions) == ["heads_q0", "kv_q"]
    pts = list(sp.points())
    pairs = [(p.config.heads, p.config.kv_per_layer) for p in pts]
    assert sorted(pairs) == sorted(expected_pairs((2, 4, 8), (1, 2, 4, 8)))  # 2 + 3 + 4, no repeats
    assert sp.size() == 9 == len({p.config.key() for p in pts})
    for p in pts:
        assert sp.decode(p.params) == p


def test_the_shared_position_runs_from_multi_query_to_multi_head():
    sp = space()
    low = sp.decode({"heads_q0": 0.99, "kv_q": 0.0}).config
    high = sp.decode({"heads_q0": 0.99, "kv_q": 1.0}).config
    assert (low.heads, low.kv_per_layer) == ((8, 8), (1, 1))
    assert high.kv_heads is None and high.kv_per_layer == (8, 8)  # kv_heads = heads is stored as multi-head


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_sampling_per_layer_is_valid_fixed_and_covering(sampler):
    sp = space(n_layers=[2, 3], families=["uniform", "increasing", "free"], kv_per_layer=True)
    assert {"kv_q0", "kv_q1", "kv_q2"} <= set(sp.distributions)
    chosen = (
        optuna.samplers.RandomSampler(seed=0) if sampler == "random" else optuna.samplers.TPESampler(seed=0)
    )
    study = optuna.create_study(sampler=chosen)
    seen = []

    def objective(trial):
        s = sp.sample(trial)
        seen.append(s.config)
        return float(sum(s.config.kv_per_layer))

    study.optimize(objective, n_trials=120)
    assert all(t.distributions == sp.distributions for t in study.trials)
    for c in seen:
        assert all(h % k == 0 and k in (1, 2, 4, 8) for h, k in zip(c.heads, c.kv_per_layer, strict=True))
        assert set(c.heads) <= {2, 4, 8}  # ramps step through the candidates only
        ModelConfig.from_dict(c.to_dict())
    mixed = [c for c in seen if len(set(c.kv_per_layer)) > 1 and len(set(c.heads)) == 1]
    assert mixed  # per layer: a layer may group its heads while another does not


def test_points_per_layer_enumerate_the_product_of_each_layers_choices():
    sp = space(kv_per_layer=True)
    pts = list(sp.points())
    want = {
        ((h, h), (a, b))
        for h in (2, 4, 8)
        for a, b in itertools.product((1, 2, 4, 8), repeat=2)
        if h % a == 0 and h % b == 0
    }
    assert {(p.config.heads, p.config.kv_per_layer) for p in pts} == want
    assert len(pts) == len(want) == sp.size() == 4 + 9 + 16
    assert all(sp.decode(p.params) == p for p in pts)


def test_shared_kv_positions_cover_layers_with_different_choices():
    """Heads 4 then 8: the one position moves both layers; every distinct layout is listed once, in order."""
    sp = space(heads=[4, 8])
    layouts = [kv_layout(sp.space, (4, 8), params) for params in kv_params(sp.space, (4, 8))]
    # bin edges of 3 and 4 options: 0, 1/4, 1/3, 1/2, 2/3, 3/4, 1, so six layouts from MQA to MHA
    assert layouts == [(1, 1), (1, 2), (2, 2), (2, 4), (4, 4), (4, 8)]


def test_head_dim_frees_the_head_count_from_d_model_and_carries_the_floor():
    sp = space(heads=[3, 6], kv_heads=[1, 3], head_dim=[16, 32], min_dk=16)
    pts = list(sp.points())
    assert {p.config.heads[0] for p in pts} == {3, 6}  # neither divides 64: allowed with a head width
    assert {p.config.d_k[0] for p in pts} == {16, 32}
    for p in pts:
        c = p.config
        assert all(h % k == 0 for h, k in zip(c.heads, c.kv_per_layer, strict=True))
        assert sp.decode(p.params) == p
    assert "head_dim" in sp.distributions and sp.size() == len(pts) == 2 * (2 + 2)


def test_a_classic_space_is_unchanged():
    sp = SearchSpace(
        spec_from_dict(
            {
                "name": "c",
                "n_trials": 5,
                "task": {"name": "digits"},
                "space": {
                    "d_model": [64],
                    "n_layers": [2],
                    "heads": [1, 2, 4, 8],
                    "families": ["uniform", "increasing"],
                },
            }
        ).space
    )
    assert not sp.modern and not any(name.startswith(("kv_q", "head_dim")) for name in sp.distributions)
    assert all(p.config.kv_heads is None and p.config.head_dim is None for p in sp.points())


def test_candidate_heads_expands_each_schedule_the_space_draws():
    from explorer.layout import candidate_heads

    assert candidate_heads("uniform:4", (1, 2, 4), 3) == (4, 4, 4)
    assert candidate_heads("increasing:1-4", (1, 2, 4), 3) == (1, 2, 4)
    assert candidate_heads("decreasing:1-4", (1, 2, 4), 3) == (4, 2, 1)
    assert candidate_heads("2,8,4", (1, 2, 4, 8), 3) == (2, 8, 4)


def test_kv_param_names_one_per_layer_or_one_shared_and_none_without_kv_heads():
    from explorer.layout import SpaceSpec, kv_param_names

    base = SpaceSpec(d_model=(64,), n_layers=(2,), heads=(2, 4))
    assert kv_param_names(base, 2) == []
    shared = SpaceSpec(d_model=(64,), n_layers=(2,), heads=(2, 4), kv_heads=(1, 2), families=("uniform",))
    (shared_name,) = kv_param_names(shared, 3)  # one position for every layer
    assert shared_name in SearchSpace(shared).distributions
    per_layer = SpaceSpec(
        d_model=(64,), n_layers=(2,), heads=(2, 4), kv_heads=(1, 2), kv_per_layer=True, families=("uniform",)
    )
    assert kv_param_names(per_layer, 3) == ["kv_q0", "kv_q1", "kv_q2"]
    assert set(kv_param_names(per_layer, 2)) <= set(SearchSpace(per_layer).distributions)
