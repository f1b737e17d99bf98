"""Why a storage could not be opened, in one sentence that names it without its password."""

from __future__ import annotations

import sqlalchemy.exc
from sqlalchemy.engine import URL

from explorer.errors import StorageError, StorageUnavailableError


def storage_error(exc: Exception, parsed: URL, masked: str, readonly: bool) -> StorageError:
    """A missing driver, a failed connection, or (RuntimeError) Optuna's "table schema is not compatible" check,
    as one sentence that names the storage without its password."""
    if isinstance(exc, ImportError):
        return StorageUnavailableError(_driver_message(parsed, masked, exc))
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        return StorageUnavailableError(_unreachable_message(parsed, masked, exc, readonly))
    return StorageError(
        f"The storage {masked} has an incompatible schema ({_scrub(str(exc), parsed)}); "
        "run `optuna storage upgrade --storage URL` or use a new database."
    )


_DRIVERS = {  # backend -> how to install the driver explorer's users meet
    "postgresql": "pip install 'psycopg[binary]' (explorer's postgres extra)",
    "mysql": "pip install PyMySQL and write the URL as mysql+pymysql://...",
}


def _driver_message(parsed: URL, masked: str, exc: ImportError) -> str:
    """The missing database driver, named from the import that failed, and how to install it."""
    cause = exc.__cause__ if isinstance(exc.__cause__, ImportError) else exc
    module = getattr(cause, "name", None)
    missing = f" (no module {module!r})" if module else ""
    backend = parsed.get_backend_name()
    how = _DRIVERS.get(backend, f"install the Python driver the URL's {parsed.drivername!r} names")
    return f"The database driver for {masked} is not installed{missing}; {how}."


def _unreachable_message(
    parsed: URL, masked: str, exc: sqlalchemy.exc.DBAPIError, readonly: bool = False
) -> str:
    """One sentence for a database that refused or failed the connection, with the driver's reason."""
    lines = str(exc.orig if exc.orig is not None else exc).strip().splitlines()
    reason = _scrub(lines[0] if lines else type(exc).__name__, parsed)
    if parsed.get_backend_name() == "sqlite" and readonly:
        hint = "check that the path is a readable SQLite file (a database in use by a writer in a read-only folder cannot be read)"
    elif parsed.get_backend_name() == "sqlite":
        hint = "check that the path is a writable SQLite file"
    else:
        hint = "check that the server is running and the host, port, user, password and database are right"
    return f"Cannot open the storage {masked} ({reason}); {hint}."


def _scrub(text: str, parsed: URL) -> str:
    """Remove the password from a driver's message, in case it quotes it (short ones would garble it)."""
    password = str(parsed.password or "")
    return text.replace(password, "***") if len(password) >= 4 else text
