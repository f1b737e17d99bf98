"""Studies: create and open them, on SQLite or PostgreSQL, and record their attention benchmark.

What one trial does is :class:`explorer.study._objective.Objective`; running stages of trials with workers is
:mod:`explorer.study._workers`. What the two are organised around:

* **Totals are exact.** A search trial counts the live search trials numbered before it (numbers are given by
  the storage in creation order), so the spec's ``n_trials`` holds under any number of racing workers, across
  resumes and machines. The finalist stage runs exactly the runs queued for it.
* **No completed work is lost, nothing is stuck.** Heartbeats mark a dead worker's trial FAIL (with the reason)
  and queue its configuration again. Before deciding that a stage is done, a worker fails stale trials and waits
  for trials still running elsewhere, so a study killed during its last trials resumes to its total.
* **Bad input changes nothing.** The spec, the task, the space, the device and every option are checked before
  the storage is touched; a stored total changes only after the command that changes it has been accepted.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna
import torch

from explorer.errors import SpecError, StorageError, StudyNotFoundError
from explorer.layout import valid_heads
from explorer.measure import bench_attention
from explorer.meta import package_version
from explorer.model import check_runtime
from explorer.spec import SOURCES_ATTR, StudySpec, spec_from_dict
from explorer.storage import (
    Role,
    companion_name,
    default_storage_url,
    find_companion,
    keeps_finalists_inside,
    label_companion,
    mask_url,
    open_storage,
    resolve_storage_url,
    storage_of,
    storage_writable,
    study_exists,
    study_parts,
)
from explorer.study._artifacts import LOCATION_ATTR, ArtifactStore, store_for
from explorer.study._capacity import check_study_fits
from explorer.study._catalog import CREATED_MARK, existing_study_url, missing_spec
from explorer.study._claims import Claims
from explorer.study._context import RunContext, resolve_context
from explorer.study._mlflow_tracking import TRACKING_ATTR
from explorer.study._rerun import check_same_meaning
from explorer.study._user_code_check import (
    CODE_ATTR,
    INPUT_ATTR,
    check_code,
    check_user_model,
    code_record,
    input_record,
)

__all__ = [
    "ANSWER_ATTR",
    "CREATION_GRACE_S",
    "SPEC_WAIT_S",
    "StudyHandle",
    "artifact_store",
    "attention_bench",
    "check_study",
    "note_answer",
    "note_artifact_location",
    "open_checked",
    "open_stored",
    "open_study",
    "open_with_heartbeats",
    "prepare_study",
    "reading_artifact_store",
    "record_bench",
    "run_context",
    "set_total",
]

ANSWER_ATTR = "answer"  # the study attribute the report keeps the answer in (note_answer)
SPEC_WAIT_S = 30.0  # how long to wait for a study another command is creating right now to get its spec
CREATION_GRACE_S = 5.0  # ... and for one created a moment ago to get explorer's mark (its first attribute)

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- opening


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


def open_with_heartbeats(url: str) -> Any:
    """Open a storage with heartbeats; EXPLORER_HEARTBEAT_INTERVAL / EXPLORER_GRACE_PERIOD (seconds) tune them.

    A killed worker's trial is failed and retried once it has been silent for the grace period. The defaults
    (10 s, 30 s) suit real trials; tests shorten them.
    """
    interval = _env_seconds("EXPLORER_HEARTBEAT_INTERVAL", 10)
    grace = _env_seconds("EXPLORER_GRACE_PERIOD", 30)
    return open_storage(url, heartbeat_interval=interval, grace_period=grace)


@dataclass
class StudyHandle:
    """A loaded study with the spec it was created from and the storage it lives in; a handle made by
    :func:`prepare_study` also carries the run context it resolved (its device, task and space), which
    :func:`run_context` reuses."""

    study: optuna.Study
    spec: StudySpec
    storage_url: str
    context: RunContext | None = field(default=None, compare=False, repr=False)
    # the tracking URIs this command has already warned about (explorer.study._mlflow_tracking): one warning each
    tracking_warned: set[str] = field(default_factory=set, compare=False, repr=False)
    finalists: optuna.Study | None = field(default=None, init=False, compare=False, repr=False)

    def stage_study(self, stage: Role) -> optuna.Study:
        """The Optuna study the trials of ``stage`` run in, decided here alone: the search in the study itself;
        the finalist runs in its companion ``NAME/finalists`` (explorer.storage._companion; created and labelled
        when first needed), unless the study already holds finalist runs (made before they were kept apart)."""
        if stage == Role.SEARCH:
            return self.study
        if self.finalists is None:
            inside = keeps_finalists_inside(self.study)
            self.finalists = (
                self.study if inside else find_companion(self.study) or _new_companion(self.study)
            )
        return self.finalists

    @property
    def masked_url(self) -> str:
        return mask_url(self.storage_url)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def is_default_storage(self) -> bool:
        """Whether the study lives where ``--storage`` defaults to (so commands need not name it)."""
        return self.storage_url == default_storage_url(self.spec.name)


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


def check_study(
    spec: StudySpec, device: str | None = None, workers: int = 1
) -> tuple[RunContext, dict[str, Any]]:
    """What this machine must do for ``spec`` (named and read by the spec's reader), checked in this order before
    the storage is touched: its space, task and ``device`` (:func:`explorer.study._context.resolve_context`), the
    user's model, the latency runtime on that device, the memory of the largest model in ``workers`` processes.
    Returns the run context and the facts a new study records (its code and its input)."""
    context = resolve_context(spec, device)
    check_user_model(spec, context.task)
    facts = {CODE_ATTR: code_record(spec), INPUT_ATTR: input_record(context.task)}
    check_runtime(spec.latency.runtime, context.device)
    check_study_fits(spec, context.task.spec, workers, context.device)
    return context, facts


def open_checked(
    spec: StudySpec,
    url: str,
    context: RunContext,
    facts: dict[str, Any],
    stored: StudySpec | None = None,
) -> StudyHandle:
    """Create the study of a spec :func:`check_study` accepted at ``url`` (resolved), or load it when it exists
    with the same meaning (compared here unless ``stored``, the spec read from it before, was compared already)
    and the same user code. The handle carries ``context``.

    Two commands creating the same study at once both succeed: one creates it, the other waits for its spec.
    A study whose creation was interrupted (empty, no spec) is finished with this spec.
    """
    log.info("opening the storage %s", mask_url(url))
    storage = open_with_heartbeats(url)
    created = False
    if not study_exists(storage, spec.name):
        try:
            study = optuna.create_study(study_name=spec.name, storage=storage, directions=spec.directions())
            created = True
        except optuna.exceptions.DuplicatedStudyError:  # another command created it a moment ago
            pass
    if created:
        _finish_creation(study, spec, storage, facts)
        return StudyHandle(study, spec, url, context)
    study = optuna.load_study(study_name=spec.name, storage=storage)
    # objectives other than the spec's: not this spec's study, whoever may be creating it; nothing to wait for
    ours = [d.name.lower() for d in study.directions] == spec.directions()
    try:
        found = _stored_spec(study, url, wait_s=SPEC_WAIT_S * ours, grace_s=CREATION_GRACE_S * ours)
    except SpecError:
        # A command killed between create_study and storing the spec leaves an empty study without one: finish
        # creating it with this spec (only when it is empty and its objectives are the spec's).
        if study.get_trials(deepcopy=False) or not ours:
            raise
        _finish_creation(study, spec, storage, facts)
        return StudyHandle(study, spec, url, context)
    if stored is None:  # created since it was read (or never read): its meaning is compared now
        check_same_meaning(found, spec, mask_url(url))
    check_code(study.user_attrs, found)
    # the spec file's timeout, artifact location and tracking apply to this run (they are not part of what it means)
    spec = dataclasses.replace(found, timeout=spec.timeout, artifacts=spec.artifacts, tracking=spec.tracking)
    return StudyHandle(study, spec, url, context)


def prepare_study(
    spec: StudySpec, storage_url: str | None = None, device: str | None = None, workers: int = 1
) -> StudyHandle:
    """Create the spec's study, or load it when it exists with the same spec; check everything first
    (:func:`check_study`, then :func:`open_checked`). The handle carries the run context resolved on the way
    (``device``, default the spec's latency device)."""
    context, facts = check_study(spec, device, workers)
    return open_checked(spec, resolve_storage_url(spec.name, storage_url, spec.storage), context, facts)


def open_study(name: str, storage_url: str | None = None, spec: StudySpec | None = None) -> StudyHandle:
    """Load an existing study and the spec stored with it (no spec file needed); ``spec``: that spec as the
    command read and checked it already (a process it started), so it is not read or checked again."""
    return open_stored(name, existing_study_url(name, storage_url), spec)


def open_stored(name: str, url: str, spec: StudySpec | None = None) -> StudyHandle:
    """:func:`open_study` at a storage URL already resolved (by the read-only look a command took first)."""
    storage = open_with_heartbeats(url)
    if not study_exists(storage, name):
        raise StudyNotFoundError(
            f"no study {name!r} in {mask_url(url)}; `explorer study list --storage URL` shows the studies there."
        )
    study = optuna.load_study(study_name=name, storage=storage)
    return StudyHandle(study, _stored_spec(study, url, wait_s=SPEC_WAIT_S) if spec is None else spec, url)


def set_total(handle: StudyHandle, total: int) -> None:
    """Make ``total`` the study's search total (stored, so reports and resumes agree). Call it only once the
    command that asks for it has been fully checked."""
    if total != handle.spec.n_trials:
        handle.spec = dataclasses.replace(handle.spec, n_trials=total)
        handle.study.set_user_attr("spec", handle.spec.stored())


# --------------------------------------------------------------------------------------------- the bench


def attention_bench(spec: StudySpec, seq_len: int, device: torch.device) -> list[dict[str, Any]]:
    """The tutorial's serial/merged/fused table at the study's widest shape, on the study's device (no memory)."""
    d_model = max(spec.space.d_model)
    valid = valid_heads(d_model, min(spec.space.min_dk))
    heads = max(h for h in valid if h <= 8)
    df = bench_attention(
        d_model=d_model,
        heads=heads,
        seq_len=seq_len,
        batch=spec.latency.batch_size,
        device=device,
        min_run_time=0.2,
        threads=spec.latency.threads,
        matmul_size=512,
        memory=False,
    )
    return df.to_dict(orient="records")


def record_bench(handle: StudyHandle, context: RunContext) -> bool:
    """Run the attention benchmark once per study, on the run's device at its task's sequence length, and store it
    with the study; False when there was nothing to do (recorded already, or switched off by the spec's
    ``bench = false``)."""
    if not handle.spec.bench or "bench" in handle.study.user_attrs:
        log.debug("attention bench: %s", "switched off" if not handle.spec.bench else "recorded already")
        return False
    device = context.device
    log.info("running the attention bench once for %s on %s (skip it with --no-bench)", handle.name, device)
    t0 = time.perf_counter()
    handle.study.set_user_attr("bench", attention_bench(handle.spec, context.task.spec.seq_len, device))
    handle.study.set_user_attr("bench_time_s", time.perf_counter() - t0)
    log.info("attention bench done in %.1f s", time.perf_counter() - t0)
    return True


def run_context(handle: StudyHandle, artifacts: str | None = None) -> RunContext:
    """This process's run context for ``handle`` (:mod:`explorer.study._context`): the one
    :func:`prepare_study` resolved, else one resolved now (on the spec's device), with the study's storage URL
    and artifact store (``artifacts`` overrides where weights go, as in :func:`artifact_store`)."""
    context = handle.context if handle.context is not None else resolve_context(handle.spec)
    return context.opened(handle.storage_url, artifact_store(handle, artifacts))


def artifact_store(handle: StudyHandle, location: str | None = None) -> ArtifactStore:
    """The artifact store a study's weights go to and come from (see :mod:`explorer.study._artifacts`), sharing
    the study's storage connection; ``location`` overrides ``$EXPLORER_ARTIFACTS`` and the spec's."""
    return store_for(
        handle.storage_url,
        location=location,
        storage=storage_of(handle.study),
        spec_location=handle.spec.artifacts,
    )


def reading_artifact_store(handle: StudyHandle, location: str | None = None) -> ArtifactStore:
    """The artifact store of a study opened read-only (explorer.study._catalog.read_study): it reads through the
    study's connection and writes (retrained weights, report figures) through a writable one of its own,
    unless the storage cannot be written (a read-only SQLite file or folder): then nothing is kept."""
    can_write = storage_writable(handle.storage_url)
    return store_for(
        handle.storage_url,
        location=location,
        storage=None if can_write else storage_of(handle.study),
        spec_location=handle.spec.artifacts,
        writable=can_write,
    )


def _dashboard_note() -> Callable[[optuna.Study, str], None] | None:
    """optuna-dashboard's ``save_note`` (the dashboard extra): a study's note, the first thing its page shows;
    None where it is not installed."""
    try:
        from optuna_dashboard import save_note
    except ImportError:
        return None
    return save_note


def note_answer(handle: StudyHandle, heads: tuple[int, ...] | None, opening: str) -> bool:
    """Keep the answer with the study and its companion as the user attribute ``answer`` (the layout and the
    report's opening), so optuna-dashboard and ``optuna.load_study(...).user_attrs`` show it; where
    optuna-dashboard is installed, also as the study's dashboard note. A report opens the
    study read-only, so this goes through a writable connection of its own; a storage that cannot be written
    keeps nothing (False)."""
    if not storage_writable(handle.storage_url):
        return False
    study = optuna.load_study(
        study_name=handle.name, storage=open_storage(handle.storage_url, heartbeat=False)
    )
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    value = {"heads": None if heads is None else list(heads), "opening": opening, "at": when}
    save_note = _dashboard_note()
    for part, _ in study_parts(study):  # the study and its finalist runs' companion
        part.set_user_attr(ANSWER_ATTR, value)
        if save_note is not None and opening:
            save_note(part, f"## The answer\n\n{opening}\n\n*From `explorer report`, {when}.*")
    return True


def note_tracking(handle: StudyHandle, result: dict[str, Any]) -> bool:
    """Store the result of a MLflow sync as the study's ``tracking`` attribute when the study was opened to read
    (a report): through a writable connection of its own, as :func:`note_answer`; False where the storage
    cannot be written."""
    if not storage_writable(handle.storage_url):
        return False
    study = optuna.load_study(
        study_name=handle.name, storage=open_storage(handle.storage_url, heartbeat=False)
    )
    study.set_user_attr(TRACKING_ATTR, result)
    return True


def note_artifact_location(handle: StudyHandle, store: ArtifactStore) -> None:
    """Record where this run writes weights on the study (read by people and by benchmarks/dashboard_check.py;
    every weight's own index entry names its location too)."""
    if handle.study.user_attrs.get(LOCATION_ATTR) != store.write_location:
        handle.study.set_user_attr(LOCATION_ATTR, store.write_location)
