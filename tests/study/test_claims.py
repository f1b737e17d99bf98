"""Atomic claims: one owner per configuration, even when processes race; a dead owner's claim passes on."""

from __future__ import annotations

import optuna

from explorer.storage import open_storage
from explorer.study._claims import Claims
from explorer.study._workers import _process_context


def _race(url: str, name: str, trial: int, out) -> None:
    storage = open_storage(url, heartbeat=False)
    out.put((trial, Claims(storage, name).claim("same-config", trial)))


def test_one_winner_when_processes_race(storage_url, study_name):
    storage = open_storage(storage_url, heartbeat=False)
    optuna.create_study(study_name=study_name, storage=storage)
    ctx = _process_context()  # started as a study's workers are
    out = ctx.SimpleQueue()
    procs = [ctx.Process(target=_race, args=(storage_url, study_name, i, out)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    answers = [out.get() for _ in range(4)]
    holders = {holder for _, holder in answers}
    assert len(holders) == 1  # everyone agrees on one owner
    (owner,) = holders
    assert sum(trial == holder for trial, holder in answers) == 1 and owner in range(4)


def test_claims_are_per_study_and_pass_from_a_failed_trial(storage_url, study_name):
    storage = open_storage(storage_url, heartbeat=False)
    for suffix in ("a", "b"):
        optuna.create_study(study_name=f"{study_name}{suffix}", storage=storage)
    a, b = Claims(storage, f"{study_name}a"), Claims(storage, f"{study_name}b")
    assert a.claim("cfg", 0) == 0 and a.claim("cfg", 1) == 0  # held
    assert b.claim("cfg", 5) == 5  # another study: its own claims
    assert a.claim("cfg", 2, can_take_over={0}) == 2  # trial 0 failed: its retry takes over
    assert a.claim("cfg", 3, can_take_over={0}) == 2  # ...once
    assert a.taken() == {"cfg": 2} and a.owner("other") is None


def test_a_study_deleted_and_made_again_starts_with_no_claims(tmp_path):
    """SQLite gives the new study the old one's id; creating a study clears its claims."""
    from explorer.spec import spec_from_dict
    from tests.fixtures import plan_study

    url = f"sqlite:///{tmp_path / 'c.db'}"
    spec = spec_from_dict(
        {
            "name": "s",
            "n_trials": 2,
            "task": {"name": "digits"},
            "latency": {"device": "cpu"},
            "space": {"d_model": [16], "n_layers": [1], "heads": [1, 2]},
        }
    )
    study = plan_study(spec, url).study
    Claims(study.optuna_study._storage, "s").claim("cfg", 0)
    optuna.delete_study(study_name="s", storage=url)
    again = plan_study(spec, url).study
    assert Claims(again.optuna_study._storage, "s").taken() == {}
