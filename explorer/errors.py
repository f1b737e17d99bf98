"""One exception hierarchy for the whole package, and the exit codes the command line maps it to.

Every error a user can cause is an :class:`ExplorerError`. Its message is one sentence that names the problem
and the fix; the CLI prints it on one line and exits with :attr:`ExplorerError.exit_code`, never a traceback.

Exit codes (documented in the README; scripts may rely on them):

====  ==========================================================================================
0     success
1     a run failed for a reason of its own (a worker process died, an unexpected error)
2     usage: an unknown option or a missing argument (click's own code)
3     bad input: a value, spec, file, study name or storage URL that is wrong, or a size above its
      limit (explorer.limits); nothing was written
4     no result: the command ran but has nothing to give (no completed trial, a diverged run,
      an export whose outputs do not match PyTorch's)
5     environment: this machine lacks what was asked for (an optional package, a device, a
      working runtime, a reachable database)
6     not decided: `confirm --until-decided` queued nothing because the budget it was given cannot
      hold the next round that decides the answer (the message names the runs that round needs), or
      because the horizon check's longer runs contradict the verdict, which no more runs at the
      grid's horizon decide (the message names the longer study that can)
130   interrupted (Ctrl-C); finished work is kept
====  ==========================================================================================
"""

from __future__ import annotations

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_ENVIRONMENT",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NO_RESULT",
    "EXIT_NOT_DECIDED",
    "EXIT_USAGE",
    "BadInputError",
    "ConfigError",
    "DataError",
    "DeviceError",
    "EnvironmentLackError",
    "ExplorerError",
    "ExportMismatchError",
    "LimitError",
    "MissingExtraError",
    "NoAnswerError",
    "NoCompletedTrialsError",
    "NoResultError",
    "RuntimeUnavailableError",
    "SpecError",
    "StorageError",
    "StorageBusyError",
    "EmptyStorageError",
    "StorageUnavailableError",
    "StudyNotFoundError",
    "TrainingDivergedError",
]

EXIT_FAILED = 1
EXIT_USAGE = 2  # click.UsageError's code; listed so the table above is complete in one place
EXIT_BAD_INPUT = 3
EXIT_NO_RESULT = 4
EXIT_ENVIRONMENT = 5
EXIT_NOT_DECIDED = 6  # confirm --until-decided queued nothing: see the table above
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


class ExplorerError(Exception):
    """Base class of every error the user can cause or fix."""

    exit_code = EXIT_FAILED


class BadInputError(ExplorerError):
    """A value, spec, file, study name or storage URL is wrong (exit 3); nothing was written."""

    exit_code = EXIT_BAD_INPUT


class EnvironmentLackError(ExplorerError):
    """This machine lacks what was asked for: an optional package, a device, a runtime, a database (exit 5)."""

    exit_code = EXIT_ENVIRONMENT


class NoResultError(ExplorerError):
    """The command ran but has nothing to give (exit 4)."""

    exit_code = EXIT_NO_RESULT


class ConfigError(BadInputError):
    """An invalid model, head count, schedule, option or training setting."""


class DataError(BadInputError):
    """A task's data (or a model file) is missing, malformed or unsafe to load."""


class SpecError(BadInputError):
    """A study spec (TOML) is malformed or describes an empty or impossible space."""


class LimitError(BadInputError):
    """A size or count above its limit (explorer.limits): the message names the value, the limit and the
    option or environment variable that goes past it; nothing was built, allocated or written."""


class StorageError(BadInputError):
    """A storage URL (or artifact location) is malformed."""


class StudyNotFoundError(BadInputError):
    """The named study is not in the storage."""


class DeviceError(EnvironmentLackError):
    """The requested device is not available on this machine."""


class StorageUnavailableError(StorageError):
    """The database (or its driver) cannot be reached from this machine."""

    exit_code = EXIT_ENVIRONMENT


class EmptyStorageError(StorageError):
    """A database with no table at all, opened to be read: nothing is stored there yet (a run creates it)."""


class StorageBusyError(StorageUnavailableError):
    """The database is still being created by another command (Optuna's schema not yet stamped): read it again
    in a moment."""


class MissingExtraError(EnvironmentLackError):
    """An optional dependency is not installed; the message names the extra that brings it."""

    def __init__(self, what: str, extra: str, package: str):
        super().__init__(
            f"{what} needs {package}, which is not installed; run pip install 'explorer[{extra}]'."
        )
        self.extra, self.package = extra, package


class RuntimeUnavailableError(EnvironmentLackError):
    """A model runtime cannot run here (torch.compile without a working compiler, no CUDA provider...)."""


class NoCompletedTrialsError(NoResultError):
    """A report or export was asked of a study with no completed trial."""


class NoAnswerError(NoResultError):
    """The study learned nothing (no layout beats chance beyond noise), so there is no layout to pick."""


class TrainingDivergedError(NoResultError):
    """The training loss became NaN or infinite."""


class ExportMismatchError(NoResultError):
    """An exported model's outputs differ from PyTorch's by more than the tolerance (nothing is written)."""
