"""A trial whose worker died: found, failed, recorded as such and queued again.

:func:`explorer.storage._storage.open_storage` installs :class:`RetryStaleTrial` on every storage opened with
heartbeats; Optuna calls it for each trial it fails for want of a heartbeat. :func:`fail_dead_trials` is the check
the workers run before deciding that a stage is done: Optuna's, and the same for a trial that never stored a
heartbeat at all (a worker killed between taking the trial and its first heartbeat), which Optuna's skips.
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable

import optuna
import sqlalchemy as sa
from optuna.storages import fail_stale_trials
from optuna.trial import FrozenTrial, TrialState, create_trial

from explorer.storage._optuna_private import heartbeats_table, rdb_storage, storage_of, trial_id_of
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


# (database, trial id) -> when this process first saw the trial RUNNING with no heartbeat stored (monotonic
# seconds: the trial's own start time is another process's clock, possibly another machine's and time zone's)
_UNBEATING: dict[tuple[str, int], float] = {}


def fail_dead_trials(study: optuna.Study, clock: Callable[[], float] = time.monotonic) -> None:
    """Fail the study's RUNNING trials whose worker died, and queue them again (:class:`RetryStaleTrial`).

    Optuna's :func:`~optuna.storages.fail_stale_trials` fails a trial whose last heartbeat is older than the
    grace period, but never one with no heartbeat at all: a worker killed after it took a trial and before its
    heartbeat thread wrote once left that trial RUNNING for good, and every later command waited for it (a
    resume hung). Such a trial is failed here once this process has seen it without a heartbeat for the grace
    period (by ``clock``), the same allowance a trial with a heartbeat gets. Storages without heartbeats are left
    as they are.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        fail_stale_trials(study)
    storage = storage_of(study)
    database = rdb_storage(storage)
    if database is None or database.heartbeat_interval is None:
        return
    grace = database.grace_period or 2 * database.heartbeat_interval
    running = [trial_id_of(t) for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))]
    where = database.engine.url.render_as_string(hide_password=True)
    for key in [k for k in _UNBEATING if k[0] == where and k[1] not in running]:
        del _UNBEATING[key]  # finished, or failed by another process
    if not running:
        return
    beats = heartbeats_table()
    with database.engine.connect() as conn:
        beating = set(
            conn.execute(sa.select(beats.c.trial_id).where(beats.c.trial_id.in_(running))).scalars()
        )
    now = clock()
    dead = []
    for trial_id in running:
        if trial_id in beating:
            _UNBEATING.pop((where, trial_id), None)
        elif now - _UNBEATING.setdefault((where, trial_id), now) > grace:
            dead.append(trial_id)
    failed = []
    for trial_id in dead:
        del _UNBEATING[(where, trial_id)]
        try:
            if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                failed.append(trial_id)
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # finished, or failed by another process, since it was read
    callback = database.get_heartbeat_stale_trial_callback()
    if callback is not None:
        for trial_id in failed:
            callback(study, copy.deepcopy(storage.get_trial(trial_id)))
