"""Workers: one in the command's process works with the run's context; a pool of spawned ones finishes exactly
the stage's total; each queued trial is run by exactly one of them; a worker that fails, or is killed before the
stage is done, says so in the command's one line, without a password."""

from __future__ import annotations

import dataclasses
import multiprocessing
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest
import torch
from optuna.trial import TrialState

import explorer.study._workers as workers_module
from explorer.errors import ExplorerError
from explorer.spec import load_spec
from explorer.storage import Role, load_records, open_storage
from explorer.study import RunOptions, StopReason, plan_run
from explorer.study._claims import pop_waiting
from explorer.study._workers import run_stage
from tests.fixtures import plan_study, write_tiny_spec


def tiny(tmp_path, n_trials: int = 2):
    spec = load_spec(write_tiny_spec(tmp_path, n_trials=n_trials, epochs=1, early=False))
    return plan_study(spec, f"sqlite:///{tmp_path / 's.db'}").study


def test_one_worker_works_in_this_process_with_the_context_it_is_given(tmp_path, monkeypatch, one_thread):
    study = tiny(tmp_path)
    plan = plan_run(study, RunOptions(threads=2))
    for where in (
        "explorer.study._context.load_task",
        "explorer.study._run_plan.load_task",
    ):  # every loading site
        monkeypatch.setattr(where, lambda *a, **k: pytest.fail("loaded a second time"))
    seen = []
    progress = run_stage(plan, Role.SEARCH, 2, on_progress=seen.append)
    assert (progress.done, progress.total, progress.note, progress.reason) == (2, 2, "", None)
    records = load_records(study.optuna_study)
    assert [r.state for r in records] == [TrialState.COMPLETE] * 2 and len({r.key for r in records}) == 2
    assert seen[0].done == 0 and seen[-1].done == 2  # progress reported from the start to the end
    assert all(r.device.endswith("2 threads)") for r in records)  # --threads while the worker trains...
    assert torch.get_num_threads() == 1  # ... and given back after


@pytest.mark.slow
def test_a_pool_of_two_workers_finishes_exactly_the_total(tmp_path, monkeypatch, one_thread):
    study = tiny(tmp_path, n_trials=5)
    progress = run_stage(plan_run(study, RunOptions(workers=2, poll_interval=0.2)), Role.SEARCH, 5)
    assert (progress.done, progress.note, progress.reason) == (5, "", None)
    trials = study.optuna_study.get_trials()
    finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) == 5 and not [t for t in trials if t.state == TrialState.RUNNING]
    assert len({r.key for r in load_records(study.optuna_study) if r.finished}) == 5  # no architecture twice
    # run again, the stage is done: it is reported as such and no worker process is spawned to find that out
    with monkeypatch.context() as m:
        m.setattr(
            workers_module.multiprocessing, "get_context", lambda *_: pytest.fail("a process was spawned")
        )
        again = run_stage(plan_run(study, RunOptions(workers=2, poll_interval=0.2)), Role.SEARCH, 5)
    assert (again.done, again.note, again.reason) == (5, "", None) and len(
        study.optuna_study.get_trials()
    ) == len(trials)
    # a trial left to run: the pool is spawned (what the check above keeps from happening when it need not)
    with monkeypatch.context() as m, pytest.raises(RuntimeError, match="spawned"):
        m.setattr(workers_module.multiprocessing, "get_context", _refuse)
        run_stage(plan_run(study, RunOptions(workers=2, poll_interval=0.2)), Role.SEARCH, 6)


@pytest.mark.slow
def test_forked_workers_see_the_commands_environment_as_it_is_now(tmp_path, monkeypatch, one_thread):
    """The fork server keeps the environment it started with; a worker forked from it takes the command's."""
    workers_module._process_context()  # the fork server's preload, as a run sets it
    if "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver

        forkserver.ensure_running()  # running before the variable is set (if an earlier test had not started it)
    build = f"{Path(__file__).resolve().parents[1] / 'usermodels.py'}:needs_its_environment"
    extra = f'\n[model]\nbuild = "{build}"\n'
    spec = load_spec(write_tiny_spec(tmp_path, n_trials=2, epochs=1, early=False, extra=extra))
    monkeypatch.setenv("EXPLORER_TEST_WORKER_ENV", "1")
    study = plan_study(spec, f"sqlite:///{tmp_path / 's.db'}").study
    progress = run_stage(plan_run(study, RunOptions(workers=2, poll_interval=0.2)), Role.SEARCH, 2)
    assert progress.done == 2 and [r.state for r in load_records(study.optuna_study)] == [
        TrialState.COMPLETE,
        TrialState.COMPLETE,
    ]


def _refuse(*_):
    raise RuntimeError("spawned")


def outcome(
    study, exitcodes: list[int], notes: list, total: int = 2, stage: Role = Role.SEARCH, resume: str = ""
):
    """What the command makes of a pool whose workers exited with ``exitcodes`` and put ``notes`` (a stop:
    (StopReason | None, words); a failure: a WorkerError)."""
    report = workers_module._start(study, stage, total, len(exitcodes), torch.device("cpu"), None)
    procs = [SimpleNamespace(exitcode=code) for code in exitcodes]
    return workers_module._pool_outcome(study, stage, total, procs, notes, report, resume)


def test_a_pool_reports_how_its_workers_ended(tmp_path):
    study = tiny(tmp_path)
    # a worker killed by a signal before the stage was done: resume
    with pytest.raises(
        ExplorerError, match=r"^1 worker\(s\) were killed \(signal 9\) before the search stage"
    ):
        outcome(study, [0, -9], [(None, ""), (None, "")])
    # ... unless the stage stopped for a reason of its own (a timeout), which is the note
    stopped = outcome(study, [0, -9], [(StopReason.TIMEOUT, "timeout"), (None, "")])
    assert (stopped.reason, stopped.note) == (StopReason.TIMEOUT, "timeout")
    # a worker that failed: its own error, and what is saved
    with pytest.raises(ExplorerError, match=r"codes \[1\]\): StorageError: gone; 0 of 2 search trials"):
        outcome(study, [1, 0], [workers_module.WorkerError("StorageError: gone"), (None, "")])
    # an error is a typed value, not a prefix: a note that reads like one stays a note
    noted = outcome(study, [0, 0], [(StopReason.EXHAUSTED, "error: StorageError: gone"), (None, "")])
    assert noted.note == "error: StorageError: gone"
    # the error names the command that continues the run
    with pytest.raises(ExplorerError, match=r"continue with `explorer confirm tiny --until-decided`"):
        outcome(study, [0, -9], [(None, ""), (None, "")], resume="explorer confirm tiny --until-decided")
    # a finalist stage whose survivors finished every queued run ends as its work did: a budget of 30 runs is not
    # a total the stage must reach (rounds stop once the answer is decided)
    done = outcome(study, [0, -9], [(None, ""), (None, "")], total=30, stage=Role.FINALIST)
    assert done.reason is None and done.done == 0


@pytest.mark.slow
def test_a_worker_that_fails_names_its_error_and_what_is_saved_in_one_line(tmp_path):
    study = plan_study(
        load_spec(write_tiny_spec(tmp_path, n_trials=2)), f"sqlite:///{tmp_path / 's.db'}"
    ).study
    # The workers open the study by URL: give them one they cannot reach (its password must not be shown).
    plan = plan_run(study, RunOptions(workers=2))
    bad = "postgresql+psycopg://bob:hunter2@127.0.0.1:9/nowhere"
    broken = dataclasses.replace(plan, study=dataclasses.replace(study, url=bad))
    with pytest.raises(ExplorerError) as info:
        run_stage(broken, Role.SEARCH, 2)
    message = str(info.value)
    assert message.startswith("2 worker(s) exited with an error (codes [1, 1]): StorageUnavailableError: ")
    assert "127.0.0.1:9" in message  # the worker's own reason, not only "rerun with -v"
    assert "0 of 2 search trials are finished and saved" in message
    assert "hunter2" not in message and "\n" not in message


def _pop_all(url: str, name: str, out) -> None:  # noqa: ANN001 - a multiprocessing queue
    """A worker's share of the queue: pop WAITING trials the way study.optimize does until none is left."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.load_study(study_name=name, storage=open_storage(url, heartbeat=False))
    popped = []
    while (trial_id := pop_waiting(study)) is not None:
        popped.append(trial_id)
    out.put(popped)


@pytest.mark.slow
def test_a_queued_trial_is_popped_by_exactly_one_of_several_workers(storage_url, study_name):
    """Optuna reads a WAITING trial, then marks it RUNNING, relying on SELECT ... FOR UPDATE, which SQLite
    ignores: with Optuna's own pop, 4 processes popping 200 queued trials popped 23 twice (the finalist stage
    then ran a run twice and crashed on "Cannot tell a COMPLETE trial"). Workers pop through pop_waiting."""
    study = optuna.create_study(study_name=study_name, storage=open_storage(storage_url, heartbeat=False))
    for i in range(200):
        study.enqueue_trial({"x": i}, skip_if_exists=False)
    ctx = workers_module._process_context()  # started as a study's workers are
    out = ctx.SimpleQueue()
    procs = [ctx.Process(target=_pop_all, args=(storage_url, study_name, out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * 4
    popped = [i for _ in procs for i in out.get()]
    assert len(popped) == 200 and len(set(popped)) == 200  # every trial once, none twice
