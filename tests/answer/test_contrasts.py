"""explorer.answer._contrasts: what the layouts beside the answer cost or gain against it."""

from __future__ import annotations

from explorer.answer import Contrast, answer
from explorer.answer._contrasts import _uniform_heads
from explorer.layout import ModelConfig
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


def test_the_named_layouts_keep_the_answers_head_width_where_the_heads_have_one_of_their_own():
    # a trained checkpoint's heads (or a head_dim space's) keep their width: its one-head layout is one 8-wide head
    # a layer, not one head as wide as the model, so the layout the study measured is the one named
    cut = ModelConfig(d_model=64, heads=(4, 4), head_dim=(8, 8))
    assert _uniform_heads(cut, 1).d_k == (8, 8) and _uniform_heads(cut, 8).d_k == (8, 8)
    classic = ModelConfig(d_model=64, heads=(4, 4))
    assert _uniform_heads(classic, 1).d_k == (64, 64) and _uniform_heads(classic, 3) is None
