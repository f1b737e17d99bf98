"""The plan of a run: what one command's run of a study works with, checked once, before any work.

:func:`plan_run` turns (a spec or a stored study, the run options, the storage) into a frozen
:class:`StudyRunPlan`: the open study and its final spec (this run's total and timeout), the storage URL, the run
context (the device as a ``torch.device``, the task, the space, the model builder, the artifact store), the
deadline, the workers and the threads. The stages (:mod:`explorer.study._runs`), the workers and confirm take the
plan and check nothing again. A spawned worker gets the plan's portable form (:class:`PortableStudyRunPlan`:
plain, picklable data) and rebuilds only what belongs to its process (the task's tensors, the torch device, the
model builder, its storage connection), without validating again.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import optuna
import torch

from explorer.data import load_task
from explorer.measure import CachePolicy, resolve_device
from explorer.model import check_runtime
from explorer.spec import SearchSpace, StudySpec
from explorer.storage import env_artifact_location, resolve_storage_url
from explorer.study._artifacts import ArtifactStore
from explorer.study._capacity import check_study_fits
from explorer.study._context import RunContext, resolve_context
from explorer.study._rerun import check_rerun, finished_search
from explorer.study._run_options import RunOptions, check_total, check_total_reaches
from explorer.study._study import StudyHandle, artifact_store, check_study, open_checked, open_with_heartbeats
from explorer.study._user_code_check import check_code

__all__ = ["StudyRunPlan", "PortableStudyRunPlan", "plan_run"]


@dataclass(frozen=True)
class StudyRunPlan:
    """What a run of a study works with, every part checked (see the module docstring)."""

    handle: StudyHandle  # the open study; its spec is the stored one (with the file's timeout and artifacts)
    spec: StudySpec  # the final spec: the study's, with this run's total (n_trials) and timeout
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
        return self.handle.storage_url

    @property
    def name(self) -> str:
        return self.handle.name

    def portable(self, device: torch.device) -> PortableStudyRunPlan:
        """This plan as a spawned worker on ``device`` receives it."""
        left = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
        return PortableStudyRunPlan(
            self.handle.spec,
            self.context.space,
            self.storage_url,
            str(device),
            self.threads,
            left,
            self.poll_interval,
            self.artifacts,
        )


@dataclass(frozen=True)
class PortableStudyRunPlan:
    """A :class:`StudyRunPlan` as plain, picklable data for a spawned worker, which :meth:`rebuild` s the parts
    that belong to its process; nothing in it is checked again."""

    spec: StudySpec  # the study's spec, as the command's plan holds it
    space: SearchSpace  # the space the plan built and checked
    storage_url: str
    device: str  # this worker's device, resolved by the plan (cuda:N spreads workers over the GPUs)
    threads: int
    seconds_left: float | None  # until the plan's deadline, when the worker was started
    poll_interval: float
    artifacts: str | None

    def rebuild(self) -> StudyRunPlan:
        """The plan in this process: its own storage connection, task tensors, torch device, model builder and
        artifact store."""
        study = optuna.load_study(study_name=self.spec.name, storage=open_with_heartbeats(self.storage_url))
        handle = StudyHandle(study, self.spec, self.storage_url)  # its spec read and checked by the command
        task = load_task(self.spec.task.name, **self.spec.task.options)
        store = artifact_store(handle, self.artifacts)
        context = RunContext(torch.device(self.device), task, self.space, self.spec.model.builder())
        deadline = None if self.seconds_left is None else time.monotonic() + self.seconds_left
        return StudyRunPlan(
            handle,
            self.spec,
            "",
            context.opened(self.storage_url, store),
            1,
            self.threads,
            deadline,
            self.poll_interval,
            self.artifacts,
        )


def plan_run(
    source: StudySpec | StudyHandle,
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
       (:func:`~explorer.study._rerun.check_rerun`);
    5. the study's name, space, task and device, the user's model, the runtime on that device and the memory of
       the largest model in ``options.workers`` processes (:func:`~explorer.study._study.check_study`);
    6. the study opened or created (a study created since step 4 is compared then, and its user code checked:
       :func:`~explorer.study._study.open_checked`), and its total checked against it when step 4 found none;
    for a stored study:
    3. the user code it was created with, unchanged (first: loading the task runs it);
    4. its space, task and device (reused when the handle was prepared in this process), the runtime on that
       device and the memory of its largest model in ``options.workers`` processes;
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
        handle = open_checked(spec, url, context, facts, compared)
        if compared is None:
            check_total_reaches(total, finished_search(handle.study), handle.name, total_from)
        if n_trials is None and total != handle.spec.n_trials:  # the file's total wins over the stored one
            notice = (
                f"the total is {spec_path or 'the spec'}'s n_trials = {total} (it was {handle.spec.n_trials})"
            )
    else:
        handle = source
        total = handle.spec.n_trials if n_trials is None else n_trials
        check_total(total, total_from)
        check_code(handle.study.user_attrs, handle.spec)  # first: loading the task runs that code
        context = _stored_context(handle, options.device)
        check_runtime(handle.spec.latency.runtime, context.device)
        check_study_fits(handle.spec, context.task.spec, options.workers, context.device)
        check_total_reaches(total, finished_search(handle.study), handle.name, total_from)
    context = context.opened(handle.storage_url, artifact_store(handle, options.artifacts))
    timeout = handle.spec.timeout if options.timeout is None else options.timeout
    return StudyRunPlan(
        handle,
        dataclasses.replace(handle.spec, n_trials=total, timeout=timeout),
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


def _stored_context(handle: StudyHandle, device: str | None) -> RunContext:
    """The run context of a stored study: the one its handle was prepared with in this process, on ``device``
    when it names one, else one resolved now."""
    if handle.context is None:
        return resolve_context(handle.spec, device)
    if device is None:
        return handle.context
    return handle.context.on(resolve_device(device))
