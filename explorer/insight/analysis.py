"""Trials -> tables: the Pareto front, hypervolume, head-count effects, the recommendation and the rule checks.

Pure functions over the trial records that explorer/study.py stores (see contracts.md, "Trial record"); nothing
here draws or prints, so every number in the report is unit-tested on hand-made tables. Accuracies are fractions
in [0, 1]; "one point" of accuracy is 0.01.
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optuna
import pandas as pd
from scipy import stats

from explorer.engine.config import schedule_family

__all__ = [
    "ACC_POINT",
    "CONFIDENCE",
    "DIRECTIONS",
    "DK_FLOOR",
    "HV_REFERENCE",
    "MIN_GROUP",
    "MIN_SPEEDUP",
    "NEGLIGIBLE_ACC",
    "Pick",
    "Recommendation",
    "StudyAccount",
    "completed",
    "effect_table",
    "hypervolume_2d",
    "hypervolume_history",
    "knee",
    "mean_ci",
    "normalize",
    "param_importances",
    "pareto_front",
    "recommend",
    "spec_value",
    "study_account",
    "trials_table",
]

DIRECTIONS = {"val_accuracy": "maximize", "latency_ms": "minimize", "params": "minimize"}
ACC_POINT = 0.01  # one accuracy point: "close to the pick", and the gain ">16 heads" must beat to matter
NEGLIGIBLE_ACC = 0.005  # an accuracy effect whose whole 95% interval lies below this is called negligible
MIN_GROUP = 3  # trials needed in each group (per stratum) before a comparison counts
CONFIDENCE = 0.95  # level of every interval in the report
DK_FLOOR = 16  # the folklore's d_k floor
MIN_SPEEDUP = 1.10  # merged must beat serial by at least 10% (and outside the IQRs) to count as faster
HV_REFERENCE = (1.1, 1.1)  # reference point in normalized objective space (0 = best observed, 1 = worst)
LATENCY_CLOSE = 0.10  # "close to the pick": within ACC_POINT in accuracy and within 10% in latency


def _join(v: Any) -> Any:
    return ",".join(str(x) for x in v) if isinstance(v, list | tuple) else v


def trials_table(study: optuna.Study) -> pd.DataFrame:
    """One row per trial (every state) with values, flattened user attrs, ``param_*`` columns and ``feasible``.

    Surplus trials (opened by a racing worker after the study reached its total, closed without running; see
    explorer/study.py) are left out: they are bookkeeping, not results or failures.
    """
    names = _objective_names(study)
    rows = []
    for t in study.get_trials(deepcopy=False):
        a = t.user_attrs
        if a.get("surplus"):
            continue
        row: dict[str, Any] = {
            "number": t.number,
            "state": t.state.name,
            "datetime_start": t.datetime_start,
            "datetime_complete": t.datetime_complete,
            "duration_s": t.duration.total_seconds() if t.duration is not None else np.nan,
        }
        for name, v in zip(names, t.values or [np.nan] * len(names), strict=True):
            row[f"value_{name}"] = v
        for k, v in a.items():
            if k != "constraints":
                row[k] = _join(v)
        heads = [int(h) for h in a.get("heads") or []]
        dks = [int(d) for d in a.get("d_k") or []]
        if heads:
            row.update(heads_max=max(heads), heads_min=min(heads), heads_mean=float(np.mean(heads)))
            row.setdefault("n_layers", len(heads))
            row.setdefault("family", schedule_family(heads))
        if dks:
            row["dk_min"] = min(dks)
        for name in DIRECTIONS:  # the objective columns the analysis reads, from attrs or the values
            if pd.isna(row.get(name, np.nan)) and f"value_{name}" in row:
                row[name] = row[f"value_{name}"]
        constraints = {**(a.get("constraints") or {}), **t.constraints}
        for k, v in constraints.items():
            row[f"constraint_{k}"] = v
        row["feasible"] = all(v <= 0 for v in constraints.values())
        for k, v in t.params.items():
            row[f"param_{k}"] = v
        rows.append(row)
    df = pd.DataFrame(rows)
    for col in ("number", "state", "val_accuracy", "latency_ms", "heads_max", "d_model", "feasible"):
        if col not in df:
            df[col] = pd.Series(dtype=float if col not in ("state", "feasible") else object)
    return df


def _objective_names(study: optuna.Study) -> list[str]:
    if study.metric_names:
        return list(study.metric_names)
    return list(DIRECTIONS)[: len(study.directions)]


def completed(df: pd.DataFrame, *, feasible_only: bool = True) -> pd.DataFrame:
    """COMPLETE trials with both main objectives, optionally only the feasible ones."""
    ok = (df["state"] == "COMPLETE") & df["val_accuracy"].notna() & df["latency_ms"].notna()
    if feasible_only:
        ok &= df["feasible"].fillna(True).astype(bool)
    return df[ok]


def _as_min(df: pd.DataFrame, objectives: Sequence[str]) -> np.ndarray:
    """The objectives as a float array where lower is better in every column."""
    cols = [df[o].to_numpy(float) * (-1.0 if DIRECTIONS.get(o) == "maximize" else 1.0) for o in objectives]
    return np.column_stack(cols) if cols else np.empty((len(df), 0))


def pareto_front(
    df: pd.DataFrame, objectives: Sequence[str] = ("val_accuracy", "latency_ms")
) -> pd.DataFrame:
    """The non-dominated COMPLETE feasible trials, sorted by the second objective (fastest first)."""
    c = completed(df).dropna(subset=list(objectives))
    y = _as_min(c, objectives)
    keep = np.ones(len(y), dtype=bool)
    for i in range(len(y)):
        dominated = np.all(y <= y[i], axis=1) & np.any(y < y[i], axis=1)
        keep[i] = not dominated.any()
    return c[keep].sort_values([objectives[-1], objectives[0]], ascending=[True, False])


def hypervolume_2d(points: np.ndarray | Sequence[Sequence[float]], reference: Sequence[float]) -> float:
    """Area dominated by ``points`` (both coordinates minimized) and bounded by ``reference``."""
    p = np.asarray(points, dtype=float).reshape(-1, 2)
    p = p[(p[:, 0] < reference[0]) & (p[:, 1] < reference[1])]
    if not len(p):
        return 0.0
    p = p[np.lexsort((p[:, 1], p[:, 0]))]  # by x, then y
    # The dominated region is a staircase: sum the slabs between successive x-coordinates.
    area, best_y = 0.0, float(reference[1])
    xs = np.append(p[:, 0], reference[0])
    for i in range(len(p)):
        best_y = min(best_y, p[i, 1])
        area += (xs[i + 1] - xs[i]) * (reference[1] - best_y)
    return float(area)


def normalize(df: pd.DataFrame, bounds: pd.DataFrame | None = None) -> np.ndarray:
    """Accuracy/latency as minimization in [0, 1]: 0 = best, 1 = worst over ``bounds`` (default ``df``)."""
    b = _as_min(df if bounds is None else bounds, ("val_accuracy", "latency_ms"))
    y = _as_min(df, ("val_accuracy", "latency_ms"))
    lo, hi = b.min(axis=0), b.max(axis=0)
    return (y - lo) / np.where(hi > lo, hi - lo, 1.0)


def hypervolume_history(df: pd.DataFrame) -> pd.DataFrame:
    """Hypervolume of the accuracy/latency front after each COMPLETE trial, in trial-number order.

    Objectives are min-max normalized over all COMPLETE feasible trials (0 = best observed, 1 = worst) and the
    reference point is ``HV_REFERENCE`` = (1.1, 1.1), so the largest possible value is 1.21. Infeasible trials
    leave the value unchanged.
    """
    c = completed(df, feasible_only=False).sort_values("number")
    feas = completed(df)
    out = [0.0] * len(c)
    if len(feas):
        y = normalize(c, feas)
        ok = c["feasible"].fillna(True).astype(bool).to_numpy()
        front = np.empty((0, 2))
        hv = 0.0
        for i in range(len(c)):
            if ok[i] and not np.any(np.all(front <= y[i], axis=1)):
                front = np.vstack([front[~np.all(y[i] <= front, axis=1)], y[i]])
                hv = hypervolume_2d(front, HV_REFERENCE)
            out[i] = hv
    return pd.DataFrame(
        {"number": c["number"].to_numpy(), "hypervolume": out}, columns=["number", "hypervolume"]
    )


def knee(front: pd.DataFrame, bounds: pd.DataFrame | None = None) -> pd.Series:
    """The knee of an accuracy/latency front.

    Definition: normalize both objectives to [0, 1] (0 = best) over ``bounds`` (default: the front itself), draw
    the line joining the front's two extremes (most accurate, fastest), and take the point farthest from it on
    the utopia side. With one or two points, or when no point lies off that line, take the point closest to the
    utopia point (0, 0) instead. Ties go to the more accurate trial.
    """
    if front.empty:
        raise ValueError("the front is empty")
    f = front.sort_values(["latency_ms", "val_accuracy"], ascending=[True, False])
    y = normalize(f, bounds)
    acc = f["val_accuracy"].to_numpy(float)
    if len(f) >= 3:
        a, b = y[np.argmin(y[:, 0])], y[np.argmin(y[:, 1])]  # most accurate, fastest
        d = b - a
        length = math.hypot(*d)
        if length > 0:
            # Signed distance to the chord; positive on the utopia side.
            dist = (d[0] * (y[:, 1] - a[1]) - d[1] * (y[:, 0] - a[0])) / length
            dist = dist * (1.0 if d[0] * (0 - a[1]) - d[1] * (0 - a[0]) > 0 else -1.0)
            if dist.max() > 1e-9:
                return f.iloc[int(np.lexsort((-acc, -np.round(dist, 12)))[0])]
    utopia = np.round(np.hypot(y[:, 0], y[:, 1]), 12)
    return f.iloc[int(np.lexsort((-acc, utopia))[0])]


def mean_ci(x: Iterable[float], level: float = CONFIDENCE) -> tuple[float, float]:
    """Two-sided t interval for the mean (NaN with fewer than two values)."""
    v = np.asarray(list(x), dtype=float)
    v = v[~np.isnan(v)]
    if len(v) < 2:
        return (np.nan, np.nan)
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return (float(v.mean() - half), float(v.mean() + half))


_FACTORS = {"heads": "heads_max", "heads_max": "heads_max", "min_dk": "min_dk", "dk_min": "dk_min"}


def effect_table(
    df: pd.DataFrame,
    factor: str,
    by: str | None = "d_model",
    metrics: Sequence[str] = ("val_accuracy", "latency_ms"),
) -> pd.DataFrame:
    """Mean, std, count and 95% t interval of each metric per level of ``factor`` (per ``by`` when given).

    ``factor``: ``heads`` (uniform schedules only, by head count), ``heads_max``, ``min_dk`` (the floor),
    ``dk_min`` (smallest d_k of the trial) or ``family``. COMPLETE feasible trials only.
    """
    col = _FACTORS.get(factor, factor)
    c = completed(df)
    if factor == "heads":
        c = c[c["family"] == "uniform"]
    keys = [k for k in (by, col) if k is not None and k in c]
    if col not in c:
        return pd.DataFrame(columns=[*keys, "n"])
    c = c.dropna(subset=keys)
    rows = []
    for key, g in c.groupby(keys, sort=True):
        row = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        row["n"] = len(g)
        for m in metrics:
            lo, hi = mean_ci(g[m])
            row.update(
                {
                    f"{m}_mean": g[m].mean(),
                    f"{m}_std": g[m].std(ddof=1),
                    f"{m}_ci_low": lo,
                    f"{m}_ci_high": hi,
                }
            )
        rows.append(row)
    return pd.DataFrame(
        rows,
        columns=[*keys, "n", *[f"{m}_{s}" for m in metrics for s in ("mean", "std", "ci_low", "ci_high")]],
    )


@dataclass(frozen=True)
class Pick:
    """One recommended configuration with what a user needs to rebuild and judge it."""

    label: str
    number: int
    d_model: int
    n_layers: int
    heads: str  # per layer, "4,8,8,16"
    d_k: str  # per layer
    family: str
    val_accuracy: float
    test_accuracy: float
    latency_ms: float
    latency_iqr_ms: float
    params: float
    n_close: int  # other feasible trials within ACC_POINT in accuracy and LATENCY_CLOSE in latency
    close_heads: str  # head schedules of those close trials, most common first
    n_similar: int  # trials with the same d_model, depth and head schedule
    similar_acc_std: float  # accuracy spread over those similar trials (NaN with fewer than two)


@dataclass(frozen=True)
class Recommendation:
    """The knee, the most accurate and the fastest feasible trials within the budgets, and how sure we are."""

    knee: Pick | None
    most_accurate: Pick | None
    fastest: Pick | None
    budgets: dict[str, float]
    n_candidates: int  # COMPLETE feasible trials within budgets
    front_size: int
    confidence: str  # "high", "medium" or "low"
    statement: str  # the evidence behind the confidence, in words
    notes: list[str] = field(default_factory=list)


def _within(df: pd.DataFrame, budgets: Mapping[str, float]) -> pd.DataFrame:
    ok = pd.Series(True, index=df.index)
    if "max_latency_ms" in budgets:
        ok &= df["latency_ms"] <= budgets["max_latency_ms"]
    if "max_params" in budgets and "params" in df:
        ok &= df["params"] <= budgets["max_params"]
    if "min_val_accuracy" in budgets:
        ok &= df["val_accuracy"] >= budgets["min_val_accuracy"]
    return df[ok]


def _pick(label: str, row: pd.Series, pool: pd.DataFrame) -> Pick:
    close = pool[
        (pool["number"] != row["number"])
        & ((pool["val_accuracy"] - row["val_accuracy"]).abs() <= ACC_POINT + 1e-9)
        & (pool["latency_ms"] <= row["latency_ms"] * (1 + LATENCY_CLOSE))
    ]
    same = pool[
        (pool["d_model"] == row["d_model"])
        & (pool["n_layers"] == row["n_layers"])
        & (pool["heads"] == row["heads"])
    ]
    g = lambda k: row.get(k, np.nan)  # noqa: E731
    return Pick(
        label=label,
        number=int(row["number"]),
        d_model=int(g("d_model")),
        n_layers=int(g("n_layers")),
        heads=str(g("heads")),
        d_k=str(g("d_k")),
        family=str(g("family")),
        val_accuracy=float(g("val_accuracy")),
        test_accuracy=float(g("test_accuracy")),
        latency_ms=float(g("latency_ms")),
        latency_iqr_ms=float(g("latency_iqr_ms")),
        params=float(g("params")),
        n_close=len(close),
        close_heads="; ".join(f"{h} (x{n})" for h, n in Counter(close["heads"].astype(str)).most_common(4)),
        n_similar=len(same),
        similar_acc_std=float(same["val_accuracy"].std(ddof=1)) if len(same) > 1 else np.nan,
    )


def recommend(df: pd.DataFrame, budgets: Mapping[str, float] | None = None) -> Recommendation:
    """Pick the knee, the most accurate and the fastest COMPLETE feasible trials within ``budgets``.

    ``budgets`` may hold ``max_latency_ms``, ``max_params`` and ``min_val_accuracy``.
    """
    budgets = {k: float(v) for k, v in (budgets or {}).items()}
    all_ok = completed(df)
    pool = _within(all_ok, budgets)
    if pool.empty:
        why = "no COMPLETE feasible trial" + (" meets the budgets" if len(all_ok) else "")
        return Recommendation(None, None, None, budgets, 0, 0, "low", why + "; nothing to recommend.")
    front = pareto_front(pool)
    k = knee(front, bounds=pool)
    best = pool.sort_values(["val_accuracy", "latency_ms"], ascending=[False, True]).iloc[0]
    fast = front.iloc[0]
    kp = _pick("knee", k, pool)
    rec_picks = (kp, _pick("most accurate", best, pool), _pick("fastest", fast, pool))
    confidence, statement = _confidence(kp, pool)
    notes = []
    if pool["number"].nunique() < len(all_ok):
        notes.append(
            f"{len(all_ok) - len(pool)} feasible trials fall outside the budgets and were not considered."
        )
    return Recommendation(*rec_picks, budgets, len(pool), len(front), confidence, statement, notes)


def _confidence(p: Pick, pool: pd.DataFrame) -> tuple[str, str]:
    """A level and a sentence from how many trials back the pick and how much similar ones vary."""
    spread = p.similar_acc_std
    parts = [
        f"{p.n_close} other trials reach within {ACC_POINT * 100:.0f} point of the knee's accuracy at most "
        f"{LATENCY_CLOSE:.0%} slower" + (f" (head schedules: {p.close_heads})" if p.n_close else ""),
    ]
    if p.n_similar > 1:
        parts.append(
            f"{p.n_similar} trials share its width, depth and heads; their val accuracy varies by "
            f"{spread * 100:.2f} points (std)"
        )
    else:
        parts.append(
            "no other trial shares its width, depth and heads, so its accuracy rests on one training run"
        )
    if p.n_similar >= MIN_GROUP and spread < ACC_POINT and len(pool) >= 20:
        level = "high"
    elif p.n_similar < 2 or (not math.isnan(spread) and spread >= 2 * ACC_POINT):
        level = "low"
    else:
        level = "medium"
    return level, "; ".join(parts) + "."


def spec_value(spec: Any, *keys: str) -> Any:
    """The first of ``keys`` found anywhere in a nested spec dict (depth first), or None."""
    if isinstance(spec, Mapping):
        for k in keys:
            if k in spec:
                return spec[k]
        for v in spec.values():
            found = spec_value(v, *keys)
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class StudyAccount:
    """What the study did: states, savings, time, and how to reproduce or resume it."""

    name: str
    task: str
    devices: list[str]
    states: dict[str, int]
    n_trials_target: int | None
    partial: bool
    partial_reason: str
    early_stopped: int
    epochs_saved: int
    rejected: int
    wall_time_s: float
    trial_time_s: float
    reproduce: str
    resume: str


def study_account(study: optuna.Study, df: pd.DataFrame, storage_url: str | None = None) -> StudyAccount:
    """Summarize the study; partial when trials are RUNNING or fewer than the spec's total have finished."""
    from explorer.search.storage import (
        mask_url,
    )  # written by the studies module; imported late to keep this module light

    spec = study.user_attrs.get("spec") or {}
    states = {s: int(n) for s, n in df["state"].value_counts().items()} if len(df) else {}
    target = spec_value(spec, "n_trials")
    finished = states.get("COMPLETE", 0) + states.get("PRUNED", 0)
    reasons = []
    if states.get("RUNNING", 0):
        reasons.append(f"{states['RUNNING']} trial(s) still RUNNING")
    if target is not None and finished < int(target):
        reasons.append(f"{finished} of the spec's {int(target)} trials finished (COMPLETE or PRUNED)")
    start = df["datetime_start"].dropna() if "datetime_start" in df else pd.Series(dtype=object)
    end = df["datetime_complete"].dropna() if "datetime_complete" in df else pd.Series(dtype=object)
    wall = (end.max() - start.min()).total_seconds() if len(start) and len(end) else 0.0
    col_sum = lambda c: float(pd.to_numeric(df[c], errors="coerce").fillna(0).sum()) if c in df else 0.0  # noqa: E731
    early = int(df["early_stopped"].fillna(False).astype(bool).sum()) if "early_stopped" in df else 0
    spec_path = spec_value(spec, "spec_path", "path") or f"studies/{study.study_name}.toml"
    storage = f" --storage {shlex.quote(mask_url(storage_url))}" if storage_url else ""
    return StudyAccount(
        name=study.study_name,
        task=str(study.user_attrs.get("task") or spec_value(spec, "task") or "unknown"),
        devices=sorted(df["device"].dropna().astype(str).unique()) if "device" in df else [],
        states=states,
        n_trials_target=int(target) if target is not None else None,
        partial=bool(reasons),
        partial_reason="; ".join(reasons),
        early_stopped=early,
        epochs_saved=int(col_sum("epochs_saved")),
        rejected=int(col_sum("rejected")),
        wall_time_s=max(wall, 0.0),
        trial_time_s=col_sum("duration_s"),
        reproduce=f"explorer study run {shlex.quote(str(spec_path))}{storage}",
        resume=f"explorer study resume {shlex.quote(study.study_name)}{storage}",
    )


def param_importances(
    study: optuna.Study, n_objectives: int = 2, min_trials: int = 10
) -> tuple[pd.DataFrame, str]:
    """fANOVA importance (fixed seed) of each sampled parameter per objective; empty with a reason if impossible.

    16 trees of depth 8 give the same ranking as Optuna's 64 deep trees on the synthetic 1,000-trial study at
    a twentieth of the time (1.5 s instead of 20 s per objective on 2 cores).
    """
    names = _objective_names(study)[:n_objectives]
    n = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
    if n < min_trials:
        return pd.DataFrame(
            columns=["objective", "param", "importance"]
        ), f"needs >= {min_trials} completed trials, has {n}"
    rows = []
    try:
        for i, name in enumerate(names):
            ev = optuna.importance.FanovaImportanceEvaluator(
                n_trees=16, max_depth=8, seed=0
            )  # ~1.5 s at 1,000 trials
            imp = optuna.importance.get_param_importances(
                study, evaluator=ev, target=lambda t, i=i: t.values[i]
            )
            rows += [{"objective": name, "param": p, "importance": v} for p, v in imp.items()]
    except (ValueError, RuntimeError) as e:  # e.g. no parameter shared by all trials, or a constant space
        return pd.DataFrame(columns=["objective", "param", "importance"]), f"importance unavailable: {e}"
    return pd.DataFrame(rows, columns=["objective", "param", "importance"]), ""
