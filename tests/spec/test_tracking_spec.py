"""explorer.spec._tracking_spec: where a run logs to MLflow, the environment over the spec."""

from __future__ import annotations

from explorer.spec import spec_from_dict, tracking_uri
from explorer.spec._tracking_spec import MLFLOW_ENV

DOC = {
    "name": "t",
    "n_trials": 2,
    "task": {"name": "digits"},
    "space": {"d_model": [32], "n_layers": [1], "heads": [1, 2]},
}


def test_the_environment_names_the_tracking_uri_over_the_spec_and_off_turns_it_off(monkeypatch, tmp_path):
    untracked = spec_from_dict(DOC).tracking
    tracked = spec_from_dict({**DOC, "tracking": {"mlflow": "sqlite:///spec.db"}}).tracking
    monkeypatch.delenv(MLFLOW_ENV, raising=False)
    assert tracking_uri(untracked) is None and tracking_uri(tracked) == "sqlite:///spec.db"
    monkeypatch.setenv(MLFLOW_ENV, f"sqlite:///{tmp_path}/env.db")
    assert tracking_uri(tracked) == tracking_uri(untracked) == f"sqlite:///{tmp_path}/env.db"
    monkeypatch.setenv(MLFLOW_ENV, "off")
    assert tracking_uri(tracked) is None
