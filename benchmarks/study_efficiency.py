"""Study-level performance targets (issue 3), measured on this machine and recorded with it.

  overhead        everything a study does besides training, evaluating and timing, as a share of wall time
                  on the quickstart spec (target <= 5%)
  workers         trials per minute with 2 workers x 1 thread vs 1 worker x 1 thread, one fixed architecture
                  so every trial does the same work (target >= 1.6x)
  early-stopping  the quickstart spec with and without early stopping, same seed and budget: share of training
                  epochs saved (target >= 30%) and the final Pareto front's hypervolume (target within 2%)

Usage: python benchmarks/study_efficiency.py [overhead workers early-stopping] [--record benchmarks/studies.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import optuna
import torch
from explorer.insight.analysis import hypervolume_2d

from explorer.engine.device import cpu_model_name
from explorer.search.spec import load_spec
from explorer.search.study import prepare_study, run_study

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "studies" / "quickstart.toml"


def _run(spec, tmp: Path, **kw) -> tuple[optuna.Study, float]:
    handle = prepare_study(spec, f"sqlite:///{tmp / (spec.name + '.db')}")
    t0 = time.perf_counter()
    run_study(handle, **kw)
    return handle.study, time.perf_counter() - t0


def _finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    return study.get_trials(deepcopy=False, states=states)


def overhead(tmp: Path, es_study: tuple[optuna.Study, float] | None = None) -> tuple[str, tuple]:
    study, wall = es_study or _run(load_spec(QUICKSTART), tmp, threads=1)
    inside = sum(
        t.user_attrs.get("fit_time_s", 0.0) + t.user_attrs.get("latency_time_s", 0.0)
        for t in _finished(study)
    )
    inside += study.user_attrs.get("bench_time_s", 0.0)
    share = (wall - inside) / wall
    return (
        f"overhead: wall {wall:.1f} s, training+evaluation+timing {inside:.1f} s, "
        f"everything else {wall - inside:.2f} s = {share:.1%} of wall time (target <= 5%: "
        f"{'met' if share <= 0.05 else 'NOT met'})",
        (study, wall),
    )


def _span(study: optuna.Study) -> float:
    """Seconds from the first trial's start to the last one's end: throughput once the workers are up."""
    done = _finished(study)
    return (max(t.datetime_complete for t in done) - min(t.datetime_start for t in done)).total_seconds()


def workers(tmp: Path, n_trials: int = 24) -> str:
    base = load_spec(QUICKSTART)
    space = dataclasses.replace(
        base.space, d_model=(32,), n_layers=(2,), heads=(4,), min_dk=(4,), families=("uniform",)
    )
    es = dataclasses.replace(base.early_stopping, enabled=False)
    rates, steady = {}, {}
    for k in (1, 2):
        spec = dataclasses.replace(
            base, name=f"workers{k}", n_trials=n_trials, space=space, early_stopping=es, sampler="random"
        )
        study, wall = _run(spec, tmp, workers=k, threads=1)
        assert len(_finished(study)) == n_trials
        rates[k] = n_trials / wall * 60
        steady[k] = n_trials / _span(study) * 60
    ratio, ratio_steady = rates[2] / rates[1], steady[2] / steady[1]
    return (
        f"workers: {n_trials} identical trials; whole command: 1 worker x 1 thread {rates[1]:.1f} trials/min, "
        f"2 workers x 1 thread {rates[2]:.1f} trials/min = {ratio:.2f}x (includes spawning the worker processes "
        f"and their imports); once running (first trial start to last trial end): {steady[1]:.1f} vs "
        f"{steady[2]:.1f} trials/min = {ratio_steady:.2f}x (target >= 1.6x: whole command "
        f"{'met' if ratio >= 1.6 else 'NOT met'}, once running {'met' if ratio_steady >= 1.6 else 'NOT met'})"
    )


def _front_points(study: optuna.Study) -> np.ndarray:
    pts = np.array([t.values for t in study.best_trials], dtype=float)
    return pts  # [val_accuracy, latency_ms]


def early_stopping(tmp: Path) -> tuple[str, tuple[optuna.Study, float]]:
    base = load_spec(QUICKSTART)
    on_study, on_wall = _run(dataclasses.replace(base, name="es_on"), tmp, threads=1)
    off_spec = dataclasses.replace(
        base, name="es_off", early_stopping=dataclasses.replace(base.early_stopping, enabled=False)
    )
    off_study, off_wall = _run(off_spec, tmp, threads=1)
    planned = sum(t.user_attrs["epochs_planned"] for t in _finished(on_study))
    run = sum(t.user_attrs.get("epochs_run", 0) for t in _finished(on_study))
    saved = 1 - run / planned
    # One normalization for both fronts: the union of both studies' complete trials, reference (1.1, 1.1).
    every = np.array(
        [
            t.values
            for s in (on_study, off_study)
            for t in s.get_trials(deepcopy=False)
            if t.state == optuna.trial.TrialState.COMPLETE
        ],
        dtype=float,
    )
    lo, hi = every.min(axis=0), every.max(axis=0)

    def hv(study: optuna.Study) -> float:
        p = _front_points(study)
        acc = (hi[0] - p[:, 0]) / (hi[0] - lo[0])
        lat = (p[:, 1] - lo[1]) / (hi[1] - lo[1])
        return hypervolume_2d(np.stack([acc, lat], axis=1), (1.1, 1.1))

    hv_on, hv_off = hv(on_study), hv(off_study)
    gap = (hv_off - hv_on) / hv_off
    text = (
        f"early stopping: {planned - run} of {planned} planned epochs saved = {saved:.1%} (target >= 30%: "
        f"{'met' if saved >= 0.30 else 'NOT met'}); {sum(1 for t in _finished(on_study) if t.user_attrs.get('early_stopped'))} "
        f"trials stopped; hypervolume with {hv_on:.4f} vs without {hv_off:.4f}: "
        f"{'-' if gap > 0 else '+'}{abs(gap):.1%} (target within 2%: {'met' if abs(gap) <= 0.02 or gap < 0 else 'NOT met'}); "
        f"wall {on_wall:.0f} s vs {off_wall:.0f} s"
    )
    return text, (on_study, on_wall)


def _machine() -> str:
    return (
        f"{cpu_model_name()}, {os.cpu_count()} cores, torch {torch.__version__}, optuna {optuna.__version__}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("which", nargs="*", default=["early-stopping", "overhead", "workers"])
    ap.add_argument("--record", type=Path, help="append the results to this markdown file")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    os.environ.setdefault("EXPLORER_CACHE_DIR", tempfile.mkdtemp(prefix="explorer-bench-cache-"))
    lines = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        es_result = None
        if "early-stopping" in args.which:
            text, es_result = early_stopping(tmp)
            lines.append(text)
            print(text, flush=True)
        if "overhead" in args.which:
            text, _ = overhead(tmp, es_result)  # the early-stopping run is a quickstart run: reuse it
            lines.append(text)
            print(text, flush=True)
        if "workers" in args.which:
            lines.append(workers(tmp))
            print(lines[-1], flush=True)
    if args.record:
        load = os.getloadavg()
        block = [
            f"\n## {dt.datetime.now().strftime('%Y-%m-%d %H:%M')} UTC, {_machine()}",
            f"load average before/after: {load[0]:.2f}; command: `python {' '.join(sys.argv)}`",
            "",
        ]
        block += [f"- {line}" for line in lines]
        with args.record.open("a") as f:
            f.write("\n".join(block) + "\n")


if __name__ == "__main__":
    main()
