"""A SQLite study file is never opened and closed behind SQLite's back, and a process keeps one writable storage
per study.

SQLite's locks are POSIX locks, held per process: closing any descriptor of the database file drops every lock
the process holds on it, and the next process to close its connection then believes it is the last, checkpoints,
and deletes the ``-wal`` and ``-shm`` a live connection still uses (SQLite's "How To Corrupt An SQLite Database
File", section 2.2)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import explorer.storage._storage as storage_module
from explorer.layout import ModelConfig
from explorer.spec import load_spec
from explorer.storage import arch_key, load_retimings, open_storage, rdb_storage, storage_of
from explorer.storage._sqlite_files import is_wal, readonly_url
from explorer.study import RunOptions, Study, artifact_store, plan_run
from explorer.study._retime import retime
from tests.fixtures import plan_study, write_tiny_spec

LOCKS = Path("/proc/locks")


def held_locks(db: Path) -> list[str]:
    """The POSIX locks this process holds on ``db`` (Linux: /proc/locks names the owner's pid and the inode)."""
    inode = f":{db.stat().st_ino} "
    pid = str(os.getpid())
    return [line for line in LOCKS.read_text().splitlines() if inode in line and line.split()[4] == pid]


def descriptors(db: Path) -> int:
    """How many descriptors of ``db`` this process has open (one a SQLite connection, and any kept otherwise)."""
    inode = db.stat().st_ino
    count = 0
    for fd in Path("/proc/self/fd").iterdir():
        try:
            count += os.stat(fd).st_ino == inode
        except OSError:  # the descriptor os.scandir itself used, closed since
            continue
    return count


def _close_a_connection_elsewhere(db: Path) -> None:
    """Another process opens the file, writes a row and closes: the last connection, as far as it can tell."""
    code = (
        "import sqlite3, sys\n"
        "con = sqlite3.connect(sys.argv[1], timeout=30)\n"
        "con.execute('create table if not exists elsewhere (x)')\n"
        "con.execute('insert into elsewhere values (1)')\n"
        "con.commit()\n"
        "con.close()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, timeout=60)


@pytest.mark.skipif(not LOCKS.exists(), reason="reads the process's locks from /proc/locks (Linux)")
def test_no_code_path_drops_the_lock_a_live_connection_holds(tmp_path: Path, one_thread) -> None:
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    study = plan_study(load_spec(write_tiny_spec(tmp_path, name="locks")), url).study
    study.optuna_study.set_user_attr("before", 1)  # committed to the -wal through the live connection
    assert is_wal(db) and Path(f"{db}-wal").exists() and held_locks(db)

    config = ModelConfig(d_model=16, heads=(2,))
    key = arch_key(config, 1e-3)
    paths = {
        "header check": lambda: readonly_url(db, "masked"),
        "WAL check": lambda: is_wal(db),
        "read-only open": lambda: Study.open_at("locks", url).records(),
        "writable open": lambda: open_storage(url, heartbeat=False).get_all_studies(),
        "artifact store": lambda: artifact_store(Study.open_at("locks", url)).index("locks"),
        "re-timing in this process": lambda: retime(
            study, [(key, config)], 1, torch.device("cpu"), fresh_processes=False
        ),
    }
    for what, path in paths.items():
        path()
        assert held_locks(db), f"the {what} dropped the lock of this process's connection"

    # a round in a process of its own: it opens the file, writes, and closes its connection
    retime(study, [(key, config)], 2, torch.device("cpu"))
    _close_a_connection_elsewhere(db)
    assert held_locks(db) and Path(f"{db}-wal").exists(), (
        "another process checkpointed under a live connection"
    )
    study.optuna_study.set_user_attr("after", 2)  # the live connection writes on, into the same -wal
    assert [t.round for t in load_retimings(study.optuna_study)] == [0, 1]
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert con.execute("select count(*) from elsewhere").fetchone() == (1,)
    reread = Study.open_at("locks", url)
    assert (reread.user_attrs["before"], reread.user_attrs["after"]) == (1, 2)
    rdb_storage(storage_of(reread.optuna_study)).engine.dispose()


def test_a_process_opens_one_writable_storage_per_study_after_closing_its_read_only_view(
    storage_url: str, study_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_thread
) -> None:
    """What `explorer confirm` and `study resume` do (a read-only look, then a run's plan: its study, its artifact
    store, its writer) and what `explorer report` does (a read-only look, then figures and the answer kept): each
    opens one writable storage, and only once its read-only connections are closed."""
    created = plan_study(load_spec(write_tiny_spec(tmp_path, name=study_name)), storage_url).study
    created.close()
    opened: list[tuple[bool, object]] = []  # (writable, engine) of each storage opened from here on

    def recorded(url: str, engine_kwargs: dict, kwargs: dict):
        writable = "skip_table_creation" not in kwargs
        if writable:  # every read-only connection of this process is closed by now
            assert all(e.pool.checkedin() + e.pool.checkedout() == 0 for _, e in opened), "a reader is open"
        storage = real(url, engine_kwargs, kwargs)
        opened.append((writable, storage.engine))
        return storage

    real = storage_module._rdb_storage
    monkeypatch.setattr(storage_module, "_rdb_storage", recorded)

    # confirm / study resume: read-only first, then the run's plan
    stored = Study.open_at(study_name, storage_url)
    plan = plan_run(stored, RunOptions())
    plan.study.note("kept", 1)  # through the plan's study
    assert plan.store.storage is storage_of(plan.study.optuna_study)  # the artifact store's
    assert plan.study._writer() is plan.study.optuna_study  # the writer's
    assert stored.user_attrs["kept"] == 1  # the read-only view now reads through that storage
    assert [w for w, _ in opened] == [False, True]
    plan.study.close()

    # report: read-only, then its figures and its answer kept
    opened.clear()
    report = Study.open_at(study_name, storage_url)
    store = artifact_store(report)
    assert [w for w, _ in opened] == [False]  # nothing written yet: no writable storage
    assert store.index(study_name) == {} and report.note_answer((2,), "two heads")
    assert store.storage is storage_of(report.optuna_study)
    assert report.note_tracking({"synced": 0}) and [w for w, _ in opened] == [False, True]
    assert Study.open_at(study_name, storage_url).user_attrs["answer"]["heads"] == [2]
