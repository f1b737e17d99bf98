"""Chaos: kill, race and feed bad input to real `explorer` commands, and count what went wrong.

Every scenario runs the real command line (``python -m explorer``) in subprocesses on a tiny digits study
(benchmarks.synthetic.write_tiny_spec), with ``EXPLORER_HEARTBEAT_INTERVAL=1`` and ``EXPLORER_GRACE_PERIOD=3`` so a
killed trial goes stale in seconds, and then reads the study back through Optuna. Per scenario it counts:

  lost        trials finished (COMPLETE/PRUNED) before the kill that are missing or changed after the resume
  duplicated  finished trials beyond the first with the same role, configuration and seed
  stuck       the study below its search total after the resume, finalist runs still queued, or trials left
              RUNNING/WAITING (a study that cannot finish)
  deleted     files that existed before the scenario and are gone after it
  tracebacks  Python tracebacks printed by any command of the scenario
  corrupt     SQLite files whose PRAGMA integrity_check is not "ok" afterwards
  misreported the recovering command's own summary ("search: N trials; finalists: M runs") unlike the storage

Scenarios: SIGKILL of a single-worker run while the study is being created (round 0 as soon as the database
file appears, later rounds as soon as the study's row exists, after 0, 10, 20... ms), mid-trial, during the last
trial, during the finalist stage, during the finalists' re-timing and during the horizon check (a study whose
grid decides at once, killed once a run of its check is RUNNING; each round a study seed of its own), each
followed by `explorer study resume` (and `study run SPEC` again, as a user would, when the kill left no study to
resume); `explorer confirm NAME --until-decided --budget 8` killed mid-run and run again, its summary against the
storage; re-timing rounds added after a finished run through explorer.study while a reader holds the study
open, what retime() and Study.retimings() read against the storage (these two on SQLite and on PostgreSQL); a
reader polling the study from another process (as optuna-dashboard does) while `study run` writes it, on SQLite
and on PostgreSQL; SIGKILL of one of 2 workers; Ctrl-C (SIGINT to the process group, as a terminal sends it) with 1
and 2 workers; two separate `study run` commands started together on a new SQLite file and on the PostgreSQL
test server (EXPLORER_TEST_POSTGRES_URL; skipped with a note when unset); `explorer report --out` onto folders
holding a user's file; and a list of bad inputs, each checked for exactly one `error:` line on stderr, a non-zero
exit, no traceback, and the disk as it was (the working folder hashed before and after, SQLite databases by
their content so a journal-mode switch on opening does not count).

Usage: python -m benchmarks.chaos [--record benchmarks/chaos.md] [--only NAME ...] [--keep DIR]

The parts: benchmarks/_chaos/ (processes, audit, kills, after_run, bad_input, record).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna

from benchmarks._chaos.after_run import confirm_after_kill, retime_after_run
from benchmarks._chaos.audit import Outcome
from benchmarks._chaos.bad_input import bad_inputs, report_onto_user_files
from benchmarks._chaos.kills import ctrl_c, kill_one_of_two, kill_single, race, reader_while_writing
from benchmarks._chaos.processes import STARTED, base_env, kill_group
from benchmarks._chaos.record import markdown, versions
from benchmarks.common import append_record, command, commit, load_average, load_text, machine, stamp

PG_ENV = "EXPLORER_TEST_POSTGRES_URL"
SCENARIOS = (
    "create",
    "mid",
    "last",
    "finalists",
    "retime",
    "horizon",
    "confirm",
    "retime-after",
    "reader",
    "workers",
    "ctrlc",
    "race",
    "report",
    "bad",
)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--record", type=Path, help="Append the results to this markdown file.")
    ap.add_argument("--only", nargs="+", choices=SCENARIOS, help="Run only these scenarios.")
    ap.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="Rounds of the racing, study-creation and horizon-check scenarios.",
    )
    ap.add_argument("--keep", type=Path, help="Work in this folder and keep it (default: a temporary one).")
    args = ap.parse_args()
    chosen = set(args.only or SCENARIOS)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="explorer-chaos-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = base_env(folder / "cache")
    pg_url = os.environ.get(PG_ENV, "").strip() or None
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    started = stamp()
    load_before = load_average()
    t0 = time.perf_counter()
    outcomes: list[Outcome] = []
    rows: list[dict[str, Any]] = []

    def step(name: str, fn: Callable[[], Outcome | list[Outcome]]) -> None:
        if name not in chosen:
            return
        s = time.perf_counter()
        got = fn()
        for o in got if isinstance(got, list) else [got]:
            outcomes.append(o)
            print(
                f"[{time.perf_counter() - s:6.1f} s] {o.scenario} ({o.storage}): rounds {o.rounds}, lost {o.lost}, "
                f"duplicated {o.duplicated}, stuck {o.stuck}, deleted {o.deleted}, tracebacks {o.tracebacks}, "
                f"corrupt {o.corrupt}, misreported {o.misreported}",
                file=sys.stderr,
                flush=True,
            )

    try:
        step(
            "create",
            lambda: kill_single(folder, env, "while creating the study", "create", rounds=args.rounds + 2),
        )
        step("mid", lambda: kill_single(folder, env, "mid-trial", "mid"))
        step("last", lambda: kill_single(folder, env, "during the last trial", "last"))
        step("finalists", lambda: kill_single(folder, env, "during the finalist stage", "finalists"))
        step("retime", lambda: kill_single(folder, env, "during re-timing", "retime"))
        step(
            "horizon",
            lambda: kill_single(folder, env, "during the horizon check", "horizon", rounds=args.rounds),
        )

        def both(case: Callable[..., Outcome]) -> Callable[[], list[Outcome]]:
            """A case on SQLite, and on PostgreSQL where the test server is named."""
            return lambda: (
                [case(folder, env, "sqlite", None)]
                + ([case(folder, env, "postgres", pg_url)] if pg_url else [])
            )

        step("confirm", both(confirm_after_kill))
        step("retime-after", both(retime_after_run))

        def readers() -> list[Outcome]:
            got = [reader_while_writing(folder, env, "sqlite", None)]
            if pg_url:
                got.append(reader_while_writing(folder, env, "postgres", pg_url))
            return got

        step("reader", readers)
        step("workers", lambda: kill_one_of_two(folder, env, "sqlite", None))
        step("ctrlc", lambda: [ctrl_c(folder, env, 1), ctrl_c(folder, env, 2)])

        def races() -> list[Outcome]:
            got = [race(folder, env, "sqlite", None, args.rounds)]
            if pg_url:
                got.append(race(folder, env, "postgres", pg_url, args.rounds))
            else:
                skipped = Outcome("2 commands started together", "postgres")
                skipped.notes.append(f"skipped: {PG_ENV} is not set")
                got.append(skipped)
            return got

        step("race", races)
        step("report", lambda: report_onto_user_files(folder, env))

        def bad() -> Outcome:
            o, got = bad_inputs(folder, env, pg_url)
            rows.extend(got)
            return o

        step("bad", bad)
    finally:
        for proc in STARTED:  # nothing started here outlives the script (each runs in its own session)
            if proc.poll() is None:
                kill_group(proc)
    header = {
        "date": started,
        "machine": machine(),
        "versions": versions(),
        "commit": commit(),
        "load average (1 min) before/after": load_text(load_before, load_average()),
        "wall time": f"{time.perf_counter() - t0:.0f} s",
        "command": f"`{command()}`",
        "environment": "EXPLORER_HEARTBEAT_INTERVAL=1 EXPLORER_GRACE_PERIOD=3, a fresh EXPLORER_CACHE_DIR, "
        + (f"PostgreSQL from {PG_ENV}" if pg_url else f"no PostgreSQL ({PG_ENV} unset)"),
    }
    text = markdown(outcomes, rows, header)
    print(text)
    append_record(args.record, text)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
