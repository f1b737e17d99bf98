"""explorer.answer._evidence_grid: the finalists' scores laid out by layout and unit, as the rule reads them."""

from __future__ import annotations

import math

import numpy as np

from explorer.answer import Grid, answer
from explorer.measurements import QUALITY_METRICS
from tests.answer.test_recommend import SPEC, finalist_records


def test_the_answer_reads_its_finalists_as_a_grid_of_layouts_by_unit():
    finals = finalist_records(10, [((8, 8), 0.95, 2.4, "8 heads"), ((4, 4), 0.94, 1.4, "knee")], seeds=4)
    grid = answer(finals, SPEC).grid
    assert isinstance(grid, Grid) and grid.scores.shape == (2, 4) and len(grid.seeds) == 4
    assert sorted(int(n) for n in grid.numbers.ravel()) == [r.number for r in finals]
    assert all(grid.runs(key) == 4 for key in grid.keys) and grid.span == 1.0


def test_a_grid_pairs_two_layouts_on_the_units_both_have_and_subsets_in_order():
    scores = np.array([[0.9, np.nan, 0.8], [0.7, 0.6, np.nan]])
    numbers = np.where(np.isnan(scores), -1, 0)
    grid = Grid(("a", "b"), (1, 2, 3), scores, numbers, (), QUALITY_METRICS["classification"])
    a, b = grid.common("a", "b")
    assert a.tolist() == [0.9] and b.tolist() == [0.7]
    assert grid.subset(["b", "a"]).keys == ("b", "a") and grid.subset(["b"]).runs("b") == 2
    bpb = Grid(("a",), (1,), scores[:1, :1], numbers[:1, :1], (), QUALITY_METRICS["language_model"])
    assert math.isinf(bpb.span)  # bits per byte are unbounded
