"""explorer.study._catalog: finding an existing study's storage without creating one."""

from __future__ import annotations

import optuna
import pytest

from explorer.errors import StudyNotFoundError
from explorer.study import existing_study_url


def test_an_existing_studys_url_is_found_and_a_missing_file_is_not_created(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path}/here.db"
    optuna.create_study(study_name="here", storage=url)
    assert existing_study_url("here", url) == url
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StudyNotFoundError, match="does not exist; start it with `explorer study run SPEC`"):
        existing_study_url("nowhere")
    assert not (tmp_path / "studies").exists()  # the default file was not created
