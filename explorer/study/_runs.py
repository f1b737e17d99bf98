"""Running a study: :func:`run_study` (a spec to a finished study), :func:`run` (an open study to its total:
the search, then the finalists and their re-timing) and :func:`confirm` (the finalist stage again, with more
finalists or seeds). Each first plans the run (:func:`explorer.study._run_plan.plan_run`: every check once, before
anything is written), then works from the plan alone (:func:`run_planned`). Each reports through
``on_stage(stage, total)`` and ``on_progress(Progress)``; the command line draws them as progress bars.
Re-exported by :mod:`explorer.api`.

Both stages run as Optuna trials through the same workers, so heartbeats, totals and resumption work the same
for both; the search's trials are the study's own, the finalist runs and their re-timings live in its companion
study ``NAME/finalists`` (:meth:`explorer.study._study.Study.stage_study` decides where each stage's
trials go; every reader reads both).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from explorer.answer import (
    FinalistPlan,
)
from explorer.errors import ConfigError, NoCompletedTrialsError
from explorer.layout import count_layouts, valid_heads
from explorer.limits import TRIALS
from explorer.measure import bench_attention
from explorer.spec import StudySpec, load_spec
from explorer.storage import Role
from explorer.study._artifacts import LOCATION_ATTR
from explorer.study._finalist_stage import UNDECIDED_STOPS, FinalistRequest, StageResult, run_finalist_stage
from explorer.study._progress import OnStage, StopReason
from explorer.study._rerun import finished_search
from explorer.study._run_options import WORKERS_ATTR, RunOptions
from explorer.study._run_plan import StudyRunPlan, plan_run
from explorer.study._study import Study
from explorer.study._workers import Progress, run_stage

DEFAULT_OPTIONS = RunOptions()  # one worker, one thread, the spec's device, no timeout

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSummary:
    """How a run of a study ended."""

    search: Progress
    finalists: Progress | None  # None when the stage did not run (switched off, or the search did not finish)
    plan: FinalistPlan | None
    added: int  # finalist runs queued by this run
    horizon_runs: int = 0  # finished finalist runs outside the grid: the pilot's other horizons, the check's
    joined: int = 0  # rounds another command queued on the study that this run's workers ran too

    @property
    def complete(self) -> bool:
        return (
            self.search.reason is None
            and self.search.done >= self.search.total
            and (self.finalists is None or self.finalists.reason in (None, *UNDECIDED_STOPS))
        )

    @property
    def undecided(self) -> bool:
        """Whether the finalist stage stopped with the answer not decided: its budget or minutes spent."""
        return self.finalists is not None and self.finalists.reason in UNDECIDED_STOPS


def run(
    study: Study,
    *,
    n_trials: int | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
    finalists: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
    on_stage: OnStage | None = None,
    bench: bool = True,
    total_from: str = "--n-trials",
) -> RunSummary:
    """Run (or resume) a study to its total, then its finalist stage; see the module docstring.

    ``n_trials`` makes a new search total (stored with the study, so resumes and reports agree); it may not fall
    below the search trials already finished (``total_from`` names where it came from in the error). The spec's
    ``timeout`` holds unless ``options.timeout`` is set. ``bench=False`` skips the once-per-study attention bench
    for this run (the spec's ``bench = false`` skips it for good). ``on_stage(stage, total)`` is called as each
    stage starts. Ctrl-C stops cleanly (finished trials are kept; the running one is queued again) and re-raises.
    """
    plan = plan_run(study, options, n_trials=n_trials, total_from=total_from)
    return run_planned(plan, finalists=finalists, bench=bench, on_progress=on_progress, on_stage=on_stage)


def run_planned(
    plan: StudyRunPlan,
    *,
    finalists: bool = True,
    bench: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
    on_stage: OnStage | None = None,
) -> RunSummary:
    """Run a planned study (:func:`explorer.study._run_plan.plan_run`: every input accepted) to its total, then its
    finalist stage; the plan's total and spec file are recorded with the study first."""
    study, total = plan.study, plan.total
    study.store_total()  # only now: every input of this command has been accepted
    if plan.spec_path is not None and "spec_path" not in study.user_attrs:
        study.optuna_study.set_user_attr("spec_path", plan.spec_path)
    # where this run writes weights, for people and benchmarks/dashboard_check.py (each weight's own index entry
    # names its location too)
    study.note(LOCATION_ATTR, plan.store.write_location)
    study.note(WORKERS_ATTR, plan.workers)  # what the commands this run names run with by default
    if bench and finished_search(study.optuna_study) < total:
        _record_bench(plan)
    if on_stage:  # a bar (and its ETA) for the trials the space can hold, when fewer than the total
        searched_lr = isinstance(study.spec.space.lr, tuple)  # then every draw is new
        on_stage(Role.SEARCH, total if searched_lr else min(total, count_layouts(study.spec.space)))
    search = run_stage(plan, Role.SEARCH, total, on_progress)
    covered = search.reason is StopReason.EXHAUSTED  # a small space evaluated whole: the search is done
    if not covered and (search.reason is not None or search.done < total):
        return RunSummary(search, None, None, 0)
    if not (finalists and study.spec.finalists.enabled):
        return RunSummary(search, None, None, 0)
    return _summary(search, run_finalist_stage(plan, FinalistRequest(), on_progress, on_stage))


def _summary(search: Progress, stage: StageResult) -> RunSummary:
    return RunSummary(search, stage.finals, stage.plan, stage.added, stage.horizon_runs, stage.joined)


def _record_bench(plan: StudyRunPlan) -> bool:
    """Run the attention benchmark once per study, on the run's device at its task's sequence length, and store it
    with the study; False when there was nothing to do (recorded already, or switched off by the spec's
    ``bench = false``)."""
    study = plan.study
    if not study.spec.bench or "bench" in study.user_attrs:
        log.debug("attention bench: %s", "switched off" if not study.spec.bench else "recorded already")
        return False
    log.info(
        "running the attention bench once for %s on %s (skip it with --no-bench)", study.name, plan.device
    )
    t0 = time.perf_counter()
    bench = attention_bench(study.spec, plan.context.task.spec.seq_len, plan.device)
    study.optuna_study.set_user_attr("bench", bench)
    study.optuna_study.set_user_attr("bench_time_s", time.perf_counter() - t0)
    log.info("attention bench done in %.1f s", time.perf_counter() - t0)
    return True


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


def confirm(
    study: Study,
    *,
    top: int | None = None,
    seeds: int | None = None,
    until_decided: bool = False,
    budget: int | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
    on_progress: Callable[[Progress], None] | None = None,
    on_stage: OnStage | None = None,
) -> RunSummary:
    """Run the finalist stage now: with more finalists (``top``) than the spec's, every finalist on a fixed grid
    of ``seeds`` replicates, or (``until_decided``) up to ``budget`` more runs (default: the stage's budget
    again, within the spec's minutes) spent where the answer is still open, until it is decided (a ``budget`` given
    here is spent whatever the spec's minutes); resumable: runs already done are kept, only what is new is
    queued."""
    if budget is not None and not until_decided:
        raise ConfigError("--budget goes with --until-decided.")
    if seeds is not None and until_decided:
        raise ConfigError(
            "--seeds (a fixed grid) and --until-decided/--budget (runs where they decide) exclude "
            "each other; give one."
        )
    for name, value in (("--top", top), ("--seeds", seeds), ("--budget", budget)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}.")
        if value is not None:
            TRIALS.check(value, name)
    plan = plan_run(study, options)
    if until_decided:  # a stopped run names the command that continues it
        plan = dataclasses.replace(plan, resume=f"explorer confirm {study.name} --until-decided")
    if not any(r.finished for r in plan.study.records(Role.SEARCH)):
        raise NoCompletedTrialsError(
            f"study {study.name!r} has no completed search trial to confirm; run it first."
        )
    plan.study.note(WORKERS_ATTR, plan.workers)
    # the search's own trials first (one worker, no deadline): a stopped one is finished before the finalists
    search = run_stage(dataclasses.replace(plan, workers=1, deadline=None), Role.SEARCH, plan.total)
    request = FinalistRequest(top, seeds, until_decided, budget)
    return _summary(search, run_finalist_stage(plan, request, on_progress, on_stage))


def run_study(
    spec: str | Path | StudySpec,
    storage: str | None = None,
    *,
    n_trials: int | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
    finalists: bool = True,
    bench: bool = True,
    spec_path: str | None = None,
    total_from: str = "--n-trials",
    on_start: Callable[[Study, str], None] | None = None,
    on_stage: OnStage | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> RunSummary:
    """Create (or resume) the study a spec file or :class:`StudySpec` describes and run it to its total: the
    spec's ``n_trials`` (a total stored by an earlier run gives way to it), or ``n_trials`` (``total_from``
    names it in errors).

    ``storage`` defaults to ``$EXPLORER_STORAGE``, then the spec's, then ``sqlite:///studies/NAME.db``. A run
    that conflicts with the stored study (another meaning, a total below the trials finished) is refused before
    anything is created or changed. ``spec_path`` is the file a :class:`StudySpec` was read from, recorded with
    the study. ``on_start(study, notice)`` is called once the study is open and every input accepted, before
    any work (``notice``: that the file's total replaced the stored one, or ""); ``on_stage`` and
    ``on_progress`` as for :func:`run`.
    """
    path = spec_path if isinstance(spec, StudySpec) else str(spec)
    spec = spec if isinstance(spec, StudySpec) else load_spec(spec)
    plan = plan_run(spec, options, storage, n_trials=n_trials, total_from=total_from, spec_path=path)
    if on_start:
        on_start(plan.study, plan.notice)
    return run_planned(plan, finalists=finalists, bench=bench, on_progress=on_progress, on_stage=on_stage)
