"""Atomic claims: no two trials of a study ever train the same configuration with the same seed.

Samplers avoid configurations they can see are taken, but two workers (or two commands on two machines) can
pick the same one at the same moment. A claim is a row in a small table of our own beside Optuna's, in the
study's database, with the (study, configuration) pair as its primary key: the database itself lets exactly one
INSERT win, on SQLite and PostgreSQL alike. A claim held by a trial that ended FAIL (killed, interrupted,
diverged) can be taken over by its retry; any other holder makes the newcomer a duplicate.

Taking a queued trial is made exclusive the same way (:func:`pop_waiting`). Optuna pops a WAITING trial by
reading it and then marking it RUNNING, relying on ``SELECT ... FOR UPDATE``, which SQLite ignores: two workers
could take the same queued finalist run, train it twice, and the second to finish crashed on "Cannot tell a
COMPLETE trial". A worker now changes the row only where it is still WAITING, in one statement.

Planning a round of the finalist stage and queuing it is made exclusive on PostgreSQL (:func:`round_lock`), so
commands on several machines that finish a round together queue the next once rather than each queuing it.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator

import optuna
import sqlalchemy as sa
import sqlalchemy.exc
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from explorer.storage import (
    optuna_pop_waiting,
    rdb_storage,
    storage_of,
    study_id_of,
    trial_id_of,
    trials_table,
)

_METADATA = sa.MetaData()
_TABLE = sa.Table(
    "explorer_claims",
    _METADATA,
    sa.Column("study", sa.String(512), primary_key=True),
    sa.Column("config", sa.String(512), primary_key=True),
    sa.Column("trial", sa.Integer, nullable=False),
)


class Claims:
    """The claims of one study in ``storage`` (an Optuna RDBStorage: its engine holds the table).

    Claims are keyed by the study's id. A database may give a new study the id of a deleted one (SQLite does), so
    whoever creates a study calls :meth:`clear` first.
    """

    def __init__(self, storage: BaseStorage, study_name: str):
        database = rdb_storage(storage)
        if database is None:
            raise TypeError("claims need a database storage (an Optuna RDBStorage)")
        self.engine = database.engine
        self.study = str(database.get_study_id_from_name(study_name))
        for attempt in range(3):  # two processes creating the table at once: the loser sees it exist
            try:
                _METADATA.create_all(self.engine, checkfirst=True)
                break
            except sqlalchemy.exc.DBAPIError:
                if attempt == 2:
                    raise

    def clear(self) -> None:
        """Forget every claim of this study id (for a study just created)."""
        with self.engine.begin() as conn:
            conn.execute(_TABLE.delete().where(_TABLE.c.study == self.study))

    def owner(self, config: str) -> int | None:
        """The trial number holding ``config``, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(
                sa.select(_TABLE.c.trial).where(_TABLE.c.study == self.study, _TABLE.c.config == config)
            ).first()
        return None if row is None else int(row[0])

    def claim(self, config: str, trial: int, can_take_over: set[int] | frozenset[int] = frozenset()) -> int:
        """Claim ``config`` for ``trial``; return the trial that holds it afterwards (``trial`` on success).

        A claim held by a trial in ``can_take_over`` (trials that ended FAIL) passes to ``trial`` atomically:
        of two retries racing for it, one wins.
        """
        for _ in range(3):
            try:
                with self.engine.begin() as conn:
                    conn.execute(_TABLE.insert().values(study=self.study, config=config, trial=trial))
                return trial
            except sqlalchemy.exc.IntegrityError:
                pass
            holder = self.owner(config)
            if holder is None:  # released between our INSERT and SELECT: try again
                continue
            if holder == trial or holder not in can_take_over:
                return holder
            with self.engine.begin() as conn:
                done = conn.execute(
                    _TABLE.update()
                    .where(
                        _TABLE.c.study == self.study,
                        _TABLE.c.config == config,
                        _TABLE.c.trial == holder,
                    )
                    .values(trial=trial)
                ).rowcount
            if done == 1:
                return trial
        return self.owner(config) or trial

    def taken(self) -> dict[str, int]:
        """Every claimed configuration of the study and its trial."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(_TABLE.c.config, _TABLE.c.trial).where(_TABLE.c.study == self.study)
            ).all()
        return {str(c): int(t) for c, t in rows}


def pop_waiting(study: optuna.Study) -> int | None:
    """Take a WAITING trial of ``study`` for this process alone (its trial id), or None when none is left.

    One conditional UPDATE (``... SET state = RUNNING WHERE state = WAITING``) per candidate: the database lets
    exactly one process change a row from WAITING, on SQLite and PostgreSQL alike. Install it with
    :func:`explorer.storage._optuna_private.install_pop_waiting` so that ``study.optimize`` takes queued trials
    this way.
    """
    storage = storage_of(study)
    database = rdb_storage(storage)
    if database is None:  # not a database (an in-process storage): one process, no race; Optuna's own pop
        return optuna_pop_waiting(study)
    engine = database.engine
    trials = trials_table()
    waiting = storage.get_all_trials(study_id_of(study), deepcopy=False, states=(TrialState.WAITING,))
    for t in waiting:
        trial_id = trial_id_of(t)
        now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)  # Optuna 5 stores naive UTC
        with engine.begin() as conn:
            taken = conn.execute(
                trials.update()
                .where(trials.c.trial_id == trial_id, trials.c.state == TrialState.WAITING.name)
                .values(state=TrialState.RUNNING.name, datetime_start=now)
            ).rowcount
        if taken == 1:
            return trial_id
    return None


_ROUND_LOCK = 0x45585052  # the first key of the round lock (PostgreSQL advisory locks take two int4 keys)


@contextlib.contextmanager
def round_lock(study: optuna.Study) -> Iterator[None]:
    """Hold the study's round lock while planning and queuing a round of the finalist stage: on PostgreSQL a
    session advisory lock on (a constant, the study's id), which one command at a time holds and the server lets
    go when its connection ends (a command killed while holding it blocks nobody). Elsewhere (SQLite: one machine)
    nothing is held; a run queued twice there is still trained once (its claim)."""
    database = rdb_storage(storage_of(study))
    if database is None or database.engine.dialect.name != "postgresql":
        yield
        return
    keys = {"a": _ROUND_LOCK, "b": study_id_of(study)}
    with database.engine.connect() as conn:
        conn.execute(sa.text("SELECT pg_advisory_lock(:a, :b)"), keys)
        conn.commit()
        try:
            yield
        finally:
            conn.execute(sa.text("SELECT pg_advisory_unlock(:a, :b)"), keys)
            conn.commit()
