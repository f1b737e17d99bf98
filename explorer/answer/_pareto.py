"""The quality/latency trade-off: Pareto front, knee and hypervolume, over architecture or trial tables.

Tables need a quality column maximized, ``score`` (the quality signed so that higher is better, see
:mod:`explorer.answer._tables`) or else ``val_accuracy`` (fractions in [0, 1]), a cost column minimized
(``cost``, default ``latency_ms``; ``decode_ms`` when decoding time is the objective) and a ``number`` to break
ties; rows must already be the ones to consider (feasible, within budgets).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import numpy as np
import numpy.typing as npt
import pandas as pd

HV_REFERENCE = (1.1, 1.1)  # reference point in normalized objective space (0 = best observed, 1 = worst)
LATENCY = "latency_ms"


def quality_column(df: pd.DataFrame) -> str:
    """The maximized quality column of a table: ``score`` where present, else ``val_accuracy``."""
    return "score" if "score" in df.columns else "val_accuracy"


def _as_min(df: pd.DataFrame, cost: str = LATENCY) -> npt.NDArray[np.float64]:
    """Quality and cost as a float array where lower is better in both columns."""
    return np.column_stack([-df[quality_column(df)].to_numpy(float), df[cost].to_numpy(float)])


def pareto_front(df: pd.DataFrame, cost: str = LATENCY) -> pd.DataFrame:
    """The non-dominated rows of ``df``, fastest first."""
    q = quality_column(df)
    c = df.dropna(subset=[q, cost])
    keep = front_mask(c[q].to_numpy(float), c[cost].to_numpy(float))
    return c[keep].sort_values([cost, q], ascending=[True, False])


def normalize(
    df: pd.DataFrame, bounds: pd.DataFrame | None = None, cost: str = LATENCY
) -> npt.NDArray[np.float64]:
    """Quality/cost as minimization in [0, 1]: 0 = best, 1 = worst over ``bounds`` (default ``df``)."""
    b = _as_min(df if bounds is None else bounds, cost)
    y = _as_min(df, cost)
    lo, hi = b.min(axis=0), b.max(axis=0)
    return cast(npt.NDArray[np.float64], (y - lo) / np.where(hi > lo, hi - lo, 1.0))


def hypervolume_2d(
    points: npt.NDArray[np.float64] | Sequence[Sequence[float]], reference: Sequence[float]
) -> float:
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


def hypervolume_history(
    df: pd.DataFrame, bounds: pd.DataFrame | None = None, cost: str = LATENCY
) -> pd.DataFrame:
    """Hypervolume of the front after each row, in ``number`` order (rows: the trials that finished).

    Objectives are min-max normalized over ``bounds`` (default ``df``; 0 = best, 1 = worst) and the reference
    point is ``HV_REFERENCE`` = (1.1, 1.1), so the largest possible value is 1.21.
    """
    c = df.dropna(subset=[quality_column(df), cost]).sort_values("number")
    out = [0.0] * len(c)
    if len(c):
        y = normalize(c, c if bounds is None else bounds, cost)
        front = np.empty((0, 2))
        hv = 0.0
        for i in range(len(c)):
            if not np.any(np.all(front <= y[i], axis=1)):
                front = np.vstack([front[~np.all(y[i] <= front, axis=1)], y[i]])
                hv = hypervolume_2d(front, HV_REFERENCE)
            out[i] = hv
    return pd.DataFrame(
        {"number": c["number"].to_numpy(), "hypervolume": out}, columns=["number", "hypervolume"]
    )


def front_mask(acc: npt.NDArray[np.float64], lat: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    """Which points (accuracy maximized, latency minimized) no other point dominates."""
    y = np.column_stack([-np.asarray(acc, float), np.asarray(lat, float)])
    dominated = np.all(y[None, :, :] <= y[:, None, :], axis=2) & np.any(y[None, :, :] < y[:, None, :], axis=2)
    return cast(npt.NDArray[np.bool_], ~dominated.any(axis=1))


def knee_index(
    acc: npt.NDArray[np.float64],
    lat: npt.NDArray[np.float64],
    bounds: tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None = None,
) -> int:
    """Index of the knee among front points ``acc``/``lat`` (see :func:`knee`); ``bounds`` = the arrays the
    objectives are normalized over (default: the points themselves)."""
    acc, lat = np.asarray(acc, float), np.asarray(lat, float)
    b_acc, b_lat = (
        (acc, lat) if bounds is None else (np.asarray(bounds[0], float), np.asarray(bounds[1], float))
    )
    lo = np.array([-b_acc.max(), b_lat.min()])
    hi = np.array([-b_acc.min(), b_lat.max()])
    y = (np.column_stack([-acc, lat]) - lo) / np.where(hi > lo, hi - lo, 1.0)
    order = np.lexsort((-acc, lat))  # fastest first, then more accurate: the tie-break order of the front
    y, acc_o = y[order], acc[order]
    if len(y) >= 3:
        a, b = y[np.argmin(y[:, 0])], y[np.argmin(y[:, 1])]  # most accurate, fastest
        d = b - a
        length = math.hypot(*d)
        if length > 0:
            # Signed distance to the chord; positive on the utopia side.
            dist = (d[0] * (y[:, 1] - a[1]) - d[1] * (y[:, 0] - a[0])) / length
            dist = dist * (1.0 if d[0] * (0 - a[1]) - d[1] * (0 - a[0]) > 0 else -1.0)
            if dist.max() > 1e-9:
                return int(order[np.lexsort((-acc_o, -np.round(dist, 12)))[0]])
    utopia = np.round(np.hypot(y[:, 0], y[:, 1]), 12)
    return int(order[np.lexsort((-acc_o, utopia))[0]])


def knee(front: pd.DataFrame, bounds: pd.DataFrame | None = None, cost: str = LATENCY) -> pd.Series:
    """The knee of a quality/latency front (``cost``: the latency column).

    Definition: normalize both objectives to [0, 1] (0 = best) over ``bounds`` (default: the front itself), draw
    the line joining the front's two extremes (most accurate, fastest), and take the point farthest from it on
    the utopia side. With one or two points, or when no point lies off that line, take the point closest to the
    utopia point (0, 0) instead. Ties go to the more accurate row.
    """
    if front.empty:
        raise ValueError("the front is empty")
    b = front if bounds is None else bounds
    q = quality_column(front)
    i = knee_index(
        front[q].to_numpy(float),
        front[cost].to_numpy(float),
        (b[q].to_numpy(float), b[cost].to_numpy(float)),
    )
    return front.iloc[i]
