"""Confirm the finalists: retrain them with fresh seeds and re-time them, so the recommendation rests on evidence.

A search trains each configuration once, so a 0.3-point accuracy gap may be seed luck and a 5% latency gap may be
the machine. :func:`confirm` retrains the Pareto finalists nearest the knee plus two references at the knee's
width and depth (one head per layer, and the folklore's default of eight where d_model and the d_k floor allow)
with S seeds each. Jobs run in rounds: round r trains and times every configuration once with the r-th seed, in
an order drawn from a fixed RNG, so a drift in the machine's speed hits every configuration alike. Each finished
(config, seed) row is stored at once in the study's user attr ``"confirm"``; a rerun skips those rows, so an
interrupted confirmation continues where it stopped. :func:`confirm_summary` and :func:`significant_differences`
turn the rows into means, 95% t-intervals and Welch t-tests against the knee.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from explorer.engine.config import LatencyConfig, ModelConfig, valid_heads
from explorer.errors import ConfigError, NoCompletedTrialsError
from explorer.insight.analysis import CONFIDENCE, mean_ci

if TYPE_CHECKING:
    import optuna
    import torch

    from explorer.search.study import StudyHandle

__all__ = [
    "CONFIRM_ATTR",
    "METRICS",
    "SEED_OFFSET",
    "Candidate",
    "confirm",
    "confirm_plan",
    "confirm_rows",
    "confirm_summary",
    "finalists",
    "significant_differences",
]

CONFIRM_ATTR = "confirm"  # study user attr holding the finished rows (a list of dicts)
SEED_OFFSET = (
    1_000_000  # confirmation seeds are spec.seed + SEED_OFFSET + i; the search used spec.seed + trial number
)
DEFAULT_HEADS = 8  # the folklore's starting point ("start at 8 and tune")
METRICS = ("val_accuracy", "test_accuracy", "latency_ms")
ALPHA = 0.05
ROLE_ORDER = {"knee": 0, "finalist": 1, "reference": 2}


@dataclass(frozen=True)
class Candidate:
    """One configuration to confirm."""

    config: str  # stable key: architecture and learning rate (what a row is matched on)
    label: str  # for tables: "knee #12", "#7", "1 head", "8 heads"
    role: str  # knee | finalist | reference
    trial: int | None  # the search trial it comes from (None for references)
    model_cfg: ModelConfig
    lr: float


def _key(cfg: ModelConfig, lr: float) -> str:
    return f"{cfg.key()}_lr{lr:.6g}"


def _candidate(label: str, role: str, trial: int | None, cfg: ModelConfig, lr: float) -> Candidate:
    return Candidate(_key(cfg, lr), label, role, trial, cfg, lr)


def finalists(handle: StudyHandle, top: int = 3) -> list[Candidate]:
    """The knee, the ``top - 1`` Pareto trials nearest it (normalized objective space), then the references."""
    from explorer.insight.analysis import _within, completed, normalize, pareto_front, recommend, trials_table
    from explorer.output.export import budgets_of, trial_configs

    if top < 1:
        raise ConfigError(f"--top must be at least 1, got {top}.")
    df = trials_table(handle.study)
    rec = recommend(df, budgets_of(handle))
    if rec.knee is None:
        raise NoCompletedTrialsError(
            f"study {handle.spec.name!r} has no completed feasible trial to confirm yet; run it first."
        )
    pool = _within(completed(df), budgets_of(handle))
    front = pareto_front(pool)
    y = normalize(front, pool)
    at = y[(front["number"] == rec.knee.number).to_numpy()][0]
    front = front.assign(_dist=np.hypot(*(y - at).T)).sort_values(["_dist", "number"])
    out: list[Candidate] = []
    for number in front["number"].astype(int):
        cfg, train = trial_configs(handle, number)
        c = _candidate(f"knee #{number}" if not out else f"#{number}", "finalist" if out else "knee",
                       number, cfg, train.lr)  # fmt: skip
        if c.config not in {o.config for o in out}:
            out.append(c)
        if len(out) == top:
            break
    knee_cfg, knee_lr = out[0].model_cfg, out[0].lr
    for h in (1, DEFAULT_HEADS):
        if h in valid_heads(knee_cfg.d_model, knee_cfg.min_dk):
            cfg = ModelConfig(
                d_model=knee_cfg.d_model, heads=(h,) * knee_cfg.n_layers, min_dk=knee_cfg.min_dk,
                mlp_ratio=knee_cfg.mlp_ratio, dropout=knee_cfg.dropout, attention=knee_cfg.attention,
            )  # fmt: skip
            c = _candidate(f"{h} head{'s' if h > 1 else ''}", "reference", None, cfg, knee_lr)
            if c.config not in {o.config for o in out}:
                out.append(c)
    return out


def confirm_plan(
    handle: StudyHandle, candidates: Sequence[Candidate], seeds: int
) -> list[tuple[Candidate, int]]:
    """The jobs in run order: one round per seed, each a fixed-RNG permutation of the candidates."""
    if seeds < 1:
        raise ConfigError(f"--seeds must be at least 1, got {seeds}.")
    rng = random.Random(handle.spec.seed)
    plan = []
    for r in range(seeds):
        order = list(candidates)
        rng.shuffle(order)
        plan += [(c, handle.spec.seed + SEED_OFFSET + r) for c in order]
    return plan


def confirm_rows(study: optuna.Study) -> list[dict[str, Any]]:
    """The confirmation rows stored with the study (empty when it was never confirmed)."""
    return [dict(r) for r in study.user_attrs.get(CONFIRM_ATTR) or []]


def _run_one(c: Candidate, seed: int, r: int, handle: StudyHandle, task: Any, device: torch.device,
             lat: LatencyConfig) -> dict[str, Any]:  # fmt: skip
    """Train one candidate with one seed, evaluate it, and time it on ``device``."""
    import torch

    from explorer.engine.config import TrainConfig
    from explorer.engine.device import describe_device
    from explorer.engine.latency import random_input, time_forward
    from explorer.engine.train import fit

    spec = handle.spec
    train = TrainConfig(epochs=spec.task.epochs, batch_size=spec.task.batch_size, lr=c.lr, seed=seed)
    model, result = fit(c.model_cfg, task, train, device)
    example = random_input(task.spec, lat.batch_size, torch.Generator().manual_seed(0))
    timing = time_forward(model, example, device, lat)
    return {
        "config": c.config, "label": c.label, "role": c.role, "trial": c.trial, "d_model": c.model_cfg.d_model,
        "heads": ",".join(map(str, c.model_cfg.heads)), "lr": c.lr, "seed": seed, "round": r,
        "val_accuracy": result.val_accuracy, "test_accuracy": result.test_accuracy,
        "latency_ms": timing.median_ms, "latency_iqr_ms": timing.iqr_ms, "latency_batch_size": timing.batch_size,
        "train_time_s": result.train_time_s, "epochs": result.epochs_run, "device": describe_device(device),
    }  # fmt: skip


def confirm(
    handle: StudyHandle,
    top: int = 3,
    seeds: int = 3,
    device: torch.device | str | None = None,
    on_progress: Callable[[int, int, dict[str, Any]], None] | None = None,
    latency: LatencyConfig | None = None,
) -> pd.DataFrame:
    """Retrain and re-time the finalists (see the module docstring); one row per (config, seed), stored as each
    finishes. Rows already stored are skipped, so a rerun resumes. ``on_progress(done, total, row)`` is called
    after each new row. ``latency`` overrides the spec's timing settings. Returns the plan's rows."""
    import torch

    from explorer.engine.device import resolve_device
    from explorer.engine.tasks import load_task

    spec = handle.spec
    dev = device if isinstance(device, torch.device) else resolve_device(device or spec.latency.device)
    lat = latency or LatencyConfig(
        batch_size=spec.latency.batch_size, threads=spec.latency.threads, dtype=spec.latency.dtype
    )
    candidates = finalists(handle, top)
    plan = confirm_plan(handle, candidates, seeds)
    done = {(r["config"], r["seed"]) for r in confirm_rows(handle.study)}
    task = load_task(spec.task.name, **spec.task.options) if len(done) < len(plan) else None
    n_done = sum((c.config, s) in done for c, s in plan)
    for i, (c, seed) in enumerate(plan):
        if (c.config, seed) in done:
            continue
        row = _run_one(c, seed, i // len(candidates), handle, task, dev, lat)
        rows = confirm_rows(handle.study)  # read-modify-write: one confirming process per study
        handle.study.set_user_attr(CONFIRM_ATTR, [*rows, row])
        done.add((c.config, seed))
        n_done += 1
        if on_progress is not None:
            on_progress(n_done, len(plan), row)
    return _plan_rows(confirm_rows(handle.study), plan)


def _plan_rows(rows: Sequence[Mapping[str, Any]], plan: Sequence[tuple[Candidate, int]]) -> pd.DataFrame:
    """The stored rows of the plan's jobs, labelled by the current plan (the knee may have moved since)."""
    want = {(c.config, s): c for c, s in plan}
    out = []
    for r in rows:
        c = want.get((r["config"], r["seed"]))
        if c is not None:
            out.append({**r, "label": c.label, "role": c.role, "trial": c.trial})
    return pd.DataFrame(out)


def _frame(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if df.empty:
        return df
    return df.assign(_order=df["role"].map(ROLE_ORDER).fillna(9)).sort_values(["_order", "label", "seed"])


def confirm_summary(
    rows: Sequence[Mapping[str, Any]] | pd.DataFrame, level: float = CONFIDENCE
) -> pd.DataFrame:
    """Per configuration (knee first): seeds run, and mean, std and ``level`` t-interval of every metric."""
    df = _frame(rows)
    if df.empty:
        return pd.DataFrame()
    out = []
    for _, g in df.groupby("config", sort=False):
        first = g.iloc[0]
        row: dict[str, Any] = {k: first[k] for k in ("config", "label", "role", "trial", "d_model", "heads")}
        row["n"] = len(g)
        for m in METRICS:
            v = g[m].to_numpy(float)
            lo, hi = mean_ci(v, level)
            row.update({f"{m}_mean": v.mean(), f"{m}_std": v.std(ddof=1) if len(v) > 1 else np.nan,
                        f"{m}_ci_low": lo, f"{m}_ci_high": hi})  # fmt: skip
        out.append(row)
    return pd.DataFrame(out)


def significant_differences(
    rows: Sequence[Mapping[str, Any]] | pd.DataFrame, alpha: float = ALPHA
) -> pd.DataFrame:
    """Welch t-tests of every configuration against the knee, per metric; ``significant`` when p < ``alpha``.

    ``difference`` is other minus knee (accuracy as a fraction, latency in ms). With fewer than two seeds on a
    side the test is undefined: p is NaN and nothing is flagged.
    """
    from scipy.stats import ttest_ind

    cols = [
        "config",
        "label",
        "metric",
        "knee_mean",
        "other_mean",
        "difference",
        "t",
        "p_value",
        "significant",
    ]
    df = _frame(rows)
    if df.empty or not (df["role"] == "knee").any():
        return pd.DataFrame(columns=cols)
    knee = df[df["role"] == "knee"]
    out = []
    for config, g in df[df["role"] != "knee"].groupby("config", sort=False):
        for m in METRICS:
            a, b = knee[m].to_numpy(float), g[m].to_numpy(float)
            t = p = np.nan
            if len(a) > 1 and len(b) > 1:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter(
                        "ignore"
                    )  # zero variance on both sides: scipy warns, returns nan/inf
                    t, p = (float(x) for x in ttest_ind(b, a, equal_var=False))
            out.append({"config": config, "label": g["label"].iloc[0], "metric": m, "knee_mean": a.mean(),
                        "other_mean": b.mean(), "difference": b.mean() - a.mean(), "t": t, "p_value": p,
                        "significant": bool(p < alpha) if not np.isnan(p) else False})  # fmt: skip
    return pd.DataFrame(out, columns=cols)
