"""explorer.analysis._relations_claim: "one head learns one relation", checked on a study's runs and attention."""

from __future__ import annotations

import dataclasses

from explorer.analysis import relations_claim
from tests.fixtures import record

ATTENTION = (
    (0, 0, 0, 0.9),
    (0, 0, 1, 0.1),
    (0, 1, 0, 0.1),
    (0, 1, 1, 0.8),
)  # layer, head, relation, attention


def runs(wide=0.90, narrow=0.60):
    """Two layouts with 2 heads (one layer) and two with one, each its own learning rate; the wide ones
    recorded their attention along the 2 relations: head 0 follows relation 0, head 1 relation 1."""
    out = []
    for i, (heads, acc) in enumerate(
        [((2,), wide), ((2,), wide - 0.01), ((1,), narrow), ((1,), narrow + 0.01)]
    ):
        r = record(i, heads, acc, 1.0, d_model=16, lr=1e-3 * (i + 1))
        out.append(dataclasses.replace(r, relations=ATTENTION if heads == (2,) else ()))
    return out


def test_the_claim_holds_when_k_heads_cost_nothing_and_follow_the_k_relations():
    claim = relations_claim(runs(), 2)
    assert (claim.n_at_least, claim.n_fewer) == (2, 2) and claim.best_number == 0 and claim.best_heads == (2,)
    assert claim.specialization_held and claim.summary["relations"].tolist() == ["0,1"]
    assert "trial 0" in claim.description and dict(claim.by_heads)[(1,)] == (0.60, 0.61)


def test_without_recorded_attention_the_specialization_is_not_judged():
    bare = [dataclasses.replace(r, relations=()) for r in runs()]
    claim = relations_claim(bare, 2)
    assert claim.summary is None and claim.specialization_held is None and claim.held is None
    assert "recorded its attention" in claim.description
