"""A committed study end to end, as a user runs it: how long it takes and what its report answers.

    python -m benchmarks.end_to_end studies/quickstart.toml [--workers 2] [--target-min 15]
        [--setup] [--keep reports/quickstart] [--record benchmarks/end_to_end.md] [--seeds 0 1 2 3 4]

Runs, in a fresh temporary folder with its own EXPLORER_CACHE_DIR (no latency is read from an earlier run),
exactly what the README runs:

    explorer study run SPEC --workers 2 && explorer report NAME

and times the commands, start to exit. ``--setup`` also times the set-up the README's first command does first
(a new virtual environment, the CPU build of torch where no GPU is present, and this package), so the recorded
total is the whole first command. Records the machine, the load average before and after (a loaded machine trains
slower), each part's time, and quotes the report: the answer's headline, its confidence and the rules of thumb.
``--keep DIR`` copies the report's folder there (the committed example is made this way).
``--until-decided`` then does what an undecided answer line suggests, before the report: while ``explorer
report NAME --json`` says not decided and names the runs a decision needs, ``explorer confirm NAME
--until-decided --budget N`` (at most ``--rounds`` times), each timed apart.

Each run also records the cost the study first printed (its first finalist round's log line that names one: the
median more runs a decision needs, the 80th percentile and the minutes) against what deciding then took (finalist
runs, counted as the line counts them, and minutes, to the round line that says decided). ``--seeds`` runs the
whole thing once per seed (each a fresh study with that seed, each its own block) and closes with a table of them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import ROOT, append_record, machine, record_block


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    return run(cmd, cwd, env)[0]


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str, str]:
    """(seconds, stdout, stderr) of ``cmd``; a failure ends the benchmark with its error."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({done.returncode}): {done.stderr[-3000:]}")
    return wall, done.stdout, done.stderr


def run_stamped(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str, list[tuple[float, str]]]:
    """(seconds, stdout, stderr lines each with the seconds since the start at which it came) of ``cmd``."""
    t0 = time.perf_counter()
    with subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stderr is not None and proc.stdout is not None
        lines = [(time.perf_counter() - t0, line.rstrip("\n")) for line in proc.stderr]
        out = proc.stdout.read()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"`{' '.join(cmd)}` failed ({proc.returncode}): {lines[-30:]}")
    return wall, out, lines


FIRST_COST = re.compile(
    r"finalists: round \d+: (\d+) runs done \| .*?a decision needs about (\d+) more runs"
    r"(?:, about (\d+) (minutes|s))? \((\d+) in 80%"
)
DECIDED = re.compile(r"finalists: round \d+: (\d+) runs done \| decided")


@dataclass(frozen=True)
class FirstCost:
    """The cost a study first printed and what deciding then took: finalist runs (every finalist run the stage
    counts, as the line does) and minutes, to the round line that says decided (None: it did not decide)."""

    done: int
    median: int
    likely: int  # the 80th percentile
    minutes: float | None  # the median's
    runs_after: int | None
    minutes_after: float | None

    @property
    def ratio(self) -> float | None:
        """The printed median over the runs deciding then took."""
        return self.median / self.runs_after if self.runs_after else None


def first_cost(stamped: list[tuple[float, str]]) -> FirstCost | None:
    """What the log ``stamped`` ((seconds, line) pairs) first printed as the cost of a decision, and what it
    took."""
    for t, line in stamped:
        m = FIRST_COST.search(line)
        if m:
            done, median, likely = int(m.group(1)), int(m.group(2)), int(m.group(5))
            minutes = None if m.group(3) is None else int(m.group(3)) / (60 if m.group(4) == "s" else 1)
            end = next(
                ((u, int(d.group(1))) for u, x in stamped if u >= t and (d := DECIDED.search(x))), None
            )
            return FirstCost(
                done,
                median,
                likely,
                minutes,
                None if end is None else end[1] - done,
                None if end is None else (end[0] - t) / 60,
            )
    return None


@dataclass(frozen=True)
class Outcome:
    """One run of the benchmark, for the table of seeds."""

    seed: int | None
    decided: bool
    seconds: float
    cost: FirstCost | None


def setup(folder: Path, env: dict[str, str]) -> tuple[float, Path]:
    """The README's set-up in a new virtual environment: (seconds, its python)."""
    venv = folder / "venv"
    t = timed([sys.executable, "-m", "venv", str(venv)], folder, env)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    if shutil.which("nvidia-smi") is None:
        t += timed([*pip, "torch==2.13.0"], folder, env)
    t += timed([*pip, "-e", str(ROOT)], folder, env)
    return t, venv / "bin" / "python"


def quote(report: str) -> list[str]:
    """The answer's headline, its trade-off and confidence, and the rules-of-thumb table."""
    lines = report.splitlines()
    keep = [
        line
        for line in lines
        if line.startswith(("**Use ", "**The trade-off", "**Confidence", "**Saving against"))
    ]
    if "## Rules of thumb, checked on this study" in lines:
        start = lines.index("## Rules of thumb, checked on this study")
        table = [line for line in lines[start + 1 :] if line.startswith("|")]
        keep += table[: next((i for i, x in enumerate(table[2:], 2) if not x.startswith("| ")), len(table))]
    return keep


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default: the command line), run the study and its report, print and record the block."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("spec", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--target-min", type=float, default=15.0)
    parser.add_argument("--setup", action="store_true", help="also time the virtual environment and installs")
    parser.add_argument("--keep", type=Path, help="copy the report's folder here")
    parser.add_argument(
        "--keep-study", type=Path, help="copy the study's database and weights (studies/) here"
    )
    parser.add_argument("--record", type=Path, help="append the result to this markdown file")
    parser.add_argument(
        "--until-decided",
        action="store_true",
        help="run the confirm an undecided answer line suggests, before the report, until decided",
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --until-decided: confirms at most")
    parser.add_argument(
        "--seed",
        type=int,
        help="run the spec with this seed instead of its own (a fresh re-run of the study)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", help="one fresh run per seed, then a table of them")
    args = parser.parse_args(argv)
    outcomes = []
    for seed in args.seeds or [args.seed]:
        block, outcome = run_once(args, seed)
        print(block, flush=True)
        append_record(args.record, block)
        outcomes.append(outcome)
    if args.seeds:
        block = seeds_block(args, outcomes)
        print(block)
        append_record(args.record, block)


def seeds_block(args: argparse.Namespace, outcomes: list[Outcome]) -> str:
    """The seeds side by side: decided, minutes, and the cost first printed against what deciding then took."""
    rows = []
    for o in outcomes:
        c = o.cost
        cells = [
            str(o.seed),
            "yes" if o.decided else "no",
            f"{o.seconds / 60:.1f}",
            "none printed"
            if c is None
            else f"{c.median} more runs ({c.likely} in 80%)"
            + ("" if c.minutes is None else f", about {c.minutes:.1f} min")
            + f", after {c.done}",
            "" if c is None or c.runs_after is None else f"{c.runs_after} runs, {c.minutes_after:.1f} min",
            "" if c is None or c.ratio is None else f"{c.ratio:.2f}",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    decided = sum(o.decided for o in outcomes)
    in_time = sum(o.decided and o.seconds <= args.target_min * 60 for o in outcomes)
    near = sum(
        o.cost is not None and o.cost.ratio is not None and abs(o.cost.ratio - 1) <= 0.3 for o in outcomes
    )
    return record_block(
        f"{args.spec.stem}, seeds {', '.join(str(o.seed) for o in outcomes)}: side by side",
        [
            f"machine: {machine()}",
            f"decided: {decided} of {len(outcomes)}; decided within {args.target_min:g} minutes"
            f"{' with set-up' if args.setup else ''}: {in_time} of {len(outcomes)}; the cost first printed within "
            f"30% of the runs deciding then took: {near} of {len(outcomes)}",
        ],
        [
            "| seed | decided | minutes in all | the cost first printed (median, 80th percentile, minutes; after "
            "runs done) | what deciding then took (to the round that decided) | printed median / runs taken |",
            "|---|---|---|---|---|---|",
            *rows,
        ],
    )


def run_once(args: argparse.Namespace, seed: int | None) -> tuple[str, Outcome]:
    """One fresh run of the spec (with ``seed`` instead of its own, when given): its record block and outcome."""
    spec_path = args.spec.resolve()
    from explorer.spec import load_spec

    name = load_spec(spec_path).name
    with tempfile.TemporaryDirectory(prefix=f"explorer-{name}-") as tmp:
        folder = Path(tmp)
        (folder / "studies").mkdir()
        if seed is not None:  # the same spec with another seed, written beside the study
            text = spec_path.read_text()
            lines = [f"seed = {seed}" if line.startswith("seed =") else line for line in text.splitlines()]
            if not any(line.startswith("seed =") for line in text.splitlines()):
                raise SystemExit(f"{spec_path} has no top-level `seed = ...` line to replace")
            spec_path = folder / spec_path.name
            spec_path.write_text("\n".join(lines) + "\n")
        env = {**os.environ, "EXPLORER_CACHE_DIR": str(folder / "cache")}
        env.pop("EXPLORER_STORAGE", None)
        load_before = os.getloadavg()
        t_setup, python = setup(folder, env) if args.setup else (0.0, Path(sys.executable))
        if not args.setup:
            env["PYTHONPATH"] = str(ROOT)
        explorer = [str(python), "-m", "explorer"]
        t_run, _, stamped = run_stamped(
            [*explorer, "study", "run", str(spec_path), "--workers", str(args.workers)], folder, env
        )
        run_err = "\n".join(line for _, line in stamped)
        confirms: list[tuple[int, float, str]] = []  # (budget, seconds, its closing line)
        while args.until_decided and len(confirms) < args.rounds:
            doc = json.loads(run([*explorer, "report", name, "--json"], folder, env)[1])["answer"] or {}
            need = doc.get("runs_to_decide")
            if doc.get("decided") or not need:
                break
            took, _, err = run(
                [*explorer, "confirm", name, "--until-decided", "--budget", str(need)]
                + ["--workers", str(args.workers)],
                folder,
                env,
            )
            closing = [line for line in err.splitlines() if line.startswith("finalists:")]
            confirms.append((need, took, closing[-1].strip() if closing else ""))
        doc = json.loads(run([*explorer, "report", name, "--json"], folder, env)[1])["answer"] or {}
        t_report, answer_line, _ = run([*explorer, "report", name], folder, env)
        summary = [line for line in run_err.splitlines() if line.startswith(("search:", "finalists:"))]
        load_after = os.getloadavg()
        report = (folder / "reports" / name / "report.md").read_text()
        if args.keep:
            shutil.rmtree(args.keep, ignore_errors=True)
            shutil.copytree(folder / "reports" / name, args.keep)
        if args.keep_study:
            shutil.rmtree(args.keep_study, ignore_errors=True)
            shutil.copytree(folder / "studies", args.keep_study)
    t_confirm = sum(t for _, t, _ in confirms)
    total = t_setup + t_run + t_confirm + t_report
    spec_rel = (
        args.spec.resolve().relative_to(ROOT) if args.spec.resolve().is_relative_to(ROOT) else args.spec
    )
    seeded = "" if seed is None else f" (its seed set to {seed})"
    command = f"explorer study run {spec_rel} --workers {args.workers} && explorer report {name}"
    parts = (
        (f"set-up {t_setup:.0f} s + " if args.setup else "")
        + f"study run {t_run:.0f} s + {''.join(f'confirm {t:.0f} s + ' for _, t, _ in confirms)}report {t_report:.0f} s"
    )
    rules = [line for line in quote(report) if line.startswith("| ") and "not enough data" in line]
    block = record_block(
        f"{name}, {args.workers} workers{' (with set-up)' if args.setup else ''}",
        [
            f"machine: {machine()}",
            f"load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
            f"{', '.join(f'{x:.2f}' for x in load_after)}",
            f"explorer's commands (in a fresh folder with its own EXPLORER_CACHE_DIR): `{command}`{seeded}",
            *[f"the run said: `{line.strip()}`" for line in summary],
            *[
                f"then `explorer confirm {name} --until-decided --budget {n} --workers {args.workers}` "
                f"({t:.0f} s) said: `{line}`"
                for n, t, line in confirms
            ],
            f"the answer line: `{answer_line.strip().splitlines()[0] if answer_line.strip() else ''}`",
            f"time: {parts} = **{total / 60:.1f} min** ({'within' if total <= args.target_min * 60 else 'over'} "
            f"the {args.target_min:g}-minute target); rules reading 'not enough data': {len(rules)}",
        ],
        [
            "What the report said:",
            "",
            *[f"> {line}" + ("" if line.startswith("|") else "\n>") for line in quote(report)],
        ],
    )
    cost = first_cost(stamped)
    if cost is not None:
        said = (
            "the study did not decide."
            if cost.runs_after is None
            else f"deciding then took {cost.runs_after} runs and {cost.minutes_after:.1f} minutes."
        )
        block += (
            f"\nThe cost first printed: {cost.median} more runs ({cost.likely} in 80%)"
            + (f", about {cost.minutes:.1f} minutes" if cost.minutes is not None else "")
            + f", after {cost.done} finalist runs; {said}\n"
        )
    return block, Outcome(seed, bool(doc.get("decided")), total, cost)


if __name__ == "__main__":
    main()
