"""A fast subset of benchmarks/chaos.py, run by the test suite: a study run killed with SIGKILL while it re-times
its finalists, and one killed while a run of its horizon check trains, each then resumed with `explorer study
resume`; `explorer confirm --until-decided --budget N` killed mid-run and run again; re-timing rounds added after
a run while a reader holds the study open; and a study polled by a reader in another process while a run writes
it. The last three on SQLite and PostgreSQL: the file whole (PRAGMA integrity_check), nothing lost, duplicated (a
unit or a re-timing round) or left stuck, the command's summary what the storage holds, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks._chaos.after_run import confirm_after_kill, retime_after_run
from benchmarks._chaos.audit import Outcome
from benchmarks._chaos.kills import kill_single, reader_while_writing
from benchmarks._chaos.processes import base_env


def clean(outcome: Outcome) -> None:
    counts = {
        k: getattr(outcome, k)
        for k in ("lost", "duplicated", "stuck", "deleted", "tracebacks", "corrupt", "misreported")
    }
    assert outcome.rounds == 1 and not any(counts.values()), (counts, outcome.notes)


@pytest.mark.slow
def test_a_run_killed_while_it_re_times_its_finalists_resumes_whole(tmp_path: Path) -> None:
    outcome = kill_single(tmp_path, base_env(tmp_path / "cache"), "during re-timing", "retime")
    assert not any("was not reached" in n for n in outcome.notes), outcome.notes
    clean(outcome)


@pytest.mark.slow
def test_a_reader_polling_while_a_run_writes_changes_nothing_it_reads(
    tmp_path: Path, storage_kind: str, storage_url: str
) -> None:
    url = None if storage_kind == "sqlite" else storage_url
    clean(reader_while_writing(tmp_path, base_env(tmp_path / "cache"), storage_kind, url))


@pytest.mark.slow
def test_a_run_killed_while_its_horizon_check_trains_resumes_whole(tmp_path: Path) -> None:
    outcome = kill_single(tmp_path, base_env(tmp_path / "cache"), "during the horizon check", "horizon")
    assert outcome.caught == 1, outcome.notes  # the kill landed on a RUNNING run of the check
    clean(outcome)


@pytest.mark.slow
def test_a_confirm_killed_and_run_again_reports_what_the_storage_holds(
    tmp_path: Path, storage_kind: str, storage_url: str
) -> None:
    url = None if storage_kind == "sqlite" else storage_url
    clean(confirm_after_kill(tmp_path, base_env(tmp_path / "cache"), storage_kind, url, budget=4))


@pytest.mark.slow
def test_re_timing_rounds_added_after_a_run_read_back_what_the_storage_holds(
    tmp_path: Path, storage_kind: str, storage_url: str
) -> None:
    url = None if storage_kind == "sqlite" else storage_url
    # one round, then one more (the benchmark adds 3 and 3): each round is a fresh process
    clean(retime_after_run(tmp_path, base_env(tmp_path / "cache"), storage_kind, url, batches=(1, 2)))
