"""Studies: create, open and run them with any number of workers, on SQLite or PostgreSQL.

What one trial does is :class:`explorer.search.objective.Objective`; this module opens studies and runs stages of
trials with workers. What it is organised around:

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
import multiprocessing
import os
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
import torch
from optuna.storages import fail_stale_trials
from optuna.trial import TrialState

from explorer import __version__
from explorer.engine.bench import bench_attention
from explorer.engine.config import ModelConfig, valid_heads
from explorer.engine.device import resolve_device
from explorer.engine.latency_cache import CachePolicy
from explorer.engine.tasks import load_task
from explorer.errors import ConfigError, ExplorerError, SpecError, StorageError, StudyNotFoundError
from explorer.search.artifacts import store_for
from explorer.search.claims import Claims
from explorer.search.objective import ClosedTrial, Objective, TrialFailed, live_trials
from explorer.search.record import FinalistRun, arch_key, is_bookkeeping
from explorer.search.sampling import make_sampler
from explorer.search.space import SearchSpace
from explorer.search.spec import StudySpec, spec_from_dict
from explorer.search.storage import (
    check_study_name,
    default_storage_url,
    mask_url,
    open_storage,
    sqlite_path,
    study_exists,
)

__all__ = [
    "EXHAUSTED",
    "MAX_CONSECUTIVE_FAILURES",
    "Progress",
    "RunOptions",
    "StudyHandle",
    "enqueue_runs",
    "open_study",
    "prepare_study",
    "record_bench",
    "run_stage",
    "stage_progress",
]

MAX_CONSECUTIVE_FAILURES = 5  # a worker gives up after this many failed trials in a row
MAX_CONSECUTIVE_DUPLICATES = 50  # ... or after this many configurations in a row that another worker held
EXHAUSTED = "the search space has no architecture left"  # how a stage's note starts when the space is used up
SPEC_WAIT_S = 30.0  # how long to wait for a study another command is creating right now to get its spec
STAGES = ("search", "finalists")


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


def _open(url: str) -> Any:
    """Open a storage with heartbeats; EXPLORER_HEARTBEAT_INTERVAL / EXPLORER_GRACE_PERIOD (seconds) tune them.

    A killed worker's trial is failed and retried once it has been silent for the grace period. The defaults
    (10 s, 30 s) suit real trials; tests shorten them.
    """
    interval = _env_seconds("EXPLORER_HEARTBEAT_INTERVAL", 10)
    grace = _env_seconds("EXPLORER_GRACE_PERIOD", 30)
    return open_storage(url, heartbeat_interval=interval, grace_period=grace)


@dataclass
class StudyHandle:
    """A loaded study with the spec it was created from and the storage it lives in."""

    study: optuna.Study
    spec: StudySpec
    storage_url: str

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


def _comparable(spec: StudySpec) -> dict[str, Any]:
    """The parts of a spec that define the study's meaning (a new total or timeout is allowed on resume)."""
    d = spec.stored()
    for key in ("n_trials", "timeout"):
        d.pop(key, None)
    return d


def _stored_spec(study: optuna.Study, url: str, wait_s: float = 0.0) -> StudySpec:
    """The spec stored with ``study``; waits up to ``wait_s`` for one another command is about to write."""
    deadline = time.monotonic() + wait_s
    while True:
        attrs = optuna.load_study(study_name=study.study_name, storage=study._storage).user_attrs
        if "spec" in attrs:
            return spec_from_dict(attrs["spec"])
        if time.monotonic() >= deadline:
            raise SpecError(
                f"study {study.study_name!r} in {mask_url(url)} has no stored spec (its creation was interrupted, "
                "or explorer did not create it); run `explorer study run SPEC` again to finish creating it, or "
                "use another name."
            )
        time.sleep(0.2)


def check_device(name: str) -> torch.device:
    """The device ``name`` resolves to, or a one-line error naming what is available."""
    return resolve_device(name)


def _finish_creation(study: optuna.Study, spec: StudySpec, storage: Any) -> None:
    """Everything a new study gets after Optuna creates it; the spec last, as its presence says it is ready."""
    Claims(storage, spec.name).clear()  # a new study may reuse a deleted one's id
    with warnings.catch_warnings():  # "experimental since 3.2": a notice for developers, not for users
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(spec.objective_names())
    study.set_user_attr("explorer_version", __version__)
    study.set_user_attr("task", spec.task.name)
    study.set_user_attr("spec", spec.stored())


def prepare_study(spec: StudySpec, storage_url: str | None = None, device: str | None = None) -> StudyHandle:
    """Create the spec's study, or load it when it exists with the same spec; check everything first.

    Two commands creating the same study at once both succeed: one creates it, the other waits for its spec.
    A study whose creation was interrupted (empty, no spec) is finished with this spec.
    """
    check_study_name(spec.name)
    SearchSpace(spec.space)  # an empty or impossible space fails here, before the storage is touched
    load_task(spec.task.name, **spec.task.options)  # so does a missing or malformed data file
    check_device(device or spec.latency.device)  # and a device this machine does not have
    url = storage_url or spec.storage or default_storage_url(spec.name)
    storage = _open(url)
    created = False
    if not study_exists(storage, spec.name):
        try:
            study = optuna.create_study(study_name=spec.name, storage=storage, directions=spec.directions())
            created = True
        except optuna.exceptions.DuplicatedStudyError:  # another command created it a moment ago
            pass
    if created:
        _finish_creation(study, spec, storage)
        return StudyHandle(study, spec, url)
    study = optuna.load_study(study_name=spec.name, storage=storage)
    try:
        stored = _stored_spec(study, url, wait_s=SPEC_WAIT_S)
    except SpecError:
        # A command killed between create_study and storing the spec leaves an empty study without one: finish
        # creating it with this spec (only when it is empty and its objectives are the spec's).
        if (
            study.get_trials(deepcopy=False)
            or [d.name.lower() for d in study.directions] != spec.directions()
        ):
            raise
        _finish_creation(study, spec, storage)
        return StudyHandle(study, spec, url)
    if _comparable(stored) != _comparable(spec):
        raise SpecError(
            f"study {spec.name!r} already exists in {mask_url(url)} with a different spec; "
            f"give the changed spec a new name, or resume it with `explorer study resume {spec.name}`."
        )
    return StudyHandle(study, stored, url)


def open_study(name: str, storage_url: str | None = None) -> StudyHandle:
    """Load an existing study and the spec stored with it (no spec file needed)."""
    check_study_name(name)
    url = storage_url or default_storage_url(name)
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise StudyNotFoundError(
            f"no study {name!r}: the database {path} does not exist; start it with `explorer study run SPEC`."
        )
    storage = _open(url)
    if not study_exists(storage, name):
        raise StudyNotFoundError(
            f"no study {name!r} in {mask_url(url)}; `explorer study list --storage URL` shows the studies there."
        )
    study = optuna.load_study(study_name=name, storage=storage)
    return StudyHandle(study, _stored_spec(study, url, wait_s=SPEC_WAIT_S), url)


def set_total(handle: StudyHandle, total: int) -> None:
    """Make ``total`` the study's search total (stored, so reports and resumes agree). Call it only once the
    command that asks for it has been fully checked."""
    if total != handle.spec.n_trials:
        handle.spec = dataclasses.replace(handle.spec, n_trials=total)
        handle.study.set_user_attr("spec", handle.spec.stored())


# --------------------------------------------------------------------------------------------- progress


@dataclass(frozen=True)
class Progress:
    """What a progress bar shows for one stage."""

    stage: str  # search | finalists
    done: int  # COMPLETE or PRUNED trials of the stage
    total: int  # the stage's total
    running: int
    failed: int
    pruned: int
    epochs: int  # epochs trained so far by the stage's finished and running trials
    best_accuracy: float | None  # best validation accuracy among the stage's COMPLETE feasible trials
    note: str = ""  # why a stage ended short, when it did


def stage_progress(study: optuna.Study, stage: str, total: int) -> Progress:
    role = "search" if stage == "search" else "finalist"
    trials = [
        t
        for t in study.get_trials(deepcopy=False)
        if not is_bookkeeping(t) and t.user_attrs.get("role", "search") == role
    ]
    count = {s: sum(t.state == s for t in trials) for s in TrialState}
    complete = [
        t
        for t in trials
        if t.state == TrialState.COMPLETE and t.values and all(v <= 0 for v in (t.constraints or {}).values())
    ]
    epochs = sum(int(t.user_attrs.get("epoch", len(t.user_attrs.get("history") or ()))) for t in trials)
    return Progress(
        stage=stage,
        done=count[TrialState.COMPLETE] + count[TrialState.PRUNED],
        total=total,
        running=count[TrialState.RUNNING],
        failed=count[TrialState.FAIL],
        pruned=count[TrialState.PRUNED],
        epochs=epochs,
        best_accuracy=max((t.values[0] for t in complete), default=None),
    )


# --------------------------------------------------------------------------------------------- the bench


def attention_bench(spec: StudySpec, seq_len: int, device: torch.device) -> list[dict[str, Any]]:
    """The seed's serial/merged/fused table at the study's widest shape, on the study's device (no memory)."""
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


def record_bench(handle: StudyHandle, device: torch.device) -> bool:
    """Run the attention benchmark once per study and store it with the study; False when there was nothing to
    do (recorded already, or switched off by the spec's ``bench = false``)."""
    if not handle.spec.bench or "bench" in handle.study.user_attrs:
        return False
    t0 = time.perf_counter()
    seq_len = load_task(handle.spec.task.name, **handle.spec.task.options).spec.seq_len
    handle.study.set_user_attr("bench", attention_bench(handle.spec, seq_len, device))
    handle.study.set_user_attr("bench_time_s", time.perf_counter() - t0)
    return True


# --------------------------------------------------------------------------------------------- running


@dataclass(frozen=True)
class RunOptions:
    """How a command runs a study's trials: checked as a whole before anything is written."""

    workers: int = 1
    threads: int = 1  # torch CPU threads per worker
    device: str | None = None  # None: the spec's latency device
    timeout: float | None = None  # seconds after which no new trial starts
    poll_interval: float = 1.0

    def check(self) -> RunOptions:
        if self.workers < 1:
            raise ConfigError(f"--workers must be at least 1, got {self.workers}.")
        if self.threads < 1:
            raise ConfigError(f"--threads must be at least 1, got {self.threads}.")
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigError(f"--timeout must be a positive number of seconds, got {self.timeout:g}.")
        if self.device is not None:
            check_device(self.device)
        CachePolicy.from_env()  # a malformed EXPLORER_CACHE_MAX_AGE fails here, not in a worker
        return self


def enqueue_runs(handle: StudyHandle, runs: Sequence[FinalistRun]) -> int:
    """Queue the finalist runs not already queued, running or done; return how many were added.

    A run is identified by its configuration and seed, so planning again (after a resume, or `explorer confirm`
    with more seeds) queues only what is new.
    """
    have = set()
    for t in handle.study.get_trials(deepcopy=False):
        a = t.user_attrs
        if a.get("role") == "finalist" and t.state != TrialState.FAIL and not is_bookkeeping(t):
            run = a["finalist"]
            have.add((arch_key(ModelConfig.from_dict(run["model"]), float(run["lr"])), int(a["seed"])))
    added = 0
    for run in runs:
        if (arch_key(run.config, run.lr), run.seed) in have:
            continue
        handle.study.enqueue_trial(
            {}, user_attrs={"role": "finalist", "seed": run.seed, "finalist": run.attrs()}
        )
        added += 1
    return added


def _remaining(study: optuna.Study, stage: str, total: int) -> tuple[int, int]:
    """(trials the stage still has to start, trials of the stage running now)."""
    if stage == "search":
        live = live_trials(study, "search")
        running = sum(t.state == TrialState.RUNNING for t in live)
        return total - len(live), running
    waiting = running = 0
    for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING, TrialState.RUNNING)):
        if t.user_attrs.get("role") == "finalist" and not is_bookkeeping(t):
            waiting += t.state == TrialState.WAITING
            running += t.state == TrialState.RUNNING
    return waiting, running


class _StopRules:
    """Optuna callback: stop this worker when its stage has nothing left to start, when the space is used up,
    or after repeated failures (``note`` says why, for the last two)."""

    def __init__(self, stage: str, total: int, space_size: int):
        self.stage, self.total, self.space_size = stage, total, space_size
        self.failures = self.duplicates = 0
        self.note = ""

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        a = trial.user_attrs
        self.failures = (
            self.failures + 1 if trial.state == TrialState.FAIL and not is_bookkeeping(trial) else 0
        )
        self.duplicates = self.duplicates + 1 if "duplicate_of" in a else 0
        if "exhausted" in a:
            self.note = f"{EXHAUSTED}: all {self.space_size} have been evaluated"
        elif self.failures >= MAX_CONSECUTIVE_FAILURES:
            self.note = f"{MAX_CONSECUTIVE_FAILURES} trials failed in a row"
        elif self.duplicates >= MAX_CONSECUTIVE_DUPLICATES:
            self.note = f"{MAX_CONSECUTIVE_DUPLICATES} proposals in a row were taken by other workers"
        if self.note or "surplus" in a or _remaining(study, self.stage, self.total)[0] <= 0:
            study.stop()


def _work(
    handle: StudyHandle,
    stage: str,
    total: int,
    device: str | None,
    deadline: float | None,
    poll_interval: float,
    on_trial: Callable[[], None] | None = None,
) -> str:
    """One worker's loop over a stage; returns "" when the stage is done, else why it stopped."""
    study = handle.study
    # Seeded samplers built alike draw alike: every worker process gets a stream of its own.
    study.sampler = make_sampler(handle.spec, os.getpid(), uuid.uuid4().int % 2**31)
    objective = Objective(
        study,
        handle.spec,
        stage=stage,
        total=total,
        device=device,
        store=store_for(handle.storage_url),
        on_epoch=on_trial,
    )
    callbacks: list[Callable[..., None]] = []
    stop = _StopRules(stage, total, SearchSpace(handle.spec.space).size())
    callbacks.append(stop)
    if on_trial is not None:
        callbacks.append(lambda _study, _trial: on_trial())
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            fail_stale_trials(study)  # a dead worker's trial must not hold the total (nor be waited for)
        left, running = _remaining(study, stage, total)
        if deadline is not None and time.monotonic() >= deadline:
            return "timeout"
        if left <= 0:
            if running == 0:
                return ""
            time.sleep(poll_interval)  # trials still running elsewhere: wait for them to finish or go stale
            continue
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        study.optimize(objective, timeout=timeout, catch=(TrialFailed, ClosedTrial), callbacks=callbacks)
        if stop.note:
            return stop.note


def _worker_main(
    storage_url: str,
    name: str,
    stage: str,
    total: int,
    device: str,
    threads: int,
    deadline_in: float | None,
    out: Any,
) -> None:
    """Entry point of a worker process (spawned): open the study by name and work on the stage."""
    import signal

    torch.set_num_threads(threads)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    deadline = None if deadline_in is None else time.monotonic() + deadline_in
    try:
        handle = open_study(name, storage_url)
        out.put(_work(handle, stage, total, device, deadline, 1.0))
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # exit quietly; the parent reports


def _worker_devices(device: torch.device, workers: int) -> list[str]:
    """Spread workers over the visible GPUs, or put them all on the CPU."""
    if device.type == "cuda":
        n = torch.cuda.device_count()
        return [f"cuda:{i % n}" for i in range(workers)]
    return [str(device)] * workers


def run_stage(
    handle: StudyHandle,
    stage: str,
    total: int,
    options: RunOptions,
    deadline: float | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> Progress:
    """Run one stage of the study (``search`` to ``total`` trials, or the queued ``finalists``) with
    ``options.workers`` processes on this machine; return its progress. Ctrl-C stops cleanly and re-raises."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}")
    study = handle.study
    dev = resolve_device(options.device or handle.spec.latency.device)

    def report(note: str = "") -> Progress:
        p = dataclasses.replace(stage_progress(study, stage, total), note=note)
        if on_progress is not None:
            on_progress(p)
        return p

    report()
    if options.workers == 1:
        previous = torch.get_num_threads()
        torch.set_num_threads(options.threads)
        try:
            note = _work(handle, stage, total, str(dev), deadline, options.poll_interval, on_trial=report)
        finally:
            torch.set_num_threads(previous)
        return report(note)

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.SimpleQueue()
    left = None if deadline is None else max(0.0, deadline - time.monotonic())
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(handle.storage_url, handle.spec.name, stage, total, d, options.threads, left, queue),
        )
        for d in _worker_devices(dev, options.workers)
    ]
    for p in procs:
        p.start()
    try:
        while any(p.is_alive() for p in procs):
            time.sleep(options.poll_interval)
            report()
    except KeyboardInterrupt:
        for p in procs:
            p.join(timeout=30)
        raise
    finally:
        for p in procs:
            p.join()
    failed = [p.exitcode for p in procs if p.exitcode is not None and p.exitcode > 0]
    if failed:
        raise ExplorerError(
            f"{len(failed)} worker(s) exited with an error (codes {failed}); rerun with -v for details."
        )
    notes = []
    while not queue.empty():
        notes.append(queue.get())
    progress = report(next((n for n in notes if n), ""))
    # A worker killed by a signal (the OOM killer, a stray kill) loses nothing: the others fail its trial once
    # it goes stale and retry it. Only a stage left unfinished for no other reason (timeout, space used up) is
    # worth an error.
    killed = [-p.exitcode for p in procs if p.exitcode is not None and p.exitcode < 0]
    if killed and progress.done < total and not progress.note:
        raise ExplorerError(
            f"{len(killed)} worker(s) were killed (signal {', '.join(map(str, killed))}) before the {stage} stage "
            f"finished; finished trials are saved: resume with `explorer study resume {handle.name}`."
        )
    return progress
