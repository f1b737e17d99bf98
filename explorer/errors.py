"""One exception hierarchy for the whole package.

Every error a user can cause is an :class:`ExplorerError`. Its message is one sentence that names the problem
and the fix; the CLI prints it on one line and exits with :attr:`ExplorerError.exit_code`, never a traceback.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DataError",
    "DeviceError",
    "ExplorerError",
    "NoCompletedTrialsError",
    "SpecError",
    "StorageError",
    "StudyNotFoundError",
    "TrainingDivergedError",
]


class ExplorerError(Exception):
    """Base class of every error the user can cause or fix."""

    exit_code = 2


class ConfigError(ExplorerError):
    """An invalid model, head count, schedule or training setting."""


class DataError(ExplorerError):
    """A task's data is missing, malformed or unsafe to load."""


class DeviceError(ExplorerError):
    """The requested device is not available."""


class SpecError(ExplorerError):
    """A study spec (TOML) is malformed or describes an empty or impossible space."""


class StorageError(ExplorerError):
    """A storage URL is malformed or the database cannot be reached."""


class StudyNotFoundError(ExplorerError):
    """The named study is not in the storage."""


class NoCompletedTrialsError(ExplorerError):
    """A report or export was asked of a study with no completed trial."""

    exit_code = 3


class TrainingDivergedError(ExplorerError):
    """The training loss became NaN or infinite."""
