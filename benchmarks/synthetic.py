"""Studies for the benchmarks to work on: a synthetic stored study (no training) and a tiny real spec.

:func:`make_study` fills an Optuna study with trials written exactly as the objective writes them
(:meth:`explorer.storage._record.TrialRecord.to_attrs`): accuracy falls at one head and saturates by eight, drops
when d_k < 16, and latency grows with width and head count, so a report on it has something to show.
:func:`write_tiny_spec` writes a digits spec small enough to train in seconds. The tests use both through
tests/fixtures.py (with their own defaults); a benchmark never imports the test suite.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState, create_trial

from explorer.layout import ModelConfig, expand_schedule, unit_seed, valid_heads
from explorer.measurements import LatencyResult
from explorer.storage import TrialRecord, companion_name, label_companion

__all__ = [
    "architectures",
    "make_study",
    "write_tiny_spec",
]

D_MODELS = (64, 128, 256)
LAYERS = (2, 4)
HEADS = (1, 2, 4, 8, 16, 32)
BASE = dt.datetime(2025, 1, 1, 12, 0, 0)
N_VAL = 270
_LIVE = (TrialState.PRUNED, TrialState.RUNNING)  # besides the n complete ones, what counts towards a total


def synthetic_accuracy(heads: tuple[int, ...], d_model: int) -> float:
    """The known truth the tests check: -6 points at one head, +1.5 per doubling up to 8, -4 when d_k < 16."""
    h = float(np.mean([min(x, 8) for x in heads]))
    acc = 0.80 + 0.02 * math.log2(d_model / 64) + 0.015 * math.log2(h)
    acc -= 0.06 * (sum(x == 1 for x in heads) / len(heads))
    acc -= 0.04 * (min(d_model // x for x in heads) < 16)
    return acc


def synthetic_latency(heads: tuple[int, ...], d_model: int) -> float:
    return 0.2 * (d_model / 64) ** 1.5 * len(heads) * (1 + 0.03 * float(np.mean(heads)))


def _latency(ms: float, when: str, spread: float = 0.02) -> LatencyResult:
    """A latency measurement of median ``ms`` with ten block times spread by ``spread`` (relative)."""
    blocks = tuple(ms * (1 + spread * (k - 4.5) / 4.5) for k in range(10))
    return LatencyResult(
        ms, ms * spread, 64, 16, 1, "cpu (synthetic)", "float32", 10, False, blocks, when, 0.1
    )


def _record(
    number: int,
    heads: tuple[int, ...],
    acc: float,
    lat: float,
    *,
    d_model: int,
    state: TrialState = TrialState.COMPLETE,
    role: str = "search",
    seed: int | None = None,
    epochs: int = 10,
    history: tuple[float, ...],
    **changes: Any,
) -> TrialRecord:
    """One trial record as the objective stores it."""
    return TrialRecord(
        number=number,
        state=state,
        role=role,
        config=ModelConfig(d_model=d_model, heads=heads, min_dk=1, mlp_ratio=2.0),
        lr=1e-3,
        seed=number if seed is None else seed,
        epochs_planned=epochs,
        batch_size=32,
        history=history,
        val_accuracy=history[-1] if history else None,
        test_accuracy=(history[-1] - 0.005) if history else None,
        val_size=N_VAL,
        latency=_latency(lat, f"2025-01-01T12:{number // 60:02d}:{number % 60:02d}+00:00"),
        params=d_model * d_model * 12 * len(heads),
        flops=d_model * d_model * 24 * len(heads),
        device="cpu (synthetic)",
        torch_version="2.13",
        proposal="sampler" if role == "search" else "enqueued",
        **changes,
    )


def architectures() -> list[tuple[int, tuple[int, ...]]]:
    out = []
    for d in D_MODELS:
        valid = [h for h in HEADS if h in valid_heads(d, 2)]
        for layers in LAYERS:
            out += [(d, (h,) * layers) for h in valid]
            for lo, hi in itertools.combinations(valid, 2):
                out.append((d, expand_schedule(f"increasing:{lo}-{hi}", layers, d)))
                out.append((d, expand_schedule(f"decreasing:{hi}-{lo}", layers, d)))
    return list(dict.fromkeys(out))


def _spec(name: str, total: int, max_latency_ms: float | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "n_trials": total,
        "sampler": "random",
        "task": {"name": "digits", "epochs": 10},
        "space": {
            "d_model": list(D_MODELS),
            "n_layers": list(LAYERS),
            "heads": list(HEADS),
            "min_dk": 2,
            "families": ["uniform", "increasing", "decreasing"],
            "mlp_ratio": [2.0],
        },
        "latency": {"device": "cpu", "batch_size": 64},
        "finalists": {"seeds": 3, "folds": 1},
    }
    if max_latency_ms is not None:
        spec["budgets"] = {"max_latency_ms": max_latency_ms}
    return spec


def make_study(
    n: int,
    *,
    storage: str | optuna.storages.BaseStorage | None,
    name: str,
    states: dict[TrialState, int] | None = None,
    max_latency_ms: float | None = None,
    bench: list[dict] | None = None,
    finalists: int = 0,
    seed: int = 0,
    noise: float = 0.004,
    n_trials_target: int | None = None,
    apart: bool = False,
) -> optuna.Study:
    """A study of ``n`` COMPLETE search trials over distinct synthetic architectures, plus trials in ``states``
    (e.g. ``{TrialState.FAIL: 20, TrialState.PRUNED: 60}``), plus ``finalists`` seeds of the four most accurate architectures, an
    attention ``bench`` table when given, and a latency budget whose constraints the trials carry. Its spec's
    total is ``n_trials_target``, else the trials that count towards one (complete, stopped early, running).
    The finalist runs are trials of the study itself (as explorer kept them before they were kept apart), or with
    ``apart`` of its companion study ``NAME/finalists`` (explorer.storage._companion), as explorer keeps them now."""
    rng = np.random.default_rng(seed)
    archs = architectures()
    kinds = [TrialState.COMPLETE] * n + [s for s, k in (states or {}).items() for _ in range(k)]
    if len(kinds) > len(archs):
        raise ValueError(f"only {len(archs)} synthetic architectures exist")
    picks = rng.permutation(len(archs))[: len(kinds)]
    study = optuna.create_study(study_name=name, storage=storage, directions=["maximize", "minimize"])
    live = n + sum(k for s, k in (states or {}).items() if s in _LIVE)
    study.set_user_attr("spec", _spec(name, n_trials_target or live, max_latency_ms))
    study.set_user_attr("task", "digits")
    if bench is not None:
        study.set_user_attr("bench", bench)
    made: list[TrialRecord] = []
    for i, (kind, a) in enumerate(zip(kinds, picks, strict=True)):
        d, heads = archs[a]
        acc = float(np.clip(synthetic_accuracy(heads, d) + rng.normal(0, noise), 0, 1))
        lat = synthetic_latency(heads, d) * (1 + rng.normal(0, 0.02))
        ran = 4 if kind is TrialState.PRUNED else 0 if kind is TrialState.FAIL else 10
        history = tuple(acc * (0.6 + 0.04 * (e + 1)) for e in range(ran))
        changes: dict[str, Any] = {}
        if kind is TrialState.PRUNED:
            changes["stop"] = "stopped at epoch 4"
        if kind is TrialState.FAIL:
            changes["fail_reason"] = "diverged: loss nan"
        made.append(_record(i, heads, acc, lat, d_model=d, state=kind, history=history, **changes))
    if finalists:
        best = sorted((r for r in made if r.state is TrialState.COMPLETE), key=lambda r: -r.val_accuracy)[:4]
        number = len(made)
        for r in best:
            for s in range(finalists):
                acc = synthetic_accuracy(r.heads, r.config.d_model) + 0.05 + rng.normal(0, noise)
                acc = float(np.clip(acc, 0, 1))
                lat = r.latency.median_ms * (1 + rng.normal(0, 0.02))
                history = tuple(acc * (0.6 + 0.4 * (e + 1) / 30) for e in range(30))
                f = _record(
                    number,
                    r.heads,
                    acc,
                    lat,
                    d_model=r.config.d_model,
                    role="finalist",
                    seed=unit_seed(0, s),
                    epochs=30,
                    history=history,
                    label="front",
                )
                made.append(f)
                number += 1
    companion = None
    if apart and finalists:
        companion = optuna.create_study(
            study_name=companion_name(name), storage=study._storage, directions=["maximize", "minimize"]
        )
        label_companion(companion, study)
    for i, r in enumerate(made):
        running = r.state is TrialState.RUNNING
        constraints = None
        if max_latency_ms is not None and not running:
            constraints = {"latency_ms": r.latency.median_ms - max_latency_ms}
        t = create_trial(
            state=r.state,
            values=[r.val_accuracy, r.latency.median_ms] if r.state is TrialState.COMPLETE else None,
            user_attrs=r.to_attrs(),
            constraints=constraints,
        )
        t.datetime_start = BASE + dt.timedelta(seconds=10 * i)
        if not running:
            t.datetime_complete = t.datetime_start + dt.timedelta(seconds=8)
        (companion if companion is not None and r.role == "finalist" else study).add_trial(t)
    return study


TINY_SPEC = """
name = "{name}"
n_trials = {n_trials}
sampler = "{sampler}"
seed = 0
bench = {bench}

[task]
name = "digits"
epochs = {epochs}
batch_size = 128

[space]
d_model = [16, 32]
n_layers = [1, 2]
heads = [1, 2, 4]
min_dk = [4]
families = ["uniform", "increasing", "decreasing"]
mlp_ratio = [2.0]
lr = 3e-3

[latency]
device = "cpu"
batch_size = 16
threads = 1
min_run_time = 0.05

[early_stopping]
enabled = {early}
min_epochs = 1

[finalists]
enabled = {finalists}
top = 1
seeds = 2
references = {references}
folds = {folds}
epochs = {final_epochs}
pilot = {pilot}
"""


def write_tiny_spec(
    folder: Path,
    name: str = "tiny",
    n_trials: int = 4,
    epochs: int = 2,
    *,
    sampler: str = "tpe",
    early: bool = True,
    finalists: bool = False,
    bench: bool = False,
    references: bool = False,
    folds: int = 1,
    pilot: bool = False,
    extra: str = "",
) -> Path:
    """Write ``folder/NAME.toml``: a digits study of 24 small architectures (d_model 16 or 32, one layer of 1, 2
    or 4 heads or two in uniform, increasing and decreasing layouts), ``epochs`` epochs a trial; its finalist
    stage, when enabled, trains the knee (and the reference layouts with ``references``) with 2 seeds on
    ``folds`` cross-validation folds (1: the task's fixed split), at its first horizon unless ``pilot`` (then a
    pilot may double it, as the stage's default does). ``extra`` is appended to the file (its last
    table is [finalists])."""
    path = Path(folder) / f"{name}.toml"
    early = early and epochs > 1  # with one epoch there is nothing to stop early (the spec refuses it)
    text = TINY_SPEC.format(
        name=name,
        n_trials=n_trials,
        epochs=epochs,
        sampler=sampler,
        early=str(early).lower(),
        finalists=str(finalists).lower(),
        bench=str(bench).lower(),
        references=str(references).lower(),
        folds=folds,
        final_epochs=max(epochs, 2 * epochs),
        pilot=str(pilot).lower(),
    )
    path.write_text(text + extra)
    return path
