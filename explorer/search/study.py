"""Studies: create, resume and run a multi-objective Optuna search over valid attention variants.

What one trial does is :class:`explorer.search.objective.Objective`; this module opens studies, runs workers, and
reports progress and status. Three properties the code below is organised around:

* **The spec's ``n_trials`` is the study's total**, across resumes and workers. Trials are numbered by the
  storage in creation order, so a trial knows whether it is within the total by counting the live trials
  numbered before it (explorer.search.objective); that rule is exact under any number of racing workers.
* **No completed work is lost.** Heartbeats make a SIGKILLed worker's trial FAIL on the next run and its
  configuration re-enqueued (RetryHeartbeatStaleTrialCallback); Ctrl-C marks the running trial FAIL, re-enqueues its
  configuration, and leaves the database consistent; a NaN loss or out-of-memory fails one trial, not the study.
* **Bad input changes nothing.** The spec, the task and the space are checked before the storage is touched.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import torch
from optuna.trial import TrialState

from explorer import __version__
from explorer.errors import ExplorerError, SpecError, StudyNotFoundError
from explorer.search.objective import LIVE_STATES, Objective, SurplusTrial, TrialFailed
from explorer.search.spec import StudySpec, spec_from_dict
from explorer.search.storage import (
    check_study_name,
    default_storage_url,
    mask_url,
    open_storage,
    study_exists,
)

__all__ = [
    "Progress",
    "StudyHandle",
    "list_studies",
    "open_study",
    "prepare_study",
    "run_study",
    "status",
    "study_progress",
]


MAX_CONSECUTIVE_FAILURES = 5  # a worker gives up after this many failed trials in a row


# --------------------------------------------------------------------------------------------- opening


def _open(url: str) -> Any:
    """Open a storage with heartbeats; EXPLORER_HEARTBEAT_INTERVAL / EXPLORER_GRACE_PERIOD (seconds) tune them.

    A killed worker's trial is failed and retried once it has been silent for the grace period, at the start of
    the next trial any worker runs. The defaults (10 s, 30 s) suit real trials; tests shorten them.
    """
    interval = int(os.environ.get("EXPLORER_HEARTBEAT_INTERVAL", "10"))
    grace = int(os.environ.get("EXPLORER_GRACE_PERIOD", "30"))
    return open_storage(url, heartbeat_interval=interval, grace_period=grace)


@dataclass
class StudyHandle:
    """A loaded study with the spec it was created from and the (masked) storage it lives in."""

    study: optuna.Study
    spec: StudySpec
    storage_url: str

    @property
    def masked_url(self) -> str:
        return mask_url(self.storage_url)


def _comparable(spec: StudySpec) -> dict[str, Any]:
    """The parts of a spec that define the study's meaning (a new total or timeout is allowed on resume)."""
    d = spec.to_dict()
    for key in ("n_trials", "timeout", "storage"):
        d.pop(key, None)
    return d


def _check_sqlite_exists(url: str, name: str) -> None:
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        if not path.exists():
            raise StudyNotFoundError(
                f"no study {name!r}: the database {path} does not exist; start it with `explorer study run SPEC`."
            )


def prepare_study(spec: StudySpec, storage_url: str | None = None) -> StudyHandle:
    """Create the spec's study, or load it when it exists with the same spec; check everything first."""
    from explorer.engine.tasks import load_task
    from explorer.search.space import SearchSpace, make_sampler

    check_study_name(spec.name)
    SearchSpace.from_spec(spec)  # an empty or impossible space fails here, before the storage is touched
    load_task(spec.task.name, **spec.task.options)  # so does a missing or malformed data file
    url = storage_url or spec.storage or default_storage_url(spec.name)
    storage = _open(url)
    if study_exists(storage, spec.name):
        study = optuna.load_study(study_name=spec.name, storage=storage)
        stored = spec_from_dict(study.user_attrs["spec"])
        if _comparable(stored) != _comparable(spec):
            raise SpecError(
                f"study {spec.name!r} already exists in {mask_url(url)} with a different spec; "
                f"give the changed spec a new name, or resume it with `explorer study resume {spec.name}`."
            )
        if spec.n_trials != stored.n_trials:
            study.set_user_attr("spec", spec.to_dict())
        return StudyHandle(study, spec, url)
    study = optuna.create_study(
        study_name=spec.name,
        storage=storage,
        sampler=make_sampler(spec),
        directions=spec.directions(),
    )
    study.set_user_attr("spec", spec.to_dict())
    study.set_user_attr("explorer_version", __version__)
    study.set_user_attr("task", spec.task.name)
    study.set_user_attr("objectives", spec.objective_names())
    return StudyHandle(study, spec, url)


def open_study(name: str, storage_url: str | None = None) -> StudyHandle:
    """Load an existing study and the spec stored with it (no spec file needed)."""
    check_study_name(name)
    url = storage_url or default_storage_url(name)
    _check_sqlite_exists(url, name)
    storage = _open(url)
    if not study_exists(storage, name):
        raise StudyNotFoundError(
            f"no study {name!r} in {mask_url(url)}; `explorer study list --storage URL` shows the studies there."
        )
    study = optuna.load_study(study_name=name, storage=storage)
    if "spec" not in study.user_attrs:
        raise SpecError(
            f"study {name!r} was not created by explorer (it has no stored spec); use Optuna directly."
        )
    return StudyHandle(study, spec_from_dict(study.user_attrs["spec"]), url)


# --------------------------------------------------------------------------------------------- progress


@dataclass(frozen=True)
class Progress:
    """What a progress bar shows: trials done out of the total, the Pareto front's size, the best values."""

    done: int
    total: int
    running: int
    failed: int
    pruned: int
    pareto_size: int
    best_accuracy: float | None
    best_latency_ms: float | None


def study_progress(study: optuna.Study, total: int) -> Progress:
    trials = study.get_trials(deepcopy=False)
    by_state = {s: 0 for s in TrialState}
    for t in trials:
        by_state[t.state] += 1
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    feasible = [t for t in complete if all(v <= 0 for v in t.constraints.values())]
    pareto = study.best_trials if complete else []
    return Progress(
        done=by_state[TrialState.COMPLETE] + by_state[TrialState.PRUNED],
        total=total,
        running=by_state[TrialState.RUNNING],
        failed=sum(1 for t in trials if t.state == TrialState.FAIL and not t.user_attrs.get("surplus")),
        pruned=by_state[TrialState.PRUNED],
        pareto_size=len(pareto),
        best_accuracy=max((t.values[0] for t in feasible), default=None),
        best_latency_ms=min((t.values[1] for t in feasible), default=None),
    )


# --------------------------------------------------------------------------------------------- running


def attention_bench(spec: StudySpec, seq_len: int, device: torch.device) -> list[dict[str, Any]]:
    """The seed's serial/merged/fused table at the study's widest shape, on the study's device.

    Recorded once per study so the report can check "merged heads are faster" where the search ran.
    """
    from explorer.engine.bench import bench_attention
    from explorer.engine.config import valid_heads

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
    )
    return df.to_dict(orient="records")


def _record_bench(handle: StudyHandle, device: torch.device) -> None:
    """Run the attention benchmark once per study, before any worker starts, and store it with the study."""
    from explorer.engine.tasks import load_task

    if "bench" in handle.study.user_attrs:
        return
    t0 = time.perf_counter()
    seq_len = load_task(handle.spec.task.name, **handle.spec.task.options).spec.seq_len
    handle.study.set_user_attr("bench", attention_bench(handle.spec, seq_len, device))
    handle.study.set_user_attr("bench_time_s", time.perf_counter() - t0)


def _counted(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=LIVE_STATES))


class _StopRules:
    """Optuna callback: stop this worker at the total, or after repeated failures."""

    def __init__(self, total: int):
        self.total = total
        self.failures = 0

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        surplus = trial.user_attrs.get("surplus", False)
        self.failures = self.failures + 1 if trial.state == TrialState.FAIL and not surplus else 0
        if surplus or self.failures >= MAX_CONSECUTIVE_FAILURES or _counted(study) >= self.total:
            study.stop()


def _work(
    handle: StudyHandle,
    total: int,
    device: torch.device,
    timeout: float | None,
    worker: int = 0,
    on_trial: Callable[[optuna.trial.FrozenTrial], None] | None = None,
) -> None:
    """One worker's loop: run trials until the study's total is reached (or the timeout, or Ctrl-C)."""
    from explorer.search.space import make_sampler

    if _counted(handle.study) >= total:
        return
    # Seeded samplers built alike draw alike: give each worker and each resumed run its own random stream.
    existing = len(handle.study.get_trials(deepcopy=False))
    handle.study.sampler = make_sampler(handle.spec, stream=existing * 64 + worker)
    objective = Objective(handle, total, device)
    callbacks: list[Callable[..., None]] = [_StopRules(total)]
    if on_trial is not None:
        callbacks.append(lambda study, trial: on_trial(trial))
    handle.study.optimize(objective, timeout=timeout, catch=(TrialFailed, SurplusTrial), callbacks=callbacks)


def _worker_main(
    storage_url: str, name: str, total: int, device: str, threads: int, timeout: float | None, worker: int
) -> None:
    """Entry point of a worker process (spawned): open the study by name and work on it."""
    import signal

    torch.set_num_threads(threads)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        handle = open_study(name, storage_url)
        _work(handle, total, torch.device(device), timeout, worker)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # exit quietly; the parent reports


def _worker_devices(device: torch.device, workers: int) -> list[str]:
    """Spread workers over the visible GPUs, or put them all on the CPU."""
    if device.type == "cuda":
        n = torch.cuda.device_count()
        return [f"cuda:{i % n}" for i in range(workers)]
    return ["cpu"] * workers


def run_study(
    handle: StudyHandle,
    *,
    n_trials: int | None = None,
    timeout: float | None = None,
    workers: int = 1,
    device: str | None = None,
    threads: int | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    poll_interval: float = 1.0,
) -> Progress:
    """Run the study to its total (``n_trials`` overrides the spec's) with ``workers`` processes on this machine.

    Each worker trains with ``threads`` CPU threads (default: the cores divided among the workers, so they do
    not oversubscribe them). Returns the final progress; raises KeyboardInterrupt after a clean stop on Ctrl-C.
    """
    from explorer.engine.device import resolve_device

    total = n_trials if n_trials is not None else handle.spec.n_trials
    if total < 1:
        raise SpecError(f"n_trials must be at least 1, got {total}.")
    if (
        total != handle.spec.n_trials
    ):  # --n-trials sets the study's total: store it, so reports and resumes agree
        handle.spec = dataclasses.replace(handle.spec, n_trials=total)
        handle.study.set_user_attr("spec", handle.spec.to_dict())
    if workers < 1:
        raise SpecError(f"--workers must be at least 1, got {workers}.")
    dev = resolve_device(device or handle.spec.latency.device)
    report = (lambda: on_progress(study_progress(handle.study, total))) if on_progress else (lambda: None)
    report()
    threads = threads or max(1, (os.cpu_count() or 1) // workers)
    if threads < 1:
        raise SpecError(f"--threads must be at least 1, got {threads}.")
    if _counted(handle.study) < total:
        _record_bench(handle, dev)
    if workers == 1:
        previous = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            _work(handle, total, dev, timeout, on_trial=lambda _t: report())
        finally:
            torch.set_num_threads(previous)
        return study_progress(handle.study, total)

    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(handle.storage_url, handle.spec.name, total, d, threads, timeout, i),
        )
        for i, d in enumerate(_worker_devices(dev, workers))
    ]
    for p in procs:
        p.start()
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
    report()
    bad = [p.exitcode for p in procs if p.exitcode not in (0, None)]
    if bad:
        raise ExplorerError(
            f"{len(bad)} worker(s) exited with an error (codes {bad}); rerun with -v for details."
        )
    return study_progress(handle.study, total)


def list_studies(storage_url: str) -> list[dict[str, Any]]:
    """Every study in a storage with its trial counts by state."""
    storage = open_storage(storage_url, heartbeat=False)
    out = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        counts: dict[str, int] = {}
        for t in study.get_trials(deepcopy=False):
            counts[t.state.name] = counts.get(t.state.name, 0) + 1
        total = study.user_attrs.get("spec", {}).get("n_trials")
        out.append(
            {
                "name": s.study_name,
                "trials": counts,
                "total": total,
                "started": s.datetime_start.isoformat(timespec="seconds") if s.datetime_start else None,
            }
        )
    return out


def status(handle: StudyHandle) -> dict[str, Any]:
    """A JSON-ready summary: counts by state, early stopping, rejections, and the Pareto trials."""
    study = handle.study
    trials = study.get_trials(deepcopy=False)
    counts = {s.name: 0 for s in TrialState}
    for t in trials:
        counts[t.state.name] += 1
    live = [t for t in trials if not t.user_attrs.get("surplus")]
    pareto = study.best_trials if counts["COMPLETE"] else []
    return {
        "name": handle.spec.name,
        "storage": handle.masked_url,
        "objectives": handle.spec.objective_names(),
        "total": handle.spec.n_trials,
        "trials": counts,
        "early_stopped": sum(1 for t in live if t.user_attrs.get("early_stopped")),
        "epochs_saved": sum(int(t.user_attrs.get("epochs_saved", 0)) for t in live),
        "rejected_configs": sum(int(t.user_attrs.get("rejected", 0)) for t in live),
        "repaired_configs": sum(1 for t in live if t.user_attrs.get("repaired")),
        "pareto": [
            {
                "number": t.number,
                "heads": t.user_attrs.get("heads"),
                "d_k": t.user_attrs.get("d_k"),
                "d_model": t.user_attrs.get("d_model"),
                "val_accuracy": t.values[0],
                "test_accuracy": t.user_attrs.get("test_accuracy"),
                "latency_ms": t.values[1],
                "params": t.user_attrs.get("params"),
            }
            for t in sorted(pareto, key=lambda t: t.values[1])
        ],
    }
