"""Study-level performance targets, measured on this machine and recorded with it.

  overhead   what a study spends outside its trials (sampling, storage, starting) as a share of wall time, and
             what its trials spend besides training (timing, per-epoch storage writes), on the quickstart spec's
             search with one worker (target: everything besides training, evaluation and timing <= 5%)
  workers    trials per minute with 2 workers x 1 thread vs 1 worker x 1 thread, one fixed architecture so every
             trial does the same work (target >= 1.6x)

Early stopping is measured by benchmarks.fidelity, on runs its settings were not chosen on.

Usage: python -m benchmarks.study_efficiency [overhead workers] [--record benchmarks/study_efficiency.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import optuna
import torch

from benchmarks.common import ROOT, append_record, load_average, load_text, machine, record_block
from explorer.spec import SearchSpace, load_spec
from explorer.storage import DONE_STATES, TrialRecord
from explorer.study import RunOptions, plan_run, run

QUICKSTART = ROOT / "studies" / "quickstart.toml"


def _run(spec, tmp: Path, workers: int = 1) -> tuple[list[TrialRecord], float]:
    options = RunOptions(workers=workers, threads=1)
    # created, every input checked
    study = plan_run(spec, options, f"sqlite:///{tmp / (spec.name + '.db')}").study
    t0 = time.perf_counter()
    run(study, options=options, finalists=False, bench=False)
    wall = time.perf_counter() - t0
    return [r for r in study.records() if r.state in DONE_STATES], wall


def overhead(tmp: Path) -> str:
    spec = load_spec(QUICKSTART)
    records, wall = _run(dataclasses.replace(spec, name="overhead"), tmp)
    inside = sum(r.duration_s or 0.0 for r in records)
    training = sum(r.train_time_s or 0.0 for r in records)
    outside = wall - inside
    return (
        f"overhead: {len(records)} search trials, 1 worker x 1 thread, wall {wall:.1f} s; inside trials "
        f"{inside:.1f} s, of which training and evaluation {training:.1f} s and timing plus per-epoch storage "
        f"writes {inside - training:.1f} s ({(inside - training) / wall:.1%}); outside trials (sampling, storage, "
        f"start-up) {outside:.2f} s = {outside / wall:.1%} of wall time (target <= 5%: "
        f"{'met' if outside / wall <= 0.05 else 'NOT met'})"
    )


def _span(records: list[TrialRecord]) -> float:
    """Seconds from the first trial's start to the last one's end: throughput once the workers are up."""
    return (max(r.completed for r in records) - min(r.started for r in records)).total_seconds()


def workers(tmp: Path, epochs: int = 4) -> str:
    """The quickstart space evaluated whole (every architecture once, no early stopping, a short budget), so
    both runs do exactly the same work whatever order the workers take it in."""
    base = load_spec(QUICKSTART)
    es = dataclasses.replace(base.early_stopping, enabled=False)
    task = dataclasses.replace(base.task, epochs=epochs)
    n_trials = len(SearchSpace(base.space).points())
    rates, steady = {}, {}
    for k in (1, 2):
        spec = dataclasses.replace(
            base, name=f"workers{k}", n_trials=n_trials, task=task, early_stopping=es, sampler="random"
        )
        records, wall = _run(spec, tmp, workers=k)
        assert len(records) == n_trials, (len(records), n_trials)
        rates[k] = len(records) / wall * 60
        steady[k] = len(records) / _span(records) * 60
    ratio, ratio_steady = rates[2] / rates[1], steady[2] / steady[1]
    return (
        f"workers: the {n_trials} architectures of the quickstart space, {epochs} epochs each; whole command: 1 worker x 1 thread {rates[1]:.1f} trials/min, "
        f"2 workers x 1 thread {rates[2]:.1f} trials/min = {ratio:.2f}x (includes spawning the worker processes "
        f"and their imports); once running (first trial start to last trial end): {steady[1]:.1f} vs "
        f"{steady[2]:.1f} trials/min = {ratio_steady:.2f}x (target >= 1.6x: whole command "
        f"{'met' if ratio >= 1.6 else 'NOT met'}, once running {'met' if ratio_steady >= 1.6 else 'NOT met'})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", nargs="*", default=["overhead", "workers"])
    ap.add_argument("--record", type=Path, help="append the results to this markdown file")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    os.environ.setdefault("EXPLORER_CACHE_DIR", tempfile.mkdtemp(prefix="explorer-bench-cache-"))
    lines = []
    load_before = load_average()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for which in args.which:
            lines.append({"overhead": overhead, "workers": workers}[which](tmp))
            print(lines[-1], flush=True)
    block = record_block(
        ", ".join(args.which),
        [
            f"machine: {machine()}, torch {torch.__version__}, optuna {optuna.__version__}",
            f"load average (1 min) before/after: {load_text(load_before, load_average())}",
        ],
        [f"- {line}" for line in lines],
    )
    append_record(args.record, block)


if __name__ == "__main__":
    main()
