"""The chaos record: one table of counts per scenario, the notes, and the bad inputs' table."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import optuna

from benchmarks._chaos.audit import Outcome
from benchmarks.common import markdown_table


def versions() -> str:
    import torch

    return f"torch {torch.__version__}, optuna {optuna.__version__}"


def markdown(outcomes: Iterable[Outcome], rows: list[dict[str, Any]], header: dict[str, str]) -> str:
    """The record block: ``header`` (its date the heading, the rest a list), the counts per scenario with their
    total, the notes, and the bad inputs one by one."""
    outcomes = list(outcomes)
    keys = ("rounds", "lost", "duplicated", "stuck", "deleted", "tracebacks", "corrupt", "misreported")
    counts = [[o.scenario, o.storage, *(getattr(o, k) for k in keys)] for o in outcomes]
    counts.append(["**total**", "", *(sum(getattr(o, k) for o in outcomes) for k in keys)])
    lines = [f"## {header['date']}", ""]
    lines += [f"- {k}: {v}" for k, v in header.items() if k != "date"]
    lines += [
        "",
        markdown_table(
            [
                "scenario",
                "storage",
                "rounds",
                "lost",
                "duplicated",
                "stuck",
                "files deleted",
                "tracebacks",
                "integrity_check failed",
                "summary misreported",
            ],
            counts,
        ),
        "",
        "For bad inputs, *stuck* counts inputs not refused cleanly; for the report scenario, commands that did not "
        "do what was asked.",
        "",
        "Notes per scenario:",
        "",
    ]
    for o in outcomes:
        lines.append(f"- **{o.scenario} ({o.storage})**")
        lines += [f"  - {n}" for n in o.notes]
    if rows:
        table = markdown_table(
            ["bad input", "exit", "`error:` lines", "other lines", "traceback", "disk unchanged", "message"],
            [
                [
                    r["input"],
                    r["exit"],
                    r["error_lines"],
                    r["other_lines"],
                    "yes" if r["traceback"] else "no",
                    "yes" if r["unchanged"] else "NO",
                    r["message"],
                ]
                for r in rows
            ],
        )
        lines += ["", table]
    return "\n".join(lines) + "\n"
