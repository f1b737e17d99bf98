"""Does the committed text-gqa study finish in 10 minutes on 2 CPU cores, and what does its report answer?

    .venv/bin/python benchmarks/text_gqa.py [--workers 2] [--record benchmarks/text_gqa.md]

Runs, in a fresh temporary folder with its own EXPLORER_CACHE_DIR (so no latency is read from an earlier run),
exactly what a user runs:

    explorer study run studies/text-gqa.toml --workers 2 && explorer report text-gqa

and times the two commands together, start to exit. Records the machine, the load average before and after
(other jobs share the machine: a loaded machine trains slower), the time of each command, and the report's
answer (the (heads, kv_heads) recommendation), its saving against multi-head attention and the grouped-query
rule's verdict, quoted from report.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SPEC = ROOT / "studies" / "text-gqa.toml"
TARGET_S = 600.0


def run(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "explorer.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True)  # fmt: skip
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"`explorer {' '.join(args)}` failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall


def quote(report: str) -> list[str]:
    """The answer's headline, the saving against multi-head attention and the grouped-query rule's row."""
    lines = report.splitlines()
    heads = ("**Use ", "**Saving against", "**Against multi-head", "**Confidence")
    keep = [line for line in lines if line.startswith(heads)]
    keep += [line for line in lines if line.startswith("| Grouped-query attention keeps")]
    return keep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--record", type=Path, help="append the result to this markdown file")
    args = parser.parse_args()
    from explorer.engine.device import cpu_model_name

    with tempfile.TemporaryDirectory(prefix="explorer-text-gqa-") as tmp:
        folder = Path(tmp)
        (folder / "studies").mkdir()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "EXPLORER_CACHE_DIR": str(folder / "cache")}
        env.pop("EXPLORER_STORAGE", None)
        load_before = os.getloadavg()
        started = dt.datetime.now(dt.timezone.utc)
        t_run = run(["study", "run", str(SPEC), "--workers", str(args.workers)], folder, env)
        t_report = run(["report", "text-gqa"], folder, env)
        load_after = os.getloadavg()
        report = (folder / "reports" / "text-gqa" / "report.md").read_text()
    total = t_run + t_report
    command = f"explorer study run studies/text-gqa.toml --workers {args.workers} && explorer report text-gqa"
    block = [
        f"## {started:%Y-%m-%dT%H:%M}: text-gqa, {args.workers} workers",
        "",
        f"- machine: `{cpu_model_name()}`, {os.cpu_count()} CPUs; Python {sys.version.split()[0]}",
        f"- load average (1, 5, 15 min) before: {', '.join(f'{x:.2f}' for x in load_before)}; after: "
        f"{', '.join(f'{x:.2f}' for x in load_after)}",
        f"- command (in a fresh folder with its own EXPLORER_CACHE_DIR): `{command}`",
        f"- recorded by: `python benchmarks/text_gqa.py --workers {args.workers}`",
        f"- time: study run {t_run:.0f} s + report {t_report:.0f} s = **{total / 60:.1f} min** "
        f"({'within' if total <= TARGET_S else 'over'} the {TARGET_S / 60:.0f}-minute target)",
        "",
        "What the report said:",
        "",
        *[f"> {line}\n>" for line in quote(report)],
        "",
    ]
    text = "\n".join(block)
    print(text)
    if args.record:
        with args.record.open("a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
