"""Running a stage of a study's trials with any number of workers on this machine.

A study runs in stages, each named as the role of the trials it runs: ``Role.SEARCH`` (new architectures up to
the spec's total) and ``Role.FINALIST`` (the queued finalist runs). :func:`run_stage` runs one with the run
plan's workers (:mod:`explorer.study._run_plan`): one works in the command's own process (:func:`_run_here`), more
are processes forked from multiprocessing's fork server (spawned where there is none; :func:`_run_pool`), each
given the plan's portable form and rebuilding its process-local parts once. Every worker loops in
:func:`_work`: it fails stale trials (a dead worker's trial must neither hold the total nor be waited for),
starts trials while the stage has some left, and otherwise waits for the trials still running elsewhere, so a
stage ends only when it is really done. The command that ends first therefore never claims to have stopped
short while another command's trials still run.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
import torch
from optuna.trial import TrialState

from explorer.errors import ExplorerError
from explorer.layout import FinalistRun
from explorer.storage import (
    Closure,
    Role,
    arch_key,
    closure_of,
    fail_dead_trials,
    finalist_attrs,
    finalist_run,
    install_pop_waiting,
    is_bookkeeping,
    mask_url,
    role_of,
    trials_of,
)
from explorer.study._claims import pop_waiting
from explorer.study._context import RunContext
from explorer.study._mlflow_tracking import sync_trials
from explorer.study._progress import Progress, StopReason, stage_progress
from explorer.study._run_plan import PortableStudyRunPlan, StudyRunPlan
from explorer.study._sampling import make_sampler
from explorer.study._study import Study
from explorer.study._trial import ClosedTrial, Objective, TrialFailed, live_trials

MAX_CONSECUTIVE_FAILURES = 5  # a worker gives up after this many failed trials in a row
MAX_CONSECUTIVE_DUPLICATES = 50  # ... or after this many configurations in a row that another worker held


@dataclass(frozen=True)
class WorkerError:
    """What a worker that failed puts on the result queue instead of its note: its error, as one masked line."""

    line: str  # "<exception type>: <message>"


log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------- running


def enqueue_runs(study: Study, runs: Sequence[FinalistRun]) -> int:
    """Queue the finalist runs not already queued, running or done (wherever they are: the study's companion,
    or the study itself for one made before finalists were kept apart) where the finalist stage runs them
    (``study.stage_study``); return how many were added.

    A run is identified by its configuration, seed and horizon, so planning again (after a resume, or
    `explorer confirm` with more seeds) queues only what is new.
    """
    spec = study.spec
    default = spec.finalists.run_epochs(spec.task.epochs)  # the horizon of a run queued without one
    have = set()
    for t, _ in trials_of(study.optuna_study):
        if role_of(t) is Role.FINALIST and t.state != TrialState.FAIL and not is_bookkeeping(t):
            queued = finalist_run(t)
            assert queued is not None, "a finalist trial is queued with its run"
            have.add((arch_key(queued.config, queued.lr), queued.seed, queued.epochs or default))
    added = 0
    where = study.stage_study(Role.FINALIST)
    for run in runs:
        if (arch_key(run.config, run.lr), run.seed, run.epochs or default) in have:
            continue
        where.enqueue_trial({}, user_attrs=finalist_attrs(run))
        added += 1
    return added


def _remaining(study: optuna.Study, stage: Role, total: int) -> tuple[int, int]:
    """(trials the stage still has to start, trials of the stage running now)."""
    if stage == Role.SEARCH:
        live = live_trials(study, Role.SEARCH)
        running = sum(t.state == TrialState.RUNNING for t in live)
        return total - len(live), running
    waiting = running = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING)):
        if role_of(t) is Role.FINALIST and not is_bookkeeping(t):
            waiting += t.state == TrialState.WAITING
            running += t.state == TrialState.RUNNING
    return waiting, running


def _settle(study: optuna.Study, stage: Role, total: int) -> tuple[int, int]:
    """:func:`_remaining`, after failing the dead workers' trials (one must not hold the total, nor be waited
    for)."""
    fail_dead_trials(study)
    return _remaining(study, stage, total)


def _finished(study: optuna.Study, stage: Role, total: int) -> bool:
    """Whether a worker would stop at once: no trial of the stage left to start and none running."""
    left, running = _settle(study, stage, total)
    return left <= 0 and running == 0


class _StopRules:
    """Optuna callback: stop this worker when its stage has nothing left to start, when the space is used up,
    or after repeated failures (``reason`` and ``note`` say why, for the last two)."""

    def __init__(self, stage: Role, total: int, space_size: int, exhaustible: bool = True):
        # exhaustible: every architecture is one trial (a searched learning rate makes each draw new)
        self.stage, self.total, self.space_size, self.exhaustible = stage, total, space_size, exhaustible
        self.failures = self.duplicates = 0
        self.reason: StopReason | None = None
        self.note = ""

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        closed = closure_of(trial)
        self.failures = (
            self.failures + 1 if trial.state == TrialState.FAIL and not is_bookkeeping(trial) else 0
        )
        self.duplicates = self.duplicates + 1 if closed is Closure.DUPLICATE else 0
        # a space of one architecture proposes it again and again: no sampler says "exhausted" there
        covered = (
            closed is Closure.DUPLICATE
            and self.exhaustible
            and self.stage == Role.SEARCH
            and len(live_trials(study, Role.SEARCH)) >= self.space_size
        )
        if closed is Closure.EXHAUSTED or covered:
            self.reason = StopReason.EXHAUSTED
            self.note = (
                f"the search space has no architecture left: all {self.space_size} have been evaluated"
            )
        elif self.failures >= MAX_CONSECUTIVE_FAILURES:
            self.reason, self.note = StopReason.FAILURES, f"{MAX_CONSECUTIVE_FAILURES} trials failed in a row"
        elif self.duplicates >= MAX_CONSECUTIVE_DUPLICATES:
            self.reason = StopReason.DUPLICATES
            self.note = f"{MAX_CONSECUTIVE_DUPLICATES} proposals in a row were taken by other workers"
        if (
            self.reason is not None
            or closed is Closure.SURPLUS
            or _remaining(study, self.stage, self.total)[0] <= 0
        ):
            study.stop()


def _work(
    opened: Study,
    stage: Role,
    total: int,
    context: RunContext,
    deadline: float | None,
    poll_interval: float,
    on_trial: Callable[[], None] | None = None,
) -> tuple[StopReason | None, str]:
    """One worker's loop over a stage, with this process's run context; returns (None, "") when the stage is
    done, else why it stopped (as a value, and in words)."""
    study = opened.stage_study(stage)  # the study itself, or its companion for the finalist runs
    spec = opened.spec
    # Seeded samplers built alike draw alike: every worker process gets a stream of its own.
    study.sampler = make_sampler(spec, os.getpid(), uuid.uuid4().int % 2**31, space=context.space)
    objective = Objective(study, spec, context, stage=stage, total=total, on_epoch=on_trial)
    install_pop_waiting(study, pop_waiting)  # one worker per queued trial, also on SQLite
    callbacks: list[Callable[..., None]] = []
    stop = _StopRules(stage, total, context.space.size(), not isinstance(spec.space.lr, tuple))
    callbacks.append(stop)
    if on_trial is not None:
        callbacks.append(lambda _study, _trial: on_trial())
    while True:
        left, running = _settle(study, stage, total)
        if deadline is not None and time.monotonic() >= deadline:
            return StopReason.TIMEOUT, "timeout"
        if left <= 0:
            if running == 0:
                return None, ""
            time.sleep(poll_interval)  # trials still running elsewhere: wait for them to finish or go stale
            continue
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        study.optimize(objective, timeout=timeout, catch=(TrialFailed, ClosedTrial), callbacks=callbacks)
        if stop.reason is not None:
            return stop.reason, stop.note


# --------------------------------------------------------------------------------------------- one stage


def run_stage(
    plan: StudyRunPlan, stage: Role, total: int, on_progress: Callable[[Progress], None] | None = None
) -> Progress:
    """Run one stage of the planned study (the search to ``total`` trials, or the queued finalist runs) with
    the plan's workers on this machine; return its progress. One worker works in this process, with the plan's
    context; more are spawned, each given the plan's portable form. Ctrl-C stops cleanly and re-raises. A study
    tracked in MLflow logs the stage's trials once it ends."""
    if stage not in tuple(Role):
        raise ValueError(f"unknown stage {stage!r}")
    study = plan.study
    report = _start(study, stage, total, plan.workers, plan.device, on_progress)
    if plan.workers == 1:
        progress = report(*_run_here(plan, stage, total, report))
    elif _finished(study.stage_study(stage), stage, total):
        progress = report()  # nothing to start or wait for: no process is spawned to find that out
    else:
        progress = _run_pool(plan, stage, total, report)
    sync_trials(study.optuna_study, study.spec, warned=plan.tracking_warned)  # MLflow, when tracked: no trial
    return progress


def _start(
    study: Study,
    stage: Role,
    total: int,
    workers: int,
    device: torch.device,
    on_progress: Callable[[Progress], None] | None,
) -> Callable[..., Progress]:
    """Log the stage's start and report its progress so far; return what reports it again (with a note)."""

    def report(reason: StopReason | None = None, note: str = "") -> Progress:
        p = dataclasses.replace(stage_progress(study.optuna_study, stage, total), note=note, reason=reason)
        if on_progress is not None:
            on_progress(p)
        return p

    report()
    log.info(
        "%s stage of %s: %d %s, %d worker(s) on %s",
        stage,
        study.name,
        total,
        "trials in total" if stage == Role.SEARCH else "runs",
        workers,
        device,
    )
    return report


def _run_here(
    plan: StudyRunPlan, stage: Role, total: int, report: Callable[[], Any]
) -> tuple[StopReason | None, str]:
    """The stage's one worker, in this process, with the plan's torch threads while it works."""
    previous = torch.get_num_threads()
    torch.set_num_threads(plan.threads)
    try:
        return _work(
            plan.study, stage, total, plan.context, plan.deadline, plan.poll_interval, on_trial=report
        )
    finally:
        torch.set_num_threads(previous)


# --------------------------------------------------------------------------------------------- the pool


def _run_pool(plan: StudyRunPlan, stage: Role, total: int, report: Callable[..., Progress]) -> Progress:
    """The stage's workers, each a process of its own (:func:`_process_context`, :func:`_worker_main`) given the
    plan's portable form and the command's environment, spread over the plan's device kind; progress is reported
    while they work."""
    ctx = _process_context()
    queue = ctx.SimpleQueue()
    level = logging.getLogger("explorer").getEffectiveLevel()
    env = dict(os.environ)
    procs = [
        ctx.Process(target=_worker_main, args=(plan.portable(d), stage, total, queue, level, env))
        for d in _worker_devices(plan.device, plan.workers)
    ]
    for p in procs:
        p.start()
    _wait_for(procs, plan.poll_interval, report)
    results: list[tuple[StopReason | None, str] | WorkerError] = []  # each worker's stop, or its error
    while not queue.empty():
        results.append(queue.get())
    return _pool_outcome(plan.study, stage, total, procs, results, report, plan.resume)


def _process_context() -> Any:
    """How workers are started: forked from multiprocessing's fork server where the platform has one (Linux,
    macOS), else spawned. The fork server is one clean process (no CUDA, none of the command's threads) that
    imports this module, and so torch, optuna and the data loaders, the scikit-learn the loaders import when
    they load, and torch._dynamo (which torch imports when a process builds its first optimizer), once per
    command; each worker is forked from it and starts without importing them again (a spawned worker spent
    about 3 s of CPU on imports, in every stage, and more on its first optimizer)."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # "__main__": multiprocessing's default, kept
    ctx.set_forkserver_preload(
        ["__main__", __name__, "sklearn.datasets", "sklearn.model_selection", "torch._dynamo"]
    )
    return ctx


def _wait_for(procs: list[Any], poll_interval: float, report: Callable[[], Any]) -> None:
    """Report progress until every worker has exited; on Ctrl-C give them time to stop, then re-raise."""
    try:
        while any(p.is_alive() for p in procs):
            time.sleep(poll_interval)
            report()
    except KeyboardInterrupt:
        for p in procs:
            p.join(timeout=30)
        raise
    finally:
        for p in procs:
            p.join()


def _pool_outcome(
    opened: Study,
    stage: Role,
    total: int,
    procs: list[Any],
    results: list[tuple[StopReason | None, str] | WorkerError],
    report: Callable[..., Progress],
    resume: str = "",
) -> Progress:
    """The stage's progress once its workers have exited (with the first worker's note); a worker that failed
    is one ExplorerError naming its error, as is one killed before the stage finished for no other reason (what
    the survivors finished counts: a stage with nothing left to start or wait for is finished). ``resume``: the
    command that continues the run."""
    study = opened.optuna_study
    errors = [r.line for r in results if isinstance(r, WorkerError)]
    # (StopReason | None, note) of each finisher
    stops = [r for r in results if not isinstance(r, WorkerError)]
    failed = [p.exitcode for p in procs if p.exitcode is not None and p.exitcode > 0]
    if failed:
        raise ExplorerError(
            f"{len(failed)} worker(s) exited with an error (codes {failed})"
            + (f": {errors[0]}" if errors else "")
            + f"; {stage_progress(study, stage, total).done} of {total} {stage} trials are finished and saved: "
            f"continue with `{resume or f'explorer study resume {opened.name}'}` (add -v for the traceback)."
        )
    progress = report(*next((n for n in stops if n[0] is not None), (None, "")))
    # A worker killed by a signal (the OOM killer, a stray kill) loses nothing: the others fail its trial once
    # it goes stale and retry it. Only a stage left unfinished for no other reason (timeout, space used up) is
    # worth an error.
    killed = [-p.exitcode for p in procs if p.exitcode is not None and p.exitcode < 0]
    if killed and progress.reason is None and not _finished(opened.stage_study(stage), stage, total):
        raise ExplorerError(
            f"{len(killed)} worker(s) were killed (signal {', '.join(map(str, killed))}) before the {stage} stage "
            f"finished; finished trials are saved: continue with `{resume or f'explorer study resume {opened.name}'}`."
        )
    return progress


def _worker_devices(device: torch.device, workers: int) -> list[torch.device]:
    """Spread workers over the visible GPUs, or put them all on the CPU."""
    if device.type == "cuda":
        n = torch.cuda.device_count()
        return [torch.device("cuda", i % n) for i in range(workers)]
    return [device] * workers


def _worker_main(
    portable: PortableStudyRunPlan,
    stage: Role,
    total: int,
    out: Any,
    log_level: int = logging.WARNING,
    env: dict[str, str] | None = None,
) -> None:
    """Entry point of a worker process (spawned or forked from the fork server): take the command's environment
    as it is now (the fork server keeps the one it started with), rebuild the plan's process-local parts once
    (nothing is checked again) and work on the stage; put its (StopReason | None, note) or its error. A parent
    run with ``-v`` passes its log level, so the worker's steps reach the same stderr."""
    import signal

    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    _log_to_stderr(log_level)
    torch.set_num_threads(portable.threads)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        plan = portable.rebuild()
        out.put(_work(plan.study, stage, total, plan.context, plan.deadline, plan.poll_interval))
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # exit quietly; the parent reports
    except Exception as exc:  # the parent names it in its one-line error; the traceback follows on stderr
        line = mask_url(" ".join(str(exc).split()))[:300]
        out.put(WorkerError(f"{type(exc).__name__}: {line}"))
        raise


def _log_to_stderr(level: int) -> None:
    """A worker's explorer log lines, on its stderr and marked with its pid, below WARNING (``-v``)."""
    if level < logging.WARNING:
        logger = logging.getLogger("explorer")
        logger.setLevel(level)
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s worker {os.getpid()} %(name)s: %(message)s", "%H:%M:%S")
        )
        logger.addHandler(handler)
