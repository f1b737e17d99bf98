"""A stage's progress as a bar shows it: done, running, failed and stopped-early trials, and the best quality;
and what a run announces as each stage (or step) starts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import optuna
from optuna.study import StudyDirection
from optuna.trial import TrialState

from explorer.storage import Role, epochs_done, is_bookkeeping, role_of, trials_of


class Step(str, Enum):
    """A step of a run that is announced as it starts, as each stage is, though it runs no trials."""

    TIMING = "timing"  # the finalists' layouts re-timed in interleaved rounds, nothing training

    def __str__(self) -> str:
        return self.value


# on_stage(stage, total): a stage starts (named as the role of its trials; total: its trials), or a step
# (total: its measurements)
OnStage = Callable[[Role | Step, int], None]


class StopReason(Enum):
    """Why a stage ended before its total (decided by explorer.study._workers, read by the run and the CLI)."""

    TIMEOUT = "timeout"  # the run's deadline passed
    EXHAUSTED = "exhausted"  # the search space has no architecture left: it was evaluated whole
    FAILURES = "failures"  # too many trials failed in a row
    DUPLICATES = "duplicates"  # too many proposals in a row were taken by other workers
    BUDGET = "budget"  # the finalist stage's budget left cannot hold the next round that decides the answer
    MINUTES = "minutes"  # the finalist stage's minutes are spent, the answer not decided
    # the horizon check's longer runs contradict the verdict: more runs here cannot decide
    HORIZON = "horizon"


@dataclass(frozen=True)
class Progress:
    """What a progress bar shows for one stage."""

    stage: Role  # the stage is named as the role of the trials it runs
    done: int  # COMPLETE or PRUNED trials of the stage
    total: int  # the stage's total
    running: int
    failed: int
    pruned: int
    epochs: int  # epochs trained so far by the stage's finished and running trials
    # the best value of the study's first objective (validation accuracy: higher is better; bits per byte on a
    # text task: lower is better) among the stage's COMPLETE feasible trials; None before the first one
    best_score: float | None
    note: str = ""  # why a stage ended short, when it did, in words
    reason: StopReason | None = None  # ... and as a value (None: the stage did not stop short)
    need: int = 0  # with reason BUDGET: the runs of the next round that would decide the answer
    # finalists, after each round: the runs within which 80% of the simulated continuations decided (the budget
    # to ask for), their median, its minutes at the stage's pace, and the comparisons the rule still has open
    to_decide: int | None = None
    median_to_decide: int | None = None
    minutes_to_decide: float | None = None
    median_minutes: float | None = None  # the median's minutes at the stage's pace
    open_comparisons: int | None = None
    # ... and the share of those continuations that decided within ``forecast_cap`` more runs (None: no forecast)
    decided_share: float | None = None
    forecast_cap: int | None = None
    rounds: int = 0  # the finalist rounds this command has finished


def stage_progress(study: optuna.Study, stage: Role, total: int) -> Progress:
    """The progress of ``stage`` in the explorer study ``study``: its trials (those of its role) wherever they
    live (the study itself, or its companion: explorer.storage._companion)."""
    trials = [t for t, _ in trials_of(study) if not is_bookkeeping(t) and role_of(t) == stage]
    count = {s: sum(t.state == s for t in trials) for s in TrialState}
    complete = [
        t
        for t in trials
        if t.state == TrialState.COMPLETE and t.values and all(v <= 0 for v in (t.constraints or {}).values())
    ]
    epochs = sum(epochs_done(t) for t in trials)
    return Progress(
        stage=stage,
        done=count[TrialState.COMPLETE] + count[TrialState.PRUNED],
        total=total,
        running=count[TrialState.RUNNING],
        failed=count[TrialState.FAIL],
        pruned=count[TrialState.PRUNED],
        epochs=epochs,
        best_score=(min if study.directions[0] == StudyDirection.MINIMIZE else max)(
            (t.values[0] for t in complete), default=None
        ),
    )
