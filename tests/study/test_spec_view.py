"""explorer.study._spec_view: the resolved spec of a file or a stored study, each key with where it came from."""

from __future__ import annotations

import optuna

from explorer.spec import SOURCES_ATTR
from explorer.study import resolved_spec


def test_a_created_study_keeps_where_each_key_came_from(created_study):
    _, url = created_study
    sources = optuna.load_study(study_name="tiny", storage=url).user_attrs[SOURCES_ATTR]
    assert sources["n_trials"] == "override" and sources["name"] == "file"
    rows = {row["key"]: row for row in resolved_spec("tiny", url)["keys"]}
    assert rows["n_trials"]["source"] == "override" and rows["name"]["source"] == "file"


def test_resolved_spec_gives_each_keys_value_and_source_from_a_file_or_the_stored_study(created_study):
    path, url = created_study
    stored = resolved_spec("tiny", url)
    assert stored["from"] == {"study": "tiny", "storage": url} and stored["sources_recorded"]
    assert stored["spec"]["n_trials"] == 3
    from_file = resolved_spec(str(path), overrides=["n_trials=5"])
    assert from_file["spec"]["n_trials"] == 5 and from_file["overrides"] == ["n_trials=5"]
