"""Fixtures of the study tests: a tiny study created once (nothing run)."""

from __future__ import annotations

import pytest

from explorer.spec import load_spec
from tests.fixtures import plan_study, write_tiny_spec


@pytest.fixture(scope="session")
def created_study(tmp_path_factory):
    """A tiny study named ``tiny``, created (nothing run) from a spec file with the override ``n_trials=3``;
    (spec path, storage URL)."""
    folder = tmp_path_factory.mktemp("created-study")
    path = write_tiny_spec(folder)
    url = f"sqlite:///{folder / 'tiny.db'}"
    plan_study(load_spec(path, ["n_trials=3"]), url)
    return path, url
