"""What the probes of a model's heads mean: how many heads each layer needs, which are redundant, which
relations they follow. Pure functions over the tables :mod:`explorer.measure._probe` measures.

* Heads needed: from the per-layer masking curves, the heads a layer keeps before validation accuracy drops by
  more than ``tolerance`` (masked least important first, other layers intact). A layout built from those counts
  is then rounded up to head counts the tool can build (dividing d_model, d_k at least the floor) and checked
  with all layers masked together (:func:`suggest_layout`): one-layer-at-a-time counts are not one configuration.
* Redundancy: pairs of heads of one layer whose attention maps are nearly the same (JS similarity).
* Relations (the relations task): which heads follow which planted relation, and how many relations are covered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from explorer.layout import valid_heads

TOLERANCE = 0.01  # one accuracy point: how much a layer may lose before its heads count as needed
REDUNDANT = 0.9  # JS similarity above which two heads of a layer are called redundant
SPECIALIZED = 0.3  # attention a head puts on a relation's target (either direction) to count as following it


def _needed(curves: pd.DataFrame, heads: Sequence[int], tolerance: float) -> list[int]:
    """Heads each layer keeps: all but the longest prefix of its curve that stays within ``tolerance``."""
    out = []
    for layer, h in enumerate(heads):
        c = curves[curves["layer"] == layer].sort_values("n_masked")
        base = float(c["accuracy"].iloc[0])
        removable = 0
        for k, acc in zip(c["n_masked"].iloc[1:], c["accuracy"].iloc[1:], strict=True):
            if acc < base - tolerance - 1e-12:
                break
            removable = int(k)
        out.append(h - removable)
    return out


def heads_needed(curves: pd.DataFrame, heads: Sequence[int], tolerance: float = TOLERANCE) -> list[int]:
    """Per layer, the heads it needs: its head count minus how many it can lose (least important first, other
    layers intact) before validation accuracy drops by more than ``tolerance`` (0.01 = 1 point).

    ``curves`` come from :func:`the per-layer frame of :func:`explorer.measure._probe.masking_curves``. Each value lies in ``[0, H_i]``.
    """
    return _needed(curves, heads, tolerance)


def redundant_pairs(pairs: pd.DataFrame, threshold: float = REDUNDANT) -> pd.DataFrame:
    """The pairs from :func:`attention_pairs` at or above ``threshold`` similarity, most similar first."""
    return pairs[pairs["similarity"] >= threshold].sort_values(
        "similarity", ascending=False, ignore_index=True
    )


def specialized_heads(table: pd.DataFrame, threshold: float = SPECIALIZED) -> pd.DataFrame:
    """Per layer: which heads follow which relations (attention along it >= threshold).

    A head may follow several relations: "one head learns one relation" is what this checks, not assumes.
    Columns: layer, heads, specialized (heads following at least one relation), relations_covered (distinct
    relations followed by some head), k, relations (those relations, e.g. "0,2"), shared (heads following more
    than one), detail (per following head, numbered from 1: "2: 0,1,2; 3: 3").
    """
    k = int(table["relation"].max()) + 1
    out = []
    for layer, g in table.groupby("layer"):
        hits = g[g["attention"] >= threshold]
        per_head = hits.groupby("head")["relation"].apply(lambda r: sorted(int(x) for x in r))
        out.append(
            {
                "layer": int(layer),
                "heads": int(g["head"].nunique()),
                "specialized": len(per_head),
                "relations_covered": int(hits["relation"].nunique()),
                "k": k,
                "relations": ",".join(map(str, sorted(int(x) for x in hits["relation"].unique()))),
                "shared": int(sum(len(rs) > 1 for rs in per_head)),
                "detail": "; ".join(f"{int(h) + 1}: {','.join(map(str, rs))}" for h, rs in per_head.items()),
            }
        )
    return pd.DataFrame(out)


def relations_followed(summary: pd.DataFrame) -> set[int]:
    """Relations followed by some head in any layer, from :func:`specialized_heads`."""
    return {int(r) for cell in summary["relations"] for r in cell.split(",") if r}


def describe_specialization(summary: pd.DataFrame) -> str:
    """One clause per layer (numbered from 1) and the network-wide count, from :func:`specialized_heads`."""

    def heads(detail: str) -> str:  # "2: 0,1; 3: 3" -> "head 2: relations 0,1, head 3: relation 3"
        parts = (part.split(": ") for part in detail.split("; "))
        return ", ".join(f"head {h}: relation{'s' * (',' in rs)} {rs}" for h, rs in parts)

    k = int(summary["k"].iloc[0])
    layers = "; ".join(
        f"layer {int(r.layer) + 1}: {int(r.specialized)} of {int(r.heads)} heads follow a relation"
        + (f" ({heads(r.detail)})" if r.detail else "")
        for r in summary.itertuples()
    )
    shared = int(summary["shared"].sum())
    return f"{layers}; in all, heads follow {len(relations_followed(summary))} of the {k} relations" + (
        f", and {shared} head{'s' * (shared > 1)} follow{'s' * (shared == 1)} more than one" if shared else ""
    )


@dataclass(frozen=True)
class HeadsReport:
    """The head analysis of one trial (validation split) and where its files went."""

    study: str
    trial: int
    d_model: int
    heads: tuple[int, ...]  # per layer, as trained
    heads_needed: tuple[int, ...]  # per layer, from masking one layer at a time
    layout: Layout  # the buildable layout from those counts, checked with all layers masked together
    tolerance: float  # accuracy loss allowed per layer when counting needed heads (0.01 = 1 point)
    val_accuracy_stored: float  # what the study recorded for the trial
    val_accuracy: float  # of the model analysed (loaded or retrained); should match the stored figure
    importance: tuple[tuple[float, ...], ...]  # per layer and head, L2-normalized per layer
    table: pd.DataFrame  # per head: importance, masking order, entropy, similarity (= heads.csv)
    curve: pd.DataFrame  # masking_curves, across layers
    layer_curves: pd.DataFrame  # masking_curves, per layer
    redundant: pd.DataFrame  # redundant_pairs
    # relations task only: attention along each relation per (layer, head), and its per-layer summary
    relations: pd.DataFrame | None = None  # specialization_from_maps
    relations_followed: pd.DataFrame | None = None  # specialized_heads

    @property
    def relations_summary(self) -> str | None:
        """One line per layer: how many heads follow a relation and how many relations they cover."""
        if self.relations_followed is None:
            return None
        return describe_specialization(self.relations_followed)

    @property
    def verdict(self) -> str:
        """One sentence comparing the masking recommendation with the trained schedule."""
        trained, layout = ",".join(map(str, self.heads)), ",".join(map(str, self.layout.heads))
        tol = f"{self.tolerance * 100:g} point"
        if self.layout.heads == self.heads:
            return f"every layer needs all its heads ({trained}): fewer heads lose more than {tol} together."
        return (
            f"with only {layout} heads per layer switched on, all layers at once, validation accuracy is "
            f"{self.layout.accuracy * 100:.2f}% against {self.layout.base_accuracy * 100:.2f}% with all {trained} "
            f"(within {tol}); a model built with {layout} heads has wider heads (d_k) and would need training "
            "to confirm it."
        )


def head_table(importance: Sequence[np.ndarray], curve: pd.DataFrame, stats: pd.DataFrame) -> pd.DataFrame:
    order = curve.dropna(subset=["layer"]).astype({"layer": int, "head": int})
    order = order.rename(columns={"n_masked": "mask_order", "accuracy": "accuracy_after_masking"})
    imp = pd.DataFrame(
        [
            {"layer": layer, "head": h, "importance": float(s)}
            for layer, v in enumerate(importance)
            for h, s in enumerate(v)
        ]
    )
    t = imp.merge(order[["layer", "head", "mask_order", "accuracy_after_masking"]], on=["layer", "head"])
    return t.merge(stats, on=["layer", "head"]).sort_values(["layer", "head"], ignore_index=True)


@dataclass(frozen=True)
class Layout:
    """A head layout suggested by masking, checked as one configuration."""

    heads: tuple[int, ...]  # per layer: head counts the tool can build
    accuracy: float  # validation accuracy of the trained model with only those heads on, all layers at once
    base_accuracy: float  # with every head on
    tolerance: float
    rounded: tuple[bool, ...]  # per layer: the masking count was rounded up to a buildable count
    note: str = ""

    @property
    def within(self) -> bool:
        return self.accuracy >= self.base_accuracy - self.tolerance - 1e-12


def suggest_layout(
    needed: Sequence[int],
    trained: Sequence[int],
    d_model: int,
    min_dk: int,
    base_accuracy: float,
    measure: Callable[[tuple[int, ...]], float],
    tolerance: float = TOLERANCE,
) -> Layout:
    """A buildable layout from per-layer ``needed`` counts, checked with every layer masked at once.

    Each count is rounded up to the smallest valid head count (divides ``d_model``, d_k >= ``min_dk``, at least
    1) that is no more than the layer was trained with. ``measure(layout)`` gives the accuracy with the most
    important heads of each layer kept (:func:`explorer.measure._probe.masked_accuracy`). While that accuracy is
    more than ``tolerance`` below ``base_accuracy``, the layer with the fewest heads kept relative to its trained
    count gets its next valid count back; the trained layout itself always qualifies.
    """
    valid = valid_heads(d_model, min_dk) or [1]
    trained = tuple(int(h) for h in trained)

    def up(n: int, cap: int) -> int:
        fits = [h for h in valid if max(n, 1) <= h <= cap]
        return fits[0] if fits else cap

    layout = tuple(up(n, cap) for n, cap in zip(needed, trained, strict=True))
    rounded = tuple(h != n for h, n in zip(layout, needed, strict=True))
    acc = measure(layout)
    steps = 0
    while acc < base_accuracy - tolerance - 1e-12 and layout != trained:
        grow = min(
            (i for i in range(len(layout)) if layout[i] < trained[i]), key=lambda i: layout[i] / trained[i]
        )
        bigger = [h for h in valid if layout[grow] < h <= trained[grow]]
        layout = layout[:grow] + (bigger[0] if bigger else trained[grow],) + layout[grow + 1 :]
        acc = measure(layout)
        steps += 1
    note = (
        f"{steps} layer(s) given heads back so that all layers together stay within tolerance"
        if steps
        else ""
    )
    return Layout(layout, acc, base_accuracy, tolerance, rounded, note)
