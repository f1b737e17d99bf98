"""Reading a study back after a scenario: what was lost, duplicated or left stuck, and what the disk holds."""

from __future__ import annotations

import collections
import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.trial import TrialState

from explorer.storage import DONE_STATES, load_records, trials_of


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


def load(name: str, url: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=url)


def finished_snapshot(name: str, url: str) -> dict[int, tuple]:
    """number -> (values, params) of every finished trial (empty when the study cannot be read)."""
    try:
        study = load(name, url)
    except Exception:
        return {}
    return {
        base + t.number: (tuple(t.values or ()), json.dumps(t.params, sort_keys=True))
        for t, base in trials_of(study, states=DONE_STATES)
    }


def running(name: str, url: str, role: str, at_least_done: int = 0) -> bool:
    """A trial of ``role`` is running past its latency measurement, with ``at_least_done`` search trials done."""
    trials = [t for t, _ in trials_of(load(name, url))]  # the study's and its finalists' companion's
    done = sum(t.state in DONE_STATES and t.user_attrs.get("role", "search") == "search" for t in trials)
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
    seen = collections.Counter((r.role, r.key, r.seed) for r in records if r.state in DONE_STATES)
    duplicated = sum(c - 1 for c in seen.values() if c > 1)
    stored = study.user_attrs.get("spec")
    total = int((stored or {}).get("n_trials", 0))
    search_done = sum(r.role == "search" and r.state in DONE_STATES for r in records)
    open_trials = [t for t, _ in trials_of(study, states=(TrialState.RUNNING, TrialState.WAITING))]
    stuck = int(stored is None or search_done < total or bool(open_trials))
    if stored is None:
        return Audit(
            lost, duplicated, stuck, search_done, total, "no stored spec: the study cannot be resumed"
        )
    by_state = collections.Counter(f"{r.role} {r.state.name}" for r in records)
    text = f"search {search_done}/{total}; " + ", ".join(f"{k} {v}" for k, v in sorted(by_state.items()))
    if open_trials:
        text += f"; left open: {[t.state.name for t in open_trials]}"
    return Audit(lost, duplicated, stuck, search_done, total, text)


def files_of(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not volatile(p)}


def volatile(p: Path) -> bool:
    return p.name.endswith(("-wal", "-shm", "-journal")) or p.name.startswith((".tmp-", ".write-test-"))


def tree_hash(root: Path) -> str:
    """A hash of every file and folder under ``root``; SQLite databases by their content (a dump)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if volatile(p):
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
