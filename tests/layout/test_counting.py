"""Counting a space's architectures without listing them: the count is the enumeration's on random small spaces
of every kind, and huge spaces are counted at once (then refused at the door by the spec reader)."""

from __future__ import annotations

import random
import time

import pytest

from explorer.errors import LimitError, SpecError
from explorer.layout import SpaceSpec, count_layouts
from explorer.spec import SearchSpace, load_spec, spec_from_dict
from tests.spec.test_search_space import STUDIES


def _random_space(rng: random.Random) -> SpaceSpec:
    kv = rng.choice([None, tuple(sorted(rng.sample([1, 2, 3, 4, 6, 8], rng.randint(1, 4))))])
    families = tuple(f for f in ("uniform", "increasing", "decreasing", "free") if rng.random() < 0.7)
    return SpaceSpec(
        d_model=tuple(sorted(rng.sample([16, 24, 32, 48, 64], rng.randint(1, 2)))),
        n_layers=tuple(sorted(rng.sample([1, 2, 3, 4], rng.randint(1, 2)))),
        heads=tuple(sorted(rng.sample([1, 2, 3, 4, 6, 8, 12, 16], rng.randint(1, 4)))),
        min_dk=(rng.choice([1, 2, 4]),),
        families=families or ("uniform",),
        mlp_ratio=rng.choice([(4.0,), (2.0, 4.0)]),
        kv_heads=kv,
        kv_per_layer=kv is not None and rng.random() < 0.5,
        head_dim=rng.choice([None, None, (8,), (8, 16)]),
    )


def test_the_count_is_the_enumeration():
    rng, checked = random.Random(1), 0
    kinds = set()
    while checked < 60:
        space = _random_space(rng)
        try:
            listed = SearchSpace(space)
        except SpecError:
            continue
        assert count_layouts(space) == sum(1 for _ in listed.points()), space
        kinds.add((space.kv_heads is not None, space.kv_per_layer, space.head_dim is not None))
        checked += 1
    assert len(kinds) >= 4  # classic, head widths, shared and per-layer key/value heads were all met


def test_huge_spaces_are_counted_at_once_and_refused_by_the_reader():
    space = SpaceSpec(
        d_model=(256,),
        n_layers=(40,),
        heads=(1, 2, 4, 8, 16),
        families=("free",),
        kv_heads=(1, 2, 4),
        kv_per_layer=True,
    )
    t0 = time.perf_counter()
    assert count_layouts(space) > 10**40
    assert time.perf_counter() - t0 < 1.0
    doc = {
        "name": "big",
        "n_trials": 5,
        "task": {"name": "digits"},
        "space": {"d_model": [256], "n_layers": [12], "heads": [1, 2, 4, 8, 16], "families": ["free"]},
    }
    # 5^12 sequences, less 2 x C(16, 12) monotone ones, plus the 5 constant ones counted twice
    with pytest.raises(
        LimitError, match=r"counted in architectures is 244,136,990, above the limit of 1,000,000"
    ):
        spec_from_dict(doc)
    assert spec_from_dict(doc, stored=True).space.n_layers == (12,)  # a stored spec is not checked again


def test_the_committed_specs_fit():
    counts = {
        name: count_layouts(load_spec(STUDIES / f"{name}.toml").space) for name in ("quickstart", "gpu-vit")
    }
    assert counts == {"quickstart": 25, "gpu-vit": 769_944}
