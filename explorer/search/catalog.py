"""Read-only views of stored studies: list them, and summarize one. No heartbeat, nothing written, no torch.

`explorer study list` and `explorer study status` go through here, so they start in about a second even on a
busy machine (they import Optuna and SQLAlchemy, not PyTorch).
"""

from __future__ import annotations

from typing import Any

import optuna

from explorer.errors import SpecError, StudyNotFoundError
from explorer.search.record import closed_counts, is_bookkeeping, load_records
from explorer.search.spec import StudySpec, spec_from_dict
from explorer.search.storage import (
    check_study_name,
    mask_url,
    open_storage,
    resolve_storage_url,
    sqlite_path,
    study_exists,
)

__all__ = ["list_studies", "read_study", "study_status"]


def read_study(name: str, storage_url: str | None = None) -> tuple[optuna.Study, StudySpec, str]:
    """The study ``name``, its stored spec and its storage URL, opened read-only."""
    check_study_name(name)
    url = resolve_storage_url(name, storage_url)
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise StudyNotFoundError(
            f"no study {name!r}: the database {path} does not exist; start it with `explorer study run SPEC`."
        )
    storage = open_storage(url, heartbeat=False)
    if not study_exists(storage, name):
        raise StudyNotFoundError(
            f"no study {name!r} in {mask_url(url)}; `explorer study list --storage URL` shows the studies there."
        )
    study = optuna.load_study(study_name=name, storage=storage)
    if "spec" not in study.user_attrs:
        raise SpecError(
            f"study {name!r} has no stored spec (it was not created by explorer); use Optuna directly."
        )
    return study, spec_from_dict(study.user_attrs["spec"]), url


def list_studies(storage_url: str) -> list[dict[str, Any]]:
    """Every study in a storage with its trial counts by state (bookkeeping trials left out)."""
    storage = open_storage(storage_url, heartbeat=False)
    out = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        counts: dict[str, int] = {}
        for t in study.get_trials(deepcopy=False):
            if not is_bookkeeping(t):
                counts[t.state.name] = counts.get(t.state.name, 0) + 1
        out.append(
            {
                "name": s.study_name,
                "trials": counts,
                "total": study.user_attrs.get("spec", {}).get("n_trials"),
                "started": s.datetime_start.isoformat(timespec="seconds") if s.datetime_start else None,
            }
        )
    return out


def study_status(name: str, storage_url: str | None = None, best: int = 5) -> dict[str, Any]:
    """A JSON-ready summary: trials by role and state, early stopping, and the most accurate finished trials."""
    study, spec, url = read_study(name, storage_url)
    records = load_records(study)
    trials: dict[str, dict[str, int]] = {"search": {}, "finalist": {}}
    for r in records:
        trials[r.role][r.state] = trials[r.role].get(r.state, 0) + 1
    stopped = [r for r in records if r.role == "search" and r.state == "PRUNED" and r.epochs_run > 0]
    top = sorted((r for r in records if r.finished), key=lambda r: -(r.val_accuracy or 0.0))[:best]
    return {
        "name": name,
        "storage": mask_url(url),
        "total": spec.n_trials,
        "trials": trials,
        "closed": closed_counts(study),
        "stopped_early": len(stopped),
        "epochs_saved": sum((r.epochs_planned or 0) - r.epochs_run for r in stopped),
        "best": [
            {
                "number": r.number,
                "role": r.role,
                "d_model": r.config.d_model if r.config else None,
                "heads": list(r.heads),
                "d_k": list(r.d_k),
                "val_accuracy": r.val_accuracy,
                "latency_ms": r.latency_ms,
                "params": r.params,
            }
            for r in top
        ],
    }
