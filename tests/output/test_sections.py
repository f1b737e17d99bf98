"""explorer.output._sections: what the report says of the relations claim about an answer with fewer heads."""

from __future__ import annotations

from explorer.analysis import relations_claim
from explorer.answer import architectures
from explorer.output import why_fewer_than_k
from tests.analysis.test_relations_claim import runs


def test_why_fewer_than_k_counts_the_runs_on_each_side_within_a_point_of_the_answer():
    records = runs(wide=0.90, narrow=0.895)  # one head is within a point of two
    claim = relations_claim(records, 2)
    answer = next(a for a in architectures(records, "search") if a.heads == (1,) and a.numbers == (3,))
    text = why_fewer_than_k(answer, 2, claim.by_heads)
    assert text.startswith("Why the answer has fewer than 2 heads in a layer: 1 at d_model 16 reached 90.50%")
    assert "within 1 point of the best layout with at least 2 heads (90.00%)" in text
    assert (
        "2 of 2 runs with fewer than 2 heads came within 1 point of it, against 1 of 2 with at least 2"
        in text
    )  # 0.89 is not
    assert "explorer confirm NAME --seeds 3" in text  # one run per layout


def test_a_count_of_epochs_is_singular_for_one():
    from explorer.output._fmt import epochs_text

    assert epochs_text(1) == "1 epoch"
    assert epochs_text(40) == "40 epochs"
    assert epochs_text(1.0) == "1 epoch"
