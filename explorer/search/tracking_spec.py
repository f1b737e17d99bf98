"""The spec's ``[tracking]`` table: where a study's trials, finalist runs and answer are logged (MLflow).

Where a study is tracked is not part of what it means (like its storage): a spec run again may name another
tracking server, and ``$EXPLORER_MLFLOW`` takes precedence over the spec (``off`` switches it off). A tracking URI is
stored with the study, so it may not hold a password: MLflow reads credentials from
``MLFLOW_TRACKING_USERNAME`` and ``MLFLOW_TRACKING_PASSWORD``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from explorer.errors import SpecError
from explorer.search.spec_keys import SPEC_KEYS
from explorer.search.toml_table import Table

__all__ = ["MLFLOW_ENV", "TrackingSpec", "read_tracking", "tracking_uri"]

MLFLOW_ENV = "EXPLORER_MLFLOW"  # a tracking URI for every command, over the spec's [tracking] mlflow


@dataclass(frozen=True)
class TrackingSpec:
    """Where the study is logged besides its own storage."""

    mlflow: str | None = (
        None  # an MLflow tracking URI (sqlite:///mlflow.db, http://host:5000, a folder); None: off
    )
    experiment: str | None = None  # the MLflow experiment; None: the study's name


def _check_uri(uri: str, where: str) -> str:
    from urllib.parse import urlsplit

    try:
        password = urlsplit(uri).password
    except ValueError:
        raise SpecError(f"the MLflow URI in {where} is malformed; give e.g. sqlite:///mlflow.db.") from None
    if password:
        raise SpecError(
            f"the MLflow URI in {where} holds a password; leave it out and set MLFLOW_TRACKING_USERNAME and "
            "MLFLOW_TRACKING_PASSWORD instead."
        )
    return uri


def read_tracking(data: Any) -> TrackingSpec:
    t = Table(data, "[tracking]", SPEC_KEYS["tracking"])
    uri = t.text("mlflow", None)
    return TrackingSpec(
        mlflow=None if uri is None else _check_uri(uri, "[tracking] mlflow"),
        experiment=t.text("experiment", None),
    )


def tracking_uri(spec: TrackingSpec) -> str | None:
    """The MLflow URI a run logs to: ``$EXPLORER_MLFLOW``, else the spec's; None when neither names one or the
    variable is ``off``."""
    env = os.environ.get(MLFLOW_ENV, "").strip()
    uri = env or spec.mlflow
    if uri is None or uri == "off":
        return None
    return _check_uri(uri, f"${MLFLOW_ENV}") if env else uri
