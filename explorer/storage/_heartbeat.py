"""The heartbeat callback of explorer's storages: a trial whose worker died is recorded as such and queued again.

:func:`explorer.storage._storage.open_storage` installs :class:`RetryStaleTrial` on every storage opened with
heartbeats; Optuna calls it for each trial it fails for want of a heartbeat.
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState, create_trial

from explorer.storage._record import note_failure, retry_attrs

STALE_REASON = "its worker stopped sending heartbeats (killed, or its machine was lost)"


class RetryStaleTrial:
    """Heartbeat callback for a trial whose worker died: record why, and queue its configuration again.

    Optuna's own retry callback copies every user attribute (half a run's measurements) onto the retry; this one
    gives the retry only the trial's role and seed, and ``retry_of``. The dead trial is already FAIL when this
    runs (its own attributes can no longer change), so the reason is stored on the study
    (:func:`explorer.storage._record.note_failure`).
    """

    def __init__(self, max_retry: int = 3):
        self.max_retry = max_retry

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        history = [*trial.system_attrs.get("retry_history", []), trial.number]
        retry = len(history) <= self.max_retry
        note = f"; retried as a new trial (attempt {len(history)})" if retry else "; not retried again"
        note_failure(study, trial, STALE_REASON + note)
        if not retry:
            return
        study.add_trial(
            create_trial(
                state=TrialState.WAITING,
                params=trial.params,
                distributions=trial.distributions,
                user_attrs=retry_attrs(trial),
                system_attrs={"retry_history": history, "failed_trial": history[0]},
            )
        )
