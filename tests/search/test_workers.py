"""Worker processes: each queued trial is run by exactly one of them; a worker that fails says why in the
command's one line, without a password."""

from __future__ import annotations

import dataclasses
import multiprocessing

import optuna
import pytest

from explorer.errors import ExplorerError
from explorer.search.claims import pop_waiting
from explorer.search.spec import load_spec
from explorer.search.storage import open_storage
from explorer.search.study import prepare_study
from explorer.search.workers import RunOptions, run_stage
from tests.fixtures import write_tiny_spec


@pytest.mark.slow
def test_a_worker_that_fails_names_its_error_and_what_is_saved_in_one_line(tmp_path):
    handle = prepare_study(load_spec(write_tiny_spec(tmp_path, n_trials=2)), f"sqlite:///{tmp_path / 's.db'}")
    # The workers open the study by URL: give them one they cannot reach (its password must not be shown).
    broken = dataclasses.replace(handle, storage_url="postgresql+psycopg://bob:hunter2@127.0.0.1:9/nowhere")
    with pytest.raises(ExplorerError) as info:
        run_stage(broken, "search", 2, RunOptions(workers=2))
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
    ctx = multiprocessing.get_context("spawn")
    out = ctx.SimpleQueue()
    procs = [ctx.Process(target=_pop_all, args=(storage_url, study_name, out)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * 4
    popped = [i for _ in procs for i in out.get()]
    assert len(popped) == 200 and len(set(popped)) == 200  # every trial once, none twice
