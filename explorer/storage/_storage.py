"""Optuna storage by URL: SQLite by default, PostgreSQL for many workers and machines.

Storage is just a URL and both engines go through one code path, :func:`open_storage`, which turns every way a
URL can be wrong (malformed, unknown engine, missing driver, server down, old schema) into one
:class:`~explorer.errors.StorageError` sentence with the password masked. With ``heartbeat=True`` (the default)
a running trial writes a heartbeat; a trial whose worker died (SIGKILL, OOM, lost machine) is marked FAIL by the
next run on that storage, its reason is recorded, and its configuration is queued again (:class:`RetryStaleTrial`).
Without a heartbeat such a trial stays RUNNING forever.
"""

from __future__ import annotations

import os
import re
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy.event
import sqlalchemy.exc
from optuna.storages import BaseStorage, RDBStorage
from sqlalchemy.engine import URL, make_url

from explorer.errors import (
    EmptyStorageError,
    SpecError,
    StorageBusyError,
    StorageError,
)
from explorer.storage._heartbeat import RetryStaleTrial
from explorer.storage._locations import STORAGE_ENV
from explorer.storage._open_errors import storage_error
from explorer.storage._sqlite_files import is_wal, read_once_created, readonly_url, writable

DEFAULT_STORAGE_TEMPLATE = "sqlite:///studies/{name}.db"
CONNECT_TIMEOUT_S = 5  # a PostgreSQL server that does not answer fails in seconds, not minutes
SQLITE_LOCK_TIMEOUT_S = 30  # SQLite's `timeout` is how long to wait for another worker's lock: be patient
URL_FORMS = "sqlite:///path.db or postgresql+psycopg://user:pass@host/db"

_NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")
# `scheme://user:` then everything up to the last `@`: a password may hold an unencoded `@`, `/` or `:`.
_USERINFO_PASSWORD_RE = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*:)(?P<password>.*)@", re.S)
_QUERY_PASSWORD_RE = re.compile(r"(?P<head>[?&](?:password|passwd|pwd)=)[^&#]*", re.I)
# A URL inside a longer text (an error message): its password runs up to the last `@` before a space.
_EMBEDDED_PASSWORD_RE = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)\S*@")


def mask_url(url: str) -> str:
    """Return ``url`` with any password replaced by ``***``; a URL without one comes back unchanged.

    Works on the raw string, so malformed URLs are masked too, and so are URLs inside a longer text (a
    worker's error message). (SQLAlchemy's ``render_as_string(hide_password=True)`` leaves the tail of a
    password that holds an unencoded ``@`` visible, and re-encodes parts of URLs that have no password.)
    """
    masked = _USERINFO_PASSWORD_RE.sub(r"\g<head>***@", str(url), count=1)
    masked = _EMBEDDED_PASSWORD_RE.sub(r"\g<head>***@", masked)
    return _QUERY_PASSWORD_RE.sub(r"\g<head>***", masked)


def check_study_name(name: str) -> str:
    """Return ``name`` if it is safe as a study name and file name, else raise :class:`SpecError`."""
    if isinstance(name, str) and _NAME_RE.fullmatch(name):
        return name
    shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:77] + "..."
    raise SpecError(
        f"Study name {shown} is invalid; use 1-64 letters, digits, '-', '_' or '.', not starting with '.'."
    )


def default_storage_url(name: str) -> str:
    """The SQLite URL a study gets when no ``--storage`` is given: ``studies/NAME.db`` under the cwd."""
    return DEFAULT_STORAGE_TEMPLATE.format(name=check_study_name(name))


def resolve_storage_url(name: str, explicit: str | None = None, spec_storage: str | None = None) -> str:
    """Where study ``name`` lives: ``explicit`` (``--storage``), else ``$EXPLORER_STORAGE``, else the spec's
    ``storage``, else :func:`default_storage_url`.

    The environment variable is how a PostgreSQL password stays out of the command line (and shell history);
    a URL without a password also works, libpq then reads ``PGPASSWORD`` or ``~/.pgpass`` (``PGPASSFILE``).
    """
    return explicit or os.environ.get(STORAGE_ENV, "").strip() or spec_storage or default_storage_url(name)


def open_storage(
    url: str,
    *,
    heartbeat: bool = True,
    heartbeat_interval: int = 10,
    grace_period: int = 30,
    max_retry: int = 3,
    readonly: bool = False,
) -> RDBStorage:
    """Open (creating tables if needed) the Optuna storage at ``url``; with ``readonly``, open an existing one
    without creating or changing anything.

    Accepts ``sqlite:///path.db`` (the parent directory is created), ``sqlite:///:memory:``, and
    ``postgresql+psycopg://user:pass@host[:port]/db``; a plain ``postgresql://`` URL is rewritten to
    ``postgresql+psycopg://`` because psycopg 3 is the driver we install (SQLAlchemy would pick psycopg2).
    Other SQLAlchemy URLs Optuna supports are passed through as they are. A SQLite file explorer creates is
    switched to write-ahead logging (:func:`_use_wal`); an existing file keeps its journal mode.

    Args:
        url: SQLAlchemy database URL.
        heartbeat: record a heartbeat for running trials, so that a killed worker's trial is failed (and
            retried) by the next ``study.optimize``; only ``study.optimize`` runs the heartbeat.
        heartbeat_interval: seconds between heartbeats.
        grace_period: seconds without a heartbeat before a RUNNING trial counts as dead; must exceed
            ``heartbeat_interval``.
        max_retry: how many times a dead trial's parameters are queued again (as a WAITING trial).
        readonly: for commands that only read: a SQLite file must exist and is opened read-only
            (:func:`explorer.storage._sqlite_files.readonly_url`), a PostgreSQL session is read-only, no table is
            created, and a database without Optuna's tables is refused. No heartbeat.

    Raises:
        StorageError: the URL is malformed, its driver is missing, or the database cannot be reached.
    """
    if heartbeat and not readonly and not 0 < heartbeat_interval < grace_period:
        raise StorageError(
            f"Heartbeat interval {heartbeat_interval}s and grace period {grace_period}s are invalid; "
            "use a positive interval shorter than the grace period."
        )
    parsed, url = _parse(url)
    masked = mask_url(url)
    file = sqlite_path(url)
    options: dict = {"skip_table_creation": True} if readonly else {}
    if heartbeat and not readonly:
        options = _heartbeat_options(heartbeat_interval, grace_period, max_retry)
    if readonly and file is not None:
        path = file.expanduser()
        return read_once_created(
            lambda: _open(readonly_url(path, masked), parsed, masked, file, False, readonly, options), path
        )
    if parsed.get_backend_name() == "sqlite" and not readonly:
        _make_sqlite_parent(parsed, masked)
    new_file = file is not None and not (file.is_file() and os.path.getsize(file) > 0)
    return _open(url, parsed, masked, file, new_file, readonly, options)


def _open(
    url: str, parsed: URL, masked: str, file: Path | None, new_file: bool, readonly: bool, options: dict
) -> RDBStorage:
    """:func:`_connect`, with every way it fails as one :class:`StorageError` sentence."""
    with warnings.catch_warnings():
        # heartbeat_interval and the retry callback are marked experimental in Optuna 5.0; we rely on them
        # on purpose (tests/storage/test_storage.py kills a worker for real), so the warning only adds noise.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        try:
            return _connect(url, parsed, masked, file, new_file, readonly, options)
        except optuna.exceptions.StorageInternalError as exc:  # Optuna's wrapper of a failed first write
            if readonly:  # Optuna stamps its schema version on first open: another command is creating it
                raise StorageBusyError(
                    f"the storage {masked} is still being created by another command (no schema version yet); "
                    "try again in a moment."
                ) from None
            cause = exc.__cause__ if isinstance(exc.__cause__, sqlalchemy.exc.DBAPIError) else exc
            raise storage_error(cause, parsed, masked, readonly) from None
        except (ImportError, sqlalchemy.exc.DBAPIError, RuntimeError) as exc:
            raise storage_error(exc, parsed, masked, readonly) from None


def _heartbeat_options(heartbeat_interval: int, grace_period: int, max_retry: int) -> dict:
    """RDBStorage's heartbeat options: a dead worker's trial is failed and its parameters queued again."""
    return {
        "heartbeat_interval": heartbeat_interval,
        "grace_period": grace_period,
        # Optuna 4.9 renamed failed_trial_callback / RetryFailedTrialCallback (now deprecated).
        "heartbeat_stale_trial_callback": RetryStaleTrial(max_retry=max_retry),
    }


def _connect(
    url: str, parsed: URL, masked: str, file: Path | None, new_file: bool, readonly: bool, options: dict
) -> RDBStorage:
    """The storage, once its database is known to hold Optuna's tables (or none, for a new SQLite file); a new
    SQLite file, or one already in WAL mode, is switched to WAL (:func:`_use_wal`)."""
    engine_kwargs = _engine_kwargs(parsed, readonly)
    if readonly:
        _check_optuna_tables(url, engine_kwargs, masked)
    elif file is not None and not new_file:  # another program's database gets no Optuna tables
        _check_optuna_tables(readonly_url(file.expanduser(), masked), {}, masked, empty_ok=True)
    # RDBStorage runs str.format(SCHEMA_VERSION=...) on the URL: escape braces in a path or password.
    storage = _rdb_storage(url.replace("{", "{{").replace("}", "}}"), engine_kwargs, options)
    if file is not None and not readonly and (new_file or is_wal(file)):
        _use_wal(storage)
    return storage


def _check_optuna_tables(url: str, engine_kwargs: dict, masked: str, empty_ok: bool = False) -> None:
    """Refuse (before Optuna would try to create or stamp anything) a database without Optuna's tables;
    ``empty_ok``: one with no table at all is fine (Optuna creates its tables there)."""
    engine = sqlalchemy.create_engine(url, **engine_kwargs)
    try:
        tables = set(sqlalchemy.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    if empty_ok and not tables:
        return
    if not {"studies", "version_info"} <= tables:
        raise (StorageError if tables else EmptyStorageError)(
            f"{masked} holds no Optuna storage (no studies table); check the URL: nothing was created there."
        )


def _rdb_storage(url: str, engine_kwargs: dict, kwargs: dict) -> RDBStorage:
    """RDBStorage, tolerating a second process that creates the same new database's tables at the same time
    (SQLite then says "table ... already exists", or "UNIQUE constraint failed" when both stamp the schema
    version; PostgreSQL a duplicate key in its catalog)."""
    for attempt in range(5):
        try:
            return RDBStorage(url, engine_kwargs=engine_kwargs, **kwargs)
        except (
            sqlalchemy.exc.OperationalError,
            sqlalchemy.exc.IntegrityError,
            sqlalchemy.exc.ProgrammingError,
        ) as exc:
            text = str(exc).lower()
            if attempt == 4 or not any(
                marker in text for marker in ("already exists", "duplicate key", "unique constraint failed")
            ):
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def sqlite_path(url: str) -> Path | None:
    """The file of a ``sqlite:///path.db[?query]`` URL (None for other URLs and in-memory databases)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    return None if path in ("", ":memory:") or path.startswith("file:") else Path(path)


def _use_wal(storage: RDBStorage) -> None:
    """SQLite in write-ahead-log mode with ``synchronous=NORMAL``.

    Optuna writes every trial attribute in a transaction of its own; with SQLite's default rollback journal each
    commit is an fsync (about 2 ms here, measured in benchmarks/study_efficiency.md), which made that bookkeeping most of
    a study's overhead. In WAL mode a commit is an append (0.8 ms), readers no longer block the writer (better for
    several workers), and a commit survives a killed process; only an OS crash or power loss can drop the last
    commits. WAL needs a local disk, not a network file system (use PostgreSQL across machines).
    """

    @sqlalchemy.event.listens_for(storage.engine, "connect")
    def _pragmas(dbapi_connection, _record):  # noqa: ANN001 - DB-API objects
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    storage.engine.dispose()  # pooled connections opened before the listener reconnect with the pragmas


def storage_writable(url: str) -> bool:
    """Whether a command may write to the storage at ``url`` (a SQLite file whose file or folder is read-only
    may not; other databases say so themselves when written)."""
    path = sqlite_path(url)
    return path is None or writable(path.expanduser())


def study_exists(storage: BaseStorage | str, name: str) -> bool:
    """Whether a study called ``name`` is in ``storage`` (a storage object or a URL)."""
    if isinstance(storage, str):
        storage = open_storage(storage, heartbeat=False)
    for attempt in range(5):  # another command creating the same new SQLite file may hold it for a moment
        try:
            storage.get_study_id_from_name(name)
        except KeyError:
            return False
        except optuna.exceptions.StorageInternalError as exc:
            if attempt == 4 or "locked" not in str(exc.__cause__ or exc).lower():
                raise
            time.sleep(0.2 * (attempt + 1))
        else:
            return True
    raise AssertionError("unreachable")


def _parse(url: str) -> tuple[URL, str]:
    """Parse and check ``url``; return it parsed and as the string to hand to SQLAlchemy."""
    malformed = StorageError(f"Storage URL {mask_url(url)!r} is malformed; use {URL_FORMS}.")
    if not isinstance(url, str) or not url.strip():
        raise malformed
    url = url.strip()
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    try:
        parsed = make_url(url)
        parsed.get_dialect()  # an unknown engine ("sqlte://", "postgres://") fails here, before any side effect
    except (sqlalchemy.exc.ArgumentError, sqlalchemy.exc.NoSuchModuleError, ValueError):
        raise malformed from None  # SQLAlchemy's message may quote the whole URL, password included
    if parsed.host and "@" in parsed.host:  # "user:p@ss@host": the driver would print "ss@host" back
        raise StorageError(
            f"Storage URL {mask_url(url)!r} is malformed; percent-encode an '@' in the password as %40."
        )
    if parsed.get_backend_name() == "sqlite" and not parsed.database:
        raise malformed  # "sqlite://" is a throwaway in-memory database: say sqlite:///:memory: if meant
    return parsed, url


def _engine_kwargs(parsed: URL, readonly: bool = False) -> dict:
    """Connection settings: fail fast on an unreachable server, wait patiently for a SQLite lock; a read-only
    PostgreSQL session with ``readonly``."""
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        connect_args: dict[str, Any] = (
            {} if "connect_timeout" in parsed.query else {"connect_timeout": CONNECT_TIMEOUT_S}
        )
        if readonly:
            connect_args["options"] = "-c default_transaction_read_only=on"
        # pool_pre_ping: a worker's connection may sit idle for a whole trial and be dropped meanwhile.
        return {"connect_args": connect_args, "pool_pre_ping": True}
    if backend == "sqlite":
        return {"connect_args": {"timeout": SQLITE_LOCK_TIMEOUT_S}}
    return {}


def _make_sqlite_parent(parsed: URL, masked: str) -> None:
    """Create the directory a SQLite file will live in (not for in-memory or ``file:`` URI databases)."""
    database = parsed.database or ""
    if database == ":memory:" or database.startswith("file:") or parsed.query.get("uri") == "true":
        return
    parent = Path(database).expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"Cannot create the directory {str(parent)!r} for {masked} ({exc.strerror}); "
            "choose a writable path."
        ) from None
