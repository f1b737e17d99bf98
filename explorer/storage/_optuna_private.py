"""The one module of explorer that touches Optuna's private API.

Optuna keeps a few things explorer needs behind underscore names: a loaded study's storage and ids, a trial's
id, the cache layer around an RDBStorage, the trials table, and how ``study.optimize`` pops a queued trial.
Every use of them is a function here that names the private name it relies on and why, so an Optuna upgrade
that moves one breaks this module (and tests/storage/test_optuna_private.py) only. No other module of explorer
may use an underscore name of Optuna; that test scans for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna
import sqlalchemy as sa
from optuna.distributions import BaseDistribution
from optuna.storages import BaseStorage, RDBStorage
from optuna.trial import FrozenTrial


def storage_of(study: optuna.Study) -> BaseStorage:
    """The storage a loaded study lives in. Uses ``Study._storage``: Optuna has no public accessor, and a
    companion study, the claims table and a fresh read of a trial's attributes must use the very same storage
    object."""
    return study._storage


def study_id_of(study: optuna.Study) -> int:
    """The study's id in its storage. Uses ``Study._study_id``: storage methods take ids, and Optuna exposes
    the id of a loaded study only there (looking it up by name costs a query each time)."""
    return study._study_id


def trial_id_of(trial: optuna.Trial | FrozenTrial) -> int:
    """A trial's id in its storage (not its number). Uses ``Trial._trial_id`` / ``FrozenTrial._trial_id``:
    storage methods take trial ids, and Optuna has no public accessor for them."""
    return trial._trial_id


def rdb_storage(storage: BaseStorage) -> RDBStorage | None:
    """The RDBStorage behind ``storage`` (None when it is not a database). Uses ``_CachedStorage._backend``:
    Optuna wraps every RDBStorage of a study in a private cache layer, and the claims table needs the database
    engine."""
    backend = getattr(storage, "_backend", storage)
    return backend if isinstance(backend, RDBStorage) else None


def trials_table() -> sa.Table:
    """Optuna's trials table. Uses ``optuna.storages._rdb.models``: taking a queued trial exclusively is one
    conditional UPDATE of its state (:func:`explorer.study._claims.pop_waiting`), which Optuna's storage API
    lacks."""
    from optuna.storages._rdb import models

    return models.TrialModel.__table__


def heartbeats_table() -> sa.Table:
    """Optuna's table of trial heartbeats. Uses ``optuna.storages._rdb.models``: a RUNNING trial whose worker died
    before its first heartbeat landed has no row there, and Optuna's stale-trial check skips such a trial for
    good (:func:`explorer.storage._heartbeat.fail_dead_trials` needs to find it)."""
    from optuna.storages._rdb import models

    return models.TrialHeartbeatModel.__table__


def enqueued_params(trial: FrozenTrial) -> dict[str, Any] | None:
    """The parameters a queued trial was enqueued with (None: not enqueued). Uses ``fixed_params``, the system
    attribute that is Optuna's undocumented record of ``enqueue_trial``'s parameters: a sampler must see them
    before the trial suggests them, to know which architecture a queued trial will take."""
    return trial.system_attrs.get("fixed_params")


def optuna_pop_waiting(study: optuna.Study) -> int | None:
    """Optuna's own pop of a WAITING trial (its id, or None). Uses ``Study._pop_waiting_trial_id``: the
    fallback of :func:`explorer.study._claims.pop_waiting` for a storage that is not a database (one process,
    no race)."""
    return optuna.Study._pop_waiting_trial_id(study)


def install_pop_waiting(study: optuna.Study, pop: Callable[[optuna.Study], int | None]) -> None:
    """Make ``study.optimize`` take queued trials with ``pop(study)``. Uses ``Study._pop_waiting_trial_id``,
    replaced on this one study object: Optuna's pop relies on ``SELECT ... FOR UPDATE``, which SQLite ignores,
    so two workers could run the same queued trial, and Optuna offers no hook for it."""
    study._pop_waiting_trial_id = lambda: pop(study)  # type: ignore[method-assign]


def stored_user_attrs(study: optuna.Study, trial: optuna.Trial | FrozenTrial) -> dict[str, Any]:
    """A trial's user attributes as stored now. Uses :func:`storage_of` and :func:`trial_id_of`: a running
    ``optuna.Trial`` caches its attributes, and a sampler writes to the storage behind that cache."""
    return storage_of(study).get_trial_user_attrs(trial_id_of(trial))


def set_stored_user_attr(
    study: optuna.Study, trial: optuna.Trial | FrozenTrial, key: str, value: Any
) -> None:
    """Set a user attribute of a trial that the caller holds only as a ``FrozenTrial`` (a sampler). Uses
    :func:`storage_of` and :func:`trial_id_of`: a FrozenTrial has no public way to write to its storage."""
    storage_of(study).set_trial_user_attr(trial_id_of(trial), key, value)


def report_epoch(trial: optuna.Trial, epoch: int, value: float) -> None:
    """Store ``value`` as the trial's intermediate value at step ``epoch`` (its learning curve in
    optuna-dashboard and ``trial.intermediate_values``). Uses :func:`trial_id_of`: ``Trial.report`` raises
    NotImplementedError in a multi-objective study, so the value goes through the storage's public
    ``set_trial_intermediate_value``, which needs the trial's id."""
    storage_of(trial.study).set_trial_intermediate_value(trial_id_of(trial), epoch, value)


def set_stored_param(trial: optuna.Trial, name: str, value: Any, distribution: BaseDistribution) -> None:
    """Record ``name = value`` as a parameter of a trial that does not suggest it (a finalist run: its layout is
    chosen, not sampled). Uses :func:`storage_of` and :func:`trial_id_of`: ``Trial`` can only set a parameter
    by asking the sampler, and the storage's public ``set_trial_param`` needs the trial's id."""
    storage_of(trial.study).set_trial_param(
        trial_id_of(trial), name, distribution.to_internal_repr(value), distribution
    )
