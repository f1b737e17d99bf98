"""explorer.storage._locations: an artifact location from the environment is checked like one given as an option,
and an error names the variable."""

from __future__ import annotations

import pytest

from explorer.errors import StorageError
from explorer.storage import ARTIFACTS_ENV, env_artifact_location


def test_the_environments_artifact_location_is_checked_and_named_in_its_error(tmp_path, monkeypatch):
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    assert env_artifact_location() is None
    monkeypatch.setenv(ARTIFACTS_ENV, f"  {tmp_path}  ")
    assert env_artifact_location() == str(tmp_path)
    monkeypatch.setenv(ARTIFACTS_ENV, "ftp://somewhere")
    with pytest.raises(
        StorageError, match=f"^{ARTIFACTS_ENV}: artifact location 'ftp://somewhere' has an unknown"
    ):
        env_artifact_location()
