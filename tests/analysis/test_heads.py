"""Reading head probes: layers' needed heads, and layouts the tool can build, checked all layers at once."""

from __future__ import annotations

import pandas as pd

from explorer.analysis._heads import heads_needed, suggest_layout
from explorer.layout import valid_heads


def curves(per_layer: dict[int, list[float]]) -> pd.DataFrame:
    rows = [
        {"layer": layer, "n_masked": k, "accuracy": acc}
        for layer, accs in per_layer.items()
        for k, acc in enumerate(accs)
    ]
    return pd.DataFrame(rows)


def test_heads_needed_from_curves():
    c = curves({0: [0.9, 0.9, 0.895, 0.89, 0.5], 1: [0.9, 0.7]})
    assert heads_needed(c, (4, 1), tolerance=0.01) == [1, 1]
    assert heads_needed(c, (4, 1), tolerance=0.0) == [3, 1]


def test_suggested_layouts_are_buildable_and_hold_up_together():
    """'6,0,1' for d_model 64 was suggested once: per-layer counts measured one layer at a time. A suggestion
    must be a layout the tool accepts (dividing d_model, at least one head) and be checked as one model."""
    calls = []

    def measure(layout):  # a model that loses accuracy when two layers lose heads together
        calls.append(layout)
        return 0.90 if sum(layout) >= 12 else 0.80

    lay = suggest_layout([6, 0, 1], (8, 8, 8), 64, 1, 0.90, measure, tolerance=0.01)
    valid = valid_heads(64, 1)
    assert all(h in valid and h >= 1 for h in lay.heads)
    assert lay.rounded[0] and lay.rounded[1]  # 6 -> 8, 0 -> 1
    assert lay.within and lay.accuracy == 0.90 and sum(lay.heads) >= 12
    assert calls[0] == (8, 1, 1) and lay.note  # first try, then heads given back until it holds


def test_the_trained_layout_always_qualifies():
    lay = suggest_layout([1, 1], (2, 2), 32, 4, 0.9, lambda layout: 0.9 if layout == (2, 2) else 0.1)
    assert lay.heads == (2, 2) and lay.within


def test_a_layer_may_lose_heads_until_accuracy_drops_by_more_than_the_tolerance():
    from explorer.analysis import TOLERANCE

    c = curves({0: [0.9, 0.9 - TOLERANCE / 2, 0.9 - 2 * TOLERANCE, 0.5]})
    assert heads_needed(c, (3,)) == heads_needed(c, (3,), tolerance=TOLERANCE) == [2]  # loses one head
    assert heads_needed(c, (3,), tolerance=3 * TOLERANCE) == [1]


def test_a_head_follows_a_relation_from_the_specialization_threshold():
    from explorer.analysis import SPECIALIZED, specialized_heads

    table = pd.DataFrame(
        {
            "layer": 0,
            "head": [0, 0, 1, 1],
            "relation": [0, 1, 0, 1],
            "attention": [SPECIALIZED, 0.0, SPECIALIZED - 0.01, 0.0],
        }
    )
    (row,) = specialized_heads(table).to_dict(orient="records")
    assert (row["specialized"], row["relations"], row["relations_covered"]) == (1, "0", 1)
