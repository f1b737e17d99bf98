"""How fast do the read-only commands answer? `explorer study list` and `study status` in fresh processes.

    python -m benchmarks.cli_startup [--runs 5] [--record benchmarks/cli_startup.md]

Creates a small stored study (4 trials written straight into a SQLite file, no training), then times the whole
command, process start to exit, for `explorer study list`, `explorer study status NAME` and, for reference,
`explorer --help`, alternating between them, ``--runs`` times each. Also records whether the command imported
torch, scipy.stats, pandas or seaborn (it should import none: read-only commands go through
explorer.study._catalog). Target: `study list` and `study status` under 2 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    ROOT,
    append_record,
    load_average,
    load_text,
    machine,
    markdown_table,
    record_block,
)

TARGET_S = 2.0
PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['explorer', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('explorer', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "heavy = [m for m in ('torch', 'scipy.stats', 'pandas', 'seaborn') if m in sys.modules]\n"
    "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
)


def make_study(folder: Path) -> str:
    """A stored study with a spec and 4 finished trials, written without training anything."""
    import optuna
    from optuna.trial import TrialState, create_trial

    from explorer.layout import ModelConfig
    from explorer.spec import spec_from_dict
    from explorer.storage import TrialRecord

    url = f"sqlite:///{folder / 'studies' / 'startup.db'}"
    (folder / "studies").mkdir()
    spec = spec_from_dict(
        {
            "name": "startup",
            "n_trials": 4,
            "task": {"name": "digits"},
            "space": {"d_model": [32], "n_layers": [2], "heads": [1, 2, 4, 8]},
        }
    )
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(study_name="startup", storage=url, directions=["maximize", "minimize"])
    study.set_user_attr("spec", spec.stored())
    for i, h in enumerate((1, 2, 4, 8)):
        r = TrialRecord(i, TrialState.COMPLETE, "search", ModelConfig(d_model=32, heads=(h, h)), 3e-3, i, 4)
        attrs = {**r.arch_attrs(), "val_accuracy": 0.8 + 0.01 * i, "history": [0.8], "val_size": 270}
        attrs["latency"] = {
            "median_ms": 1.0 + i,
            "iqr_ms": 0.1,
            "batch_size": 16,
            "seq_len": 16,
            "threads": 1,
            "device": "cpu",
            "dtype": "float32",
            "runs": 5,
        }
        study.add_trial(create_trial(state=TrialState.COMPLETE, values=[0.8, 1.0 + i], user_attrs=attrs))
    return url


def run(args: list[str], cwd: Path) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("EXPLORER_STORAGE", None)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    heavy = next((line[6:] for line in done.stderr.splitlines() if line.startswith("HEAVY=")), "?")
    if "error" in done.stderr.lower():
        raise SystemExit(done.stderr)
    return wall, heavy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--record", type=Path, help="append a dated block to this markdown file")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="explorer-startup-"))
    make_study(folder)
    commands = {
        "explorer study list": ["study", "list"],
        "explorer study status startup": ["study", "status", "startup"],
        "explorer --help": ["--help"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    heavy: dict[str, str] = {}
    load_before = load_average()
    for _ in range(args.runs):
        for name, argv in commands.items():  # alternating: each round runs every command once
            wall, imported = run(argv, folder)
            times[name].append(wall)
            heavy[name] = imported
    load_after = load_average()
    rows = []
    for name, walls in times.items():
        med = statistics.median(walls)
        verdict = "yes" if max(walls) < TARGET_S else ("median yes" if med < TARGET_S else "NO")
        runs = ", ".join(f"{w:.2f}" for w in walls)
        rows.append([f"`{name}`", f"{med:.2f}", f"{max(walls):.2f}", runs, verdict, heavy[name] or "none"])
    block = record_block(
        f"read-only commands, {args.runs} fresh processes each",
        [f"machine: {machine()}", f"load average (1 min) before/after: {load_text(load_before, load_after)}"],
        [
            markdown_table(
                ["command", "median (s)", "max (s)", "all runs (s)", "under 2 s", "heavy modules imported"],
                rows,
            )
        ],
    )
    print(block)
    append_record(args.record, block)
    print(json.dumps({k: statistics.median(v) for k, v in times.items()}), file=sys.stderr)


if __name__ == "__main__":
    main()
