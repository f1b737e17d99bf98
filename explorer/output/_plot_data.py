"""The numbers the report's figures draw, as tables: computed here (and tested without images), drawn by
:mod:`explorer.output._plots`, the way Optuna's plotting separates a plot's data from drawing it.

Quality is in the figures' unit: validation accuracy in percent, or validation bits per byte (``metric``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from explorer.measurements import QualityMetric

FAMILY_ORDER = ("uniform", "increasing", "decreasing", "free")


def shows_bpb(metric: QualityMetric | None) -> bool:
    """Whether the figures draw bits per byte (lower is better) rather than accuracy in percent."""
    return metric is not None and metric.direction == "minimize"


def quality(df: pd.DataFrame, metric: QualityMetric | None, col: str = "val_accuracy") -> pd.Series:
    """The column to draw as quality: accuracy in percent, or bits per byte (``col`` names the accuracy one)."""
    if shows_bpb(metric):
        return df[col.replace("val_accuracy", "quality").replace("val_", "quality_")]
    return df[col] * 100


def _text(heads: Any) -> str:
    return ",".join(map(str, heads)) if isinstance(heads, tuple | list) else str(heads)


@dataclass(frozen=True)
class KneePoint:
    """The recommended architecture in the Pareto figure: where it is and what its annotation says."""

    x: float  # its cost (ms)
    y: float  # its quality
    text: str  # "recommended: heads 4,2 (d_model 64)\n91.20% at 1.23 ms"


@dataclass(frozen=True)
class ParetoData:
    """What the Pareto figure draws."""

    points: pd.DataFrame  # every searched architecture, its quality as column "acc"
    x: str  # the cost column: latency_ms or decode_ms
    feasible: pd.DataFrame  # the points within the study's constraints (coloured by heads, marked by family)
    infeasible: pd.DataFrame  # the others (grey crosses)
    levels: list[int]  # the distinct "most heads in a layer" values, ascending: the colours
    families: list[str]  # the schedule families present, in FAMILY_ORDER: the markers
    front: pd.DataFrame  # the search's Pareto front, fastest first, its quality as column "acc"
    finalists: pd.DataFrame | None  # per finalist: x, y, x_low, x_high, y_low, y_high (95% intervals), label
    knee: KneePoint | None
    log_x: bool  # the costs span more than 20x: a log axis


def pareto_data(
    archs: pd.DataFrame,
    front: pd.DataFrame,
    knee: pd.Series | None = None,
    finalists: pd.DataFrame | None = None,
    metric: QualityMetric | None = None,
    cost: str = "latency_ms",
) -> ParetoData:
    """The Pareto figure's data from a non-empty architecture table, its front, the knee and the finalists."""
    c = archs.copy()
    c["acc"] = quality(c, metric)
    feas = c[c["feasible"].fillna(True).astype(bool)]
    return ParetoData(
        points=c,
        x=cost,
        feasible=feas,
        infeasible=c[~c.index.isin(feas.index)],
        levels=sorted(int(h) for h in c["heads_max"].dropna().unique()),
        families=[f for f in FAMILY_ORDER if f in set(c["family"].dropna())],
        front=front.sort_values(cost).assign(acc=lambda f: quality(f, metric)) if len(front) else front,
        finalists=_finalist_points(finalists, metric, cost)
        if finalists is not None and len(finalists)
        else None,
        knee=None if knee is None else _knee_point(knee, metric, cost),
        log_x=bool(c[cost].max() / max(c[cost].min(), 1e-12) > 20),
    )


def _finalist_points(finalists: pd.DataFrame, metric: QualityMetric | None, cost: str) -> pd.DataFrame:
    """Each finalist's mean cost and quality, the ends of their 95% intervals, and its layout as a label."""
    labels = [
        _text(r.heads)
        + (f" kv {_text(r.kv_heads)}" if "kv_heads" in finalists and r.kv_heads != r.heads else "")
        for r in finalists.itertuples()
    ]
    return pd.DataFrame(
        {
            "x": finalists[cost].to_numpy(),
            "y": quality(finalists, metric).to_numpy(),
            "x_low": finalists[cost.replace("_ms", "_low")].to_numpy(),
            "x_high": finalists[cost.replace("_ms", "_high")].to_numpy(),
            "y_low": quality(finalists, metric, "val_low").to_numpy(),
            "y_high": quality(finalists, metric, "val_high").to_numpy(),
            "label": labels,
        }
    )


def _knee_point(knee: pd.Series, metric: QualityMetric | None, cost: str) -> KneePoint:
    kx = knee[cost]
    ky = knee["quality"] if shows_bpb(metric) else knee["val_accuracy"] * 100
    kv = (
        f", kv heads {_text(knee['kv_heads'])}"
        if "kv_heads" in knee and knee["kv_heads"] != knee["heads"]
        else ""
    )
    value = f"{ky:.3f} bits/byte" if shows_bpb(metric) else f"{ky:.2f}%"
    text = f"recommended: heads {_text(knee['heads'])}{kv} (d_model {int(knee['d_model'])})\n{value} at {kx:.3g} ms"
    return KneePoint(kx, ky, text)


@dataclass(frozen=True)
class EffectData:
    """What an effect figure draws (quality, latency and decoding time against one factor, per d_model)."""

    points: pd.DataFrame  # the architectures that have the factor, their quality as column "acc"
    widths: list[Any]  # the d_model of each column of panels ([None]: one column, no d_model known)
    columns: list[str]  # the rows of panels: "acc", "latency_ms" and, where measured, "decode_ms"
    levels: list[Any]  # the factor's values in drawing order


def effect_data(
    df: pd.DataFrame, x: str, order: Sequence[Any] | None = None, metric: QualityMetric | None = None
) -> EffectData:
    """The architectures of ``df`` that have factor ``x``, the panels they are drawn in, and the factor's
    values in ``order`` (values not in it follow, sorted)."""
    c = df.dropna(subset=[x]).copy()
    c["acc"] = quality(c, metric)
    widths = (
        sorted(c["d_model"].dropna().unique()) if "d_model" in c and c["d_model"].notna().any() else [None]
    )
    columns = ["acc", "latency_ms"]
    if "decode_ms" in c and c["decode_ms"].notna().any():
        columns.append("decode_ms")
    present = set(c[x])
    levels = [v for v in order if v in present] + sorted(present - set(order)) if order else sorted(present)
    return EffectData(c, widths, columns, levels)
