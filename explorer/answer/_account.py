"""What a study did: trials by role and state, the budget early stopping saved, how the search chose its
architectures (real counts), time, and how to reproduce or resume it."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath

from optuna.trial import TrialState

from explorer.spec import StudySpec
from explorer.storage import DONE_STATES, Role, TrialRecord


@dataclass(frozen=True)
class StudyAccount:
    """The study's bookkeeping, every figure counted from its trials."""

    name: str
    task: str
    devices: tuple[str, ...]
    search_states: Mapping[str, int]  # search trials by state, named as Optuna names it (COMPLETE, PRUNED...)
    finalist_states: Mapping[str, int]  # finalist runs by state, named so
    search_total: int
    partial: bool
    partial_reason: str
    stopped_early: int  # search trials stopped at a rung
    over_budget: int  # search trials pruned untrained for a budget
    epochs_run: int  # search epochs trained
    epochs_saved: int  # search epochs not trained because a trial stopped at a rung
    proposals_rejected: int  # sampler proposals of architectures already taken, skipped before training
    fallbacks: int  # trials given an untaken architecture at random after the sampler kept repeating itself
    closed: Mapping[str, int]  # trials closed without running: beyond a total, duplicate claims
    failed: Mapping[str, int]  # FAIL trials by reason kind
    wall_time_s: float
    trial_time_s: float
    reproduce: str
    resume: str
    reproduce_from: str = ""  # where ``reproduce`` runs, in words (" from the folder that holds lm.toml")


def _fail_kind(reason: str | None) -> str:
    if not reason:
        return "no reason recorded"
    for kind in ("diverged", "out of memory", "interrupted", "heartbeats"):
        if kind in reason:
            return {"heartbeats": "worker lost"}.get(kind, kind)
    return "other"


def study_account(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    *,
    storage: str | None = None,
    closed: Mapping[str, int] | None = None,
    spec_path: str | None = None,
    task_label: str | None = None,
) -> StudyAccount:
    """Summarize the study; partial when trials still run or the search has not reached its total.

    ``storage`` (masked) is named in the commands when it is not the default; ``spec_path`` is the spec file the
    study was started from, when known (else the reproduce command resumes from the stored spec).
    """
    search = [r for r in records if r.role == Role.SEARCH]
    finals = [r for r in records if r.role == Role.FINALIST]
    s_states = Counter(r.state for r in search)
    f_states = Counter(r.state for r in finals)
    finished = sum(s_states[s] for s in DONE_STATES)
    reasons = []
    running = s_states[TrialState.RUNNING] + f_states[TrialState.RUNNING]
    waiting = f_states[TrialState.WAITING]
    if running:
        reasons.append(f"{running} trial(s) still RUNNING")
    if finished < spec.n_trials:
        reasons.append(f"{finished} of the spec's {spec.n_trials} search trials finished")
    if waiting:
        reasons.append(f"{waiting} finalist run(s) queued")
    stopped = [r for r in search if r.state is TrialState.PRUNED and r.epochs_run > 0]
    over = [r for r in search if r.state is TrialState.PRUNED and r.epochs_run == 0]
    starts = [r.started for r in records if r.started is not None]
    ends = [r.completed for r in records if r.completed is not None]
    wall = (max(ends) - min(starts)).total_seconds() if starts and ends else 0.0
    where = f" --storage {shlex.quote(storage)}" if storage else ""
    resume = f"explorer study resume {shlex.quote(spec.name)}{where}"
    shown, reproduce_from = _portable(spec_path) if spec_path else ("", "")
    reproduce = f"explorer study run {shlex.quote(shown)}{where}" if spec_path else resume
    return StudyAccount(
        name=spec.name,
        task=task_label or spec.task.name,
        devices=tuple(sorted({r.device for r in records if r.device})),
        search_states={s.name: n for s, n in s_states.items()},
        finalist_states={s.name: n for s, n in f_states.items()},
        search_total=spec.n_trials,
        partial=bool(reasons),
        partial_reason="; ".join(reasons),
        stopped_early=len(stopped),
        over_budget=len(over),
        epochs_run=sum(r.epochs_run for r in search),
        epochs_saved=sum((r.epochs_planned or 0) - r.epochs_run for r in stopped),
        proposals_rejected=sum(r.rejected for r in search),
        fallbacks=sum(r.proposal == "unevaluated" for r in search),
        closed=dict(closed or {}),
        failed=dict(Counter(_fail_kind(r.fail_reason) for r in records if r.state is TrialState.FAIL)),
        wall_time_s=max(wall, 0.0),
        trial_time_s=sum(r.duration_s or 0.0 for r in records),
        reproduce=reproduce,
        resume=resume,
        reproduce_from=reproduce_from,
    )


def _portable(spec_path: str) -> tuple[str, str]:
    """The spec file as a reproduce command names it, and from where it runs: a relative path as given (from the
    folder the study was started in), an absolute one by its name alone (from the folder that holds it), so a
    report names no folder of the machine it ran on."""
    path = PurePath(spec_path)
    if not path.is_absolute():
        return spec_path, " from the folder the study was started in"
    return path.name, f" from the folder that holds {path.name}"
