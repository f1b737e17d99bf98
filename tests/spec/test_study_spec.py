"""explorer.spec._study_spec: the samplers a spec may name."""

from __future__ import annotations

import pytest

from explorer.errors import SpecError
from explorer.spec import SAMPLERS, spec_from_dict

DOC = {
    "name": "s",
    "n_trials": 2,
    "task": {"name": "digits"},
    "space": {"d_model": [32], "n_layers": [1], "heads": [1, 2]},
}


def test_every_sampler_is_accepted_and_another_is_refused_naming_them():
    assert [spec_from_dict({**DOC, "sampler": s}).sampler for s in SAMPLERS] == list(SAMPLERS)
    with pytest.raises(SpecError) as err:
        spec_from_dict({**DOC, "sampler": "cmaes"})
    assert all(s in str(err.value) for s in SAMPLERS)
