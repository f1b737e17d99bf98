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
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from explorer.answer import (
    FinalistPlan,
    Horizon,
    Outlook,
    answer,
    busy_rounds,
    check_runs,
    choose_horizon,
    cost_axis,
    finalist_pace,
    minutes_text,
    next_round_size,
    next_runs,
    pilot_layouts,
    pilot_runs,
    plan_finalists,
    rule_times,
    stage_outlook,
)
from explorer.errors import ConfigError, NoCompletedTrialsError
from explorer.layout import count_layouts, valid_heads
from explorer.limits import TRIALS
from explorer.measure import bench_attention
from explorer.spec import StudySpec, load_spec
from explorer.storage import Role
from explorer.study._artifacts import LOCATION_ATTR
from explorer.study._progress import OnStage, Step, StopReason, stage_progress
from explorer.study._rerun import finished_search
from explorer.study._retime import retime, search_configs
from explorer.study._run_options import WORKERS_ATTR, RunOptions
from explorer.study._run_plan import StudyRunPlan, plan_run
from explorer.study._study import Study
from explorer.study._workers import Progress, enqueue_runs, run_stage

# the stage did what it could, not decided (HORIZON: the grid's verdict does not hold at the longer horizon)
UNDECIDED_STOPS = (StopReason.BUDGET, StopReason.MINUTES, StopReason.HORIZON)
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
    return _finalist_stage(plan, search, on_progress, on_stage)


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


def _finalist_stage(
    run_plan: StudyRunPlan,
    search: Progress,
    on_progress: Callable[[Progress], None] | None,
    on_stage: OnStage | None,
    top: int | None = None,
    seeds: int | None = None,
    more: int | None = None,
) -> RunSummary:
    """The finalist stage: its layouts re-timed first (with nothing else running, so the rounds say which are
    faster), their first units run, then rounds of paired runs where the answer is still open until it is
    decided or the budget is spent (``seeds``: a fixed grid instead; ``more``: a budget of that many runs on
    top of those finished, -1 for the stage's budget again: ``explorer confirm --until-decided``)."""
    study, context, spec = run_plan.study, run_plan.context, run_plan.spec
    rounds = spec.finalists.timing_rounds
    if spec.decode is not None:  # decoding re-timed with nothing else running before the knee is taken
        configs = search_configs(study.optuna_study)
        if on_stage:
            on_stage(Step.TIMING, len(configs) * rounds)
        retime(study, configs, rounds, kinds=("decode",), context=context)
    plan = plan_finalists(study.records(), spec, top=top, seeds=seeds, retimings=study.retimings())
    configs = [(key, layout.config) for key, layout in zip(plan.keys, plan.layouts, strict=True)]
    if on_stage:
        on_stage(Step.TIMING, len(configs) * rounds)
    timed = retime(study, configs, rounds, context=context)
    # the first rounds that ran on a busy machine are timed again, once (the answer leaves them out where the
    # others time every layout); counted from the first rounds alone, so a resume adds none
    busy = busy_rounds([t for t in timed if t.round < rounds], cost_axis(spec))
    if busy:
        if on_stage:
            on_stage(Step.TIMING, len(configs) * len(busy))
        timed = retime(study, configs, rounds + len(busy), context=context)
    times = rule_times(plan.keys, timed, cost_axis(spec))[0]  # as the answer reads them
    if on_stage:
        on_stage(Role.FINALIST, max(plan.budget, stage_progress(study.optuna_study, Role.FINALIST, 0).done))
    stage_end = math.inf if spec.finalists.minutes is None else time.monotonic() + 60 * spec.finalists.minutes
    horizon, pilot = _pilot(run_plan, plan, times, on_progress)
    if pilot is not None:  # stopped before the horizon was chosen (Ctrl-C aside: a timeout, failures)
        return RunSummary(search, pilot, plan, 0)
    plan = plan.at(horizon)
    done = _grid_runs(plan, study)
    if more is not None:  # --until-decided: that many runs more (-1: the stage's budget again)
        budget = done + (plan.budget if more < 0 else more)
    else:
        budget = len(plan.runs) if seeds is not None else plan.budget
    # no new round starts past the stage's minutes, unless a --budget of runs was given for this confirm
    minutes = spec.finalists.minutes if more is None or more < 0 else None
    if minutes is None:
        stage_end = math.inf
    added = enqueue_runs(study, plan.runs if seeds is not None else plan.runs[: max(0, budget - done)])
    last = _Outlook()  # where the last round left the answer

    def progress(p: Progress) -> None:
        if on_progress is not None:
            on_progress(last.on(p))

    while True:
        finals = run_stage(run_plan, Role.FINALIST, budget, progress)
        if finals.reason is not None or seeds is not None:
            break
        records = study.records(Role.FINALIST)
        last = _Outlook(stage_outlook(plan, records, spec, times), last.rounds + 1)
        finals = last.on(finals)
        progress(finals)
        if time.monotonic() >= stage_end:
            if next_round_size(plan, records, spec, times):
                finals = dataclasses.replace(
                    finals,
                    reason=StopReason.MINUTES,
                    note=f"not decided when the stage's {minutes:g} minutes were spent",
                )
            break
        left = budget - _grid_runs(plan, study)
        queued = enqueue_runs(study, next_runs(plan, records, spec, times, left))
        if not queued:
            need = next_round_size(plan, records, spec, times)
            if need:  # undecided, and the budget left cannot hold the next round that decides
                took = minutes_text(need, finalist_pace(records))
                finals = dataclasses.replace(
                    finals,
                    reason=StopReason.BUDGET,
                    note=f"not decided: the next round that decides needs {need} runs"
                    + (f" ({took})" if took else "")
                    + f" and {max(0, left)} of the budget are left",
                    need=need,
                )
            break
        added += queued
    if finals.reason is None:  # decided: the deciding comparisons again, trained twice as long
        records = study.records(Role.FINALIST)
        if enqueue_runs(study, check_runs(plan, records, spec, times, horizon)):
            checked = run_stage(run_plan, Role.FINALIST, budget, progress)
            finals = (
                checked
                if checked.reason is not None
                else dataclasses.replace(
                    checked,
                    reason=finals.reason,
                    note=finals.note,
                    need=finals.need,
                    to_decide=finals.to_decide,
                )
            )
    if finals.reason in (None, *UNDECIDED_STOPS) and seeds is None:
        finals = _horizon_stop(study, finals)
    records = study.records(Role.FINALIST)
    horizon_runs = sum(r.finished for r in records) - sum(r.finished for r in plan.grid(records))
    return RunSummary(search, finals, plan, added, horizon_runs)


@dataclass(frozen=True)
class _Outlook:
    """The stage's outlook after its last round (:func:`explorer.answer.stage_outlook`), and the rounds so far."""

    outlook: Outlook | None = None
    rounds: int = 0

    def on(self, p: Progress) -> Progress:
        """``p`` with what the last round said of the decision."""
        o = self.outlook
        if o is None:
            return p
        found = o.forecast
        return dataclasses.replace(
            p,
            to_decide=o.runs,
            median_to_decide=0 if o.open == 0 else None if found is None else found.median,
            minutes_to_decide=None if found is None else found.minutes(o.runs),
            open_comparisons=o.open,
            rounds=self.rounds,
        )


def _horizon_stop(study: Study, finals: Progress) -> Progress:
    """``finals`` stopped for :attr:`StopReason.HORIZON` where the answer every command reads
    (:func:`explorer.answer.answer`) is contradicted by its horizon check: the grid's rounds may have decided,
    but no more runs at its horizon decide the answer, so the stage says what does rather than stopping as if
    decided."""
    spec = study.spec
    found = answer(study.records(), spec, study.retimings())
    if not found.contradicted or found.check is None:
        return finals
    short, long = found.check.epochs, found.check.long
    return dataclasses.replace(
        finals,
        reason=StopReason.HORIZON,
        note=f"not decided: the verdict does not hold at {long} epochs, and more runs at {short} epochs cannot "
        f"decide it; a study whose grid trains that long can: {found.check.longer_study(spec.name)}",
        need=0,
        to_decide=None,  # no number of runs at this horizon decides it
    )


def _pilot(
    run_plan: StudyRunPlan,
    plan: FinalistPlan,
    times: np.ndarray,
    on_progress: Callable[[Progress], None] | None,
) -> tuple[Horizon, Progress | None]:
    """The stage's horizon: chosen by its pilot (:mod:`explorer.answer._horizon`), whose runs are queued and run
    here until it is; with the progress of a pilot stopped short (None: it was not)."""
    study, spec = run_plan.study, run_plan.spec
    horizon = choose_horizon(study.records(Role.FINALIST), spec)
    if horizon.chosen:
        return horizon, None
    layouts = pilot_layouts(plan, study.records(Role.SEARCH), times)
    while not horizon.chosen:
        enqueue_runs(study, pilot_runs(plan, layouts, horizon, spec))
        progress = run_stage(run_plan, Role.FINALIST, plan.budget, on_progress)
        if progress.reason is not None:
            return horizon, progress
        horizon = choose_horizon(study.records(Role.FINALIST), spec)
    return horizon, None


def _grid_runs(plan: FinalistPlan, study: Study) -> int:
    """The grid's runs, finished or running: what the stage's budget counts (the pilot's runs at other horizons
    and the horizon check's are not the rule's spending)."""
    return sum(r.state != "FAIL" for r in plan.grid(study.records(Role.FINALIST)))


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
    return _finalist_stage(
        plan, search, on_progress, on_stage, top, seeds, (budget or -1) if until_decided else None
    )


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
