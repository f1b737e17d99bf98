"""A study: one value (:class:`Study`) that owns opening it, read-only or writable, on SQLite or PostgreSQL.

What a run of trials does with it is :mod:`explorer.study._runs` (planned by :mod:`explorer.study._run_plan`; a
trial's life is :class:`explorer.study._trial.Objective`, running stages with workers
:mod:`explorer.study._workers`). What it is organised around:

* **Opened two ways.** :meth:`Study.open` reads an existing study (read-only unless ``write``: nothing created,
  no heartbeat, no torch, so `explorer study status` answers in a second); :meth:`Study.create_or_load`
  creates a spec's study, or loads it when it exists with the same meaning and user code. A writable study has
  heartbeats: a killed worker's trial is failed with the reason and its configuration queued again.
* **Where each stage's trials go** is decided here alone (:meth:`Study.stage_study`): the search in the study
  itself, the finalist runs and their re-timings in its companion ``NAME/finalists``.
* **Immutable.** A study's spec changes only through :meth:`Study.with_total`, which returns a new value; the
  total is written to the storage (:meth:`Study.store_total`) only once the command that asks for it has been
  fully checked, so bad input changes nothing.

And what the trials run in it are organised around:

* **Totals are exact.** A search trial counts the live search trials numbered before it (numbers are given by
  the storage in creation order), so the spec's ``n_trials`` holds under any number of racing workers, across
  resumes and machines. The finalist stage runs exactly the runs queued for it.
* **No completed work is lost, nothing is stuck.** Heartbeats mark a dead worker's trial FAIL (with the reason)
  and queue its configuration again. Before deciding that a stage is done, a worker fails stale trials and waits
  for trials still running elsewhere, so a study killed during its last trials resumes to its total.
* **Bad input changes nothing.** The spec, the task, the space, the device and every option are checked before
  the storage is touched (:func:`explorer.study._run_plan.plan_run`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.storages import BaseStorage

from explorer.errors import SpecError, StorageError, StudyNotFoundError
from explorer.meta import package_version
from explorer.spec import SOURCES_ATTR, StudySpec, spec_from_dict
from explorer.storage import (
    Retiming,
    Role,
    TrialRecord,
    check_study_name,
    companion_name,
    default_storage_url,
    find_companion,
    keeps_finalists_inside,
    label_companion,
    load_records,
    load_retimings,
    mask_url,
    open_storage,
    rdb_storage,
    resolve_storage_url,
    sqlite_path,
    storage_of,
    storage_writable,
    study_exists,
    study_parts,
)
from explorer.study._claims import Claims
from explorer.study._code_record import check_code
from explorer.study._rerun import check_same_meaning

ANSWER_ATTR = "answer"  # the study attribute the report keeps the answer in (Study.note_answer)
# the study attribute of the last MLflow sync (explorer.study._mlflow_tracking): where it logged, which finished
# trials MLflow holds and which not yet
TRACKING_ATTR = "tracking"
CREATED_MARK = "explorer_version"  # the user attr explorer writes first when it creates a study
SPEC_WAIT_S = 30.0  # how long to wait for a study another command is creating right now to get its spec
CREATION_GRACE_S = 5.0  # ... and for one created a moment ago to get explorer's mark (its first attribute)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Study:
    """An explorer study: the Optuna study that holds its search, the spec it was created from (with the spec
    file's timeout, artifact location and tracking when a file opened it) and the storage it lives in, opened
    read-only or writable (see the module docstring). Make one with :meth:`open` or :meth:`create_or_load`."""

    # the study itself (NAME): its search trials, its spec and its other attributes
    optuna_study: optuna.Study
    spec: StudySpec
    url: str  # the storage URL, resolved (it may hold a password: show masked_url)
    writable: bool

    # ----------------------------------------------------------------------------------------- opening

    @classmethod
    def open(
        cls, name: str, storage: str | None = None, *, write: bool = False, spec: StudySpec | None = None
    ) -> Study:
        """The existing study ``name`` in ``storage`` (resolved by :func:`existing_study_url`: a SQLite file that
        is not there is refused, not created) with its stored spec.

        Read-only (the default): nothing is created or changed, no heartbeat, and a study without explorer's spec
        is refused at once. ``write``: with heartbeats, for a command that runs trials; a study another command
        is creating right now is waited for. ``spec``: the study's spec as this command read it already (a
        process it started), so it is not read again."""
        return cls.open_at(name, existing_study_url(name, storage), write=write, spec=spec)

    @classmethod
    def open_at(cls, name: str, url: str, *, write: bool = False, spec: StudySpec | None = None) -> Study:
        """:meth:`open` at a storage URL this command has resolved already."""
        _check_sqlite_file(name, url)
        backend = _heartbeat_storage(url) if write else open_storage(url, readonly=True)
        if not study_exists(backend, name):
            raise StudyNotFoundError(
                f"no study {name!r} in {mask_url(url)}; `explorer study list --storage URL` shows the studies "
                "there."
            )
        study = optuna.load_study(study_name=name, storage=backend)
        if spec is None:
            if write:
                spec = _stored_spec(study, url, wait_s=SPEC_WAIT_S)
            elif "spec" in study.user_attrs:
                spec = spec_from_dict(study.user_attrs["spec"], stored=True)
            else:
                raise missing_spec(name, mask_url(url), study.user_attrs)
        return cls(study, spec, url, write)

    @classmethod
    def create_or_load(
        cls,
        spec: StudySpec,
        url: str,
        facts: dict[str, Any],
        stored: StudySpec | None = None,
    ) -> Study:
        """Create the study of ``spec`` at ``url`` (resolved), writable, with ``facts`` (user attributes about its
        task and code); or load it when it exists with the same meaning (compared here unless ``stored``, the
        spec read from it before, was compared already) and the same user code. Call it once every input of the
        command has been checked (:func:`explorer.study._run_plan.plan_run`).

        Two commands creating the same study at once both succeed: one creates it, the other waits for its spec.
        A study whose creation was interrupted (empty, no spec) is finished with this spec.
        """
        log.info("opening the storage %s", mask_url(url))
        backend = _heartbeat_storage(url)
        if not study_exists(backend, spec.name):
            try:
                study = optuna.create_study(
                    study_name=spec.name, storage=backend, directions=spec.directions()
                )
            except optuna.exceptions.DuplicatedStudyError:  # another command created it a moment ago
                pass
            else:
                _finish_creation(study, spec, backend, facts)
                return cls(study, spec, url, True)
        study = optuna.load_study(study_name=spec.name, storage=backend)
        # objectives other than the spec's: not this spec's study, whoever may be creating it; nothing to wait for
        ours = [d.name.lower() for d in study.directions] == spec.directions()
        try:
            found = _stored_spec(study, url, wait_s=SPEC_WAIT_S * ours, grace_s=CREATION_GRACE_S * ours)
        except SpecError:
            # A command killed between create_study and storing the spec leaves an empty study without one:
            # finish creating it with this spec (only when it is empty and its objectives are the spec's).
            if study.get_trials(deepcopy=False) or not ours:
                raise
            _finish_creation(study, spec, backend, facts)
            return cls(study, spec, url, True)
        if stored is None:  # created since it was read (or never read): its meaning is compared now
            check_same_meaning(found, spec, mask_url(url))
        check_code(study.user_attrs, found)
        # the spec file's timeout, artifact location and tracking apply to this run (not part of what it means)
        found = dataclasses.replace(
            found, timeout=spec.timeout, artifacts=spec.artifacts, tracking=spec.tracking
        )
        return cls(study, found, url, True)

    def writable_copy(self) -> Study:
        """This study to write (with heartbeats), its spec as read, through its one writable storage in this
        process (:attr:`_write_view`)."""
        return (
            self if self.writable else dataclasses.replace(self, optuna_study=self._write_view, writable=True)
        )

    @functools.cached_property
    def _write_view(self) -> optuna.Study:
        """This study through the one writable storage (with heartbeats) it has in this process, opened on first
        use, shared by the run's plan, its artifact store and :meth:`_writer`. A study opened read-only closes its
        read-only connections first and reads through the writable storage from then on: a reader opened
        ``immutable=1`` (a quiet SQLite file) assumes that nothing writes the file, this process included."""
        if self.writable:
            return self.optuna_study
        self.close()
        view = Study.open_at(self.name, self.url, write=True, spec=self.spec).optuna_study
        # frozen: its meaning is unchanged, only its connection
        object.__setattr__(self, "optuna_study", view)
        self.__dict__.pop("_finalists", None)  # the companion, loaded again through the writable storage
        return view

    def write_storage(self) -> BaseStorage:
        """The study's one writable storage in this process (:attr:`_write_view`), opened now if it is not yet."""
        return storage_of(self._write_view)

    def close(self) -> None:
        """Close this study's database connections (a later read opens them again)."""
        database = rdb_storage(storage_of(self.optuna_study))
        if database is not None:
            database.engine.dispose()

    # ----------------------------------------------------------------------------------------- what it is

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def masked_url(self) -> str:
        return mask_url(self.url)

    @property
    def is_default_storage(self) -> bool:
        """Whether the study lives where ``--storage`` defaults to (so commands need not name it)."""
        return self.url == default_storage_url(self.spec.name)

    @property
    def user_attrs(self) -> dict[str, Any]:
        """The study's user attributes (its spec, bench, answer, task input...), read now."""
        return self.optuna_study.user_attrs

    def records(self, *roles: Role) -> list[TrialRecord]:
        """The study's trial records (its own and its companion's), only those of ``roles`` when given."""
        return load_records(self.optuna_study, roles) if roles else load_records(self.optuna_study)

    def retimings(self) -> list[Retiming]:
        """The re-timings of its finalists, in the companion."""
        return load_retimings(self.optuna_study)

    def stage_study(self, stage: Role) -> optuna.Study:
        """The Optuna study the trials of ``stage`` run in, decided here alone: the search in the study itself;
        the finalist runs in its companion ``NAME/finalists`` (explorer.storage._companion; created and labelled
        when first needed), unless the study already holds finalist runs (made before they were kept apart)."""
        return self.optuna_study if stage == Role.SEARCH else self._finalists

    @functools.cached_property
    def _finalists(self) -> optuna.Study:
        if keeps_finalists_inside(self.optuna_study):
            return self.optuna_study
        return find_companion(self.optuna_study) or _new_companion(self.optuna_study)

    # ----------------------------------------------------------------------------------------- changing it

    def with_total(self, total: int) -> Study:
        """This study with ``total`` search trials (its spec's ``n_trials``); nothing is stored (see
        :meth:`store_total`)."""
        if total == self.spec.n_trials:
            return self
        return dataclasses.replace(self, spec=dataclasses.replace(self.spec, n_trials=total))

    def store_total(self) -> None:
        """Store this study's spec when its total differs from the stored one (so reports and resumes agree).
        Call it only once the command that asks for it has been fully checked."""
        if (self.user_attrs.get("spec") or {}).get("n_trials") != self.spec.n_trials:
            self.optuna_study.set_user_attr("spec", self.spec.stored())

    def note(self, key: str, value: Any) -> None:
        """Set the user attribute ``key`` of the study, if not set to ``value`` already."""
        if self.user_attrs.get(key) != value:
            self.optuna_study.set_user_attr(key, value)

    def note_answer(self, heads: tuple[int, ...] | None, opening: str) -> bool:
        """Keep the answer with the study and its companion as the user attribute ``answer`` (the layout and the
        report's opening), so optuna-dashboard and ``optuna.load_study(...).user_attrs`` show it; where
        optuna-dashboard is installed, also as the study's dashboard note. Goes through the study's writable storage
        (a report opens the study read-only); a storage that cannot be written keeps nothing (False)."""
        writer = self._writer()
        if writer is None:
            return False
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        value = {"heads": None if heads is None else list(heads), "opening": opening, "at": when}
        save_note = _dashboard_note()
        for part, _ in study_parts(writer):  # the study and its finalist runs' companion
            part.set_user_attr(ANSWER_ATTR, value)
            if save_note is not None and opening:
                save_note(part, f"## The answer\n\n{opening}\n\n*From `explorer report`, {when}.*")
        return True

    def note_tracking(self, result: dict[str, Any]) -> bool:
        """Store the result of a MLflow sync as the study's ``tracking`` attribute, through the study's writable
        storage as :meth:`note_answer`; False where the storage cannot be written."""
        writer = self._writer()
        if writer is None:
            return False
        writer.set_user_attr(TRACKING_ATTR, result)
        return True

    def _writer(self) -> optuna.Study | None:
        """The study through its one writable storage (:attr:`_write_view`); None: its storage cannot be
        written."""
        if not self.writable and not storage_writable(self.url):
            return None
        return self._write_view


# --------------------------------------------------------------------------------------------- helpers


def existing_study_url(name: str, storage_url: str | None = None) -> str:
    """The storage URL of the existing study ``name`` (see :func:`explorer.storage.resolve_storage_url`); a
    SQLite file that is not there raises StudyNotFoundError rather than being created empty."""
    check_study_name(name)
    url = resolve_storage_url(name, storage_url)
    _check_sqlite_file(name, url)
    return url


def _check_sqlite_file(name: str, url: str) -> None:
    """Refuse a SQLite database file that is not there (opening it would create it empty)."""
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise StudyNotFoundError(
            f"no study {name!r}: the database {path} does not exist; start it with `explorer study run SPEC`."
        )


def missing_spec(name: str, masked: str, attrs: dict[str, Any]) -> SpecError:
    """The error for a study without a stored spec: one whose creation by explorer was cut short, or one explorer
    did not create (a plain Optuna study), which explorer reads and changes no further."""
    if CREATED_MARK in attrs:
        return SpecError(
            f"study {name!r} in {masked} has no stored spec: its creation was interrupted; run `explorer study "
            "run SPEC` again to finish creating it, or use another name."
        )
    return SpecError(
        f"study {name!r} in {masked} was not created by explorer (it has no explorer spec); read it with Optuna "
        "itself (optuna.load_study), or give your study another name."
    )


def _env_seconds(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise StorageError(
            f"{name}={raw!r} is not a whole number of seconds; set e.g. {name}={default}."
        ) from None
    if value < 1:
        raise StorageError(f"{name}={raw!r} must be at least 1 second; set e.g. {name}={default}.")
    return value


def _heartbeat_storage(url: str) -> Any:
    """A storage with heartbeats; EXPLORER_HEARTBEAT_INTERVAL / EXPLORER_GRACE_PERIOD (seconds) tune them.

    A killed worker's trial is failed and retried once it has been silent for the grace period. The defaults
    (10 s, 30 s) suit real trials; tests shorten them.
    """
    interval = _env_seconds("EXPLORER_HEARTBEAT_INTERVAL", 10)
    grace = _env_seconds("EXPLORER_GRACE_PERIOD", 30)
    return open_storage(url, heartbeat_interval=interval, grace_period=grace)


def _new_companion(study: optuna.Study) -> optuna.Study:
    """Create the companion of ``study`` (same objectives and metric names), labelled for the dashboard; one made
    a moment ago by another command is loaded instead."""
    name = companion_name(study.study_name)
    try:
        companion = optuna.create_study(
            study_name=name, storage=storage_of(study), directions=study.directions
        )
    except optuna.exceptions.DuplicatedStudyError:
        return optuna.load_study(study_name=name, storage=storage_of(study))
    Claims(storage_of(study), name).clear()  # a new study may reuse a deleted one's id
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if study.metric_names:
            companion.set_metric_names(study.metric_names)
    label_companion(companion, study)
    log.info("created %s for the finalist runs of %s", name, study.study_name)
    return companion


def _stored_spec(study: optuna.Study, url: str, wait_s: float = 0.0, grace_s: float = 0.0) -> StudySpec:
    """The spec stored with ``study``. An empty study explorer has begun creating (its mark is there, the spec
    not yet) is waited for up to ``wait_s``; an empty one with no attribute at all (created a moment ago, its
    mark not written yet) for ``grace_s``; anything else without a spec is refused at once."""
    start = time.monotonic()
    while True:
        attrs = optuna.load_study(study_name=study.study_name, storage=storage_of(study)).user_attrs
        if "spec" in attrs:
            return spec_from_dict(attrs["spec"], stored=True)
        empty = not study.get_trials(deepcopy=False)
        waited = time.monotonic() - start
        if not empty or waited >= (wait_s if CREATED_MARK in attrs else grace_s if not attrs else 0.0):
            raise missing_spec(study.study_name, mask_url(url), attrs)
        time.sleep(0.2)


def _finish_creation(study: optuna.Study, spec: StudySpec, storage: Any, facts: dict[str, Any]) -> None:
    """Everything a new study gets after Optuna creates it (``facts``: user attributes about its task and code);
    the spec last, as its presence says it is ready."""
    study.set_user_attr(CREATED_MARK, package_version())  # first: another command then waits for the spec
    Claims(storage, spec.name).clear()  # a new study may reuse a deleted one's id
    with warnings.catch_warnings():  # "experimental since 3.2": a notice for developers, not for users
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(spec.objective_names())
    study.set_user_attr("task", spec.task.name)
    for key, value in facts.items():
        study.set_user_attr(key, value)
    if spec.origin:  # which keys the file set and which an override did (explorer spec show NAME)
        study.set_user_attr(SOURCES_ATTR, dict(spec.origin))
    study.set_user_attr("spec", spec.stored())  # last: its presence says the study is ready
    log.info("created study %s (%s)", spec.name, ", ".join(spec.objective_names()))


def _dashboard_note() -> Callable[[optuna.Study, str], None] | None:
    """optuna-dashboard's ``save_note`` (the dashboard extra): a study's note, the first thing its page shows;
    None where it is not installed."""
    try:
        from optuna_dashboard import save_note
    except ImportError:
        return None
    return save_note
