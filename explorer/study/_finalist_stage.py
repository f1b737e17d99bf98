"""The finalist stage, phase by phase (:func:`run_finalist_stage`): each phase a function that returns a value,
run in order the way Optuna's own optimize loop runs its trials.

1. **Re-timing** (:func:`retimed_plan`): the finalist layouts planned from the search, then timed with nothing
   else running, so the rounds know which layouts are faster (decoding first, where the spec weighs it; rounds
   taken on a busy machine timed again, once).
2. **Pilot** (:func:`pilot`): the horizon the grid trains at, chosen by pilot runs of the most accurate and the
   fastest layouts.
3. **Spending** (:class:`Spending`): what this command may spend: runs (the stage's budget, or a confirm's) and
   minutes.
4. **Rounds** (:func:`rounds`): every layout's first units, then rounds where the answer is still open, each
   round's outlook (comparisons open, a forecast of what deciding costs) reported, until it is decided or the
   spending stops it (:func:`next_round` says which).
5. **Horizon check** (:func:`horizon_check`): once decided, the deciding comparisons trained again at twice the
   horizon; a verdict they contradict stops the stage for that reason (:func:`horizon_stop`).

Every phase reads the study's records afresh, so a resumed stage plans only what is new.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from optuna.trial import TrialState

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
from explorer.storage import Role, TimingKind, role_of, trials_of
from explorer.study._claims import round_lock
from explorer.study._progress import OnStage, Step, StopReason, stage_progress
from explorer.study._retime import retime, search_configs
from explorer.study._run_plan import StudyRunPlan
from explorer.study._study import Study
from explorer.study._workers import Progress, enqueue_runs, run_stage

# the stage did what it could, not decided (HORIZON: the grid's verdict does not hold at the longer horizon)
UNDECIDED_STOPS = (StopReason.BUDGET, StopReason.MINUTES, StopReason.HORIZON)

OnProgress = Callable[[Progress], None]


@dataclass(frozen=True)
class FinalistRequest:
    """What a command asks of the stage: the spec's own stage (all defaults), more finalists (``top``), a fixed
    grid of ``seeds`` replicates, or (``until_decided``) ``budget`` runs more where the answer is open (None: the
    stage's budget again, within the spec's minutes)."""

    top: int | None = None
    seeds: int | None = None
    until_decided: bool = False
    budget: int | None = None


@dataclass(frozen=True)
class StageResult:
    """How the stage ended: its progress, its plan, the runs this command queued, the finished runs outside
    the grid (the pilot's other horizons, the check's) and the rounds another command queued that this one ran
    too."""

    finals: Progress
    plan: FinalistPlan
    added: int = 0
    horizon_runs: int = 0
    joined: int = 0


@dataclass(frozen=True)
class Spending:
    """What this command may spend on the stage's grid: runs in all (finished ones included) and, unless a
    confirm named a budget of runs, no new round past the deadline."""

    budget: int
    minutes: float | None  # the spec's, or None: no limit in time
    deadline: float  # time.monotonic() past which no new round starts (inf: none)

    @classmethod
    def of(
        cls,
        plan: FinalistPlan,
        done: int,
        request: FinalistRequest,
        started: float,
        spec_minutes: float | None,
    ) -> Spending:
        """The spending of ``request`` on ``plan``, whose grid has ``done`` runs; the stage started at ``started``
        (its pilot counts toward its minutes)."""
        if request.until_decided:  # that many runs more (none named: the stage's budget again)
            budget = done + (plan.budget if request.budget is None else request.budget)
        else:
            budget = len(plan.runs) if request.seeds is not None else plan.budget
        # a budget of runs named for this confirm is spent whatever the spec's minutes
        minutes = None if request.budget is not None else spec_minutes
        return cls(budget, minutes, math.inf if minutes is None else started + 60 * minutes)


@dataclass(frozen=True)
class RoundOutlook:
    """Where the last round left the answer (:func:`explorer.answer.stage_outlook`), and the rounds so far."""

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
            median_minutes=None if found is None else found.minutes(found.median),
            open_comparisons=o.open,
            decided_share=None if found is None else found.decided_share,
            forecast_cap=None if found is None else found.cap,
            rounds=self.rounds,
        )


def run_finalist_stage(
    run_plan: StudyRunPlan,
    request: FinalistRequest,
    on_progress: OnProgress | None,
    on_stage: OnStage | None,
) -> StageResult:
    """The stage's phases in order (see the module docstring)."""
    study = run_plan.study
    plan, times = retimed_plan(run_plan, request, on_stage)
    if on_stage:
        on_stage(Role.FINALIST, max(plan.budget, stage_progress(study.optuna_study, Role.FINALIST, 0).done))
    started = time.monotonic()
    horizon, stopped = pilot(run_plan, plan, times, on_progress)
    if stopped is not None:  # stopped before the horizon was chosen (Ctrl-C aside: a timeout, failures)
        return StageResult(stopped, plan)
    plan = plan.at(horizon)
    spend = Spending.of(plan, grid_runs(plan, study), request, started, run_plan.spec.finalists.minutes)
    finals, last, added, joined = rounds(run_plan, plan, times, spend, request.seeds is not None, on_progress)
    if finals.reason is None:  # decided: the deciding comparisons again, trained twice as long
        finals = horizon_check(run_plan, plan, times, spend, finals, _reporting(last, on_progress))
    if finals.reason in (None, *UNDECIDED_STOPS) and request.seeds is None:
        finals = horizon_stop(study, finals)
    records = study.records(Role.FINALIST)
    outside = sum(r.finished for r in records) - sum(r.finished for r in plan.grid(records))
    return StageResult(finals, plan, added, outside, joined)


def retimed_plan(
    run_plan: StudyRunPlan, request: FinalistRequest, on_stage: OnStage | None
) -> tuple[FinalistPlan, np.ndarray]:
    """The finalist plan and its layouts' times as the rule reads them (``[layouts, rounds]``), every layout
    re-timed first with nothing else running."""
    study, context, spec = run_plan.study, run_plan.context, run_plan.spec
    rounds_ = spec.finalists.timing_rounds
    if spec.decode is not None:  # decoding re-timed with nothing else running before the knee is taken
        configs = search_configs(study.optuna_study)
        if on_stage:
            on_stage(Step.TIMING, len(configs) * rounds_)
        retime(study, configs, rounds_, kinds=(TimingKind.DECODE,), context=context)
    plan = plan_finalists(
        study.records(), spec, top=request.top, seeds=request.seeds, retimings=study.retimings()
    )
    configs = [(key, layout.config) for key, layout in zip(plan.keys, plan.layouts, strict=True)]
    if on_stage:
        on_stage(Step.TIMING, len(configs) * rounds_)
    timed = retime(study, configs, rounds_, context=context)
    # the first rounds that ran on a busy machine are timed again, once (the answer leaves them out where the
    # others time every layout); counted from the first rounds alone, so a resume adds none
    busy = busy_rounds([t for t in timed if t.round < rounds_], cost_axis(spec))
    if busy:
        if on_stage:
            on_stage(Step.TIMING, len(configs) * len(busy))
        timed = retime(study, configs, rounds_ + len(busy), context=context)
    return plan, rule_times(plan.keys, timed, cost_axis(spec))[0]


def pilot(
    run_plan: StudyRunPlan, plan: FinalistPlan, times: np.ndarray, on_progress: OnProgress | None
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


def rounds(
    run_plan: StudyRunPlan,
    plan: FinalistPlan,
    times: np.ndarray,
    spend: Spending,
    fixed_grid: bool,
    on_progress: OnProgress | None,
) -> tuple[Progress, RoundOutlook, int, int]:
    """Every layout's first units (a fixed grid: every unit), then rounds until :func:`next_round` stops them;
    with how the last ended, its outlook, the runs queued and the rounds of another command joined."""
    study = run_plan.study
    done = grid_runs(plan, study)
    added = enqueue_runs(study, plan.runs if fixed_grid else plan.runs[: max(0, spend.budget - done)])
    # the runs another command queued and this one's workers take part in count as a round joined
    last, joined = RoundOutlook(), int(not added and _in_flight(study))
    while True:
        finals = run_stage(run_plan, Role.FINALIST, spend.budget, _reporting(last, on_progress))
        if finals.reason is not None or fixed_grid:
            return finals, last, added, joined
        last = RoundOutlook(
            stage_outlook(plan, study.records(Role.FINALIST), run_plan.spec, times), last.rounds + 1
        )
        finals = last.on(finals)
        if on_progress is not None:
            on_progress(finals)
        queued, stop = next_round(run_plan, plan, times, spend, finals)
        if stop is not None:
            return stop, last, added, joined
        added, joined = added + queued, joined + (queued == 0)  # nothing queued, no stop: a round joined


def next_round(
    run_plan: StudyRunPlan, plan: FinalistPlan, times: np.ndarray, spend: Spending, finals: Progress
) -> tuple[int, Progress | None]:
    """Queue the next round where the answer is open: its runs, or how the stage stops instead (decided: the
    progress as it is; past the deadline or the budget with a deciding round left: that reason). Commands on
    several machines share one study's rounds: a round is planned only once the last has finished everywhere,
    by one command at a time (:func:`explorer.study._claims.round_lock`), so the first to plan queues it; a
    command that finds a round in flight (another command queued it meanwhile) joins it rather than planning on
    part of its results or counting its queued runs against its own budget. Every command's workers take the
    runs from the one queue (a run is claimed once, so none is trained twice)."""
    study, spec = run_plan.study, run_plan.spec
    if spend.minutes is not None and time.monotonic() >= spend.deadline:
        if not next_round_size(plan, study.records(Role.FINALIST), spec, times):
            return 0, finals
        note = f"not decided when the stage's {spend.minutes:g} minutes were spent"
        return 0, dataclasses.replace(finals, reason=StopReason.MINUTES, note=note)
    with round_lock(study.stage_study(Role.FINALIST)):  # one command at a time plans and queues a round
        if _in_flight(study):  # a round another command queued since this one's last ended: run it too
            return 0, None
        records = study.records(Role.FINALIST)
        left = spend.budget - grid_runs(plan, study)
        queued = enqueue_runs(study, next_runs(plan, records, spec, times, left))
    if queued:
        return queued, None
    need = next_round_size(plan, records, spec, times)
    if not need:  # decided
        return 0, finals
    took = minutes_text(need, finalist_pace(records))  # undecided, and the budget left cannot hold the round
    note = (
        f"not decided: the next round that decides needs {need} run{'s' * (need != 1)}"
        + (f" ({took})" if took else "")
        + f" and {max(0, left)} of the budget are left"
    )
    return 0, dataclasses.replace(finals, reason=StopReason.BUDGET, note=note, need=need)


def horizon_check(
    run_plan: StudyRunPlan,
    plan: FinalistPlan,
    times: np.ndarray,
    spend: Spending,
    finals: Progress,
    on_progress: OnProgress | None,
) -> Progress:
    """The deciding comparisons of a decided grid trained again at twice the horizon (none queued: ``finals`` as
    it is); the progress keeps the decision's words unless the check itself stopped short."""
    study = run_plan.study
    records = study.records(Role.FINALIST)
    assert plan.horizon is not None, "the check runs on a plan at its chosen horizon"
    with round_lock(study.stage_study(Role.FINALIST)):  # queued once where several commands decide together
        queued = enqueue_runs(study, check_runs(plan, records, run_plan.spec, times, plan.horizon))
    if not queued and not _in_flight(study):  # nothing to check, or checked: another command's check runs
        return finals  # are waited for as this command's own
    checked = run_stage(run_plan, Role.FINALIST, spend.budget, on_progress)
    if checked.reason is not None:
        return checked
    return dataclasses.replace(
        checked, reason=finals.reason, note=finals.note, need=finals.need, to_decide=finals.to_decide
    )


def horizon_stop(study: Study, finals: Progress) -> Progress:
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


def grid_runs(plan: FinalistPlan, study: Study) -> int:
    """The grid's runs, finished or running: what the stage's budget counts (the pilot's runs at other horizons
    and the horizon check's are not the rule's spending)."""
    return sum(r.state is not TrialState.FAIL for r in plan.grid(study.records(Role.FINALIST)))


def _in_flight(study: Study) -> bool:
    """Whether a finalist run of the study is queued or running (here or in another command)."""
    live = (TrialState.WAITING, TrialState.RUNNING)
    return any(role_of(t) is Role.FINALIST for t, _ in trials_of(study.optuna_study, states=live))


def _reporting(last: RoundOutlook, on_progress: OnProgress | None) -> OnProgress | None:
    """``on_progress`` with what the last round said of the decision on every update."""
    if on_progress is None:
        return None
    return lambda p: on_progress(last.on(p))
