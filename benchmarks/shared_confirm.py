"""Two machines, one decision: `explorer confirm NAME --until-decided` started twice on one PostgreSQL study,
against once, on the same records.

A user who outgrows one machine starts the same confirm on another, against the same PostgreSQL study; the two
commands share the study's rounds (a round is planned once, from the records every command reads, and every
command's workers take its runs from the one queue), so the decision should come sooner. This script builds a
tiny digits study (benchmarks.synthetic.write_tiny_spec: the finalists with their reference layouts, a small
first budget so the finalist stage ends undecided), copies it twice within the server (the study and its
companion ``NAME/finalists``, with ``optuna.copy_study``; the copies' stored spec renamed), then per repetition
times, on the real command line:

  one   `explorer confirm COPY1 --until-decided --budget N --workers 1` alone
  two   two such commands started together on COPY2

alternating which arm goes first. Each arm is audited from the storage:

  twice     grid units (layout, seed, horizon) finished more than once (must be 0)
  paired    every layout's units are the grid's first units, none skipped, and every unit beyond the first
            round is shared by at least two layouts: every round gave its layouts the same units
  decided   whether the answer every command reads is decided at the end
  summary   whether the last command's own summary (``--json``: finalist runs done) matches the storage
  exits     the commands' exit codes (0, or 6: not decided, nothing more this command could queue)

The record gives the median wall-time ratio two / one with its range over the repetitions.

Usage: python -m benchmarks.shared_confirm [--storage URL] [--repeats 3] [--budget 60]
       [--record benchmarks/shared_confirm.md]

The PostgreSQL URL defaults to $EXPLORER_TEST_POSTGRES_URL (.ci/run's PostgreSQL section starts a throwaway
server); without one the script refuses in one line. The studies it makes are deleted at the end.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from benchmarks.common import (
    EXPLORER,
    append_record,
    command,
    commit,
    explorer_env,
    load_average,
    load_text,
    machine,
    markdown_table,
    stamp,
)
from benchmarks.synthetic import write_tiny_spec

PG_ENV = "EXPLORER_TEST_POSTGRES_URL"
TITLE = """# Two confirm commands on one PostgreSQL study against one

Written by `benchmarks/shared_confirm.py` (its docstring says what each column means). Each block is one run.
"""


@dataclass(frozen=True)
class Arm:
    """One arm of one repetition: its commands' wall time and what the storage says afterwards."""

    arm: str  # "one" or "two"
    seconds: float
    exits: tuple[int, ...]
    runs: int  # grid runs finished after the confirm
    twice: int
    paired: bool
    decided: bool
    summary: bool
    units: str = ""  # each layout's units, for a failure's message


def build(
    folder: Path,
    url: str,
    name: str,
    final_epochs: int,
    first_budget: int,
    margin: float,
    env: dict[str, str],
) -> None:
    """The undecided tiny study ``name`` at ``url``: 8 search trials, the finalists trained ``final_epochs``
    epochs on their first 2 units, the stage's budget ``first_budget`` runs, the answer's margin ``margin``
    accuracy points (wider than the default 1: the tiny models' units spread by several points)."""
    spec = write_tiny_spec(
        folder,
        name,
        n_trials=8,
        epochs=2,
        finalists=True,
        references=True,
        extra=f"start = 2\nbudget = {first_budget}\n\n[answer]\nmargin = {margin}\n",
    )
    text = spec.read_text()
    spec.write_text(text.replace("epochs = 4\npilot", f"epochs = {final_epochs}\npilot"))
    done = subprocess.run(
        [*EXPLORER, "study", "run", str(spec), "--storage", url, "--workers", "2"],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode not in (0, 6):
        sys.exit(f"building the study failed ({done.returncode}): {done.stderr[-2000:]}")


def copy(url: str, source: str, name: str) -> None:
    """Copy study ``source`` and its companion to ``name`` in the same storage, its stored spec renamed."""
    for suffix in ("", "/finalists"):
        optuna.copy_study(
            from_study_name=source + suffix, from_storage=url, to_storage=url, to_study_name=name + suffix
        )
    study = optuna.load_study(study_name=name, storage=url)
    study.set_user_attr("spec", {**study.user_attrs["spec"], "name": name})


def delete(url: str, name: str) -> None:
    for suffix in ("/finalists", ""):
        with contextlib.suppress(KeyError):
            optuna.delete_study(study_name=name + suffix, storage=url)


def confirm(url: str, name: str, budget: int, env: dict[str, str], commands: int) -> tuple[float, list[Any]]:
    """``commands`` confirm commands on ``name`` started together: their wall time and (exit, summary) each."""
    argv = [*EXPLORER, "confirm", name, "--storage", url, "--until-decided", "--budget", str(budget)]
    argv += ["--workers", "1", "--json"]
    start = time.perf_counter()
    procs = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(commands)
    ]
    outs = [p.communicate() for p in procs]
    seconds = time.perf_counter() - start
    results = []
    for p, (out, err) in zip(procs, outs, strict=True):
        try:
            doc = json.loads(out)
        except json.JSONDecodeError:
            doc = {"error": err[-2000:]}
        results.append((p.returncode, doc))
    return seconds, results


def audit(url: str, name: str, arm: str, seconds: float, results: list[Any]) -> Arm:
    """What the storage says of ``name`` after an arm (see the module docstring)."""
    from explorer import api
    from explorer.layout import Purpose, unit_seed
    from explorer.storage import Role
    from explorer.study import Study

    study = Study.open(name, url)
    finished = [r for r in study.records(Role.FINALIST) if r.finished]
    grid = [r for r in finished if r.purpose != Purpose.CHECK]
    counts = collections.Counter((r.key, r.seed, r.epochs_planned) for r in grid)
    base = unit_seed(study.spec.seed, 0)
    units: dict[str, set[int]] = {}
    for r in grid:
        units.setdefault(r.key, set()).add(r.seed - base)
    start = min(len(u) for u in units.values())
    by_unit = collections.Counter(u for us in units.values() for u in us)
    paired = all(us == set(range(len(us))) for us in units.values()) and all(
        n >= 2 for u, n in by_unit.items() if u >= start
    )
    done = [doc["finalists"]["done"] for _, doc in results if "finalists" in doc]
    return Arm(
        arm,
        seconds,
        tuple(code for code, _ in results),
        len(grid),
        sum(c - 1 for c in counts.values()),
        paired,
        api.recommend(name, url).decided,
        bool(done) and max(done) == len(finished),
        "; ".join(f"{k}: {sorted(us)}" for k, us in sorted(units.items())),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--storage", default=os.environ.get(PG_ENV, ""), help=f"PostgreSQL URL (default ${PG_ENV})"
    )
    ap.add_argument("--repeats", type=int, default=3, help="repetitions, alternating which arm goes first")
    ap.add_argument("--budget", type=int, default=60, help="each confirm's --budget (runs)")
    ap.add_argument("--final-epochs", type=int, default=12, help="epochs of a finalist run")
    ap.add_argument("--first-budget", type=int, default=8, help="the study's own finalist budget (runs)")
    ap.add_argument("--margin", type=float, default=5.0, help="the answer's margin, accuracy points")
    ap.add_argument("--record", type=Path, help="append the results to this markdown file")
    ap.add_argument("--note", default="", help="a line for the record (other work running, ...)")
    args = ap.parse_args()
    if not args.storage.startswith("postgresql"):
        sys.exit(f"shared_confirm: needs a PostgreSQL URL (--storage or ${PG_ENV}); none given")
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    url, tag = args.storage, f"shared-{os.getpid()}"
    load_before = load_average()
    arms: list[Arm] = []
    made = [f"{tag}-base"]
    with tempfile.TemporaryDirectory() as tmp:
        env = explorer_env(Path(tmp) / "cache", EXPLORER_ARTIFACTS=str(Path(tmp) / "artifacts"))
        try:
            t0 = time.perf_counter()
            build(Path(tmp), url, made[0], args.final_epochs, args.first_budget, args.margin, env)
            setup = time.perf_counter() - t0
            for rep in range(args.repeats):
                order = ("one", "two") if rep % 2 == 0 else ("two", "one")
                for arm in order:
                    name = f"{tag}-{rep}-{arm}"
                    made.append(name)
                    copy(url, made[0], name)
                    seconds, results = confirm(url, name, args.budget, env, 1 if arm == "one" else 2)
                    arms.append(audit(url, name, arm, seconds, results))
                    print(arms[-1], flush=True)
        finally:
            for name in made:
                delete(url, name)
    load_after = load_average()
    ratios = []
    for rep in range(args.repeats):  # two / one within each repetition
        by = {a.arm: a for a in arms[2 * rep : 2 * rep + 2]}
        ratios.append(by["two"].seconds / by["one"].seconds)
    rows = [
        [
            i // 2,
            a.arm,
            f"{a.seconds:.1f}",
            " ".join(map(str, a.exits)),
            a.runs,
            a.twice,
            a.paired,
            a.decided,
            a.summary,
        ]
        for i, a in enumerate(arms)
    ]
    table = markdown_table(
        ["rep", "arm", "wall s", "exits", "grid runs", "twice", "paired", "decided", "summary"], rows
    )
    median = statistics.median(ratios)
    lines = [
        f"## {stamp()}: two confirm commands against one",
        "",
        f"- machine: {machine()}",
        f"- load average (1 min) before/after: {load_text(load_before, load_after)}",
        f"- command: `{command(omit=('--storage', '--note'))}` (PostgreSQL {server_version(url)} on this machine)",
        f"- commit: {commit()}",
        f"- study: tiny digits, {args.final_epochs} epochs a finalist run, margin {args.margin:g} points, built in {setup:.0f} s; each confirm "
        f"`--until-decided --budget {args.budget} --workers 1`",
        *([f"- note: {args.note}"] if args.note else []),
        "",
        table,
        "",
        f"**two / one wall time: median {median:.2f}x** (range {min(ratios):.2f}-{max(ratios):.2f} over "
        f"{len(ratios)} repetitions: {', '.join(f'{r:.2f}' for r in ratios)}); units trained twice: "
        f"{sum(a.twice for a in arms)}; pairing intact in {sum(a.paired for a in arms)} of {len(arms)} arms; "
        f"decided in {sum(a.decided for a in arms)} of {len(arms)}; summaries matching the storage in "
        f"{sum(a.summary for a in arms)} of {len(arms)}.",
    ]
    block = "\n".join(lines)
    print(block)
    append_record(args.record, block, title=TITLE)


def server_version(url: str) -> str:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return str(conn.execute(sa.text("SHOW server_version")).scalar()).split()[0]
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
