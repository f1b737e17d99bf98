"""Read-only views of stored studies: list them, and summarize one. No heartbeat, nothing created or written
(storages are opened with ``readonly=True``: a missing SQLite file is an error, an existing one is opened
read-only), no torch.

`explorer study list` and `explorer study status` go through here, so they start in about a second even on a
busy machine (they import Optuna and SQLAlchemy, not PyTorch).
"""

from __future__ import annotations

from typing import Any

from optuna.trial import TrialState

from explorer.storage import (
    Role,
    closed_counts,
    find_companion,
    is_bookkeeping,
    keeps_finalists_inside,
    open_storage,
    parent_name,
    trial_label,
)
from explorer.study._study import Study


def list_studies(storage_url: str) -> list[dict[str, Any]]:
    """Every study in a storage with its trial counts by state (bookkeeping trials left out), sorted by name.
    A study's finalist runs' companion (``NAME/finalists``, explorer.storage._companion) is no row of its own: its
    counts join its study's (``trials``, as when the finalist runs were the study's own trials) and its row names
    it (``finalists``: the companion's name and counts).

    Counted with COUNT queries per state (Optuna's ``get_n_trials``), not by loading every trial: only failed
    trials are read, to leave out the bookkeeping ones (closed without running), so a listing stays fast for
    studies of thousands of trials.
    """
    storage = open_storage(storage_url, readonly=True)
    rows: dict[str, dict[str, Any]] = {}
    for s in sorted(storage.get_all_studies(), key=lambda s: s.study_name):
        sid = storage.get_study_id_from_name(s.study_name)
        counts = {state: storage.get_n_trials(sid, state) for state in TrialState}
        failed = storage.get_all_trials(sid, deepcopy=False, states=(TrialState.FAIL,))
        counts[TrialState.FAIL] -= sum(is_bookkeeping(t) for t in failed)
        started = None
        if storage.get_n_trials(sid) > 0:
            first = storage.get_trial(storage.get_trial_id_from_study_id_trial_number(sid, 0))
            started = first.datetime_start
        rows[s.study_name] = {
            "name": s.study_name,
            "trials": {state.name: n for state, n in counts.items() if n},
            "total": (s.user_attrs.get("spec") or {}).get("n_trials"),
            "started": started.isoformat(timespec="seconds") if started else None,
            "finalists": None,
        }
    for name in list(rows):
        parent = rows.get(parent_name(name) or "")
        if parent is not None:  # a companion: part of its study's row
            companion = rows.pop(name)
            parent["finalists"] = {"study": name, "trials": companion["trials"]}
            for state, n in companion["trials"].items():
                parent["trials"][state] = parent["trials"].get(state, 0) + n
    return list(rows.values())


# what `study status` says of a study made before the finalist runs were kept apart
INSIDE_NOTE = (
    "made before explorer kept finalist runs apart: its finalist runs are trials of the study itself, so Optuna's "
    "best_trials, plot_pareto_front, the hypervolume history and optuna-dashboard's front include them (filter "
    "on the user attribute role == 'search'); explorer reads and runs it as before"
)


def study_status(name: str, storage_url: str | None = None, best: int = 5) -> dict[str, Any]:
    """A JSON-ready summary: trials by role and state, early stopping, and the most accurate finished trials."""
    opened = Study.open(name, storage_url)
    study, spec = opened.optuna_study, opened.spec
    records = opened.records()  # the study's and its companion's (explorer.storage._companion)
    companion = find_companion(study)
    trials: dict[str, dict[str, int]] = {"search": {}, "finalist": {}}
    for r in records:
        trials[r.role][r.state.name] = trials[r.role].get(r.state.name, 0) + 1
    stopped = [
        r for r in records if r.role == Role.SEARCH and r.state is TrialState.PRUNED and r.epochs_run > 0
    ]
    metric = spec.metric
    sign = 1.0 if metric.direction == "maximize" else -1.0
    top = sorted((r for r in records if r.finished), key=lambda r: -sign * float(r.quality or 0.0))[:best]
    return {
        "name": name,
        "storage": opened.masked_url,
        "total": spec.n_trials,
        "trials": trials,
        "closed": closed_counts(study),
        "stopped_early": len(stopped),
        "epochs_saved": sum((r.epochs_planned or 0) - r.epochs_run for r in stopped),
        "metric": {"name": metric.name, "direction": metric.direction, "label": metric.label},
        "tracking": study.user_attrs.get("tracking"),  # the last MLflow sync, when the study is tracked
        # where the finalist runs are: the companion study (None: none yet, or kept inside, said by the note)
        "finalists_study": None if companion is None else companion.study_name,
        "note": INSIDE_NOTE if keeps_finalists_inside(study) else "",
        "best": [
            {
                "number": r.number,
                "trial": trial_label(name, r.number),
                "role": r.role,
                "d_model": r.config.d_model if r.config else None,
                "heads": list(r.heads),
                "d_k": list(r.d_k),
                "kv_heads": list(r.config.kv_per_layer) if r.config else [],
                "quality": r.quality,
                "val_accuracy": r.val_accuracy,
                "val_bpb": r.val_bpb,
                "latency_ms": r.latency_ms,
                "decode_ms": r.decode_ms,
                "params": r.params,
            }
            for r in top
        ],
    }
