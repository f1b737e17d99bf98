"""Shared test fixtures: storage URLs for every storage kind, unique study names, a sandboxed cache.

PostgreSQL tests run when EXPLORER_TEST_POSTGRES_URL names a server (``.ci/run`` starts a throwaway one);
otherwise they skip with the reason. Tests marked ``cuda`` (the only way a test asks for a GPU, so ``-m cuda``
selects every one) skip when torch sees no CUDA device.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import uuid

import pytest

# Set before any test module is imported, so nothing reads the real values: tests never write into the
# home directory, and plots never open a window.
if "EXPLORER_CACHE_DIR" not in os.environ:
    _cache_dir = tempfile.mkdtemp(prefix="explorer-test-cache-")
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
    os.environ["EXPLORER_CACHE_DIR"] = _cache_dir
os.environ["MPLBACKEND"] = "Agg"

POSTGRES_ENV = "EXPLORER_TEST_POSTGRES_URL"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the ``cuda``-marked tests when there is no CUDA device (torch is imported only if there are some)."""
    marked = [item for item in items if item.get_closest_marker("cuda")]
    if not marked:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in marked:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """URL of a PostgreSQL database the tests may write to, or skip."""
    url = os.environ.get(POSTGRES_ENV, "").strip()
    if not url:
        pytest.skip(f"no PostgreSQL server: set {POSTGRES_ENV}; .ci/run starts a server")
    return url


@pytest.fixture
def study_name(request: pytest.FixtureRequest) -> str:
    """A study name no other test (or earlier run on the same server) uses; valid for check_study_name."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")[:40]
    return f"{stem}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)])
def storage_kind(request: pytest.FixtureRequest) -> str:
    """Each storage-dependent test runs once per storage kind ("sqlite", "postgres")."""
    return request.param


@pytest.fixture
def storage_url(storage_kind: str, tmp_path, request: pytest.FixtureRequest) -> str:
    """A storage URL of each kind: a fresh SQLite file in tmp_path, or the PostgreSQL test server."""
    if storage_kind == "sqlite":
        return f"sqlite:///{tmp_path / 'studies.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models on a shared 2-core machine: a second thread only waits for the first (60x slower under load)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
