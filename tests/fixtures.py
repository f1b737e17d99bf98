"""Synthetic studies with a known structure, and a tiny real spec, for tests, benchmarks and trying the report.

:func:`make_study` fills an Optuna study with trial records shaped exactly like explorer/study.py's (see
explorer/analysis.py), whose accuracy falls at one head and saturates by eight and whose latency grows with
width and head count, so the analysis has right answers to find.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from explorer.engine.config import expand_schedule, valid_heads

__all__ = ["TINY_SPEC", "make_study", "synthetic_accuracy", "synthetic_latency", "write_tiny_spec"]

D_MODELS = (64, 128, 256)
LAYERS = (2, 4)
FAMILIES = ("uniform", "increasing", "decreasing")
HEADS = (1, 2, 4, 8, 16, 32)
BASE = dt.datetime(2025, 1, 1, 12, 0, 0)


def synthetic_accuracy(heads: list[int], d_model: int) -> float:
    """The known truth the tests check: -6 points at one head, +1.5 per doubling up to 8, -4 when d_k < 16."""
    h = float(np.mean([min(x, 8) for x in heads]))
    acc = 0.80 + 0.02 * math.log2(d_model / 64) + 0.015 * math.log2(h)
    acc -= 0.06 * (sum(x == 1 for x in heads) / len(heads))
    acc -= 0.04 * (min(d_model // x for x in heads) < 16)
    return acc


def synthetic_latency(heads: list[int], d_model: int) -> float:
    return 0.2 * (d_model / 64) ** 1.5 * len(heads) * (1 + 0.03 * float(np.mean(heads)))


def make_study(
    n: int = 120,
    *,
    seed: int = 0,
    storage: str | optuna.storages.BaseStorage | None = None,
    name: str = "synthetic",
    states: dict[str, int] | None = None,
    max_latency_ms: float | None = None,
    bench: list[dict] | None = None,
    n_trials_target: int | None = None,
) -> optuna.Study:
    """A study of ``n`` COMPLETE trials with the synthetic structure, plus extra trials per state in ``states``."""
    rng = np.random.default_rng(seed)
    study = optuna.create_study(study_name=name, storage=storage, directions=["maximize", "minimize"])
    live = n + sum(k for s, k in (states or {}).items() if s in ("PRUNED", "RUNNING"))  # FAIL does not count
    spec = {"name": name, "n_trials": n_trials_target or live, "task": "digits"}
    if max_latency_ms is not None:
        spec["budgets"] = {"max_latency_ms": max_latency_ms}
    study.set_user_attr("spec", spec)
    study.set_user_attr("task", "digits")
    study.set_user_attr("explorer_version", "0.1.0")
    if bench is not None:
        study.set_user_attr("bench", bench)
    dists = {
        "d_model": CategoricalDistribution(D_MODELS),
        "n_layers": CategoricalDistribution(LAYERS),
        "family": CategoricalDistribution(FAMILIES),
        "heads": CategoricalDistribution(HEADS),
        "lr": FloatDistribution(1e-4, 1e-2, log=True),
    }
    kinds = ["COMPLETE"] * n + [s for s, k in (states or {}).items() for _ in range(k)]
    for i, kind in enumerate(kinds):
        d, layers, fam = int(rng.choice(D_MODELS)), int(rng.choice(LAYERS)), str(rng.choice(FAMILIES))
        valid = [h for h in HEADS if h in valid_heads(d, 2)]
        h = int(rng.choice(valid))
        if fam == "uniform" or h == valid[-1]:
            fam, heads = "uniform", [h] * layers
        else:
            lo, hi = h, valid[-1] if h * 4 > valid[-1] else h * 4
            heads = list(
                expand_schedule(f"{fam}:{lo}-{hi}" if fam == "increasing" else f"{fam}:{hi}-{lo}", layers, d)
            )
        acc = synthetic_accuracy(heads, d) + rng.normal(0, 0.004)
        lat = synthetic_latency(heads, d) * (1 + rng.normal(0, 0.02))
        attrs = {
            "d_model": d, "n_layers": layers, "heads": heads, "d_k": [d // x for x in heads], "family": fam,
            "min_dk": 2, "mlp_ratio": 2.0, "lr": 1e-3, "val_accuracy": acc, "test_accuracy": acc - 0.005,
            "latency_ms": lat, "latency_iqr_ms": lat * 0.03, "latency_batch_size": 32, "params": d * d * 12 * layers,
            "flops": d * d * 24 * layers, "train_time_s": 5.0, "epochs_run": 10, "epochs_planned": 10,
            "early_stopped": kind == "PRUNED", "epochs_saved": 6 if kind == "PRUNED" else 0,
            "val_history": [acc] * 3, "rejected": int(rng.random() < 0.02), "device": "cpu (2 threads)",
            "torch_version": "2.13", "attention_impl": "fused",
        }  # fmt: skip
        if kind == "FAIL":
            attrs["fail_reason"] = "TrainingDivergedError: loss became nan"
        params = {
            "d_model": d,
            "n_layers": layers,
            "family": fam,
            "heads": h,
            "lr": float(rng.uniform(1e-4, 1e-2)),
        }
        constraints = {"latency": lat - max_latency_ms} if max_latency_ms is not None else None
        t = create_trial(
            state=TrialState[kind],
            values=[acc, lat] if kind == "COMPLETE" else None,
            params=params,
            distributions=dists,
            user_attrs=attrs,
            constraints=constraints if kind != "RUNNING" else None,
        )
        t.datetime_start = BASE + dt.timedelta(seconds=10 * i)
        if kind != "RUNNING":
            t.datetime_complete = t.datetime_start + dt.timedelta(seconds=8)
        study.add_trial(t)
    return study


TINY_SPEC = """
name = "{name}"
n_trials = {n_trials}
sampler = "{sampler}"
seed = 0

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

[early_stopping]
enabled = {early}
min_epochs = 1
margin = 0.02
"""


def write_tiny_spec(
    tmp_path: Path,
    name: str = "tiny",
    n_trials: int = 4,
    epochs: int = 2,
    sampler: str = "tpe",
    early: bool = True,
    extra: str = "",
) -> Path:
    """Write a tiny digits study spec (two widths, one or two layers, a few epochs) into ``tmp_path``."""
    path = Path(tmp_path) / f"{name}.toml"
    early = early and epochs > 1  # with one epoch there is nothing to stop early (the spec refuses it)
    text = TINY_SPEC.format(
        name=name, n_trials=n_trials, epochs=epochs, sampler=sampler, early=str(early).lower()
    )
    path.write_text(text + extra)
    return path
