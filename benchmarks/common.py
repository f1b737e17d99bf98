"""What the benchmarks share: the machine and load a figure was measured under, Markdown tables, the command
that reproduces a run, and the dated block a run appends to its record.

A record block reads::

    ## 2026-12-01 13:27 UTC: TITLE

    - machine: AMD EPYC 7763 64-Core Processor, 2 CPUs, Python 3.11.7
    - load average (1 min) before/after: 0.79 / 1.52
    - command: `python -m benchmarks.NAME --record benchmarks/NAME.md`

    BODY (tables, findings)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explorer.measurements import load_average

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EXPLORER",
    "HERE",
    "ROOT",
    "add_run_args",
    "append_json",
    "append_record",
    "command",
    "commit",
    "explorer_env",
    "frame_table",
    "load_average",
    "load_text",
    "machine",
    "markdown_table",
    "record_block",
    "stamp",
]

ROOT = Path(__file__).resolve().parents[1]  # the repository
HERE = ROOT / "benchmarks"  # where the records live
EXPLORER = (sys.executable, "-m", "explorer")  # the command line, in a process of its own


def stamp() -> str:
    """When a record block was written, to the minute, in UTC: ``2026-12-01 13:27 UTC``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def machine() -> str:
    """The CPU's model, the logical CPUs and the Python version (a GPU is named by the script that used it)."""
    from explorer.measure import cpu_model_name  # imports torch: only once the figures are taken

    return f"{cpu_model_name()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def load_text(before: float | None, after: float | None = None) -> str:
    """The 1-minute load average as a record states it: ``0.79 / 1.52`` (before / after), n/a where unknown."""
    shown = [f"{x:.2f}" if x is not None else "n/a" for x in (before, after)]
    return shown[0] if after is None else " / ".join(shown)


def command(omit: Iterable[str] = ()) -> str:
    """The command that reproduces this run, ``python -m benchmarks.NAME ARGS``, without the options in
    ``omit`` (and their values): free text such as a note belongs in the record, not in the command."""
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        head = ["python", "-m", spec.name.removesuffix(".__main__")]
    else:  # run as a file
        head = ["python", os.path.relpath(getattr(main, "__file__", sys.argv[0]), ROOT)]
    skip, args = False, []
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg in omit:
            skip = True
        elif not any(arg.startswith(f"{o}=") for o in omit):
            args.append(arg)
    return shlex.join([*head, *args])


def commit() -> str:
    """The repository's commit (short), marked when explorer/ has uncommitted changes; "unknown" without git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "explorer"], cwd=ROOT, capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    return (head.stdout.strip() or "unknown") + (" (explorer/ modified)" if dirty.stdout.strip() else "")


def explorer_env(cache_dir: Path, **extra: str) -> dict[str, str]:
    """The environment for ``explorer`` commands a benchmark starts: this checkout's explorer, a latency cache
    of the benchmark's own, and none of the user's EXPLORER_* settings (no storage or artifacts from outside)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPLORER_")}
    return env | {"PYTHONPATH": str(ROOT), "EXPLORER_CACHE_DIR": str(cache_dir), **extra}


def add_run_args(parser: argparse.ArgumentParser) -> None:
    """The options of a timing benchmark: threads, device, where to record, and a note for the record."""
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (stated in the record)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--record", type=Path, help="append a dated markdown block to this file")
    parser.add_argument(
        "--note", default="", help="free text for the record (e.g. 'machine shared with other jobs')"
    )


def _cell(value: Any) -> str:
    return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> str:
    """A GitHub Markdown table of already formatted cells (None is empty, ``|`` is escaped). ``align`` gives one
    letter a column, ``l`` or ``r`` (default: every column left)."""
    align = align or "l" * len(header)
    if len(align) != len(header):
        raise ValueError(f"align {align!r} has {len(align)} letters for {len(header)} columns")
    lines = [
        "| " + " | ".join(map(_cell, header)) + " |",
        "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|",
    ]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a row of {len(row)} cells under {len(header)} columns: {row!r}")
        lines.append("| " + " | ".join(map(_cell, row)) + " |")
    return "\n".join(lines)


def frame_table(df: pd.DataFrame, floatfmt: str = "{:.3g}") -> str:
    """A DataFrame as a Markdown table, floats written with ``floatfmt`` (pandas' own ``to_markdown`` needs
    tabulate, which explorer does not depend on)."""
    rows = [
        [floatfmt.format(v) if isinstance(v, float) else v for v in row] for row in df.itertuples(index=False)
    ]
    return markdown_table([str(c) for c in df.columns], rows)


def record_block(
    title: str, facts: Iterable[str], body: Iterable[str] = (), *, omit: Iterable[str] = ()
) -> str:
    """A dated record block: ``## DATE: title``, the run's ``facts`` as a list ending with the command that
    reproduces it (:func:`command`, without ``omit``), a blank line, then the ``body`` lines."""
    lines = [f"## {stamp()}: {title}", "", *(f"- {f}" for f in facts), f"- command: `{command(omit)}`"]
    body = list(body)
    if body:
        lines += ["", *body]
    return "\n".join(lines).rstrip("\n") + "\n"


def append_record(path: Path | None, block: str, *, title: str = "") -> None:
    """Append ``block`` to the record at ``path``, after a blank line; a new record starts with ``title``
    (its heading and a line on how it is written). Nothing happens when ``path`` is None."""
    if path is None:
        return
    if title and not path.exists():
        path.write_text(title.rstrip("\n") + "\n", encoding="utf-8")
    with path.open("a", encoding="utf-8") as f:
        f.write("\n" + block.rstrip("\n") + "\n")


def append_json(path: Path, entry: Any) -> None:
    """Append ``entry`` to the JSON list at ``path`` (the raw figures beside a record), creating it if need be."""
    old = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([*old, entry], indent=1) + "\n")
