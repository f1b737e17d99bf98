"""Chaos: kill, race and feed bad input to real `explorer` commands, and count what went wrong.

Every scenario runs the real command line (``python -m explorer.cli``) in subprocesses on a tiny digits study
(tests/fixtures.write_tiny_spec), with ``EXPLORER_HEARTBEAT_INTERVAL=1`` and ``EXPLORER_GRACE_PERIOD=3`` so a
killed trial goes stale in seconds, and then reads the study back through Optuna. Per scenario it counts:

  lost        trials finished (COMPLETE/PRUNED) before the kill that are missing or changed after the resume
  duplicated  finished trials beyond the first with the same role, configuration and seed
  stuck       the study below its search total after the resume, finalist runs still queued, or trials left
              RUNNING/WAITING (a study that cannot finish)
  deleted     files that existed before the scenario and are gone after it
  tracebacks  Python tracebacks printed by any command of the scenario

Scenarios: SIGKILL of a single-worker run while the study is being created (round 0 as soon as the database
file appears, later rounds as soon as the study's row exists, after 0, 10, 20... ms), mid-trial, during the last
trial and during the finalist stage, each followed by `explorer study resume` (and `study run SPEC` again, as a
user would, when the kill left no study to resume); SIGKILL of one of 2 workers; Ctrl-C (SIGINT to the process group, as a terminal sends it) with 1
and 2 workers; two separate `study run` commands started together on a new SQLite file and on the PostgreSQL
test server (EXPLORER_TEST_POSTGRES_URL; skipped with a note when unset); `explorer report --out` onto folders
holding a user's file; and a list of bad inputs, each checked for exactly one `error:` line on stderr, a non-zero
exit, no traceback, and the disk as it was (the working folder hashed before and after, SQLite databases by
their content so a journal-mode switch on opening does not count).

Usage: python benchmarks/chaos.py [--record benchmarks/chaos.md] [--only NAME ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from explorer.search.record import load_records  # noqa: E402
from tests.fixtures import make_study, write_tiny_spec  # noqa: E402

PG_ENV = "EXPLORER_TEST_POSTGRES_URL"
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
WAIT_CAP_S = 600.0  # a generous cap on any wait: trials on a busy 2-core machine can take minutes


# --------------------------------------------------------------------------------------------- plumbing


def base_env(cache_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPLORER_")}
    env |= {
        "PYTHONPATH": str(ROOT),
        "EXPLORER_HEARTBEAT_INTERVAL": "1",
        "EXPLORER_GRACE_PERIOD": "3",
        "EXPLORER_CACHE_DIR": str(cache_dir),
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
    }
    return env


def cli_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "explorer.cli", *args]


@dataclass
class Outcome:
    """What one scenario found."""

    scenario: str
    storage: str
    rounds: int = 0
    lost: int = 0
    duplicated: int = 0
    stuck: int = 0
    deleted: int = 0
    tracebacks: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, **counts: int) -> None:
        for k, v in counts.items():
            setattr(self, k, getattr(self, k) + v)


class Runner:
    """Runs commands in a working folder with the chaos environment, collecting their stderr."""

    def __init__(self, cwd: Path, env: dict[str, str]):
        self.cwd, self.env = cwd, env
        self.stderr: list[str] = []

    def run(self, *args: str, timeout: float = WAIT_CAP_S, env: dict[str, str] | None = None):
        proc = subprocess.run(
            cli_cmd(*args), cwd=self.cwd, env={**self.env, **(env or {})}, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
        self.stderr.append(proc.stderr)
        return proc

    def start(self, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            cli_cmd(*args), cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, start_new_session=True, preexec_fn=sigint_default,
        )  # fmt: skip
        STARTED.append(proc)
        return proc

    def collect(self, proc: subprocess.Popen, timeout: float = WAIT_CAP_S) -> str:
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
            err += "\n[chaos: killed after the cap]"
        self.stderr.append(err or "")
        return err or ""

    def tracebacks(self) -> int:
        return sum(e.count("Traceback (most recent call last)") for e in self.stderr)


STARTED: list[
    subprocess.Popen
] = []  # every command started in its own session, killed at exit if still alive


def sigint_default() -> None:
    """Run in a started command before exec: the Ctrl-C scenarios' SIGINT must reach it even when this script
    runs as a shell's background job (started with SIGINT ignored; an ignored signal stays ignored across exec,
    and the command, rightly, keeps ignoring it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def last_message(stderr: str) -> str:
    """The line that says how a command ended: its last `error:` line, else its last line (progress bars
    redraw with carriage returns, so lines are split on those too)."""
    lines = [x.strip() for x in stderr.replace("\r", "\n").splitlines() if x.strip()]
    errors = [x[x.index("error:") :] for x in lines if "error:" in x]
    return (errors or lines or [""])[-1][:200]


def wait_for(
    predicate: Callable[[], Any],
    proc: subprocess.Popen | None,
    what: str,
    cap: float = WAIT_CAP_S,
    poll: float = 0.05,
):
    """Poll ``predicate`` until truthy (returning it); None when the process ends first or the cap passes."""
    deadline = time.monotonic() + cap
    while time.monotonic() < deadline:
        try:
            found = predicate()
        except Exception:  # the database may be half-made or locked right now: look again
            found = None
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            return None
        time.sleep(poll)
    return None


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


# --------------------------------------------------------------------------------------------- the study


def load(name: str, url: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=url)


def finished_snapshot(name: str, url: str) -> dict[int, tuple]:
    """number -> (values, params) of every finished trial (empty when the study cannot be read)."""
    try:
        study = load(name, url)
    except Exception:
        return {}
    return {t.number: (tuple(t.values or ()), json.dumps(t.params, sort_keys=True)) for t in study.get_trials(
        deepcopy=False, states=FINISHED)}  # fmt: skip


def running(name: str, url: str, role: str, at_least_done: int = 0) -> bool:
    """A trial of ``role`` is running past its latency measurement, with ``at_least_done`` search trials done."""
    trials = load(name, url).get_trials(deepcopy=False)
    done = sum(t.state in FINISHED and t.user_attrs.get("role", "search") == "search" for t in trials)
    busy = [
        t
        for t in trials
        if t.state == TrialState.RUNNING
        and t.user_attrs.get("role", "search") == role
        and ("latency_ms" in t.user_attrs or role == "finalist")
    ]
    return done >= at_least_done and bool(busy)


@dataclass(frozen=True)
class Audit:
    """A study read back after a scenario."""

    lost: int  # finished before, missing or changed now
    duplicated: int  # finished trials beyond the first with the same role, configuration and seed
    stuck: int  # 1 when the study is below its search total or holds RUNNING/WAITING trials
    search_done: int
    total: int
    text: str


def audit(name: str, url: str, before: dict[int, tuple]) -> Audit:
    """Read a study back after its recovery and count what went wrong."""
    try:
        study = load(name, url)
    except Exception as exc:
        return Audit(len(before), 0, 1, 0, 0, f"study unreadable: {type(exc).__name__}")
    after = finished_snapshot(name, url)
    lost = sum(1 for n, v in before.items() if after.get(n) != v)
    records = load_records(study)
    seen = collections.Counter((r.role, r.key, r.seed) for r in records if r.state in ("COMPLETE", "PRUNED"))
    duplicated = sum(c - 1 for c in seen.values() if c > 1)
    stored = study.user_attrs.get("spec")
    total = int((stored or {}).get("n_trials", 0))
    search_done = sum(r.role == "search" and r.state in ("COMPLETE", "PRUNED") for r in records)
    open_trials = study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING))
    stuck = int(stored is None or search_done < total or bool(open_trials))
    if stored is None:
        return Audit(
            lost, duplicated, stuck, search_done, total, "no stored spec: the study cannot be resumed"
        )
    by_state = collections.Counter(f"{r.role} {r.state}" for r in records)
    text = f"search {search_done}/{total}; " + ", ".join(f"{k} {v}" for k, v in sorted(by_state.items()))
    if open_trials:
        text += f"; left open: {[t.state.name for t in open_trials]}"
    return Audit(lost, duplicated, stuck, search_done, total, text)


def files_of(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not _volatile(p)}


def _volatile(p: Path) -> bool:
    return p.name.endswith(("-wal", "-shm", "-journal")) or p.name.startswith((".tmp-", ".write-test-"))


def tree_hash(root: Path) -> str:
    """A hash of every file and folder under ``root``; SQLite databases by their content (a dump)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if _volatile(p):
            continue
        h.update(str(p.relative_to(root)).encode())
        if p.is_dir():
            h.update(b"/")
        elif p.suffix == ".db":
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
            try:
                for line in con.iterdump():
                    h.update(line.encode())
            finally:
                con.close()
        else:
            h.update(p.read_bytes())
    return h.hexdigest()


# --------------------------------------------------------------------------------------------- scenarios


def spec_for(folder: Path, name: str, **kw: Any) -> Path:
    """A tiny digits spec; ``references=False`` keeps the finalist stage to the knee's seeds."""
    path = write_tiny_spec(folder, name=name, **kw)
    path.write_text(path.read_text().replace("seeds = 2\n", "seeds = 2\nreferences = false\n"))
    return path


def recover(r: Runner, name: str, url: str, spec: Path, outcome: Outcome) -> None:
    """`explorer study resume`; when the kill left no usable study, `explorer study run SPEC` as a user would."""
    res = r.run("study", "resume", name, "--storage", url)
    if res.returncode != 0:
        outcome.notes.append(f"resume exit {res.returncode}: {last_message(res.stderr)}")
        res = r.run("study", "run", str(spec), "--storage", url)
        if res.returncode != 0:
            outcome.notes.append(f"run again exit {res.returncode}: {last_message(res.stderr)}")
    if "stopped the" in res.stderr:
        outcome.notes.append("a recovery claimed to stop short: " + last_message(res.stderr))


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
            spec = spec_for(work, name, n_trials=2, epochs=2)
        elif trigger == "finalists":
            spec = spec_for(work, name, n_trials=3, epochs=15, early=False, finalists=True)
        else:
            spec = spec_for(work, name, n_trials=3, epochs=40, early=False)
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
        out.notes.append(f"round {k}: killed with {state}")
        recover(r, name, url, spec, out)
        a = audit(name, url, before)
        out.notes.append(f"round {k} after recovery: {a.text}")
        out.add(rounds=1, lost=a.lost, duplicated=a.duplicated, stuck=a.stuck)
        out.add(deleted=len(files_before - files_of(work)))
        out.tracebacks += r.tracebacks()
    return out


def _trigger(trigger: str, name: str, url: str, db: Path) -> Callable[[], bool]:
    """When to kill: the database file exists; a trial after the first runs; the last runs; a finalist runs."""
    if trigger == "create-db":
        return db.exists
    if trigger == "create":
        return lambda: _study_row(db, name)
    if trigger == "finalists":
        return lambda: running(name, url, "finalist")
    return lambda: running(name, url, "search", 1 if trigger == "mid" else 2)


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


def kill_one_of_two(folder: Path, env: dict[str, str], storage: str, url: str | None) -> Outcome:
    """SIGKILL of one of two worker processes mid-trial; the other carries on; then a resume."""
    out = Outcome("SIGKILL of 1 of 2 workers", storage)
    work = folder / f"two-workers-{storage}"
    work.mkdir(parents=True)
    name = f"two-{uuid.uuid4().hex[:8]}"
    url = url or f"sqlite:///{work / 's.db'}"
    spec = spec_for(work, name, n_trials=4, epochs=40, early=False)
    r = Runner(work, env)
    proc = r.start("study", "run", str(spec), "--storage", url, "--workers", "2")
    hit = wait_for(lambda: running(name, url, "search", 1), proc, "a trial after the first")
    workers = [c for c in children(proc.pid) if "spawn_main" in cmdline(c)]
    if hit and workers:
        time.sleep(1.2)
        os.kill(workers[0], signal.SIGKILL)
        out.notes.append(f"killed worker pid {workers[0]} of {len(workers)}")
    else:
        out.notes.append(f"no worker to kill (reached: {bool(hit)}, workers {workers})")
    before = finished_snapshot(name, url)
    err = r.collect(proc)
    out.notes.append(f"the run exited {proc.returncode}: {last_message(err)}")
    recover(r, name, url, spec, out)
    a = audit(name, url, before)
    out.notes.append(f"after resume: {a.text}")
    out.add(rounds=1, lost=a.lost, duplicated=a.duplicated, stuck=a.stuck)
    out.tracebacks += r.tracebacks()
    return out


def ctrl_c(folder: Path, env: dict[str, str], workers: int) -> Outcome:
    """SIGINT to the whole process group (what a terminal's Ctrl-C does) mid-trial, then a resume."""
    out = Outcome(f"Ctrl-C, {workers} worker(s)", "sqlite")
    work = folder / f"ctrlc-{workers}"
    work.mkdir(parents=True)
    name = f"ctrlc-{workers}"
    url = f"sqlite:///{work / 's.db'}"
    spec = spec_for(work, name, n_trials=3, epochs=40, early=False)
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
    recover(r, name, url, spec, out)
    a = audit(name, url, before)
    out.notes.append(f"after resume: {a.text}")
    out.add(rounds=1, lost=a.lost, duplicated=a.duplicated, stuck=a.stuck + (not ok))
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
        spec = spec_for(work, name, n_trials=6, epochs=2)
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


def report_onto_user_files(folder: Path, env: dict[str, str]) -> Outcome:
    """`explorer report --out` onto folders holding a user's files: refused, or with --force left alone."""
    out = Outcome("report --out onto a user's folder", "sqlite")
    work = folder / "report-out"
    work.mkdir(parents=True)
    url = f"sqlite:///{work / 's.db'}"
    make_study(15, storage=url, name="syn")
    mine = work / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    (work / "thesis.tex").write_text("keep me too")
    r = Runner(work, env)
    files_before = files_of(work)
    checks = [
        (["report", "syn", "--storage", url, "--out", "mine"], False),
        (["report", "syn", "--storage", url, "--out", "."], False),
        (["report", "syn", "--storage", url, "--out", "mine", "--force"], True),
        (["report", "syn", "--storage", url, "--out", "mine"], True),  # now explorer's: rewritten in place
        (["report", "syn", "--storage", url, "--out", "fresh"], True),
        (["report", "syn", "--storage", url, "--out", "fresh"], True),
    ]
    for args, should_pass in checks:
        res = r.run(*args)
        if (res.returncode == 0) != should_pass:
            out.notes.append(f"`{' '.join(args[:2] + args[4:])}` exit {res.returncode} (expected "
                             f"{'0' if should_pass else 'a refusal'})")  # fmt: skip
            out.stuck += 1
        out.rounds += 1
    out.deleted = len(files_before - files_of(work))
    kept = (mine / "notes.txt").read_text() == "keep me" and (
        work / "thesis.tex"
    ).read_text() == "keep me too"
    out.notes.append(f"{len(checks)} commands; the user's files intact: {kept}")
    out.deleted += not kept
    out.tracebacks = r.tracebacks()
    return out


# --------------------------------------------------------------------------------------------- bad input


def bad_inputs(folder: Path, env: dict[str, str], pg_url: str | None) -> tuple[Outcome, list[dict[str, Any]]]:
    """Each bad input: one `error:` line, a non-zero exit, no traceback, the folder exactly as it was."""
    work = folder / "bad"
    (work / "studies").mkdir(parents=True)
    cache = work / "cache"
    env = {**env, "EXPLORER_CACHE_DIR": str(cache)}
    base = f"sqlite:///{work / 'studies' / 'base.db'}"
    make_study(12, storage=base, name="base")
    spec = spec_for(work, "fresh", n_trials=2, epochs=1)
    (work / "note.txt").write_text("a user's file")
    (work / "mine").mkdir()
    (work / "mine" / "notes.txt").write_text("keep me")
    texts = {
        "unknown-key.toml": spec.read_text() + "\n[space2]\nfoo = 1\n",
        "bad-type.toml": spec.read_text().replace("n_trials = 2", 'n_trials = "two"'),
        "no-heads.toml": spec.read_text().replace("heads = [1, 2, 4]", "heads = [3, 5]"),
        "cuda.toml": spec.read_text().replace('device = "cpu"', 'device = "cuda"'),
        "bad-npz.toml": spec.read_text().replace('name = "digits"', 'name = "huge-label.npz"'),
    }
    for fname, text in texts.items():
        (work / fname).write_text(text)
    rng = np.random.default_rng(0)
    X, y = rng.integers(0, 7, size=(60, 5)), np.arange(60) % 3
    np.savez(work / "huge-label.npz", X=X, y=np.r_[y[:-1], 2**40])
    np.savez(work / "huge-token.npz", X=np.where(X == 1, 2**40, X), y=y)
    np.savez(work / "sparse.npz", X=X, y=np.array([0, 1, 5000])[y])
    obj = np.empty((60, 5), dtype=object)
    obj[:] = 1
    np.savez(work / "pickled.npz", X=obj, y=y)
    (work / "text.npz").write_text("not numpy")
    fresh = f"sqlite:///{work / 'new.db'}"
    cases: list[tuple[str, list[str], dict[str, str]]] = [
        ("spec: unknown table", ["study", "run", "unknown-key.toml", "--storage", fresh], {}),
        ("spec: wrong type", ["study", "run", "bad-type.toml", "--storage", fresh], {}),
        ("spec: no valid head count", ["study", "run", "no-heads.toml", "--storage", fresh], {}),
        ("spec: missing file", ["study", "run", "nope.toml", "--storage", fresh], {}),
        ("spec: device cuda without a GPU", ["study", "run", "cuda.toml", "--storage", fresh], {}),
        ("spec: task .npz with a label of 2**40", ["study", "run", "bad-npz.toml", "--storage", fresh], {}),
        ("--workers 0", ["study", "run", str(spec), "--storage", fresh, "--workers", "0"], {}),
        ("--timeout -1", ["study", "run", str(spec), "--storage", fresh, "--timeout", "-1"], {}),
        ("--threads 0", ["study", "run", str(spec), "--storage", fresh, "--threads", "0"], {}),
        ("--device tpu", ["study", "run", str(spec), "--storage", fresh, "--device", "tpu"], {}),
        ("EXPLORER_CACHE_MAX_AGE=soon", ["study", "run", str(spec), "--storage", fresh],
         {"EXPLORER_CACHE_MAX_AGE": "soon"}),
        ("EXPLORER_GRACE_PERIOD=0", ["study", "run", str(spec), "--storage", fresh], {"EXPLORER_GRACE_PERIOD": "0"}),
        ("--n-trials below done", ["study", "resume", "base", "--storage", base, "--n-trials", "3"], {}),
        ("--n-trials 0", ["study", "resume", "base", "--storage", base, "--n-trials", "0"], {}),
        ("storage: unknown scheme", ["study", "run", str(spec), "--storage", "foo://bar"], {}),
        ("storage: not a URL", ["study", "run", str(spec), "--storage", "just-a-path.db"], {}),
        ("storage: unreachable PostgreSQL", ["study", "run", str(spec), "--storage",
                                              "postgresql+psycopg://me:hunter2@127.0.0.1:1/db"], {}),
        ("resume: no such study", ["study", "resume", "ghost", "--storage", base], {}),
        ("resume: no such database", ["study", "resume", "ghost"], {}),
        ("status: bad study name", ["study", "status", "bad name!", "--storage", base], {}),
        ("train: head count breaks the rules", ["train", "--d-model", "64", "--heads", "uniform:5"], {}),
        ("train: npz label 2**40", ["train", "--task", "huge-label.npz", "--epochs", "1"], {}),
        ("train: npz token id 2**40", ["train", "--task", "huge-token.npz", "--epochs", "1"], {}),
        ("train: npz sparse labels {0,1,5000}", ["train", "--task", "sparse.npz", "--epochs", "1"], {}),
        ("train: npz with pickled objects", ["train", "--task", "pickled.npz", "--epochs", "1"], {}),
        ("train: .npz that is text", ["train", "--task", "text.npz", "--epochs", "1"], {}),
        ("train: missing --config", ["train", "--config", "nope.json"], {}),
        ("space: no valid head count", ["space", "--d-model", "8", "--min-dk", "16"], {}),
        ("report --out under a file", ["report", "base", "--storage", base, "--out", "note.txt/r"], {}),
        ("report --out onto a user's folder", ["report", "base", "--storage", base, "--out", "mine"], {}),
        ("heads --out under a file", ["heads", "base", "--storage", base, "--out", "note.txt/h"], {}),
        ("heads --trial 999", ["heads", "base", "--storage", base, "--trial", "999", "--out", "h2"], {}),
        ("bench --out under a file", ["bench", "attention", "--d-model", "32", "--heads", "2", "--seq-len", "8",
                                      "--out", "note.txt/b"], {}),
        ("export --out under a file", ["export", "base", "--storage", base, "--out", "note.txt/c.json"], {}),
        ("export --trial 999", ["export", "base", "--storage", base, "--trial", "999", "--out", "c.json"], {}),
        ("cache clear --older-than -1", ["cache", "clear", "--older-than", "-1"], {}),
    ]  # fmt: skip
    if pg_url:
        cases.append(("PostgreSQL: no such study", ["study", "resume", f"ghost-{uuid.uuid4().hex[:6]}",
                                                     "--storage", pg_url], {}))  # fmt: skip
    r = Runner(work, env)
    rows = []
    out = Outcome("bad inputs", "sqlite" + (" + postgres" if pg_url else ""))
    for label, args, extra_env in cases:
        before = tree_hash(work)
        res = r.run(*args, env=extra_env, timeout=300)
        lines = [x for x in res.stderr.splitlines() if x.strip()]
        errors = [x for x in lines if x.startswith("error:")]
        row = {
            "input": label,
            "exit": res.returncode,
            "error_lines": len(errors),
            "other_lines": len(lines) - len(errors),
            "traceback": "Traceback" in res.stderr,
            "unchanged": tree_hash(work) == before,
            "message": (errors[0] if errors else (lines[-1] if lines else ""))[:150],
            "leaks_password": "hunter2" in res.stderr + res.stdout,
        }
        row["ok"] = (
            res.returncode != 0 and len(errors) == 1 and not row["traceback"] and row["unchanged"]
            and not row["leaks_password"]
        )  # fmt: skip
        rows.append(row)
        out.rounds += 1
        out.tracebacks += row["traceback"]
        out.stuck += not row["ok"]
    out.notes.append(f"{sum(r['ok'] for r in rows)} of {len(rows)} inputs refused cleanly (table below)")
    return out, rows


# --------------------------------------------------------------------------------------------- record


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def versions() -> str:
    import torch

    return f"torch {torch.__version__}, optuna {optuna.__version__}"


def commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(["git", "status", "--porcelain", "explorer"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip()  # fmt: skip
        return head.stdout.strip() + (" (explorer/ modified)" if dirty else "")
    except OSError:
        return "unknown"


def markdown(outcomes: Iterable[Outcome], rows: list[dict[str, Any]], header: dict[str, str]) -> str:
    outcomes = list(outcomes)
    keys = ("lost", "duplicated", "stuck", "deleted", "tracebacks")
    totals = {k: sum(getattr(o, k) for o in outcomes) for k in keys}
    lines = [f"## {header['date']}", ""]
    lines += [f"- {k}: {v}" for k, v in header.items() if k != "date"]
    lines += ["", "| scenario | storage | rounds | lost | duplicated | stuck | files deleted | tracebacks |",
              "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for o in outcomes:
        lines.append(
            f"| {o.scenario} | {o.storage} | {o.rounds} | {o.lost} | {o.duplicated} | {o.stuck} | {o.deleted} | "
            f"{o.tracebacks} |"
        )
    lines.append(
        f"| **total** | | {sum(o.rounds for o in outcomes)} | {totals['lost']} | {totals['duplicated']} | "
        f"{totals['stuck']} | {totals['deleted']} | {totals['tracebacks']} |"
    )
    lines += ["", "For bad inputs, *stuck* counts inputs not refused cleanly; for the report scenario, commands "
              "that did not do what was asked.", "", "Notes per scenario:", ""]  # fmt: skip
    for o in outcomes:
        lines.append(f"- **{o.scenario} ({o.storage})**")
        lines += [f"  - {n}" for n in o.notes]
    if rows:
        lines += ["", "| bad input | exit | `error:` lines | other lines | traceback | disk unchanged | message |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in rows:
            msg = r["message"].replace("|", "\\|")
            lines.append(
                f"| {r['input']} | {r['exit']} | {r['error_lines']} | {r['other_lines']} | "
                f"{'yes' if r['traceback'] else 'no'} | {'yes' if r['unchanged'] else 'NO'} | {msg} |"
            )
    return "\n".join(lines) + "\n"


SCENARIOS = ("create", "mid", "last", "finalists", "workers", "ctrlc", "race", "report", "bad")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--record", type=Path, help="Append the results to this markdown file.")
    ap.add_argument("--only", nargs="+", choices=SCENARIOS, help="Run only these scenarios.")
    ap.add_argument(
        "--rounds", type=int, default=2, help="Rounds of the racing and study-creation scenarios."
    )
    ap.add_argument("--keep", type=Path, help="Work in this folder and keep it (default: a temporary one).")
    args = ap.parse_args()
    chosen = set(args.only or SCENARIOS)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="explorer-chaos-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = base_env(folder / "cache")
    pg_url = os.environ.get(PG_ENV, "").strip() or None
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    started = dt.datetime.now().astimezone()
    load_before = os.getloadavg()[0]
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
            print(f"[{time.perf_counter() - s:6.1f} s] {o.scenario} ({o.storage}): rounds {o.rounds}, lost {o.lost}, "
                  f"duplicated {o.duplicated}, stuck {o.stuck}, deleted {o.deleted}, tracebacks {o.tracebacks}",
                  file=sys.stderr, flush=True)  # fmt: skip

    try:
        step(
            "create",
            lambda: kill_single(folder, env, "while creating the study", "create", rounds=args.rounds + 2),
        )
        step("mid", lambda: kill_single(folder, env, "mid-trial", "mid"))
        step("last", lambda: kill_single(folder, env, "during the last trial", "last"))
        step("finalists", lambda: kill_single(folder, env, "during the finalist stage", "finalists"))
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
        "date": started.strftime("%Y-%m-%dT%H:%M %Z"),
        "machine": machine(),
        "versions": versions(),
        "commit": commit(),
        "load average (1 min) before/after": f"{load_before:.2f} / {os.getloadavg()[0]:.2f}",
        "wall time": f"{time.perf_counter() - t0:.0f} s",
        "command": "python benchmarks/chaos.py " + " ".join(sys.argv[1:]),
        "environment": "EXPLORER_HEARTBEAT_INTERVAL=1 EXPLORER_GRACE_PERIOD=3, a fresh EXPLORER_CACHE_DIR, "
        + (f"PostgreSQL from {PG_ENV}" if pg_url else f"no PostgreSQL ({PG_ENV} unset)"),
    }
    text = markdown(outcomes, rows, header)
    print(text)
    if args.record:
        with open(args.record, "a") as f:
            f.write("\n" + text)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
