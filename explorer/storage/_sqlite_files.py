"""SQLite database files as explorer meets them: a new one it creates, an existing one it must not alter.

* :func:`readonly_url`: the URL that opens an existing file for reading without creating or changing anything
  beside it. A file in write-ahead-log mode with no ``-wal`` file (nothing pending: the last writer closed) is
  opened ``immutable=1``, which works in a read-only folder and creates no ``-shm``/``-wal``; otherwise
  ``mode=ro``, which reads the pending log a running writer keeps. A missing file, a folder or a file that is
  not a SQLite database is a one-line error; nothing is created.
* :func:`read_once_created`: a read of a file another command is creating at this moment is tried again
  until the file is whole (a few seconds at most).
* :func:`writable`: whether a file and its folder can be written (a read-only command keeps nothing there
  when they cannot).
* :func:`is_wal`: whether a file is in write-ahead-log mode (explorer switches only the databases it creates,
  and keeps the ones already in that mode fast; another program's rollback-journal file is left as it is).

A file's header is read through one descriptor per file kept open for the life of the process, never one opened
and closed: a close would drop the locks of the process's SQLite connections to that file (see
:func:`_kept_descriptor`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from urllib.parse import quote

from explorer.errors import StorageError

T = TypeVar("T")
CREATION_WAIT_S = 3.0  # how long a read waits for another command to finish creating a new SQLite file

SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite 3 database file
_WAL_VERSION = 2  # header bytes 18 and 19 (write and read format versions) are 2 in WAL mode
# (device, inode) -> the descriptor this process reads that SQLite file through, never closed (_kept_descriptor)
_KEPT: dict[tuple[int, int], int] = {}


def _header(path: Path) -> bytes:
    """The first 100 bytes of the SQLite file at ``path``, read through the descriptor this process keeps of it
    (:func:`_kept_descriptor`), never through one opened and closed for the purpose."""
    try:
        return os.pread(_kept_descriptor(path), 100, 0)
    except OSError as exc:
        raise StorageError(
            f"cannot read the SQLite file {str(path)!r} ({exc.strerror}); check its permissions."
        ) from None


def _kept_descriptor(path: Path) -> int:
    """A read-only descriptor of the file at ``path``: one a file (by device and inode), opened the first time this
    process reads that file and never closed.

    SQLite's locks are POSIX locks, held per process and file: closing *any* descriptor of a database file drops
    every lock the process holds on it, those of its live SQLite connections included. Another process then
    takes itself for the last connection, checkpoints, and deletes the ``-wal`` and ``-shm`` those connections
    still use (SQLite's "How To Corrupt An SQLite Database File", section 2.2; SQLite itself keeps such a
    descriptor open until its locks are released). Opening a file drops nothing; only a close does, and this
    one never comes. A file replaced at the same path is another inode and gets a descriptor of its own."""
    st = path.stat()
    fd = _KEPT.get((st.st_dev, st.st_ino))
    if fd is None:
        fd = os.open(path, os.O_RDONLY)  # not inherited by child processes (PEP 446)
        opened = os.fstat(fd)  # the file as opened: replaced since the stat, it is the new one
        fd = _KEPT.setdefault((opened.st_dev, opened.st_ino), fd)  # a second one of an inode is kept, unused
    return fd


def is_wal(path: Path) -> bool:
    """Whether the SQLite file at ``path`` is in write-ahead-log mode (False for a missing or foreign file)."""
    try:
        header = _header(path)
    except StorageError:  # missing or unreadable
        return False
    return header.startswith(SQLITE_MAGIC) and len(header) >= 20 and header[18] == _WAL_VERSION


def readonly_url(path: Path, masked: str) -> str:
    """A ``sqlite:///file:...?uri=true`` URL reading the existing database at ``path`` without writing."""
    if not path.exists():
        raise StorageError(
            f"no SQLite database at {str(path)!r} (from {masked}); nothing was created: check the path, or "
            "create the study with `explorer study run SPEC`."
        )
    if not path.is_file():
        raise StorageError(
            f"{str(path)!r} (from {masked}) is not a file; give the path of a SQLite database."
        )
    header = _header(path)
    if not header:
        raise StorageError(f"{str(path)!r} is an empty file, not an Optuna database; check the path.")
    if not header.startswith(SQLITE_MAGIC):
        raise StorageError(f"{str(path)!r} is not a SQLite database; check the path (or the URL's scheme).")
    pending = Path(f"{path}-wal").exists()
    mode = "immutable=1" if is_wal(path) and not pending else "mode=ro"
    uri = quote(str(path.resolve()), safe="/")  # URI form: percent-encoded ("?", "#", "%", braces, spaces)
    return f"sqlite:///file:{uri}?{mode}&uri=true"


def writable(path: Path) -> bool:
    """Whether explorer may write the SQLite file at ``path``: the file and its folder (for the journal) are
    writable to this process (a read-only mount says no even to root)."""
    return os.access(path, os.W_OK) and os.access(path.parent if str(path.parent) else Path("."), os.W_OK)


def read_once_created(open_once: Callable[[], T], path: Path) -> T:
    """A read-only open of a SQLite file that another command may be creating at this moment. Its tables, schema
    stamp and switch to write-ahead logging land over a fraction of a second, and a read in between finds no
    tables, no schema version, or (``mode=ro``) a log it may not set up. While the file or its log changed in
    the last few seconds, such a read is tried again for up to :data:`CREATION_WAIT_S`; otherwise, or after
    that, its error stands."""
    deadline = time.monotonic() + CREATION_WAIT_S
    while True:
        try:
            return open_once()
        except StorageError:
            if time.monotonic() > deadline or not _recently_written(path):
                raise
            time.sleep(0.1)


def _recently_written(path: Path) -> bool:
    """Whether a SQLite file or its write-ahead log was changed in the last few seconds."""
    times = []
    for name in (path, Path(f"{path}-wal")):
        try:
            times.append(name.stat().st_mtime)
        except OSError:
            continue
    return bool(times) and time.time() - max(times) < 2 * CREATION_WAIT_S
