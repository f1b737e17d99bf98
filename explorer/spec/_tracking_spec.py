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
from explorer.fields import key
from explorer.spec._toml import read_table

MLFLOW_ENV = "EXPLORER_MLFLOW"  # a tracking URI for every command, over the spec's [tracking] mlflow


@dataclass(frozen=True)
class TrackingSpec:
    """Where the study is logged besides its own storage."""

    # an MLflow tracking URI (sqlite:///mlflow.db, http://host:5000, a folder); None: off
    mlflow: str | None = key(
        None,
        "an MLflow tracking URI: `sqlite:///mlflow.db`, `http://HOST:5000`, `databricks`; every finished trial, "
        "every finalist run (under its layout) and the answer with its report are logged; `$EXPLORER_MLFLOW` "
        "takes precedence (`off`: not logged); no password in it (MLflow reads `MLFLOW_TRACKING_USERNAME` and "
        "`MLFLOW_TRACKING_PASSWORD`)",
        shown="none (not logged)",
    )
    # the MLflow experiment; None: the study's name
    experiment: str | None = key(None, "the MLflow experiment", shown="the study's name")


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
    tracking = read_table(TrackingSpec, data, "[tracking]")
    if tracking.mlflow is not None:
        _check_uri(tracking.mlflow, "[tracking] mlflow")
    return tracking


def tracking_uri(spec: TrackingSpec) -> str | None:
    """The MLflow URI a run logs to: ``$EXPLORER_MLFLOW``, else the spec's; None when neither names one or the
    variable is ``off``."""
    env = os.environ.get(MLFLOW_ENV, "").strip()
    uri = env or spec.mlflow
    if uri is None or uri == "off":
        return None
    return _check_uri(uri, f"${MLFLOW_ENV}") if env else uri
