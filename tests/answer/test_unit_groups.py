"""explorer.answer._unit_groups: one group of layouts against another, unit by unit."""

from __future__ import annotations

from explorer.answer import UnitComparison, answer, architectures, unit_comparison
from tests.answer.test_recommend import SPEC, finalist_records


def test_layouts_with_more_heads_compared_with_fewer_unit_by_unit():
    finals = finalist_records(
        10,
        [((8, 8), 0.95, 2.4, "8 heads"), ((4, 4), 0.94, 1.4, "knee"), ((1, 1), 0.70, 1.0, "1 head")],
        seeds=5,
    )
    grid = answer(finals, SPEC).grid
    archs = architectures(finals, "finalist")
    many = unit_comparison(grid, archs, lambda c: min(c.heads) >= 4, lambda c: max(c.heads) == 1)
    assert isinstance(many, UnitComparison)
    assert {a.heads for a in many.a} == {(8, 8), (4, 4)} and {b.heads for b in many.b} == {(1, 1)}
    assert many.diff.diff > 0.2 and many.p_greater < 0.01 < 0.99 < many.p_less  # one-sided p-values: a > b
    assert unit_comparison(None, archs, lambda c: True, lambda c: True) is None
