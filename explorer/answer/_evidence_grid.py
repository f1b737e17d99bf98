"""The evidence grid: every finalist layout's score on every unit, with collapsed runs set apart.

A *unit* is one cell of the evidence grid (:func:`explorer.answer._finalists.evidence_units`): a fold of one
replicate, trained with one seed that every layout shares; its seed identifies it. :func:`evidence_grid` lays
the finalist runs out as a layouts x units matrix of scores (quality signed so that higher is better: accuracy,
or minus bits per byte), the cells a layout has not run (yet) missing.

A run *collapses* when training fails for reasons of its own (it sticks near chance, or at a poor plateau): one
such run in a layout's units drags its mean and spread far from what the layout does, and pooling it in would
widen every interval it touches. :func:`collapsed_runs` finds them as runs far below what their layout scores on
the other units *and* what the other layouts score on that unit: the residual of a two-way fit by medians
(layout and unit effects), beyond :data:`COLLAPSE_SDS` robust standard deviations of all residuals and at least
:data:`COLLAPSE_FLOOR` of the score's range. They are left out of the grid and reported apart, never pooled.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from explorer.measurements import QualityMetric
from explorer.storage import Role, TrialRecord

COLLAPSE_SDS = 6.0  # robust standard deviations of the residuals below which a run is called collapsed
COLLAPSE_FLOOR = 0.05  # ... and at least this far below (5 accuracy points; 5% of the bits per byte)


@dataclass(frozen=True)
class Collapse:
    """A run set apart: its layout, unit, trial and score, and how far below the two-way fit it fell."""

    key: str
    seed: int
    number: int
    value: float  # its quality on the metric's own scale (accuracy, or bits per byte)
    shortfall: float  # how far below the fit, on the score's scale (higher is better)


@dataclass(frozen=True)
class Grid:
    """Scores of ``keys`` (layouts) on ``seeds`` (units); NaN where a layout has no usable run on a unit."""

    keys: tuple[str, ...]
    seeds: tuple[int, ...]
    scores: npt.NDArray[np.float64]  # [layouts, units], higher is better
    numbers: npt.NDArray[np.int_]  # [layouts, units] trial numbers (-1: none)
    collapsed: tuple[Collapse, ...]
    metric: QualityMetric

    def subset(self, keys: Sequence[str]) -> Grid:
        """The grid of ``keys`` only, in that order."""
        rows = [self.keys.index(k) for k in keys]
        return Grid(
            tuple(keys), self.seeds, self.scores[rows], self.numbers[rows], self.collapsed, self.metric
        )

    def row(self, key: str) -> npt.NDArray[np.float64]:
        return cast(npt.NDArray[np.float64], self.scores[self.keys.index(key)])

    def common(self, a: str, b: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The two layouts' scores on the units both have."""
        x, y = self.row(a), self.row(b)
        both = ~np.isnan(x) & ~np.isnan(y)
        return x[both], y[both]

    def runs(self, key: str) -> int:
        return int(np.count_nonzero(~np.isnan(self.row(key))))

    @property
    def span(self) -> float:
        """The largest difference two scores can show: 1 for accuracies, unbounded for bits per byte."""
        return 1.0 if self.metric.direction == "maximize" else math.inf


def _score(metric: QualityMetric, value: float) -> float:
    return value if metric.direction == "maximize" else -value


def evidence_grid(records: Sequence[TrialRecord], keys: Sequence[str], metric: QualityMetric) -> Grid:
    """The finished finalist runs of ``keys`` as a grid by unit (seed), collapsed runs left out."""
    runs = [
        r for r in records if r.role == Role.FINALIST and r.finished and r.key in keys and r.seed is not None
    ]
    seeds = tuple(sorted({int(r.seed) for r in runs}))  # type: ignore[arg-type]
    scores = np.full((len(keys), len(seeds)), np.nan)
    numbers = np.full((len(keys), len(seeds)), -1, dtype=int)
    for r in sorted(runs, key=lambda r: r.number):  # a retried run replaces nothing: the first one counts
        i, j = list(keys).index(r.key), seeds.index(int(r.seed))  # type: ignore[arg-type]
        if np.isnan(scores[i, j]):
            scores[i, j] = _score(metric, float(r.quality))  # type: ignore[arg-type]
            numbers[i, j] = r.number
    collapsed = collapsed_runs(scores, metric)
    out = []
    for i, j, shortfall in collapsed:
        out.append(Collapse(keys[i], seeds[j], int(numbers[i, j]), _score(metric, scores[i, j]), shortfall))
        scores[i, j] = np.nan
    return Grid(tuple(keys), seeds, scores, numbers, tuple(out), metric)


def collapsed_runs(scores: npt.NDArray[np.float64], metric: QualityMetric) -> list[tuple[int, int, float]]:
    """(layout, unit, shortfall) of every run far below the two-way median fit (see the module docstring)."""
    filled = ~np.isnan(scores)
    if filled.sum() < 6 or scores.shape[1] < 3:
        return []
    fit = _median_polish(scores)
    resid = scores - fit
    values = resid[filled]
    sd = 1.4826 * float(np.median(np.abs(values - np.median(values))))
    level = float(np.nanmedian(np.abs(scores)))
    floor = COLLAPSE_FLOOR if metric.direction == "maximize" else COLLAPSE_FLOOR * level
    cut = max(COLLAPSE_SDS * sd, floor)
    out = []
    for i, j in zip(*np.nonzero(filled), strict=True):
        if resid[i, j] < -cut and np.count_nonzero(filled[i]) >= 3:
            out.append((int(i), int(j), float(-resid[i, j])))
    return out


def _median_polish(x: npt.NDArray[np.float64], sweeps: int = 10) -> npt.NDArray[np.float64]:
    """Tukey's median polish of a matrix with missing cells: the fitted overall + row + column effects."""
    rows = np.zeros(x.shape[0])
    cols = np.zeros(x.shape[1])
    # a layout with no run yet is an all-NaN row: its effect is 0, said quietly
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        overall = float(np.nanmedian(x))
        resid = x - overall
        for _ in range(sweeps):
            r = np.nan_to_num(np.nanmedian(resid, axis=1))
            rows += r
            resid = resid - r[:, None]
            c = np.nan_to_num(np.nanmedian(resid, axis=0))
            cols += c
            resid = resid - c[None, :]
    return overall + rows[:, None] + cols[None, :]
