"""explorer.answer._contrasts: what the layouts beside the answer cost or gain against it."""

from __future__ import annotations

from explorer.answer import Contrast, answer
from tests.answer.test_recommend import SPEC, finalist_records


def test_the_answer_contrasts_the_layouts_at_its_width_and_depth_against_itself():
    finals = finalist_records(
        10,
        [((8, 8), 0.95, 2.4, "8 heads"), ((4, 4), 0.948, 1.4, "knee"), ((1, 1), 0.70, 1.0, "1 head")],
        seeds=6,
        noise=0.002,
    )
    ans = answer(finals, SPEC)
    assert ans.recommended.heads == (4, 4) and ans.contrasts
    assert all(isinstance(c, Contrast) for c in ans.contrasts)
    one = next(c for c in ans.contrasts if c.other is not None and c.other.heads == (1, 1))
    assert one.quality_diff < -0.2 and one.latency_ratio < 1  # one head: faster and far worse
    assert one.quality is not None and one.quality.diff < 0
