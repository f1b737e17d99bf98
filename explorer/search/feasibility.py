"""The declared design space (:class:`SpaceSpec`), which of its combinations can be realised, and the check
that every listed value is usable.

A family needs enough layers (free: 3) and enough valid head counts (ramps: 2) for a width and d_k floor;
:func:`space_combos` lists the realisable (family, d_model, min_dk, n_layers) combinations and
:func:`check_space` turns a listed value no valid configuration can use into a :class:`SpecError` naming the
value and the fix. The spec reader and the search space both rely on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.engine.config import SCHEDULE_FAMILIES, valid_heads
from explorer.errors import SpecError

__all__ = [
    "FACTORS",
    "MIN_COUNTS",
    "MIN_LAYERS",
    "SpaceSpec",
    "check_space",
    "realisable_families",
    "space_combos",
]


@dataclass(frozen=True)
class SpaceSpec:
    """The declared design space; explorer.search.space turns it into a fixed Optuna search space."""

    d_model: tuple[int, ...]  # residual widths
    n_layers: tuple[int, ...]  # depths
    heads: tuple[int, ...]  # head-count candidates (uniform counts, ramp endpoints, free per-layer choices)
    min_dk: tuple[int, ...] = (1,)  # d_k floors; more than one means the floor is searched over
    families: tuple[str, ...] = SCHEDULE_FAMILIES  # per-layer schedule families
    mlp_ratio: tuple[float, ...] = (4.0,)  # MLP width multipliers
    lr: float | tuple[float, float] = 3e-3  # fixed learning rate, or (low, high) searched log-uniformly
    dropout: float = 0.0  # fixed dropout
    attention: str = "fused"  # attention implementation every variant uses


FACTORS = ("family", "d_model", "min_dk", "n_layers")  # sampled in this order; nominal family first
MIN_LAYERS = {"uniform": 1, "increasing": 2, "decreasing": 2, "free": 3}  # depth a family needs
MIN_COUNTS = {"uniform": 1, "increasing": 2, "decreasing": 2, "free": 2}  # valid head counts it needs


def space_combos(
    space: SpaceSpec,
) -> tuple[dict[tuple[int, int], tuple[int, ...]], tuple[tuple[str, int, int, int], ...]]:
    """Valid head candidates per (d_model, min_dk), and every realisable (family, d_model, min_dk, n_layers)."""
    counts = {  # the one head rule lives in explorer.engine.config.valid_heads
        (d, m): tuple(h for h in space.heads if h in set(valid_heads(d, m)))
        for d in space.d_model
        for m in space.min_dk
    }
    combos = tuple(
        (f, d, m, n_layers)
        for f in space.families
        for d in space.d_model
        for m in space.min_dk
        for n_layers in space.n_layers
        if len(counts[d, m]) >= MIN_COUNTS[f] and n_layers >= MIN_LAYERS[f]
    )
    return counts, combos


def realisable_families(space: SpaceSpec) -> tuple[str, ...]:
    """The families of ``space.families`` that some d_model, min_dk and depth of the space can realise."""
    return tuple(dict.fromkeys(f for f, *_ in space_combos(space)[1]))


def check_space(s: SpaceSpec) -> None:
    """Every listed value must be usable by some valid config; say which is not and how to fix it."""
    counts, combos = space_combos(s)
    floor = min(s.min_dk)
    if not any(counts.values()):
        raise SpecError(
            f"no head count in heads {list(s.heads)} divides any d_model in {list(s.d_model)} with "
            f"d_k >= {floor}; for d_model {s.d_model[-1]} the valid counts are "
            f"{valid_heads(s.d_model[-1], floor) or 'none'}: add some, or lower min_dk."
        )
    used = {i: {c[i] for c in combos} for i in range(4)}
    for f in s.families:
        if f not in used[0]:
            raise SpecError(
                f"family {f!r} cannot be realised: it needs {MIN_LAYERS[f]}+ layers and {MIN_COUNTS[f]}+ valid "
                f"head counts for one d_model and min_dk; add such n_layers or head counts, or drop {f!r}."
            )
    for d in s.d_model:
        if d not in used[1]:
            valid = sorted({h for m in s.min_dk for h in counts[d, m]})
            has = f"only the head counts {valid}" if valid else f"none of the head counts {list(s.heads)}"
            raise SpecError(
                f"d_model {d} admits {has} at d_k >= {floor}, too few for families {list(s.families)}; "
                f"add head counts from {valid_heads(d, floor)} or remove {d} from d_model."
            )
    for m in s.min_dk:
        if m not in used[2]:
            raise SpecError(
                f"min_dk {m} leaves too few valid head counts for every d_model and family; lower it, "
                f"remove it from min_dk, or add a wider d_model."
            )
    for n_layers in s.n_layers:
        if n_layers not in used[3]:
            raise SpecError(
                f"n_layers {n_layers} fits none of the families {list(s.families)} (increasing and decreasing "
                f"need 2+ layers, free 3+); remove it or add 'uniform' to families."
            )
    usable = {h for _, d, m, _ in combos for h in counts[d, m]}
    for h in s.heads:
        if h not in usable:
            if any(d % h == 0 for d in s.d_model):
                d = max(d for d in s.d_model if d % h == 0)
                why = (
                    f"d_k = {d}/{h} = {d // h} < {floor}" if d // h < floor else "no listed family can use it"
                )
            else:
                why = f"{h} divides no listed d_model"
            raise SpecError(
                f"head count {h} is never valid ({why}); remove it from heads, lower min_dk or add a wider d_model."
            )
