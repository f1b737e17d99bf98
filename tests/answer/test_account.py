"""The study's account: how to reproduce it names the spec it was really started from."""

from __future__ import annotations

from explorer.answer import study_account
from tests.fixtures import LM_SPEC, lm_search


def test_reproduce_names_the_spec_file_the_study_was_started_from():
    records = lm_search()
    acct = study_account(records, LM_SPEC, spec_path="my specs/lm.toml", storage="sqlite:///elsewhere/lm.db")
    assert acct.reproduce == "explorer study run 'my specs/lm.toml' --storage sqlite:///elsewhere/lm.db"
    assert acct.resume == "explorer study resume lm --storage sqlite:///elsewhere/lm.db"


def test_without_a_known_spec_file_reproduce_resumes_from_the_stored_spec():
    acct = study_account(lm_search(), LM_SPEC)
    assert "studies/lm.toml" not in acct.reproduce and acct.reproduce == acct.resume
    assert acct.resume.startswith("explorer study resume lm")


def test_the_account_counts_the_search_from_its_records():
    from explorer.answer import StudyAccount

    records = lm_search()
    acct = study_account(records, LM_SPEC)
    assert isinstance(acct, StudyAccount) and acct.name == "lm"
    assert acct.search_states == {"COMPLETE": len(records)} and acct.epochs_run == sum(
        len(r.history) for r in records
    )
