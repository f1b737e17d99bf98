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
# home directory, and plots never open a window. Each pytest-xdist worker (PYTEST_XDIST_WORKER) inherits the
# main process's folder and takes a subfolder of its own: no test sees latencies another process measured.
if "EXPLORER_CACHE_DIR" not in os.environ:
    _cache_dir = tempfile.mkdtemp(prefix="explorer-test-cache-")
    atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
    os.environ["EXPLORER_CACHE_DIR"] = _cache_dir
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["EXPLORER_CACHE_DIR"] = os.path.join(
        os.environ["EXPLORER_CACHE_DIR"], os.environ["PYTEST_XDIST_WORKER"]
    )
    os.makedirs(os.environ["EXPLORER_CACHE_DIR"], exist_ok=True)
os.environ["MPLBACKEND"] = "Agg"

POSTGRES_ENV = "EXPLORER_TEST_POSTGRES_URL"
_POSTGRES_SCHEMA_LOCK = 7_390_001  # pg_advisory_lock key: one process at a time creates the tables


def pytest_configure(config: pytest.Config) -> None:
    """In a pytest-xdist worker, give torch its share of the cores: the tests' models are tiny, and workers that
    each use every core only wait for one another (as in :func:`one_thread`)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // workers))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the modules that hold ``slow`` tests first (each module's tests together, in their order, so a module's
    fixtures are made once), so that the short tests fill the workers' last minutes rather than one long test
    keeping a worker busy while the others wait; skip the ``cuda``-marked tests when there is no CUDA device
    (torch is imported only if there are some)."""
    slow = {getattr(item, "module", None) for item in items if item.get_closest_marker("slow")}
    # a stable sort: the order within each group is kept
    items.sort(key=lambda item: getattr(item, "module", None) not in slow)
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
    _create_tables_once(url)
    return url


def _create_tables_once(url: str) -> None:
    """Create Optuna's tables in the test database, one process at a time (a PostgreSQL advisory lock): the
    pytest-xdist workers share the server, and two first connections creating the tables at once would collide
    in the catalogue, a race of the test set-up, not of what the tests check."""
    import sqlalchemy

    from explorer.storage import open_storage

    parsed = sqlalchemy.make_url(url)
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    engine = sqlalchemy.create_engine(parsed)
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:key)"), {"key": _POSTGRES_SCHEMA_LOCK})
            try:
                open_storage(url, heartbeat=False).engine.dispose()
            finally:
                conn.execute(
                    sqlalchemy.text("SELECT pg_advisory_unlock(:key)"), {"key": _POSTGRES_SCHEMA_LOCK}
                )
    finally:
        engine.dispose()


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
