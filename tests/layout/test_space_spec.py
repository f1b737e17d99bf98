"""explorer.layout._space_spec: which (family, d_model, min_dk, head_dim, n_layers) combinations a space can
realise, and the check that names a listed value no valid configuration uses."""

from __future__ import annotations

import pytest

from explorer.errors import SpecError
from explorer.layout import FACTORS, Combo, SpaceSpec, check_space, realisable_families, space_combos
from explorer.spec import SearchSpace

RAMPS = ("uniform", "increasing", "decreasing")


def test_space_combos_lists_each_realisable_combination_with_the_heads_valid_for_it():
    space = SpaceSpec(d_model=(16, 32), n_layers=(1, 2), heads=(1, 2, 4), min_dk=(8,))
    counts, combos = space_combos(space)
    assert counts == {(16, 8, None): (1, 2), (32, 8, None): (1, 2, 4)}
    assert ("uniform", 16, 8, None, 1) in combos and ("increasing", 32, 8, None, 2) in combos
    assert ("increasing", 16, 8, None, 1) not in combos  # a ramp needs two layers
    assert not any(c[0] == "free" for c in combos)  # free needs three layers
    one: Combo = combos[0]
    assert len(one) == len(FACTORS)  # a combination holds one value of each factor, in the sampled order


def test_the_search_space_samples_the_factors_in_their_order():
    space = SearchSpace(
        SpaceSpec(d_model=(16, 32), n_layers=(1, 2), heads=(1, 2, 4), min_dk=(8,), families=RAMPS)
    )
    assert [f.name for f in space.factors] == list(FACTORS)
    assert FACTORS[0] == "family"


def test_realisable_families_drops_those_the_depths_cannot_hold():
    assert realisable_families(SpaceSpec(d_model=(32,), n_layers=(1,), heads=(1, 2, 4))) == ("uniform",)
    deep = SpaceSpec(d_model=(32,), n_layers=(3,), heads=(1, 2, 4))
    assert realisable_families(deep) == ("uniform", "increasing", "decreasing", "free")


def test_check_space_passes_a_usable_space_and_names_an_unusable_value():
    check_space(SpaceSpec(d_model=(32,), n_layers=(2,), heads=(1, 2, 4), families=RAMPS))
    with pytest.raises(SpecError, match="n_layers 1 fits none of the families"):
        check_space(SpaceSpec(d_model=(32,), n_layers=(1, 2), heads=(1, 2, 4), families=("increasing",)))
    with pytest.raises(SpecError, match="no head count in heads"):
        check_space(SpaceSpec(d_model=(32,), n_layers=(1,), heads=(3, 5)))
