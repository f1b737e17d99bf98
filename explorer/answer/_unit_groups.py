"""Two groups of finalist layouts compared unit by unit: the rules of thumb on the evidence grid.

A rule of thumb ("one head loses accuracy", "d_k below 16 hurts") compares the layouts on one side of a claim
with those on the other. On the evidence grid every layout ran the same units, so for each unit the mean score
of side a's layouts minus that of side b's is one paired difference (within each width and depth, then averaged
over those), and the claim is tested over units with the paired t statistic of
:func:`explorer.answer._paired.paired`, the same machinery as the answer's class and contrasts. What it
shows is about the layouts measured, trained as the evidence trained them; the layouts are named in the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from explorer.answer._evidence_grid import Grid
from explorer.answer._paired import PairedDifference, paired
from explorer.answer._tables import Architecture
from explorer.layout import ModelConfig


@dataclass(frozen=True)
class UnitComparison:
    """Side a minus side b, unit by unit, over the layouts of each side (higher scores are better)."""

    diff: PairedDifference  # the per-unit differences against zero
    a: tuple[Architecture, ...]
    b: tuple[Architecture, ...]
    p_greater: float  # one-sided paired t p of a > b
    p_less: float  # ... of a < b


def unit_comparison(
    grid: Grid | None,
    archs: Sequence[Architecture],
    in_a: Callable[[ModelConfig], bool],
    in_b: Callable[[ModelConfig], bool],
    strata: Callable[[ModelConfig], tuple[Any, ...]] = lambda c: (c.d_model, c.n_layers),
    level: float = 0.95,
) -> UnitComparison | None:
    """Compare the grid's layouts where ``in_a`` holds with those where ``in_b`` holds (the interval at
    ``level``); None when no stratum has both sides on two or more shared units."""
    if grid is None:
        return None
    by_key = {a.key: a for a in archs if a.key in grid.keys}
    groups: dict[tuple[Any, ...], tuple[list[int], list[int]]] = {}
    for i, key in enumerate(grid.keys):
        a = by_key.get(key)
        side = None if a is None else 0 if in_a(a.config) else 1 if in_b(a.config) else None
        if side is not None:
            groups.setdefault(strata(a.config), ([], []))[side].append(i)  # type: ignore[union-attr]
    per_stratum = []
    side_a: list[Architecture] = []
    side_b: list[Architecture] = []
    for rows_a, rows_b in groups.values():
        if rows_a and rows_b:
            per_stratum.append(_column_means(grid.scores[rows_a]) - _column_means(grid.scores[rows_b]))
            side_a += [by_key[grid.keys[i]] for i in rows_a]
            side_b += [by_key[grid.keys[i]] for i in rows_b]
    if not per_stratum:
        return None
    stacked = np.vstack(per_stratum)
    d = stacked[:, ~np.isnan(stacked).any(axis=0)].mean(axis=0)
    if len(d) < 2:
        return None
    diff = paired(d, np.zeros_like(d), level=level, span=grid.span)
    return UnitComparison(diff, tuple(side_a), tuple(side_b), diff.p_greater(), diff.p_less())


def _column_means(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each unit's mean over the layouts that ran it (NaN where none did), without numpy's warning for an
    empty column: with runs spent where they decide, most layouts skip most units."""
    filled = ~np.isnan(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cast(npt.NDArray[np.float64], np.where(filled, x, 0.0).sum(axis=0) / filled.sum(axis=0))
