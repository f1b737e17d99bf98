"""Artifact locations (where trained weights and report figures go): the forms Optuna's stores take, checked
before anything is written, whether given as ``--artifacts``, the spec's ``artifacts`` or
``$EXPLORER_ARTIFACTS``; and the name of the storage URL's variable, here so the CLI reads it without
importing Optuna."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from explorer.errors import MissingExtraError, StorageError

ARTIFACTS_ENV = "EXPLORER_ARTIFACTS"
STORAGE_ENV = "EXPLORER_STORAGE"  # a storage URL for every command (keeps a password out of argv)
ARTIFACT_FORMS = "a directory, file://PATH, s3://BUCKET or gs://BUCKET"
_ARTIFACT_BACKENDS = {  # scheme -> (module to import, pip package, explorer extra)
    "s3://": ("boto3", "boto3", "s3"),
    "gs://": ("google.cloud.storage", "google-cloud-storage", "gcs"),
}


def check_artifact_location(location: str, *, importable: bool = True) -> str:
    """``location`` (stripped) if it names an artifact store Optuna has, else a one-line error; creates nothing.

    With ``importable`` the package a cloud store needs must be installed (a missing one names its extra);
    without, only the form is checked (a stored spec read on a machine that will not write there).
    """
    if not isinstance(location, str) or not location.strip():
        raise StorageError(f"the artifact location is empty; give {ARTIFACT_FORMS}.")
    location = location.strip()
    scheme = location.split("://", 1)[0] + "://" if "://" in location else ""
    if scheme and scheme != "file://" and scheme not in _ARTIFACT_BACKENDS:
        raise StorageError(f"artifact location {location!r} has an unknown scheme; give {ARTIFACT_FORMS}.")
    if scheme in _ARTIFACT_BACKENDS:
        bucket = location.removeprefix(scheme).strip("/")
        if not bucket or "/" in bucket:
            raise StorageError(
                f"artifact location {location!r} must be {scheme}BUCKET (Optuna's store writes at the bucket's "
                "top level); give the study a bucket of its own."
            )
        module, package, extra = _ARTIFACT_BACKENDS[scheme]
        if importable and importlib.util.find_spec(module.split(".")[0]) is None:
            raise MissingExtraError(f"the artifact location {location}", extra, package)
        return location
    path = Path(location.removeprefix("file://")).expanduser()
    if path.exists() and not path.is_dir():
        raise StorageError(f"artifact location {str(path)!r} is a file; give a directory.")
    return location


def env_artifact_location() -> str | None:
    """``$EXPLORER_ARTIFACTS`` checked like ``--artifacts`` (an error names the variable), or None when unset."""
    raw = os.environ.get(ARTIFACTS_ENV, "").strip()
    if not raw:
        return None
    try:
        return check_artifact_location(raw)
    except MissingExtraError:
        raise  # it names the location and the extra already
    except StorageError as exc:
        raise type(exc)(f"{ARTIFACTS_ENV}: {exc}") from None
