"""explorer.study._spec_view: the resolved spec of a file or a stored study, each key with where it came from."""

from __future__ import annotations

import optuna

from explorer.spec import SOURCES_ATTR, load_spec
from explorer.study import resolved_spec
from explorer.study._user_code_check import INPUT_ATTR


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


def test_unset_keys_a_run_works_out_show_their_resolved_values(created_study, tmp_path):
    path, url = created_study
    stored = {row["key"]: row for row in resolved_spec("tiny", url)["keys"]}
    folder = url.removeprefix("sqlite:///").rsplit("/", 1)[0]
    assert (stored["storage"]["value"], stored["storage"]["source"]) == (url, "derived")
    assert stored["artifacts"]["value"] == f"{folder}/tiny.artifacts"
    spec = load_spec(path)
    units = spec.finalists.seeds * spec.finalists.folds
    assert stored["finalists.budget"]["value"] == f"{units} runs a layout (seeds x folds)"
    task_input = optuna.load_study(study_name="tiny", storage=url).user_attrs[INPUT_ATTR]
    # as the task fed the model
    assert stored["latency.seq_len"]["value"] == task_input["spec"]["seq_len"] > 0
    other = f"sqlite:///{tmp_path / 'elsewhere.db'}"  # a file shown for another storage: that storage's
    from_file = {row["key"]: row for row in resolved_spec(str(path), other)["keys"]}
    assert from_file["storage"]["value"] == other and from_file["artifacts"]["value"] == str(
        tmp_path / "elsewhere.artifacts"
    )
    assert from_file["timeout"]["value"] is None  # unset and not worked out: no limit
