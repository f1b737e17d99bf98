"""How a command runs a study's trials (workers, threads, device, timeout, artifacts), checked as a whole before
anything is written. Torch-free, so a refused option is answered before PyTorch is imported."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from explorer.engine.latency_cache import CachePolicy
from explorer.engine.limits import THREADS, TRIALS, WORKERS
from explorer.errors import ConfigError
from explorer.search.locations import check_artifact_location, env_artifact_location

if TYPE_CHECKING:
    import torch

__all__ = ["RunOptions", "check_total", "check_total_reaches"]


def check_total(total: int, total_from: str = "--n-trials") -> int:
    """A search total (``--n-trials`` or a spec's ``n_trials``) of at least 1 and within the limit."""
    if total < 1:
        raise ConfigError(f"{total_from} must be at least 1, got {total}.")
    return TRIALS.check(total, total_from, "ask for fewer trials")


def check_total_reaches(total: int, done: int, name: str, total_from: str = "--n-trials") -> None:
    """A new total may not fall below the search trials ``name`` has already finished."""
    if total < done:
        raise ConfigError(
            f"{total_from} {total} is below the {done} search trials {name!r} has already finished; "
            f"give at least {done}."
        )


@dataclass(frozen=True)
class RunOptions:
    """How a command runs a study's trials: checked as a whole before anything is written."""

    workers: int = 1
    threads: int = 1  # torch CPU threads per worker
    # None: the spec's latency device; a name is resolved once, by check(), into the torch.device the run uses
    device: str | torch.device | None = None
    timeout: float | None = None  # seconds after which no new trial starts
    poll_interval: float = 1.0
    artifacts: str | None = (
        None  # where trained weights go (None: $EXPLORER_ARTIFACTS, the spec's, the default)
    )

    def check(self) -> RunOptions:
        """These options, checked, with a named device resolved (checking them again resolves nothing)."""
        if self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}.")
        if self.threads < 1:
            raise ConfigError(f"--threads must be at least 1, got {self.threads}.")
        WORKERS.check(self.workers, "--workers", "use fewer worker processes")
        THREADS.check(self.threads, "--threads", "use fewer threads")
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigError(f"--timeout must be a positive number of seconds, got {self.timeout:g}.")
        checked = self
        if isinstance(self.device, str):
            from explorer.engine.device import resolve_device  # torch: only when a device is named

            checked = dataclasses.replace(self, device=resolve_device(self.device))
        if self.artifacts is not None:
            check_artifact_location(self.artifacts)
        env_artifact_location()  # a malformed EXPLORER_ARTIFACTS fails here, before anything is written
        CachePolicy.from_env()  # a malformed EXPLORER_CACHE_MAX_AGE fails here, not in a worker
        return checked
