"""explorer.layout._units: the seeds of search trials and evidence units lie apart."""

from __future__ import annotations

import pytest

from explorer.layout import UNIT_OFFSET, fold_seed, search_seed, unit_seed
from explorer.limits import TRIALS


@pytest.mark.parametrize("study_seed", [0, 3])
def test_a_units_seed_is_past_every_search_trial_below_the_offset(study_seed):
    assert unit_seed(study_seed, 0) == search_seed(study_seed, UNIT_OFFSET)
    assert search_seed(study_seed, UNIT_OFFSET - 1) < unit_seed(study_seed, 0)
    assert unit_seed(study_seed, 10_000) < fold_seed(study_seed, 0)  # and units stay below the folds' seeds


def test_the_trials_limit_keeps_search_seeds_below_the_units(monkeypatch):
    from explorer.errors import ConfigError
    from explorer.study._run_options import check_total

    assert TRIALS.value() < UNIT_OFFSET  # the default limit
    monkeypatch.setenv(TRIALS.env, str(10 * UNIT_OFFSET))  # raised past the units: still refused there
    assert check_total(UNIT_OFFSET - 1) == UNIT_OFFSET - 1
    with pytest.raises(
        ConfigError, match="search trials stay below 500,000, where the seeds of its finalist"
    ):
        check_total(UNIT_OFFSET)
