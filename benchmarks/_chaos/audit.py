"""Reading a study back after a scenario: what was lost, duplicated or left stuck, and what the disk holds."""

from __future__ import annotations

import collections
import hashlib
import json
import re
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import optuna
from optuna.trial import TrialState

from explorer.errors import EmptyStorageError
from explorer.storage import (
    DONE_STATES,
    load_records,
    load_retimings,
    sqlite_path,
    trials_of,
)


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
    corrupt: int = 0  # SQLite files whose PRAGMA integrity_check is not "ok"
    misreported: int = 0  # commands whose own summary differs from what the storage holds
    caught: int = (
        0  # rounds whose kill landed where the scenario aims (its stage seen running in the storage)
    )
    notes: list[str] = field(default_factory=list)

    def add(self, **counts: int) -> None:
        for k, v in counts.items():
            setattr(self, k, getattr(self, k) + v)


_STORAGES: dict[str, optuna.storages.BaseStorage] = {}


def load(name: str, url: str) -> optuna.Study:
    """The study, read through one storage per URL for this process: the chaos cases poll a study many times a
    second, and a storage made from a URL on each read would keep a connection pool open per read (a PostgreSQL
    server then runs out of connections). A SQLite file is opened ``mode=ro``, so a poll that comes before the
    command it watches has made its database creates nothing: Optuna's own storage would create the file and its
    tables in rollback-journal mode, and the command would then find a database it did not make and keep that
    mode (its readers then hold up its heartbeats). Until the file holds Optuna's tables this raises, and the
    pollers look again. (Not explorer's read-only storage: it opens a database no command is writing
    ``immutable=1``, and a poller that keeps it would never see the next command's writes.)"""
    if url not in _STORAGES:
        file = sqlite_path(url)
        where = url if file is None else f"sqlite:///file:{quote(str(file.resolve()))}?mode=ro&uri=true"
        _STORAGES[url] = optuna.storages.RDBStorage(where)
    return optuna.load_study(study_name=name, storage=_STORAGES[url])


def finished_snapshot(name: str, url: str, tries: int = 5) -> dict[int, tuple]:
    """number -> (values, params) of every finished trial (empty when the study does not exist yet). A read that
    fails (a server short of connections while many commands run) is tried again, a second apart, rather than
    taken for an empty study: an empty snapshot after a resume would count every trial as lost."""
    file = sqlite_path(url)
    for attempt in range(tries):
        if file is not None and not file.exists():
            return {}  # no database (yet)
        try:
            study = load(name, url)
            return {
                base + t.number: (tuple(t.values or ()), json.dumps(t.params, sort_keys=True))
                for t, base in trials_of(study, states=DONE_STATES)
            }
        except (KeyError, EmptyStorageError):  # no such study, or no Optuna tables (yet)
            return {}
        except Exception:
            if attempt == tries - 1:
                raise
            time.sleep(1.0)
    return {}


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
    # finished trials beyond the first with the same role, configuration, seed and horizon, and re-timings
    # beyond the first of the same layout, round and kind
    duplicated: int
    stuck: int  # 1 when the study is below its search total or holds RUNNING/WAITING trials
    search_done: int
    total: int
    text: str
    finalists_done: int = 0
    corrupt: int = 0  # 1 when a SQLite file fails PRAGMA integrity_check


def audit(name: str, url: str, before: dict[int, tuple]) -> Audit:
    """Read a study back after its recovery and count what went wrong."""
    try:
        study = load(name, url)
    except Exception as exc:
        return Audit(len(before), 0, 1, 0, 0, f"study unreadable: {type(exc).__name__}")
    after = finished_snapshot(name, url)
    lost = sum(1 for n, v in before.items() if after.get(n) != v)
    records = load_records(study)
    seen = collections.Counter(
        (r.role, r.key, r.seed, r.epochs_planned) for r in records if r.state in DONE_STATES
    )
    rounds = collections.Counter((t.key, t.round, t.kind) for t in load_retimings(study))
    duplicated = sum(c - 1 for c in [*seen.values(), *rounds.values()] if c > 1)
    corrupt = int(integrity(url) != "ok")
    stored = study.user_attrs.get("spec")
    total = int((stored or {}).get("n_trials", 0))
    search_done = sum(r.role == "search" and r.state in DONE_STATES for r in records)
    finalists_done = sum(r.role == "finalist" and r.state in DONE_STATES for r in records)
    open_trials = [t for t, _ in trials_of(study, states=(TrialState.RUNNING, TrialState.WAITING))]
    stuck = int(stored is None or search_done < total or bool(open_trials))
    if stored is None:
        text = "no stored spec: the study cannot be resumed"
        return Audit(lost, duplicated, stuck, search_done, total, text, finalists_done, corrupt)
    by_state = collections.Counter(f"{r.role} {r.state.name}" for r in records)
    text = f"search {search_done}/{total}; " + ", ".join(f"{k} {v}" for k, v in sorted(by_state.items()))
    text += f"; re-timings {sum(rounds.values())} in {len(rounds)} (layout, round, kind)"
    if open_trials:
        text += f"; left open: {[t.state.name for t in open_trials]}"
    if corrupt:
        text += f"; integrity_check: {integrity(url)}"
    return Audit(lost, duplicated, stuck, search_done, total, text, finalists_done, corrupt)


def integrity(url: str) -> str:
    """SQLite's PRAGMA integrity_check of the file at ``url`` ("ok" for other databases, and when it is
    whole)."""
    path = sqlite_path(url)
    if path is None:
        return "ok"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return "; ".join(row[0] for row in con.execute("PRAGMA integrity_check"))
    except sqlite3.Error as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        con.close()


_SUMMARY_RE = re.compile(
    r"search: (?P<search>\d+) trials \(.*?\)(?:; finalists: (?P<grid>\d+) runs of .*? \(\d+ failed\)"
    r"(?:, and (?P<more>\d+) runs of the pilot and the horizon check)?)?\. Next:"
)


def summary_differs(stderr: str, a: Audit) -> str:
    """Where a command's closing summary ("search: N trials ...; finalists: M runs ...") differs from what the
    storage holds, in words ("": it agrees, or the command printed none)."""
    found = list(_SUMMARY_RE.finditer(stderr.replace("\r", "\n")))
    if not found:
        return ""
    m = found[-1]
    said = (int(m["search"]), int(m["grid"] or 0) + int(m["more"] or 0))
    held = (a.search_done, a.finalists_done if m["grid"] is not None else 0)
    return (
        "" if said == held else f"the summary says {said} (search, finalist runs), the storage holds {held}"
    )


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
