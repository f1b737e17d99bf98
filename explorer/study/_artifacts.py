"""Trained weights and report figures kept through ``optuna.artifacts``, so every machine that can open a study
can load them (and optuna-dashboard shows them).

Where they go is an artifact *location*, one of the stores Optuna ships:

* a directory path or ``file://`` URL: :class:`optuna.artifacts.FileSystemArtifactStore` (a shared disk);
* ``s3://BUCKET``: :class:`optuna.artifacts.Boto3ArtifactStore` (needs boto3; credentials from its environment);
* ``gs://BUCKET``: :class:`optuna.artifacts.GCSArtifactStore` (needs google-cloud-storage).

The cloud stores are wrapped in :class:`optuna.artifacts.Backoff` (retries on transient errors). A run writes
to the first location that is set among: the ``location`` argument (``--artifacts``), ``$EXPLORER_ARTIFACTS``,
the spec's ``artifacts`` key, and the default: ``path/NAME.artifacts/`` beside a SQLite file
``sqlite:///path/NAME.db`` (it travels with the database), else ``./studies/artifacts/``.

Each weight file (``trial-00012.pt``: a plain ``state_dict``, read back with ``torch.load(weights_only=True)``,
so a planted file can never run code) is uploaded with :func:`optuna.artifacts.upload_artifact`: to the trial
while it runs, or to the study for a trial retrained after it finished (a finished trial's attributes are
frozen). An index in the study's system attributes (``explorer:weights:<number>``: artifact id, size, location;
a finalist run's, trial ``FINALIST_BASE + n`` to explorer, in its companion study's, under ``n``) finds it
again from any machine, so a second machine sharing a PostgreSQL study reads the weights from the shared store
instead of retraining; ``--artifacts`` or ``$EXPLORER_ARTIFACTS`` on the reading side override the recorded
location (a share mounted elsewhere). The weights of one study are kept under ``max_bytes`` by removing the
oldest; :func:`explorer.study._retrain.trained_model` retrains an evicted (or never stored) trial exactly and stores it again.
"""

from __future__ import annotations

import contextlib
import io
import logging
import pickle
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import optuna
import torch
from optuna.artifacts import upload_artifact
from optuna.artifacts.exceptions import ArtifactNotFound
from optuna.storages import BaseStorage
from optuna.trial import TrialState
from torch import nn

from explorer.errors import ConfigError, DataError, StorageError
from explorer.storage import (
    FINALIST_BASE,
    check_artifact_location,
    companion_name,
    env_artifact_location,
    local_number,
    open_storage,
    storage_of,
    storage_writable,
    trial_label,
)
from explorer.study._study import Study

log = logging.getLogger(__name__)

# 200 MiB per study: thousands of small encoders, a few dozen ViT-S sized ones
DEFAULT_MAX_BYTES = 200 * 2**20
WEIGHTS_KEY = "explorer:weights:"  # + trial number (5 digits): the index entry of a trial's weights
FIGURE_KEY = "explorer:file:"  # + file name: a study-level file (a report figure), replaced in place
LOCATION_ATTR = "artifacts"  # study user attr: where the latest run wrote (for people and optuna-dashboard)


def artifact_root_for(storage_url: str) -> Path:
    """The default location: ``path/NAME.artifacts/`` beside a SQLite file, else ``./studies/artifacts/``."""
    if storage_url.startswith("sqlite:///"):
        db = storage_url.removeprefix("sqlite:///").split("?", 1)[0]
        if db and db != ":memory:" and not db.startswith("file:"):
            path = Path(db)
            return path.with_name(path.stem + ".artifacts")
    return Path("studies") / "artifacts"


def absolute_location(location: str) -> str:
    """A directory location as an absolute path (what the index records, so a process in another folder finds
    it); cloud locations unchanged."""
    if location.startswith(("s3://", "gs://")):
        return location
    return str(Path(location.removeprefix("file://")).expanduser().resolve())


def _env_location() -> str | None:
    return env_artifact_location()  # checked: EXPLORER_ARTIFACTS=ftp://x is an error, not a folder "ftp:"


def open_backend(location: str, create: bool = True) -> Any:
    """The Optuna artifact store for ``location`` (see the module docstring); a directory is created unless
    ``create`` is False (reading creates nothing: a missing directory simply holds no file)."""
    location = check_artifact_location(location)
    if location.startswith("s3://"):
        from optuna.artifacts import Backoff, Boto3ArtifactStore

        return Backoff(Boto3ArtifactStore(location.removeprefix("s3://").strip("/")))
    if location.startswith("gs://"):
        from optuna.artifacts import Backoff, GCSArtifactStore

        return Backoff(GCSArtifactStore(location.removeprefix("gs://").strip("/")))
    from optuna.artifacts import FileSystemArtifactStore

    path = Path(location.removeprefix("file://")).expanduser()
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(
                f"cannot create the artifact directory {str(path)!r} ({exc.strerror}); choose a writable --artifacts."
            ) from None
    return FileSystemArtifactStore(path)


class ArtifactStore:
    """The trained weights (and report files) of the studies in one Optuna storage.

    Args:
        storage_url: the study storage's URL (for the default location, and to open it if ``storage`` is None).
        location: where to write and (overriding what the index recorded) read; None: ``$EXPLORER_ARTIFACTS``,
            else the study spec's ``artifacts``, else the default (:func:`artifact_root_for`).
        max_bytes: the most one study's weights may take together; the oldest are removed first.
        storage: the open storage object (a study's own; an in-memory database has no second connection), or what
            opens it when the store is first used.
        spec_location: the study spec's ``artifacts`` key, used when neither ``location`` nor the env is set.
    """

    def __init__(
        self,
        storage_url: str,
        location: str | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        storage: BaseStorage | Callable[[], BaseStorage] | None = None,
        spec_location: str | None = None,
        writable: bool = True,
    ):
        if max_bytes < 1:
            raise ConfigError(f"the artifact size limit must be positive, got {max_bytes} bytes.")
        self.storage_url = storage_url
        self.override = check_artifact_location(location) if location else _env_location()
        self.default_location = absolute_location(str(artifact_root_for(storage_url)))
        self.write_location = absolute_location(self.override or spec_location or self.default_location)
        self.max_bytes = int(max_bytes)
        self._storage = storage
        self.writable = (
            writable  # False: a read-only study storage; saving keeps nothing (and says so in the log)
        )
        self._backends: dict[tuple[str, bool], Any] = {}

    # ---------------------------------------------------------------------------------------- plumbing

    @property
    def storage(self) -> BaseStorage:
        storage = self._storage
        if storage is None:
            storage = open_storage(self.storage_url, heartbeat=False)
        elif callable(storage):  # the study's writable storage, opened now
            storage = storage()
        self._storage = storage
        return storage

    def backend(self, location: str, create: bool = False) -> Any:
        """The store at ``location``; ``create`` makes its directory (for writing)."""
        key = (location, create)
        if key not in self._backends:
            self._backends[key] = open_backend(location, create)
        return self._backends[key]

    def _study_id(self, study_name: str) -> int:
        try:
            return self.storage.get_study_id_from_name(study_name)
        except KeyError:
            raise DataError(f"no study {study_name!r} in the storage to keep artifacts for.") from None

    def _parts(self, study_name: str) -> list[tuple[str, int]]:
        """(Optuna study, number base) of every study a study's trials live in: itself and its companion."""
        parts = [(study_name, 0)]
        try:
            self.storage.get_study_id_from_name(companion_name(study_name))
            parts.append((companion_name(study_name), FINALIST_BASE))
        except KeyError:
            pass
        return parts

    def index(self, study_name: str) -> dict[int, dict[str, Any]]:
        """The stored weights of a study (its companion's too): trial number -> {artifact_id, bytes, saved,
        location}."""
        out = {}
        for name, base in self._parts(study_name):
            for key, entry in self.storage.get_study_system_attrs(self._study_id(name)).items():
                if key.startswith(WEIGHTS_KEY) and isinstance(entry, dict) and not entry.get("removed"):
                    out[base + int(key.removeprefix(WEIGHTS_KEY))] = entry
        return out

    def _entry(self, study_name: str, trial_number: int) -> dict[str, Any] | None:
        name, local = local_number(study_name, trial_number)  # a finalist run's lives with the companion
        entry = self.storage.get_study_system_attrs(self._study_id(name)).get(f"{WEIGHTS_KEY}{local:05d}")
        return entry if isinstance(entry, dict) and not entry.get("removed") else None

    def _read_location(self, entry: dict[str, Any]) -> str:
        """Where an indexed file is: the override if set, else the default location of this storage (a SQLite
        study's ``NAME.artifacts`` beside its file: a study folder moved or copied elsewhere reads its own
        files, not those of the folder it came from; artifact ids are unique, so a file found there is this
        entry's), else where it was written (a location of its own, recorded absolute)."""
        if self.override:
            return absolute_location(self.override)
        recorded = str(entry.get("location") or self.write_location)
        for location in dict.fromkeys((self.default_location, recorded)):
            try:
                self.backend(location).open_reader(entry["artifact_id"]).close()
                return location
            except (ArtifactNotFound, OSError, StorageError):
                continue
        return recorded

    # ---------------------------------------------------------------------------------------- weights

    def save(self, study_name: str, trial_number: int, model: nn.Module) -> str:
        """Upload ``model``'s state_dict (CPU copies) as ``trial-NNNNN.pt``, index it, enforce the size limit;
        return the artifact id ("" when the storage is read-only: nothing is kept)."""
        if not self.writable:
            log.info("the weights of trial #%d are not kept: the study's storage is read-only", trial_number)
            return ""
        name, local = local_number(study_name, int(trial_number))  # a finalist run's: in the companion
        storage, study_id = self.storage, self._study_id(name)
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, local)
        trial = storage.get_trial(trial_id)
        state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        previous = self._entry(study_name, trial_number)
        backend = self.backend(self.write_location, create=True)
        with tempfile.TemporaryDirectory(prefix="explorer-weights-") as tmp:
            path = Path(tmp) / f"trial-{local:05d}.pt"
            torch.save(state, path)
            size = path.stat().st_size
            # A running trial owns its artifacts (the dashboard lists them under it); a finished one is frozen,
            # so a retrained trial's weights hang on the study.
            if trial.state == TrialState.RUNNING:
                target: Any = trial
            else:
                target = optuna.load_study(study_name=name, storage=storage)
            artifact_id = upload_artifact(
                artifact_store=backend,
                file_path=str(path),
                study_or_trial=target,
                storage=storage,
                mimetype="application/octet-stream",
            )
        entry: dict[str, Any] = {
            "artifact_id": artifact_id,
            "bytes": size,
            "saved": time.time(),
            "location": self.write_location,
        }
        storage.set_study_system_attr(study_id, f"{WEIGHTS_KEY}{local:05d}", entry)
        if previous is not None:
            self._remove_blob(previous)
        log.debug(
            "stored the weights of trial #%d of %s (%d bytes) in %s",
            trial_number,
            study_name,
            size,
            self.write_location,
        )
        self.enforce_limit(study_name, protect=[int(trial_number)])
        return artifact_id

    def has(self, study_name: str, trial_number: int) -> bool:
        """Whether the trial's weights are indexed and their file is still in the store."""
        entry = self._entry(study_name, trial_number)
        if entry is None:
            return False
        try:
            self.backend(self._read_location(entry)).open_reader(entry["artifact_id"]).close()
        except (ArtifactNotFound, OSError):
            return False
        return True

    def load_state(self, study_name: str, trial_number: int) -> dict[str, torch.Tensor]:
        """The stored state_dict on the CPU. Anything but a plain ``{name: tensor}`` file raises DataError."""
        entry = self._entry(study_name, trial_number)
        if entry is None:
            raise DataError(f"no stored weights for trial {trial_label(study_name, trial_number)}.")
        where = self._read_location(entry)
        try:
            with self.backend(where).open_reader(entry["artifact_id"]) as reader:
                payload = io.BytesIO(reader.read())
        except (ArtifactNotFound, OSError):
            raise DataError(
                f"the weights of trial {trial_label(study_name, trial_number)} are missing from {where}; "
                "they are retrained when needed."
            ) from None
        try:
            state: Any = torch.load(payload, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, OSError) as exc:
            raise DataError(
                f"artifact {entry['artifact_id']} in {where} is not a plain tensor file ({type(exc).__name__}); "
                "delete it so the trial is retrained."
            ) from None
        if not isinstance(state, dict) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
        ):
            raise DataError(
                f"artifact {entry['artifact_id']} in {where} does not hold a state_dict of tensors; "
                "delete it so the trial is retrained."
            )
        return state

    def total_bytes(self, study_name: str) -> int:
        return sum(int(e.get("bytes", 0)) for e in self.index(study_name).values())

    def _remove_blob(self, entry: dict[str, Any]) -> None:
        with contextlib.suppress(ArtifactNotFound, OSError):  # already gone: nothing to free
            self.backend(self._read_location(entry)).remove(entry["artifact_id"])

    def _remove(self, study_name: str, trial_number: int, entry: dict[str, Any]) -> None:
        self._remove_blob(entry)
        # System attributes cannot be deleted: the entry is marked removed (and the trial retrained if needed).
        name, local = local_number(study_name, trial_number)
        self.storage.set_study_system_attr(
            self._study_id(name), f"{WEIGHTS_KEY}{local:05d}", {**entry, "removed": True}
        )

    def prune(self, study_name: str, keep: set[int]) -> list[int]:
        """Remove the study's weights except those of the trials in ``keep``; return the trials removed."""
        gone = []
        for number, entry in sorted(self.index(study_name).items()):
            if number not in keep:
                self._remove(study_name, number, entry)
                gone.append(number)
        return gone

    def enforce_limit(self, study_name: str, protect: Iterable[int] = ()) -> list[int]:
        """Remove the study's oldest weights until they fit ``max_bytes``; ``protect`` is never removed."""
        protected = set(protect)
        entries = sorted(self.index(study_name).items(), key=lambda kv: (kv[1].get("saved", 0), kv[0]))
        total = sum(int(e.get("bytes", 0)) for _, e in entries)
        gone = []
        for number, entry in entries:
            if total <= self.max_bytes:
                break
            if number in protected:
                continue
            total -= int(entry.get("bytes", 0))
            self._remove(study_name, number, entry)
            gone.append(number)
        if gone:
            log.debug(
                "removed the weights of trials %s of %s (size limit %d bytes)",
                gone,
                study_name,
                self.max_bytes,
            )
        return gone

    # ---------------------------------------------------------------------------------------- files

    def save_file(self, study_name: str, path: str | Path) -> str:
        """Keep a file (a report figure) with the study under its name; a later file of the same name replaces
        the content in place, so the study's artifact list (and the dashboard's) never holds stale copies
        ("" when the storage is read-only: nothing is kept)."""
        if not self.writable:
            return ""
        path = Path(path)
        storage, study_id = self.storage, self._study_id(study_name)
        key = f"{FIGURE_KEY}{path.name}"
        entry = storage.get_study_system_attrs(study_id).get(key)
        backend = self.backend(self.write_location, create=True)
        if isinstance(entry, dict) and entry.get("location") == self.write_location:
            with path.open("rb") as f:
                backend.write(entry["artifact_id"], f)
            return str(entry["artifact_id"])
        study = optuna.load_study(study_name=study_name, storage=storage)
        artifact_id = upload_artifact(artifact_store=backend, file_path=str(path), study_or_trial=study)
        storage.set_study_system_attr(
            study_id, key, {"artifact_id": artifact_id, "location": self.write_location}
        )
        return artifact_id


def store_for(
    storage_url: str,
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    location: str | None = None,
    storage: BaseStorage | Callable[[], BaseStorage] | None = None,
    spec_location: str | None = None,
    writable: bool = True,
) -> ArtifactStore:
    """The artifact store that belongs to a study storage (see :class:`ArtifactStore` for the arguments)."""
    return ArtifactStore(
        storage_url, location, max_bytes, storage=storage, spec_location=spec_location, writable=writable
    )


def artifact_store(study: Study, location: str | None = None) -> ArtifactStore:
    """The artifact store a study's weights go to and come from; ``location`` overrides ``$EXPLORER_ARTIFACTS``
    and the spec's. The store reads and writes through the study's one writable storage in this process (opened
    when the store is first used: a report that keeps no figure opens none), unless the storage cannot be written
    (a read-only SQLite file or folder): then it reads through the study's read-only connection and keeps
    nothing."""
    can_write = study.writable or storage_writable(study.url)
    return store_for(
        study.url,
        location=location,
        storage=study.write_storage if can_write else storage_of(study.optuna_study),
        spec_location=study.spec.artifacts,
        writable=can_write,
    )
