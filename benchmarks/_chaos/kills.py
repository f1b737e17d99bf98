"""The kill scenarios: SIGKILL at each stage of a run, one of two workers killed, Ctrl-C, and two commands racing to
create one study; each followed by the recovery a user would try."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from optuna.trial import TrialState

from benchmarks._chaos.audit import (
    Audit,
    Outcome,
    audit,
    files_of,
    finished_snapshot,
    load,
    running,
    summary_differs,
)
from benchmarks._chaos.processes import STARTED, Runner, kill_group, last_message, wait_for, workers
from benchmarks.synthetic import write_tiny_spec
from explorer.layout import Purpose
from explorer.storage import load_records, load_retimings


def recover(r: Runner, name: str, url: str, spec: Path, outcome: Outcome) -> str:
    """`explorer study resume`; when the kill left no usable study, `explorer study run SPEC` as a user would.
    Returns the stderr of the last command (its summary)."""
    res = r.run("study", "resume", name, "--storage", url)
    if res.returncode != 0:
        outcome.notes.append(f"resume exit {res.returncode}: {last_message(res.stderr)}")
        res = r.run("study", "run", str(spec), "--storage", url)
        if res.returncode != 0:
            outcome.notes.append(f"run again exit {res.returncode}: {last_message(res.stderr)}")
    if "stopped the" in res.stderr:
        outcome.notes.append("a recovery claimed to stop short: " + last_message(res.stderr))
    return res.stderr


def checked(outcome: Outcome, a: Audit, stderr: str, what: str) -> None:
    """Count what an audit found, and a command's summary that differs from what the storage holds."""
    differs = summary_differs(stderr, a)
    if differs:
        outcome.notes.append(f"{what}: {differs}")
    outcome.add(
        rounds=1,
        lost=a.lost,
        duplicated=a.duplicated,
        stuck=a.stuck,
        corrupt=a.corrupt,
        misreported=bool(differs),
    )


def kill_single(folder: Path, env: dict[str, str], label: str, trigger: str, rounds: int = 1) -> Outcome:
    """SIGKILL of a one-worker `study run` at a stage, then recovery."""
    out = Outcome(f"SIGKILL, 1 worker, {label}", "sqlite")
    for k in range(rounds):
        work = folder / f"{trigger}-{k}"
        work.mkdir(parents=True)
        name = f"kill-{trigger}-{k}"
        db = work / "s.db"
        url = f"sqlite:///{db}"
        if trigger == "create":
            spec = write_tiny_spec(work, name, n_trials=2, epochs=2)
        elif trigger == "horizon":
            spec = decisive_spec(work, name, seed=k)
        elif trigger == "retime":
            spec = write_tiny_spec(work, name, n_trials=3, epochs=2, finalists=True)
        elif trigger == "finalists":
            spec = write_tiny_spec(work, name, n_trials=3, epochs=15, early=False, finalists=True)
        else:
            spec = write_tiny_spec(work, name, n_trials=3, epochs=40, early=False)
        r = Runner(work, env)
        files_before = files_of(work)
        proc = r.start("study", "run", str(spec), "--storage", url)
        when = "create-db" if trigger == "create" and k == 0 else trigger
        hit = wait_for(_trigger(when, name, url, db), proc, f"the {label} moment", poll=0.002)
        if trigger == "create" and k > 1:
            time.sleep(0.01 * (k - 1))
        if trigger != "create" and hit:
            time.sleep(1.2)  # let its heartbeat land
        kill_group(proc)
        r.collect(proc)
        if not hit:
            out.notes.append(
                f"round {k}: the stage was not reached before the run ended (exit {proc.returncode})"
            )
        before = finished_snapshot(name, url)
        state = (
            _creation_state(name, url, db) if trigger == "create" else f"{len(before)} finished at the kill"
        )
        if (
            trigger == "horizon"
        ):  # what the storage says ran at the kill (a killed run stays RUNNING until stale)
            checks = _running_checks(name, url)
            out.caught += int(bool(hit) and checks > 0)
            state += f", {checks} horizon-check run(s) RUNNING in the storage"
        out.notes.append(f"round {k}: killed with {state}")
        said = recover(r, name, url, spec, out)
        a = audit(name, url, before)
        out.notes.append(f"round {k} after recovery: {a.text}")
        checked(out, a, said, f"round {k}")
        out.add(deleted=len(files_before - files_of(work)))
        out.tracebacks += r.tracebacks()
    if trigger == "horizon":
        out.notes.append(f"a horizon-check run was RUNNING at the kill in {out.caught} of {rounds} round(s)")
    return out


def _trigger(trigger: str, name: str, url: str, db: Path) -> Callable[[], bool]:
    """When to kill: the database file exists; a trial after the first runs; the last runs; a finalist runs."""
    if trigger == "create-db":
        return db.exists
    if trigger == "create":
        return lambda: _study_row(db, name)
    if trigger == "finalists":
        return lambda: running(name, url, "finalist")
    if trigger == "retime":  # the finalists' re-timing has stored its first timing
        return lambda: bool(load_retimings(load(name, url)))
    if trigger == "horizon":  # a run of the horizon check trains
        return lambda: _running_checks(name, url) > 0
    return lambda: running(name, url, "search", 1 if trigger == "mid" else 2)


def _running_checks(name: str, url: str) -> int:
    """The finalist runs of the horizon check that are RUNNING in the storage."""
    return sum(
        r.role == "finalist" and r.state is TrialState.RUNNING and r.purpose == Purpose.CHECK
        for r in load_records(load(name, url))
    )


def decisive_spec(work: Path, name: str, seed: int = 0) -> Path:
    """A tiny digits study whose finalist grid decides at once and whose answer is not its best layout, so its
    horizon check runs: one width and depth (d_model 32, one layer, uniform layouts), the ladder of 1, 2 and 4
    heads there, a margin of 50 accuracy points, and models built by ``models.py:ordered_by_heads``, whose
    one-head layout is the fastest and clearly the least accurate (inside the margin). The answer is then the
    one-head layout and the check trains it and the best again, whatever the timings (with the standard model
    the three layouts' latencies were a few microseconds apart, and in about a third of runs the fastest was
    also the best, so no check ran)."""
    build = f"{Path(__file__).with_name('models.py')}:ordered_by_heads"
    path = write_tiny_spec(
        work,
        name,
        n_trials=3,
        epochs=2,
        finalists=True,
        extra=f'\n[answer]\nmargin = 50.0\n\n[model]\nbuild = "{build}"\n',
    )
    text = path.read_text()
    for old, new in (
        ("seed = 0", f"seed = {seed}"),
        ("d_model = [16, 32]", "d_model = [32]"),
        ("n_layers = [1, 2]", "n_layers = [1]"),
        ('families = ["uniform", "increasing", "decreasing"]', 'families = ["uniform"]'),
    ):
        assert old in text, f"the tiny spec no longer holds {old!r}"
        text = text.replace(old, new)
    path.write_text(text)
    return path


def _study_row(db: Path, name: str) -> bool:
    """Whether the study's row exists yet (read straight from SQLite: polling through Optuna is too slow to
    catch the moment between the study's creation and its spec being stored)."""
    if not db.exists():
        return False
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.05)
    try:
        return bool(con.execute("SELECT 1 FROM studies WHERE study_name = ?", (name,)).fetchone())
    except sqlite3.Error:
        return False
    finally:
        con.close()


def _creation_state(name: str, url: str, db: Path) -> str:
    if not db.exists():
        return "no database"
    try:
        study = load(name, url)
    except Exception as exc:
        return f"no study ({type(exc).__name__})"
    return "the study and its spec" if "spec" in study.user_attrs else "a study without its spec"


def new_study(folder: Path, where: str, stem: str, url: str | None) -> tuple[Path, str, str]:
    """A scenario's own working folder, a study name no other scenario uses, and its storage (``url``, else a
    SQLite file in that folder)."""
    work = folder / where
    work.mkdir(parents=True)
    return work, f"{stem}-{uuid.uuid4().hex[:8]}", url or f"sqlite:///{work / 's.db'}"


def kill_one_of_two(folder: Path, env: dict[str, str], storage: str, url: str | None) -> Outcome:
    """SIGKILL of one of two worker processes mid-trial; the other carries on; then a resume."""
    out = Outcome("SIGKILL of 1 of 2 workers", storage)
    work, name, url = new_study(folder, f"two-workers-{storage}", "two", url)
    spec = write_tiny_spec(work, name, n_trials=4, epochs=40, early=False)
    r = Runner(work, env)
    proc = r.start("study", "run", str(spec), "--storage", url, "--workers", "2")
    hit = wait_for(lambda: running(name, url, "search", 1), proc, "a trial after the first")
    pids = workers(proc.pid)
    if hit and pids:
        time.sleep(1.2)
        os.kill(pids[0], signal.SIGKILL)
        out.notes.append(f"killed worker pid {pids[0]} of {len(pids)}")
    else:
        out.notes.append(f"no worker to kill (reached: {bool(hit)}, workers {pids})")
    before = finished_snapshot(name, url)
    err = r.collect(proc)
    out.notes.append(f"the run exited {proc.returncode}: {last_message(err)}")
    said = recover(r, name, url, spec, out)
    a = audit(name, url, before)
    out.notes.append(f"after resume: {a.text}")
    checked(out, a, said, "the resume")
    out.tracebacks += r.tracebacks()
    return out


def ctrl_c(folder: Path, env: dict[str, str], workers: int) -> Outcome:
    """SIGINT to the whole process group (what a terminal's Ctrl-C does) mid-trial, then a resume."""
    out = Outcome(f"Ctrl-C, {workers} worker(s)", "sqlite")
    work = folder / f"ctrlc-{workers}"
    work.mkdir(parents=True)
    name = f"ctrlc-{workers}"
    url = f"sqlite:///{work / 's.db'}"
    spec = write_tiny_spec(work, name, n_trials=3, epochs=40, early=False)
    r = Runner(work, env)
    proc = r.start("study", "run", str(spec), "--storage", url, "--workers", str(workers))
    hit = wait_for(lambda: running(name, url, "search", 1), proc, "a trial after the first")
    kill_group(proc, signal.SIGINT)
    err = r.collect(proc, timeout=180)
    if not hit:
        out.notes.append("the run ended before a second trial started")
    ok = proc.returncode == 130 and "resume with: explorer study resume" in err
    out.notes.append(f"exit {proc.returncode}, resume command printed: {ok}")
    before = finished_snapshot(name, url)
    said = recover(r, name, url, spec, out)
    a = audit(name, url, before)
    out.notes.append(f"after resume: {a.text}")
    checked(out, a, said, "the resume")
    out.add(stuck=int(not ok))
    out.tracebacks += r.tracebacks()
    return out


def race(folder: Path, env: dict[str, str], storage: str, url: str | None, rounds: int) -> Outcome:
    """Two separate `study run` commands started together on one new study."""
    out = Outcome("2 commands started together", storage)
    for k in range(rounds):
        work = folder / f"race-{storage}-{k}"
        work.mkdir(parents=True)
        name = f"race-{uuid.uuid4().hex[:8]}"
        u = url or f"sqlite:///{work / 's.db'}"
        spec = write_tiny_spec(work, name, n_trials=6, epochs=2)
        r = Runner(work, env)
        procs = [r.start("study", "run", str(spec), "--storage", u) for _ in range(2)]
        errs = [r.collect(p) for p in procs]
        bad = [(p.returncode, last_message(e)) for p, e in zip(procs, errs, strict=True) if p.returncode != 0]
        short = sum("stopped the" in e for e in errs)
        a = audit(name, u, {})
        extra = max(0, a.search_done - a.total)  # beyond the total: as bad as a duplicate
        out.notes.append(f"round {k}: exits {[p.returncode for p in procs]}; {a.text}")
        if bad:
            out.notes.append(f"round {k}: failed command(s) {bad}")
        if short:
            out.notes.append(f"round {k}: {short} command(s) claimed to stop short")
        out.add(rounds=1, duplicated=a.duplicated + extra, stuck=a.stuck + len(bad) + short)
        out.tracebacks += r.tracebacks()
    return out


READER = """
import sys, time
from pathlib import Path
import optuna
optuna.logging.set_verbosity(optuna.logging.ERROR)
storage = optuna.storages.RDBStorage(sys.argv[1])  # one storage polled, as optuna-dashboard keeps one
polls = 0
while not Path(sys.argv[2]).exists():
    for summary in optuna.get_all_study_summaries(storage):
        optuna.load_study(study_name=summary.study_name, storage=storage).get_trials(deepcopy=False)
    polls += 1
    time.sleep(0.2)
print(polls)
"""


def start_reader(r: Runner, url: str, stop: Path) -> subprocess.Popen:
    """A process polling the study at ``url`` as optuna-dashboard does (:data:`READER`) until ``stop`` exists."""
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, url, str(stop)],
        cwd=r.cwd,
        env=r.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    STARTED.append(reader)
    return reader


def stop_reader(r: Runner, reader: subprocess.Popen, stop: Path) -> str:
    """Stop a :func:`start_reader` process; its number of polls (its stderr kept with the runner's)."""
    stop.touch()
    polls, err = reader.communicate(timeout=120)
    r.stderr.append(err)
    return polls.strip() or "0"


def reader_while_writing(folder: Path, env: dict[str, str], storage: str, url: str | None) -> Outcome:
    """A study open in another process that polls it (as optuna-dashboard does) while `study run` writes it,
    search, re-timing and finalists; then the file, the counts and the command's own summary."""
    out = Outcome("a reader polling while a run writes", storage)
    work, name, url = new_study(folder, f"reader-{storage}", "read", url)
    spec = write_tiny_spec(work, name, n_trials=3, epochs=2, finalists=True)
    r = Runner(work, env)
    writer = r.start("study", "run", str(spec), "--storage", url)
    if wait_for(lambda: load(name, url), writer, "the study") is None:
        out.notes.append("the study was never created")
    stop = work / "stop-reading"
    reader = start_reader(r, url, stop)
    said = r.collect(writer)
    polls = stop_reader(r, reader, stop)
    out.notes.append(
        f"the run exited {writer.returncode}: {last_message(said)}; the reader exited {reader.returncode} after "
        f"{polls} polls"
    )
    a = audit(name, url, {})
    out.notes.append(f"after the run: {a.text}")
    checked(out, a, said, "the run")
    out.add(stuck=int(writer.returncode != 0) + int(reader.returncode != 0))
    out.tracebacks += r.tracebacks()
    return out
