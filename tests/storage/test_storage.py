"""explorer.storage._storage: URL checks, masked errors, SQLite/PostgreSQL round trips, and a real killed worker."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from explorer.errors import SpecError, StorageError
from explorer.storage import check_study_name, default_storage_url, mask_url, open_storage, study_exists
from explorer.storage._heartbeat import RetryStaleTrial, fail_dead_trials
from explorer.study import list_studies

REPO = Path(__file__).resolve().parents[2]
EXPECTED_FORMS = "sqlite:///path.db or postgresql+psycopg://user:pass@host/db"


@pytest.fixture
def opened() -> Iterator[Callable[..., RDBStorage]]:
    """open_storage, with every engine disposed after the test (PostgreSQL connections are finite)."""
    storages: list[RDBStorage] = []

    def _open(url: str, **kwargs) -> RDBStorage:
        storage = open_storage(url, **kwargs)
        storages.append(storage)
        return storage

    yield _open
    for storage in storages:
        storage.engine.dispose()


# ---- mask_url ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (
            "postgresql+psycopg://alice:s3cret-pw@db.example:5432/studies",
            "postgresql+psycopg://alice:***@db.example:5432/studies",
        ),
        ("postgresql://alice:s3cret-pw@localhost/studies", "postgresql://alice:***@localhost/studies"),
        # an unencoded '@' in the password: nothing of it may show
        ("postgresql://alice:s3c@ret-pw@localhost/db", "postgresql://alice:***@localhost/db"),
        (
            "postgresql://alice@localhost/db?password=s3cret-pw&sslmode=require",
            "postgresql://alice@localhost/db?password=***&sslmode=require",
        ),
        ("not a url:s3cret-pw@", "not a url:s3cret-pw@"),  # no scheme: nothing looks like a password
    ],
)
def test_mask_url_hides_passwords(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_mask_url_hides_the_password_of_a_url_inside_an_error_message() -> None:
    """A worker's one-line error goes through mask_url too: a URL in the middle of a text is masked."""
    text = "cannot reach postgresql+psycopg://bob:hun@ter2@127.0.0.1:9/db (timeout); ask admin@example.org"
    masked = "cannot reach postgresql+psycopg://bob:***@127.0.0.1:9/db (timeout); ask admin@example.org"
    assert mask_url(text) == masked


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///studies/quickstart.db",
        "sqlite:///:memory:",
        "sqlite:////tmp/a@b.db",
        "postgresql+psycopg://alice@host/db",
        "not a url",
    ],
)
def test_mask_url_leaves_urls_without_password_alone(url: str) -> None:
    assert mask_url(url) == url


# ---- study names --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["quickstart", "a", "run-1.v2_final", "-x", "x" * 64])
def test_check_study_name_accepts_safe_names(name: str) -> None:
    assert check_study_name(name) == name


@pytest.mark.parametrize(
    "name", ["", ".hidden", "a/b", "../escape", "x" * 65, "with space", "héads", "a\nb", None]
)
def test_check_study_name_rejects_unsafe_names(name) -> None:
    with pytest.raises(SpecError, match="letters, digits, '-', '_' or '.', not starting with '.'"):
        check_study_name(name)


def test_default_storage_url_is_a_sqlite_file_under_studies() -> None:
    assert default_storage_url("quickstart") == "sqlite:///studies/quickstart.db"
    with pytest.raises(SpecError):
        default_storage_url("../../etc/passwd")


# ---- malformed and unreachable URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "",
        "not a url",
        "studies/quickstart.db",
        "sqlte:///studies/x.db",
        "postgres://alice:s3cret-pw@localhost/db",  # SQLAlchemy 2 knows no "postgres" dialect
        "sqlite://",
        "postgresql+psycopg://alice:s3cret-pw@localhost:notaport/db",
    ],
)
def test_malformed_url_names_the_expected_form(url: str) -> None:
    with pytest.raises(StorageError) as info:
        open_storage(url)
    message = str(info.value)
    assert EXPECTED_FORMS in message
    assert "s3cret-pw" not in message


def test_unencoded_at_in_password_is_malformed_and_not_echoed() -> None:
    with pytest.raises(StorageError, match="%40") as info:
        open_storage("postgresql+psycopg://alice:s3c@ret-pw@127.0.0.1:1/db")
    assert "ret-pw" not in str(info.value)


def test_malformed_sqlite_url_creates_no_directory(tmp_path: Path) -> None:
    with pytest.raises(StorageError):
        open_storage(f"sqlte:///{tmp_path}/sub/x.db")
    assert not (tmp_path / "sub").exists()


@pytest.mark.parametrize("scheme", ["postgresql+psycopg", "postgresql"])
def test_unreachable_postgres_fails_fast_without_password(scheme: str) -> None:
    start = time.monotonic()
    with pytest.raises(StorageError) as info:
        open_storage(f"{scheme}://alice:s3cret-pw@127.0.0.1:1/explorer_test")
    message = str(info.value)
    assert time.monotonic() - start < 10
    assert "s3cret-pw" not in message
    # plain postgresql:// was rewritten to psycopg 3's dialect; the message shows what was tried
    assert "postgresql+psycopg://alice:***@127.0.0.1:1/explorer_test" in message
    assert "server is running" in message


def test_missing_driver_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # makes `import psycopg` raise ImportError
    with pytest.raises(StorageError, match=r"pip install 'psycopg\[binary\]'") as info:
        open_storage("postgresql+psycopg://alice:s3cret-pw@127.0.0.1:1/db")
    assert "s3cret-pw" not in str(info.value)


def test_heartbeat_grace_period_must_exceed_interval() -> None:
    with pytest.raises(StorageError, match="shorter than the grace period"):
        open_storage("sqlite:///:memory:", heartbeat_interval=10, grace_period=10)


# ---- opening real storages -----------------------------------------------------------------------------------


def test_sqlite_creates_parent_directory_and_survives_braces(tmp_path: Path, opened) -> None:
    # RDBStorage str.format()s its URL: braces in a path (or password) must not break it
    path = tmp_path / "new" / "dir" / "{study}.db"
    opened(f"sqlite:///{path}")
    assert path.is_file()


def test_open_storage_uses_current_optuna_api_without_warnings(opened) -> None:
    # Earlier tests' unclosed database connections, collected as garbage inside the block, warn there too
    # (ResourceWarning, "deleted while still open"): collect them first, and judge only what opening warns.
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        storage = opened("sqlite:///:memory:")
    assert [str(w.message) for w in caught if not issubclass(w.category, ResourceWarning)] == []
    assert storage.get_heartbeat_interval() == 10
    assert storage.grace_period == 30
    assert isinstance(storage.get_heartbeat_stale_trial_callback(), RetryStaleTrial)
    assert opened("sqlite:///:memory:", heartbeat=False).get_heartbeat_interval() is None


def test_open_storage_creates_and_loads_a_study(storage_url: str, study_name: str, opened) -> None:
    study = optuna.create_study(
        study_name=study_name, storage=opened(storage_url), directions=["maximize", "minimize"]
    )
    study.optimize(lambda t: (t.suggest_float("x", 0, 1), 1.0), n_trials=2)

    storage = opened(storage_url)  # a second, independent connection, as a resuming worker would have
    assert study_exists(storage, study_name)
    assert not study_exists(storage, study_name + "-missing")
    loaded = optuna.load_study(study_name=study_name, storage=storage)
    assert [t.state for t in loaded.trials] == [TrialState.COMPLETE] * 2
    assert loaded.trials[1].params == study.trials[1].params

    assert loaded.directions == study.directions
    row = {r["name"]: r for r in list_studies(storage_url)}[study_name]  # what `explorer study list` shows
    assert row["trials"] == {"COMPLETE": 2} and row["started"] is not None


def test_a_read_only_storage_reads_and_cannot_write(storage_url: str, study_name: str, opened) -> None:
    optuna.create_study(study_name=study_name, storage=opened(storage_url)).enqueue_trial({"x": 1.0})
    storage = opened(storage_url, readonly=True)
    assert study_exists(storage, study_name) and storage.get_heartbeat_interval() is None
    with pytest.raises(optuna.exceptions.StorageInternalError):  # "attempt to write a readonly database"
        optuna.create_study(study_name=study_name + "-new", storage=storage)  # or a read-only PG transaction
    assert not study_exists(opened(storage_url), study_name + "-new")


def test_read_only_opening_creates_nothing_and_refuses_what_is_not_optuna(tmp_path: Path) -> None:
    import sqlite3

    with pytest.raises(StorageError, match="no SQLite database at .* nothing was created"):
        open_storage(f"sqlite:///{tmp_path}/nowhere/x.db", readonly=True)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "text.db").write_text("hello")
    with pytest.raises(StorageError, match="is not a SQLite database"):
        open_storage(f"sqlite:///{tmp_path}/text.db", readonly=True)
    with sqlite3.connect(tmp_path / "app.db") as con:
        con.execute("create table notes (body text)")
    before = (tmp_path / "app.db").read_bytes()
    for name in ("text.db", "app.db"):  # written an hour ago: not a file another command is creating now
        os.utime(tmp_path / name, (time.time() - 3600, time.time() - 3600))
    for readonly in (True, False):  # a run does not add Optuna's tables to another program's database either
        with pytest.raises(StorageError, match="holds no Optuna storage"):
            open_storage(f"sqlite:///{tmp_path}/app.db", readonly=readonly)
    assert (tmp_path / "app.db").read_bytes() == before


def test_only_files_explorer_creates_are_switched_to_wal(tmp_path: Path, opened) -> None:
    from explorer.storage._sqlite_files import is_wal

    new = tmp_path / "new.db"
    optuna.create_study(study_name="s", storage=opened(f"sqlite:///{new}"))
    assert is_wal(new)
    theirs = tmp_path / "theirs.db"
    optuna.create_study(study_name="plain", storage=f"sqlite:///{theirs}")  # Optuna's own: a rollback journal
    storage = opened(f"sqlite:///{theirs}")
    assert study_exists(storage, "plain") and not is_wal(theirs)


def test_a_missing_driver_is_named_for_its_own_database() -> None:
    with pytest.raises(StorageError, match=r"\(no module 'MySQLdb'\); pip install PyMySQL") as info:
        open_storage("mysql://me:s3cret-pw@127.0.0.1/db")
    assert "psycopg" not in str(info.value) and "s3cret-pw" not in str(info.value)


def test_plain_postgresql_url_uses_psycopg3(postgres_url: str, opened) -> None:
    if not postgres_url.startswith("postgresql+psycopg://"):
        pytest.skip("EXPLORER_TEST_POSTGRES_URL does not use postgresql+psycopg://")
    storage = opened("postgresql://" + postgres_url.removeprefix("postgresql+psycopg://"))
    assert storage.engine.dialect.driver == "psycopg"


# ---- a worker killed with SIGKILL mid-trial ------------------------------------------------------------------

HEARTBEAT_S = 1
GRACE_S = 2
WORKER = textwrap.dedent(
    f"""
    import sys, time
    import optuna
    from explorer.storage._storage import open_storage

    url, name = sys.argv[1], sys.argv[2]
    storage = open_storage(url, heartbeat_interval={HEARTBEAT_S}, grace_period={GRACE_S})
    study = optuna.create_study(study_name=name, storage=storage)

    def objective(trial):
        x = trial.suggest_float("x", 0.0, 1.0)
        if trial.number == 0:
            return x
        while True:  # the second trial hangs until the test kills this process
            time.sleep(0.1)

    study.optimize(objective, n_trials=2)
    """
)


def _wait_for_second_trial_heartbeat(
    storage: RDBStorage, name: str, proc: subprocess.Popen, log: Path, timeout_s: float = 60
) -> None:
    """Block until the worker's 2nd trial is RUNNING, has drawn its parameter and has written a heartbeat (a
    trial without one is never considered stale, so killing it earlier would test nothing; one killed before its
    draw was stored, seen once on a loaded machine, has no parameters for the retry to repeat)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"worker exited with {proc.returncode} before its 2nd trial ran:\n{log.read_text()}")
        if study_exists(storage, name):
            trials = storage.get_all_trials(storage.get_study_id_from_name(name), deepcopy=False)
            running = [t for t in trials if t.number == 1 and t.state == TrialState.RUNNING and t.params]
            if running and _has_heartbeat(storage, running[0]._trial_id):
                return
        time.sleep(0.2)
    pytest.fail(
        f"worker's 2nd trial was not RUNNING with its parameter and a heartbeat within {timeout_s}s:\n"
        f"{log.read_text()}"
    )


def _has_heartbeat(storage: RDBStorage, trial_id: int) -> bool:
    # Optuna keeps heartbeats in its own table; there is no public reader for it.
    query = sqlalchemy.text("SELECT COUNT(*) FROM trial_heartbeats WHERE trial_id = :trial_id")
    with storage.engine.connect() as connection:
        return connection.execute(query, {"trial_id": trial_id}).scalar_one() > 0


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_sigkilled_worker_trial_is_failed_and_retried(
    storage_url: str, study_name: str, tmp_path: Path, opened
) -> None:
    log = tmp_path / "worker.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, storage_url, study_name], stdout=out, stderr=out, env=env
        )
    try:
        watcher = opened(storage_url, heartbeat=False)
        _wait_for_second_trial_heartbeat(watcher, study_name, proc, log)
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    # Nothing has noticed yet: the dead worker's trial still claims to run.
    trials = optuna.load_study(study_name=study_name, storage=watcher).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.RUNNING]

    time.sleep(GRACE_S + 2)  # past the grace period (SQLite's clock ticks in whole seconds)
    storage = opened(storage_url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
    study = optuna.load_study(study_name=study_name, storage=storage)
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=1)

    first, killed, retried = study.trials
    assert first.state == TrialState.COMPLETE and first.value == first.params["x"]
    assert killed.state == TrialState.FAIL and killed.datetime_complete is not None
    assert retried.state == TrialState.COMPLETE
    assert retried.params == killed.params  # the killed trial's parameters ran again
    assert RetryHeartbeatStaleTrialCallback.retried_trial_number(retried) == killed.number
    assert RetryHeartbeatStaleTrialCallback.retry_history(retried) == [killed.number]
    # explorer's callback gives the retry only what the trial is, says so, and records why the first one failed
    assert retried.user_attrs["retry_of"] == killed.number
    assert "heartbeats" in study.user_attrs[f"fail_reason:{killed.number}"]


def test_a_trial_whose_worker_died_before_its_first_heartbeat_is_failed_and_retried(
    storage_url: str, study_name: str, opened
) -> None:
    """A worker killed after it took a trial and before its heartbeat thread wrote once (benchmarks/chaos.py, a
    kill during the horizon check) left the trial RUNNING with no heartbeat, which Optuna's stale check skips:
    every resume then waited for it for good. Such a trial is failed once it has been seen without a heartbeat
    for the grace period, and queued again; a trial whose heartbeat is stored is not."""
    storage = opened(storage_url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S)
    study = optuna.create_study(study_name=study_name, storage=storage)
    x = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    orphan = study.ask(x)  # RUNNING, and nothing beats for it
    beating = study.ask(x)

    def check(at: float) -> list[TrialState]:
        storage.record_heartbeat(beating._trial_id)  # as its worker's heartbeat thread does, every second
        fail_dead_trials(study, clock=lambda: at)
        return [t.state for t in study.trials]

    assert check(100.0) == [TrialState.RUNNING] * 2  # just seen: it may be about to beat
    assert check(100.0 + GRACE_S) == [TrialState.RUNNING] * 2  # not yet past the grace period
    check(100.5 + GRACE_S)
    dead, alive, retried = study.trials
    assert dead.number == orphan.number and dead.state == TrialState.FAIL
    assert alive.state == TrialState.RUNNING  # its heartbeat is fresh
    assert retried.state == TrialState.WAITING and retried.params == dead.params
    assert retried.user_attrs["retry_of"] == dead.number
    assert "heartbeats" in study.user_attrs[f"fail_reason:{dead.number}"]
    check(160.0)  # failed once: not failed or queued again
    assert len(study.trials) == 3


def test_a_second_command_stamping_a_new_sqlite_file_at_the_same_moment_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `study run` commands on a new SQLite file (benchmarks/chaos.py, 1 of 2 rounds): the loser of the race
    to stamp Optuna's schema version failed with "Cannot open the storage ... (UNIQUE constraint failed:
    alembic_version.version_num)"; like "table ... already exists", it means the other one got there first."""
    import sqlite3

    import explorer.storage._storage as storage_module

    url = f"sqlite:///{tmp_path / 'race.db'}"
    calls = []

    def racing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            RDBStorage(url)  # the other command creates and stamps the database first ...
            raise sqlalchemy.exc.IntegrityError(  # ... so this one's own stamp collides
                "INSERT INTO alembic_version (version_num) VALUES (?)",
                ("v3.2.0.a",),
                sqlite3.IntegrityError("UNIQUE constraint failed: alembic_version.version_num"),
            )
        return RDBStorage(*args, **kwargs)

    monkeypatch.setattr(storage_module, "RDBStorage", racing)
    storage = open_storage(url)
    assert len(calls) == 2 and storage.get_all_studies() == []


def test_a_read_only_url_reads_a_quiet_database_immutable_and_a_busy_one_through_its_log(
    tmp_path: Path,
) -> None:
    """immutable=1 needs no -wal/-shm (a read-only folder); with a writer's log beside it, mode=ro reads that log."""
    import sqlite3

    from explorer.storage._sqlite_files import readonly_url

    db = tmp_path / "a b%.db"  # a path that needs percent-encoding
    con = sqlite3.connect(db)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("create table t (x)")
    con.commit()
    con.execute("insert into t values (1)")
    con.commit()  # pending in the -wal while this connection stays open
    busy = readonly_url(db, "masked")
    assert busy.endswith("?mode=ro&uri=true") and "a%20b%25.db" in busy
    reader = sqlalchemy.create_engine(busy)
    with reader.connect() as c:
        assert c.execute(sqlalchemy.text("select count(*) from t")).scalar() == 1
    reader.dispose()
    con.close()  # the last connection: the log is checkpointed and removed
    assert not Path(f"{db}-wal").exists()
    assert readonly_url(db, "masked").endswith("?immutable=1&uri=true")


def _being_created(tmp_path: Path) -> Path:
    """A SQLite file at the moment between a writer creating Optuna's tables and stamping its schema version."""
    path = tmp_path / "new.db"
    open_storage(f"sqlite:///{path}", heartbeat=False).engine.dispose()
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("DELETE FROM version_info")
        db.commit()
    return path


def test_a_read_only_open_during_another_commands_creation_is_one_line_and_writes_nothing(tmp_path):
    path = _being_created(tmp_path)
    with pytest.raises(StorageError, match="still being created by another command"):
        open_storage(f"sqlite:///{path}", readonly=True, heartbeat=False)
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT COUNT(*) FROM version_info").fetchone() == (0,)  # nothing was written


def test_a_read_waits_while_another_command_finishes_creating_the_file(tmp_path, monkeypatch):
    """`study run` checks a study it may join read-only; started beside another command creating the file, that
    read found no schema version (or no tables, or a log it could not set up) and the run failed. It now waits
    until the file is whole; a file nobody has written for a while is answered at once."""
    import threading

    from explorer.storage import _sqlite_files as sqlite_files

    whole = tmp_path / "whole.db"  # the schema version a finished file holds
    open_storage(f"sqlite:///{whole}", heartbeat=False).engine.dispose()
    with contextlib.closing(sqlite3.connect(whole)) as db:
        version = db.execute("SELECT * FROM version_info").fetchone()
    path = _being_created(tmp_path)
    stamp = threading.Timer(0.5, _stamp, (path, version))
    waits = []
    sleep = time.sleep
    monkeypatch.setattr(sqlite_files.time, "sleep", lambda s: (waits.append(s), sleep(s)))
    stamp.start()
    try:
        storage = open_storage(f"sqlite:///{path}", readonly=True, heartbeat=False)
    finally:
        stamp.join()
    assert storage.get_all_studies() == [] and waits  # it read the finished file, after waiting for it
    waits.clear()
    path.unlink()
    path = _being_created(tmp_path)
    os.utime(path, (time.time() - 3600, time.time() - 3600))  # a file abandoned mid-creation an hour ago
    with pytest.raises(StorageError, match="still being created by another command"):
        open_storage(f"sqlite:///{path}", readonly=True, heartbeat=False)
    assert waits == []


def _stamp(path: Path, version: tuple) -> None:
    """Finish what :func:`_being_created` interrupted: stamp Optuna's schema version."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute(f"INSERT INTO version_info VALUES ({', '.join('?' for _ in version)})", version)
        db.commit()


def test_a_run_started_while_another_command_creates_its_database_goes_on_to_create_or_join_it(tmp_path):
    from explorer.spec import load_spec
    from explorer.study._run_plan import check_rerun
    from tests.fixtures import write_tiny_spec

    path = _being_created(tmp_path)
    spec = load_spec(write_tiny_spec(tmp_path, name="racing"))
    # not refused: prepare_study joins
    assert check_rerun(spec, f"sqlite:///{path}", None, "n_trials") is None


def test_sqlite_path_is_the_file_of_a_sqlite_url_and_none_for_others(tmp_path: Path) -> None:
    from explorer.storage import sqlite_path

    assert sqlite_path(f"sqlite:///{tmp_path}/a.db?timeout=5") == tmp_path / "a.db"
    assert sqlite_path("sqlite:///relative/b.db") == Path("relative/b.db")
    assert sqlite_path("sqlite:///:memory:") is None and sqlite_path("sqlite://") is None
    assert sqlite_path("postgresql+psycopg://u@h/db") is None


def test_storage_writable_refuses_a_sqlite_file_in_a_read_only_folder(tmp_path: Path) -> None:
    from explorer.storage import storage_writable

    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder}/s.db"
    optuna.create_study(study_name="s", storage=url)
    assert storage_writable(url) and storage_writable("postgresql+psycopg://u@h/db")
    if os.geteuid() == 0:
        pytest.skip("root may write into a read-only folder")
    folder.chmod(0o555)
    try:
        assert not storage_writable(url)
    finally:
        folder.chmod(0o755)


def test_study_list_reads_the_storage_the_environment_names(tmp_path: Path, monkeypatch) -> None:
    from click.testing import CliRunner

    from explorer.cli import main
    from explorer.storage import STORAGE_ENV

    url = f"sqlite:///{tmp_path}/env.db"
    optuna.create_study(study_name="from-env", storage=url)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(STORAGE_ENV, url)
    result = CliRunner().invoke(main, ["study", "list"])
    assert result.exit_code == 0, result.output
    assert "from-env" in result.output
