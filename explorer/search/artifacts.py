"""Trained weights kept next to the study database, so a finalist can be analysed without retraining.

Layout: ``ROOT/STUDY/trial-00012.pt``, one ``state_dict`` per trial, where ROOT is

* ``path/NAME.artifacts/`` for a SQLite storage ``sqlite:///path/NAME.db`` (it travels with the database);
* ``$EXPLORER_ARTIFACT_DIR``, else ``./studies/artifacts/``, for any other storage (PostgreSQL...).

Files hold tensors only (``torch.save`` of a state_dict, written atomically) and are read back with
``torch.load(weights_only=True)``, so a planted file can never run code. The store keeps its total size under
``max_bytes`` by deleting the oldest files (never the one just written). :func:`trained_model` loads a trial's
weights, or retrains the trial exactly and stores them: analysis works for studies run before weights were kept.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from explorer.engine.config import LatencyConfig
from explorer.engine.device import as_device
from explorer.engine.evaluate import evaluate_variant
from explorer.engine.model import Encoder, build_model
from explorer.engine.tasks.base import Task
from explorer.engine.train import EpochStats
from explorer.errors import ConfigError, DataError
from explorer.search.record import TrialRecord

__all__ = [
    "ARTIFACT_DIR_ENV",
    "DEFAULT_MAX_BYTES",
    "ArtifactStore",
    "artifact_root_for",
    "store_for",
    "trained_model",
]

ARTIFACT_DIR_ENV = "EXPLORER_ARTIFACT_DIR"
DEFAULT_MAX_BYTES = 200 * 2**20  # 200 MiB: thousands of small encoders, a few dozen ViT-S sized ones
_SUFFIX = ".pt"


def artifact_root_for(storage_url: str) -> Path:
    """Where a storage's weights live: ``path/NAME.artifacts/`` beside a SQLite file, else the env/default dir."""
    if storage_url.startswith("sqlite:///"):
        db = storage_url.removeprefix("sqlite:///").split("?", 1)[0]
        if db and db != ":memory:":
            path = Path(db)
            return path.with_name(path.stem + ".artifacts")
    env = os.environ.get(ARTIFACT_DIR_ENV, "").strip()
    return Path(env).expanduser() if env else Path("studies") / "artifacts"


class ArtifactStore:
    """A folder of per-trial state_dicts with a total size limit.

    Args:
        root: the folder (created on first save).
        max_bytes: the most the ``*.pt`` files under ``root`` may take together; the oldest go first.
    """

    def __init__(self, root: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES):
        if max_bytes < 1:
            raise ConfigError(f"the artifact size limit must be positive, got {max_bytes} bytes.")
        self.root = Path(root)
        self.max_bytes = int(max_bytes)

    def path(self, study_name: str, trial_number: int) -> Path:
        return self.root / study_name / f"trial-{int(trial_number):05d}{_SUFFIX}"

    def has(self, study_name: str, trial_number: int) -> bool:
        return self.path(study_name, trial_number).is_file()

    def save(self, study_name: str, trial_number: int, model: nn.Module) -> Path:
        """Write ``model``'s state_dict (CPU copies) atomically, then enforce the size limit; return the path."""
        out = self.path(study_name, trial_number)
        out.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".tmp-", suffix=_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                torch.save(state, f)
            os.replace(tmp, out)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.enforce_limit(protect=[out])
        return out

    def load_state(self, study_name: str, trial_number: int) -> dict[str, torch.Tensor]:
        """The stored state_dict on the CPU. Anything but a plain ``{name: tensor}`` file raises DataError."""
        path = self.path(study_name, trial_number)
        if not path.is_file():
            raise DataError(f"no stored weights for trial #{trial_number} of {study_name!r} at {path}.")
        try:
            state: Any = torch.load(path, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
            raise DataError(
                f"{path} is not a plain tensor file ({type(exc).__name__}); delete it so the trial is retrained."
            ) from None
        if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
        ):
            raise DataError(
                f"{path} does not hold a state_dict of tensors; delete it so the trial is retrained."
            )
        return state

    def files(self) -> list[Path]:
        """Every stored weight file, oldest first."""
        if not self.root.is_dir():
            return []
        return sorted(
            (p for p in self.root.glob(f"*/*{_SUFFIX}") if not p.name.startswith(".tmp-")),
            key=lambda p: (p.stat().st_mtime_ns, str(p)),
        )

    def total_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files())

    def prune(self, study_name: str, keep: set[int]) -> list[Path]:
        """Delete the study's weights except those of the trials in ``keep``; return the deleted paths."""
        keep_paths = {self.path(study_name, n) for n in keep}
        gone = [p for p in self.files() if p.parent.name == study_name and p not in keep_paths]
        for p in gone:
            p.unlink(missing_ok=True)
        return gone

    def enforce_limit(self, protect: Iterable[Path] = ()) -> list[Path]:
        """Delete the oldest files until the total fits ``max_bytes``; ``protect`` is never deleted."""
        protected = {Path(p) for p in protect}
        files = self.files()
        total = sum(p.stat().st_size for p in files)
        gone = []
        for p in files:
            if total <= self.max_bytes:
                break
            if p in protected:
                continue
            total -= p.stat().st_size
            p.unlink(missing_ok=True)
            gone.append(p)
        return gone


def store_for(storage_url: str, max_bytes: int = DEFAULT_MAX_BYTES) -> ArtifactStore:
    """The artifact store that belongs to a study storage."""
    return ArtifactStore(artifact_root_for(storage_url), max_bytes)


def trained_model(
    study_name: str,
    record: TrialRecord,
    task: Task,
    latency: LatencyConfig,
    store: ArtifactStore,
    device: torch.device | str = "cpu",
) -> Encoder:
    """The trained model of a trial (eval mode, on ``device``).

    Stored weights are loaded when present; otherwise the trial is retrained exactly (same architecture,
    learning rate, seed and epochs, through :func:`explorer.engine.evaluate.evaluate_variant`) and its weights
    are stored for next time. A finalist retrains for the epochs it ran (its plateau), not its cap.
    """
    if record.config is None or record.lr is None or record.seed is None or not record.history:
        raise DataError(f"trial #{record.number} of {study_name!r} has no trained configuration to load.")
    device = as_device(device)
    if store.has(study_name, record.number):
        with torch.random.fork_rng(devices=[]):
            model = build_model(record.config, task.spec)
        try:
            model.load_state_dict(store.load_state(study_name, record.number))
        except RuntimeError:
            raise DataError(
                f"stored weights {store.path(study_name, record.number)} do not fit trial #{record.number}'s "
                f"architecture; delete the file so the trial is retrained."
            ) from None
        return model.to(device).eval()
    train = record.train_config()
    stop_at = record.epochs_run

    def on_epoch(stats: EpochStats) -> bool:
        return stats.epoch >= stop_at  # the same schedule, stopped where the trial stopped

    result = evaluate_variant(record.config, task, train, latency, device, on_epoch=on_epoch, keep_model=True)
    assert result.model is not None
    store.save(study_name, record.number, result.model)
    return result.model.eval()
