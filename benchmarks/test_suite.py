"""How long the README's test command takes, and which tests take the time.

    python -m benchmarks.test_suite [--clone] [--target-min 8] [--note TEXT] [--record benchmarks/test_suite.md]

Reads the test command from README.md (the first code block, the line after the comment that says "Run the
tests"), runs it through the shell, each ``&&`` part timed on its own, with the user's EXPLORER_* settings
removed (EXPLORER_TEST_POSTGRES_URL is kept: with it the PostgreSQL tests run, as ``.ci/run`` does). By default it
runs in this checkout, with its ``.venv``. ``--clone`` runs it as a newcomer does: in a fresh ``git clone`` of
this commit, after the README's set-up of a new virtual environment (``python3 -m venv .venv`` and, where no GPU
is present, the CPU build of torch), so the install part times a first install.

Records the machine (CPU model and cores), the load average before and after (a loaded machine runs slower), the
commit, each part's wall time, pytest's counts (passed, skipped, failed) and the slowest durations pytest printed
(the README's command prints them: ``--durations`` in pyproject.toml's pytest options).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import ROOT, append_record, commit, load_average, load_text, machine, record_block

MARK = "Run the tests"  # the comment in the README's first code block that precedes the test command
TITLE = """# The README's test command: wall time and the slowest tests

`benchmarks/test_suite.py` runs the test command of README.md's first code block (the set-up's install, then
pytest) and records its wall time, pytest's counts and the slowest durations pytest printed. Target: at most
8 minutes on 2 CPU cores from a fresh clone (`--clone`). New runs append a dated block
(`--record benchmarks/test_suite.md`).
"""


def readme_test_command(readme: str) -> str:
    """The line after the comment naming ``MARK`` in the README's first code block."""
    match = re.search(r"^```\w*\n(.*?)^```", readme, flags=re.M | re.S)
    if match is None:
        raise SystemExit("README.md has no code block")
    lines = match.group(1).splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.lstrip().startswith("#") and MARK in line:
            return lines[i + 1].strip()
    raise SystemExit(f"README.md's first code block has no comment with {MARK!r} before a command")


def counts(output: str) -> dict[str, int]:
    """pytest's closing counts (``1528 passed, 3 skipped, 2 warnings in 1195.31s``): outcome to number."""
    summary = next((line for line in reversed(output.splitlines()) if re.search(r"\bin [\d.]+s\b", line)), "")
    return {
        word: int(n)
        for n, word in re.findall(r"(\d+) (passed|skipped|failed|errors?|xfailed|xpassed)", summary)
    }


def slowest(output: str) -> list[str]:
    """The lines of pytest's ``slowest N durations`` section (``12.34s call tests/...::test_x``)."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if re.search(r"slowest (\d+ )?durations", line)), None)
    if start is None:
        return []
    return [line for line in lines[start + 1 :] if re.match(r"\s*[\d.]+s (setup|call|teardown) ", line)]


def run_part(part: str, cwd: Path, env: dict[str, str]) -> tuple[float, int, str]:
    """One ``&&`` part through the shell: (seconds, exit code, stdout and stderr)."""
    t0 = time.perf_counter()
    done = subprocess.run(part, shell=True, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - t0, done.returncode, done.stdout + done.stderr


def fresh_clone(folder: Path, env: dict[str, str]) -> tuple[Path, float]:
    """A ``git clone`` of this commit in ``folder`` with the README's new virtual environment: (clone, seconds)."""
    clone = folder / "explorer"
    t0 = time.perf_counter()
    for cmd in (
        ["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)],
        ["git", "-C", str(clone), "checkout", "-q", commit().split()[0]],
        [sys.executable, "-m", "venv", str(clone / ".venv")],
    ):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"`{' '.join(cmd)}` failed ({done.returncode}): {done.stderr[-2000:]}")
    if shutil.which("nvidia-smi") is None:
        seconds, code, out = run_part(".venv/bin/pip install -q torch==2.13.0", clone, env)
        if code != 0:
            raise SystemExit(f"installing torch failed ({code}): {out[-2000:]}")
    return clone, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` (default: the command line), run the README's test command, print and record the block."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--clone", action="store_true", help="run in a fresh clone with a new virtual environment"
    )
    parser.add_argument("--target-min", type=float, default=8.0)
    parser.add_argument(
        "--note", default="", help="free text for the record (e.g. 'machine shared with other jobs')"
    )
    parser.add_argument("--record", type=Path, help="append a dated markdown block to this file")
    args = parser.parse_args(argv)
    command = readme_test_command((ROOT / "README.md").read_text())
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("EXPLORER_") or k == "EXPLORER_TEST_POSTGRES_URL"
    }
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="explorer-tests-") as tmp:
        cwd, t_setup = fresh_clone(Path(tmp), env) if args.clone else (ROOT, 0.0)
        parts, output = [], ""
        for part in command.split(" && "):
            seconds, code, out = run_part(part, cwd, env)
            parts.append((part, seconds))
            output = out
            if code != 0:
                raise SystemExit(f"`{part}` failed ({code}):\n{out[-4000:]}")
    load_after = load_average()
    total = sum(seconds for _, seconds in parts)
    found = counts(output)
    times = " + ".join(f"{seconds:.0f} s (`{part}`)" for part, seconds in parts)
    where = "a fresh clone with a new virtual environment" if args.clone else "this checkout and its .venv"
    facts = [
        f"machine: {machine()}",
        f"load average (1 min) before/after: {load_text(load_before, load_after)}",
        f"commit: {commit()}; run in {where}"
        + (f" (clone, venv and torch: {t_setup:.0f} s, not counted)" if args.clone else ""),
        f"the README's test command: `{command}`",
        f"time: {times} = **{total / 60:.1f} min** "
        f"({'within' if total <= args.target_min * 60 else 'over'} the {args.target_min:g}-minute target)",
        "pytest: " + ", ".join(f"{n} {word}" for word, n in found.items()),
    ]
    if args.note:
        facts.append(f"note: {args.note}")
    block = record_block(
        "the README's test command",
        facts,
        ["Slowest durations, as pytest printed them:", "", "```", *slowest(output), "```"],
        omit=("--note",),
    )
    print(block)
    append_record(args.record, block, title=TITLE)


if __name__ == "__main__":
    main()
