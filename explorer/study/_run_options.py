"""How a command runs a study's trials (workers, threads, device, timeout, artifacts), valid by construction.
Torch-free, so a refused option is answered before PyTorch is imported; the device it names is resolved once,
by the run's plan (:func:`explorer.study._run_plan.plan_run`)."""

from __future__ import annotations

from dataclasses import dataclass

from explorer.errors import ConfigError
from explorer.layout import DEVICE_NAMES, UNIT_OFFSET
from explorer.limits import THREADS, TRIALS, WORKERS
from explorer.storage import check_artifact_location


def check_total(total: int, total_from: str = "--n-trials") -> int:
    """A search total (``--n-trials`` or a spec's ``n_trials``) of at least 1 and within the limit; never
    UNIT_OFFSET or more, whatever the limit is raised to: search trial ``n`` trains with the study's ``n``-th
    seed, and the evidence units' seeds begin at UNIT_OFFSET."""
    if total < 1:
        raise ConfigError(f"{total_from} must be at least 1, got {total}.")
    TRIALS.check(total, total_from, "ask for fewer trials")
    if total >= UNIT_OFFSET:  # only where $EXPLORER_MAX_TRIALS raised the limit this far
        raise ConfigError(
            f"{total_from} is {total:,}; a study's search trials stay below {UNIT_OFFSET:,}, where the seeds of "
            "its finalist runs begin: ask for fewer trials."
        )
    return total


def check_total_reaches(total: int, done: int, name: str, total_from: str = "--n-trials") -> None:
    """A new total may not fall below the search trials ``name`` has already finished."""
    if total < done:
        raise ConfigError(
            f"{total_from} {total} is below the {done} search trials {name!r} has already finished; "
            f"give at least {done}."
        )


WORKERS_ATTR = "workers"  # the study's user attribute: the worker processes its last run on a machine used


@dataclass(frozen=True)
class RunOptions:
    """How a command runs a study's trials: checked once, as a whole, when made (so nothing checks it again)."""

    workers: int = 1
    threads: int = 1  # torch CPU threads per worker
    device: str | None = None  # a device name (DEVICE_NAMES); None: the spec's latency device
    timeout: float | None = None  # seconds after which no new trial starts
    poll_interval: float = 1.0
    # where trained weights go (None: $EXPLORER_ARTIFACTS, the spec's, the default)
    artifacts: str | None = None

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}.")
        if self.threads < 1:
            raise ConfigError(f"--threads must be at least 1, got {self.threads}.")
        WORKERS.check(self.workers, "--workers", "use fewer worker processes")
        THREADS.check(self.threads, "--threads", "use fewer threads")
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigError(f"--timeout must be a positive number of seconds, got {self.timeout:g}.")
        if self.device is not None and not isinstance(self.device, str):
            raise ConfigError(f"device must be a name ({DEVICE_NAMES}), got {self.device!r}.")
        if self.artifacts is not None:
            check_artifact_location(self.artifacts)
