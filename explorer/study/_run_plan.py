"""The plan of a run: what one command's run of a study works with, checked once, before any work.

:func:`plan_run` turns (a spec or a stored study, the run options, the storage) into a frozen
:class:`StudyRunPlan`: the open study and its final spec (this run's total and timeout), the storage URL, the run
context (the device as a ``torch.device``, the task, the space, the model builder, the artifact store), the
deadline, the workers and the threads. The stages (:mod:`explorer.study._runs`), the workers and confirm take the
plan and check nothing again. A spawned worker gets the plan's portable form (:class:`PortableStudyRunPlan`:
picklable data, its device a ``torch.device``) and rebuilds only what belongs to its process (the task's
tensors, the model builder, its storage connection), without validating again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from explorer.data import load_task
from explorer.errors import EmptyStorageError, SpecError, StorageBusyError, StudyNotFoundError
from explorer.measure import CachePolicy
from explorer.model import check_runtime
from explorer.spec import SearchSpace, StudySpec
from explorer.storage import env_artifact_location, mask_url, resolve_storage_url, sqlite_path
from explorer.study._artifacts import ArtifactStore, artifact_store
from explorer.study._capacity import check_study_fits
from explorer.study._code_record import CODE_ATTR, check_code, code_record
from explorer.study._context import RunContext, resolve_context
from explorer.study._model_builder import model_builder
from explorer.study._rerun import check_same_meaning, finished_search
from explorer.study._run_options import RunOptions, check_total, check_total_reaches
from explorer.study._study import Study
from explorer.study._user_code_check import INPUT_ATTR, check_user_model, input_record


@dataclass(frozen=True)
class StudyRunPlan:
    """What a run of a study works with, every part checked (see the module docstring)."""

    study: Study  # the open study, writable; its spec has this run's total (stored once the run is accepted)
    timeout: float | None  # this run's timeout in seconds (--timeout, else the spec's); None: none
    total_from: str  # where the total came from, as errors name it (--n-trials, n_trials in FILE)
    context: RunContext  # device, task, space, model builder, storage URL and artifact store
    workers: int  # worker processes on this machine
    threads: int  # torch CPU threads per worker
    deadline: float | None  # time.monotonic() after which no new trial starts; None: no timeout
    poll_interval: float = 1.0  # seconds between looks at the trials running elsewhere
    artifacts: str | None = None  # --artifacts, as given (a worker's artifact store is built from it)
    notice: str = ""  # that the spec file's total replaced the stored one, or ""
    spec_path: str | None = None  # the spec file the study came from, recorded once the run is accepted
    resume: str = ""  # the command that continues this run, as a stopped run names it ("": study resume)
    # the MLflow tracking URIs this command has warned about (explorer.study._mlflow_tracking): one warning each
    tracking_warned: set[str] = field(default_factory=set, compare=False, repr=False)

    @property
    def spec(self) -> StudySpec:
        """The study's spec with this run's total."""
        return self.study.spec

    @property
    def total(self) -> int:
        return self.spec.n_trials

    @property
    def device(self) -> torch.device:
        return self.context.device

    @property
    def store(self) -> ArtifactStore:
        """Where this run's trained weights go."""
        assert self.context.store is not None, "a plan's context is opened with its store"
        return self.context.store

    @property
    def storage_url(self) -> str:
        return self.study.url

    @property
    def name(self) -> str:
        return self.study.name

    def portable(self, device: torch.device) -> PortableStudyRunPlan:
        """This plan as a spawned worker on ``device`` receives it."""
        left = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        return PortableStudyRunPlan(
            self.spec,
            self.context.space,
            self.storage_url,
            device,
            self.threads,
            left,
            self.poll_interval,
            self.artifacts,
        )


@dataclass(frozen=True)
class PortableStudyRunPlan:
    """A :class:`StudyRunPlan` as picklable data for a spawned worker, which :meth:`rebuild` s the parts that
    belong to its process; nothing in it is checked again."""

    spec: StudySpec  # the study's spec, as the command's plan holds it
    space: SearchSpace  # the space the plan built and checked
    storage_url: str
    device: torch.device  # this worker's device, resolved by the plan (cuda:N spreads workers over the GPUs)
    threads: int
    seconds_left: float | None  # until the plan's deadline, when the worker was started
    poll_interval: float
    artifacts: str | None

    def rebuild(self) -> StudyRunPlan:
        """The plan in this process: its own storage connection, task tensors, model builder and artifact store,
        on the worker's device."""
        # its spec read and checked by the command
        study = Study.open_at(self.spec.name, self.storage_url, write=True, spec=self.spec)
        task = load_task(self.spec.task.name, **self.spec.task.options)
        store = artifact_store(study, self.artifacts)
        context = RunContext(self.device, task, self.space, model_builder(self.spec))
        deadline = None if self.seconds_left is None else time.monotonic() + self.seconds_left
        return StudyRunPlan(
            study,
            self.seconds_left,
            "",
            context.opened(self.storage_url, store),
            1,
            self.threads,
            deadline,
            self.poll_interval,
            self.artifacts,
        )


def plan_run(
    source: StudySpec | Study,
    options: RunOptions,
    storage: str | None = None,
    *,
    n_trials: int | None = None,
    total_from: str = "--n-trials",
    spec_path: str | None = None,
) -> StudyRunPlan:
    """The plan of a run of ``source`` (a spec, whose study is created or resumed in ``storage``; or a stored
    study, opened) with ``options`` to ``n_trials`` search trials (default: the spec's; ``total_from`` names it
    in errors). Every check runs once, here, in this order, and a refused run writes nothing:

    1. the environment (``$EXPLORER_ARTIFACTS``, ``$EXPLORER_CACHE_MAX_AGE``);
    2. the total (:func:`~explorer.study._run_options.check_total`);
    for a spec:
    3. the storage URL, resolved (``storage``, else ``$EXPLORER_STORAGE``, the spec's, the default);
    4. an existing study, read-only: the same meaning, a total not below its finished search trials
       (:func:`check_rerun`);
    5. the study's name, space, task and device, the user's model, the runtime on that device and the memory of
       the largest model in ``options.workers`` processes (:func:`check_study`);
    6. the study opened or created (a study created since step 4 is compared then, and its user code checked:
       :meth:`~explorer.study._study.Study.create_or_load`), and its total checked against it when step 4 found
       none;
    for a stored study:
    3. the user code it was created with, unchanged (first: loading the task runs that code);
    4. its space, task and device, the runtime on that device and the memory of its largest model in
       ``options.workers`` processes;
    5. the total against its finished search trials;
    then the artifact store (``options.artifacts``, else ``$EXPLORER_ARTIFACTS``, the spec's, the default) and
    the deadline (``options.timeout``, else the spec's timeout).
    """
    env_artifact_location()  # a malformed EXPLORER_ARTIFACTS fails here, before anything is written
    CachePolicy.from_env()  # a malformed EXPLORER_CACHE_MAX_AGE fails here, not in a worker
    notice = ""
    if isinstance(source, StudySpec):
        spec = source
        if n_trials is None:
            total, total_from = spec.n_trials, f"n_trials in {spec_path or 'the spec'}"
        else:
            total = n_trials
        check_total(total, total_from)
        url = resolve_storage_url(spec.name, storage, spec.storage)
        compared = check_rerun(spec, url, total, total_from)
        context, facts = check_study(spec, options.device, options.workers)
        study = Study.create_or_load(spec, url, facts, compared)
        if compared is None:
            check_total_reaches(total, finished_search(study.optuna_study), study.name, total_from)
        if n_trials is None and total != study.spec.n_trials:  # the file's total wins over the stored one
            notice = (
                f"the total is {spec_path or 'the spec'}'s n_trials = {total} (it was {study.spec.n_trials})"
            )
    else:
        study = source.writable_copy()
        total = study.spec.n_trials if n_trials is None else n_trials
        check_total(total, total_from)
        check_code(study.user_attrs, study.spec)  # first: loading the task runs that code
        context = resolve_context(study.spec, options.device)
        check_runtime(study.spec.latency.runtime, context.device)
        check_study_fits(study.spec, context.task.spec, options.workers, context.device)
        check_total_reaches(total, finished_search(study.optuna_study), study.name, total_from)
    context = context.opened(study.url, artifact_store(study, options.artifacts))
    timeout = study.spec.timeout if options.timeout is None else options.timeout
    return StudyRunPlan(
        study.with_total(total),
        timeout,
        total_from,
        context,
        options.workers,
        options.threads,
        None if timeout is None else time.monotonic() + timeout,
        options.poll_interval,
        options.artifacts,
        notice,
        spec_path,
    )


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


def check_rerun(spec: StudySpec, url: str, total: int, total_from: str) -> StudySpec | None:
    """For a spec whose study already exists at ``url`` (resolved) with a stored spec: refuse a changed meaning,
    or a ``total`` below the search trials finished; return the stored spec so compared. A new study, or one
    without a spec (its creation is finished, or refused, by :meth:`Study.create_or_load`), passes: None.
    Read-only: nothing is created or changed, and the read-only connection is closed again."""
    path = sqlite_path(url)
    if path is not None and (not path.is_file() or path.stat().st_size == 0):
        return None  # a new database: Study.create_or_load creates it
    try:
        stored = Study.open_at(spec.name, url)
    # busy: another command is creating it right now; empty: a new database (PostgreSQL), which
    # Study.create_or_load fills
    except (StudyNotFoundError, SpecError, StorageBusyError, EmptyStorageError):
        return None
    try:
        check_same_meaning(stored.spec, spec, mask_url(url))
        check_total_reaches(total, finished_search(stored.optuna_study), spec.name, total_from)
    finally:
        stored.close()  # before the study is opened to write (Study.create_or_load)
    return stored.spec
