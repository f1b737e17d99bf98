"""The cases on a study that has run already: `explorer confirm --until-decided` killed with SIGKILL and then run
again, and re-timing rounds added after the run while a reader holds the study open. Both apply to SQLite and
PostgreSQL alike."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from benchmarks._chaos.audit import Outcome, audit, finished_snapshot, load, running
from benchmarks._chaos.kills import checked, new_study, start_reader, stop_reader
from benchmarks._chaos.processes import Runner, kill_group, last_message, wait_for
from benchmarks.synthetic import write_tiny_spec
from explorer.storage import DONE_STATES, load_retimings

EXIT_NOT_DECIDED = 6  # explorer's documented exit: the stage stopped with the answer still open
CONFIRM_BUDGET = 8
# a margin narrow enough that the answer stays open and confirm spends its budget
NARROW = "ladder = false\n\n[answer]\nmargin = 0.2\n"


def confirm_after_kill(
    folder: Path, env: dict[str, str], storage: str, url: str | None, budget: int = CONFIRM_BUDGET
) -> Outcome:
    """A finished search; `explorer confirm NAME --until-decided --budget N` (its finalists the knee and the
    reference layouts, a margin narrow enough to leave the answer open) killed with SIGKILL once two finalist runs
    of it have finished and another trains; then the same command again. Its closing summary ("finalists: N
    runs of a budget of M") must be what the storage holds, nothing lost or duplicated."""
    out = Outcome(f"SIGKILL of confirm --until-decided --budget {budget}, then it again", storage)
    work, name, url = new_study(folder, f"confirm-{storage}", "conf", url)
    spec = write_tiny_spec(
        work, name, n_trials=3, epochs=4, early=False, finalists=True, references=True, extra=NARROW
    )
    r = Runner(work, env)
    ran = r.run("study", "run", str(spec), "--storage", url, "--no-finalists")
    out.notes.append(f"the search exited {ran.returncode}: {last_message(ran.stderr)}")
    command = ("confirm", name, "--storage", url, "--until-decided", "--budget", str(budget))
    proc = r.start(*command)
    hit = wait_for(lambda: _finalists_done(name, url) >= 2 and running(name, url, "finalist"), proc, "a run")
    if hit:
        time.sleep(1.2)  # let its heartbeat land
    kill_group(proc)
    r.collect(proc)
    before = finished_snapshot(name, url)
    done = _finalists_done(name, url)
    out.notes.append(
        f"killed with {done} finalist run(s) finished and one training: {bool(hit)}"
        if hit
        else f"the confirm ended before a finalist run trained (exit {proc.returncode})"
    )
    again = r.run(*command)
    out.notes.append(f"the same confirm again exited {again.returncode}: {last_message(again.stderr)}")
    a = audit(name, url, before)
    out.notes.append(f"after it: {a.text}")
    checked(out, a, again.stderr, "the confirm again")
    out.add(stuck=int(again.returncode not in (0, EXIT_NOT_DECIDED)) + int(not hit))
    out.tracebacks += r.tracebacks()
    return out


def _finalists_done(name: str, url: str) -> int:
    from explorer.storage import load_records

    return sum(r.role == "finalist" and r.state in DONE_STATES for r in load_records(load(name, url)))


# Adds re-timing rounds to a finished study's finalists in this process, through explorer.study as a user's script
# would, and prints what retime() returned and what Study.retimings() reads after it, one line a batch.
RETIMER = """
import sys
import torch
from explorer.storage import Role
from explorer.study import Study
from explorer.study._retime import retime

name, url, batches = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3:]]
study = Study.open(name, url, write=True)
configs = {r.key: r.config for r in study.records(Role.FINALIST) if r.key and r.config}
first = 1 + max(t.round for t in study.retimings())
for more in batches:
    got = retime(study, sorted(configs.items()), first + more, torch.device("cpu"))
    print(len(got), len(study.retimings()), flush=True)
"""


def retime_after_run(
    folder: Path, env: dict[str, str], storage: str, url: str | None, batches: tuple[int, ...] = (3, 6)
) -> Outcome:
    """A finished run with its finalists; then, while a reader polls the study from another process (as
    optuna-dashboard does), re-timing rounds added through explorer.study up to each of ``batches`` rounds past
    the run's (default: 3, then 3 more; each round a fresh process), then `explorer study resume`. What retime() returned and Study.retimings() read must be what the
    storage holds, with no re-timing round stored twice and the file whole."""
    out = Outcome("re-timing rounds added after a run, a reader polling", storage)
    work, name, url = new_study(folder, f"retime-after-{storage}", "reti", url)
    spec = write_tiny_spec(work, name, n_trials=3, epochs=2, finalists=True)
    r = Runner(work, env)
    ran = r.run("study", "run", str(spec), "--storage", url)
    out.notes.append(f"the run exited {ran.returncode}: {last_message(ran.stderr)}")
    held = len(load_retimings(load(name, url)))
    stop = work / "stop-reading"
    reader = start_reader(r, url, stop)
    added = subprocess.run(
        [sys.executable, "-c", RETIMER, name, url, *map(str, batches)],
        cwd=work,
        env=r.env,
        capture_output=True,
        text=True,
    )
    r.stderr.append(added.stderr)
    after = [len(load_retimings(load(name, url)))]
    resumed = r.run("study", "resume", name, "--storage", url)
    polls = stop_reader(r, reader, stop)
    said = [tuple(int(x) for x in line.split()) for line in added.stdout.splitlines() if line.strip()]
    a = audit(name, url, {})
    after.append(len(load_retimings(load(name, url))))
    out.notes.append(
        f"{held} re-timings after the run; the script exited {added.returncode} "
        f"({last_message(added.stderr) or 'no message'}), retime() and Study.retimings() read {said}, the "
        f"storage then held {after[0]}; the resume exited {resumed.returncode}, the storage then held "
        f"{after[1]}; the reader exited {reader.returncode} after {polls} polls"
    )
    out.notes.append(f"after it: {a.text}")
    checked(out, a, resumed.stderr, "the resume")
    malformed = sum("malformed" in e for e in r.stderr)
    # the last batch's reads are what the storage holds; each batch read what it stored, 3 rounds more a time
    misread = not said or said[-1] != (after[0], after[0]) or any(x != y for x, y in said)
    out.add(
        misreported=int(misread),
        corrupt=malformed,
        stuck=int(added.returncode != 0) + int(resumed.returncode != 0) + int(reader.returncode != 0),
    )
    out.add(duplicated=int(after[1] != after[0]))  # a resume of a finished study re-times nothing
    out.tracebacks += r.tracebacks()
    return out
