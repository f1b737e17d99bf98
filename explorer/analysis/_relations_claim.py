""" "One head learns one relation", checked on a relations study (k planted relations).

Two halves. Accuracy: architectures with at least k heads in every layer against those with fewer in some layer
(the same stratified exact permutation test as the rules of thumb). Specialization: in the most accurate
architecture with at least k heads per layer, how many heads follow a relation and how many of the k relations
they cover, read from the attention each trial measured along every relation when it finished (stored with the
trial, so the report never loads or runs a model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from explorer.analysis._groups import ALPHA, GroupComparison, group_comparison
from explorer.analysis._heads import (
    SPECIALIZED,
    describe_specialization,
    relations_followed,
    specialized_heads,
)
from explorer.answer import architectures
from explorer.storage import Role, TrialRecord


@dataclass(frozen=True)
class RelationsClaim:
    k: int
    accuracy: GroupComparison | None  # >= k heads in every layer vs fewer
    n_at_least: int
    n_fewer: int
    # every architecture's accuracy, by layout
    by_heads: tuple[tuple[tuple[int, ...], tuple[float, ...]], ...]
    best_number: int | None  # the trial whose heads were read
    best_heads: tuple[int, ...]
    best_accuracy: float | None
    summary: pd.DataFrame | None  # specialized_heads of that trial
    description: str

    @property
    def accuracy_held(self) -> bool | None:
        return None if self.accuracy is None else self.accuracy.comparison.p_value <= ALPHA

    @property
    def specialization_held(self) -> bool | None:
        if self.summary is None:
            return None
        covered = len(relations_followed(self.summary))
        return covered >= self.k and int(self.summary["specialized"].sum()) >= self.k

    @property
    def held(self) -> bool | None:
        if self.accuracy_held is None or self.specialization_held is None:
            return None
        return self.accuracy_held and self.specialization_held


def relations_claim(records: Sequence[TrialRecord], k: int) -> RelationsClaim:
    g, n_a, n_b = group_comparison(records, lambda c: min(c.heads) >= k, lambda c: min(c.heads) < k)
    archs = architectures(records, Role.SEARCH)
    by_heads: dict[tuple[int, ...], list[float]] = {}
    for a in sorted(archs, key=lambda a: a.numbers[0]):
        by_heads.setdefault(a.heads, []).extend(a.values)
    wide = [
        r
        for r in records
        if r.finished
        and r.role == Role.SEARCH
        and min(r.heads) >= k
        and r.relations
        and r.val_accuracy is not None
    ]
    if not wide:
        return RelationsClaim(
            k,
            g,
            n_a,
            n_b,
            tuple((h, tuple(v)) for h, v in sorted(by_heads.items())),
            None,
            (),
            None,
            None,
            f"No finished trial with at least {k} heads in every layer recorded its attention along the relations.",
        )
    best = max(wide, key=lambda r: (r.val_accuracy, -r.number))
    accuracy = best.val_accuracy
    assert accuracy is not None  # wide holds only trials that measured it
    table = pd.DataFrame(list(best.relations), columns=["layer", "head", "relation", "attention"])
    summary = specialized_heads(table)
    description = (
        f"Most accurate trial with at least {k} heads in every layer (trial {best.number}, heads "
        f"{','.join(map(str, best.heads))}, {accuracy * 100:.2f}% validation): "
        f"{describe_specialization(summary)}. A head follows relation r when it puts at least {SPECIALIZED:.0%} of "
        "its attention between marker r and its target, averaged over the validation split."
    )
    return RelationsClaim(
        k,
        g,
        n_a,
        n_b,
        tuple((h, tuple(v)) for h, v in sorted(by_heads.items())),
        best.number,
        best.heads,
        best.val_accuracy,
        summary,
        description,
    )
