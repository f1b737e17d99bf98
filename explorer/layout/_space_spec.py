"""The spec's ``[space]`` table (:class:`SpaceSpec`): the declared design space, which of its combinations
can be realised, and the check that every listed value is usable.

A family needs enough layers (free: 3) and enough valid head counts (ramps: 2) for a width, d_k floor and head
width; :func:`space_combos` lists the realisable (family, d_model, min_dk, head_dim, n_layers) combinations and
:func:`check_space` turns a listed value no valid configuration can use into a :class:`SpecError` naming the
value and the fix. The spec reader and the search space both rely on it.

Two optional dimensions: ``kv_heads`` candidates (a head count is usable only where some candidate
divides it: heads % kv_heads == 0) and ``head_dim`` candidates (where given, every head is that wide, the d_k
floor applies to it, and d_model % heads is not required).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from explorer.errors import SpecError
from explorer.fields import key
from explorer.layout._config import ATTENTION_IMPLS
from explorer.layout._schedules import SCHEDULE_FAMILIES, valid_heads
from explorer.limits import D_MODEL, HEAD_DIM, HEADS, LAYERS


@dataclass(frozen=True)
class SpaceSpec:
    """The spec's ``[space]`` table: the declared design space, which explorer.spec._search_space turns into a
    fixed Optuna search space (its SearchSpace)."""

    d_model: tuple[int, ...] = key(
        doc="widths, a list of integers; one value fixes the base model's width", cap=D_MODEL
    )
    n_layers: tuple[int, ...] = key(doc="depths, a list of integers; one value fixes the depth", cap=LAYERS)
    heads: tuple[int, ...] = key(
        doc="head-count candidates; a layer takes those that divide its width with d_k at least `min_dk`",
        cap=HEADS,
    )
    min_dk: tuple[int, ...] = key(
        (1,), "the d_k floor: an integer, or a list to search over", scalar=True, cap=HEAD_DIM
    )
    families: tuple[str, ...] = key(
        SCHEDULE_FAMILIES,
        "per-layer schedules: `uniform`, `increasing`, `decreasing`, `free` (free needs 3+ layers)",
        choices=SCHEDULE_FAMILIES,
        shown="every family the space can realise",
    )
    mlp_ratio: tuple[float, ...] = key((4.0,), "MLP width multipliers")
    lr: float | tuple[float, float] = key(
        3e-3, "a fixed learning rate, or `[low, high]` searched log-uniformly"
    )
    dropout: float = key(0.0, "fixed dropout", lo=0.0, hi=1.0)
    attention: str = key(
        "fused",
        "`fused` (scaled_dot_product_attention), `merged` (one batched matmul, the tutorial's) or `serial` (a loop "
        "over heads)",
        choices=ATTENTION_IMPLS,
    )
    kv_heads: tuple[int, ...] | None = key(
        None,
        "key/value-head candidates (grouped-query attention); a layer takes those dividing its heads",
        shown="none (kv_heads = heads)",
        cap=HEADS,
    )
    kv_per_layer: bool = key(
        False, "`true`: one key/value-head position per layer; `false`: one for every layer"
    )
    head_dim: tuple[int, ...] | None = key(
        None,
        "head widths; where given, the d_k floor applies to them and d_model % heads is not required",
        scalar=True,
        shown="none (d_k = d_model / heads)",
        cap=HEAD_DIM,
    )

    def kv_options(self, heads: int) -> tuple[int, ...]:
        """The key/value head counts a layer of ``heads`` query heads may take, ascending."""
        if self.kv_heads is None:
            return (heads,)
        return tuple(k for k in self.kv_heads if heads % k == 0)


FACTORS = ("family", "d_model", "min_dk", "head_dim", "n_layers")  # sampled in this order; family first
MIN_LAYERS = {"uniform": 1, "increasing": 2, "decreasing": 2, "free": 3}  # depth a family needs
MIN_COUNTS = {"uniform": 1, "increasing": 2, "decreasing": 2, "free": 2}  # valid head counts it needs


Combo = tuple[str, int, int, "int | None", int]  # (family, d_model, min_dk, head_dim, n_layers)


def head_counts(space: SpaceSpec, d_model: int, min_dk: int, head_dim: int | None) -> tuple[int, ...]:
    """The head candidates valid at a width, d_k floor and head width (ascending).

    Without ``head_dim`` a count must divide d_model with d_k >= min_dk (explorer.layout._schedules.valid_heads, the
    one head rule); with it every count is valid when head_dim >= min_dk. With kv_heads candidates, a count
    must also be divisible by one of them.
    """
    if head_dim is None:
        ok = set(valid_heads(d_model, min_dk))
        counts = [h for h in space.heads if h in ok]
    else:
        counts = list(space.heads) if head_dim >= min_dk else []
    return tuple(h for h in counts if space.kv_options(h))


def space_combos(
    space: SpaceSpec,
) -> tuple[dict[tuple[int, int, int | None], tuple[int, ...]], tuple[Combo, ...]]:
    """Valid head candidates per (d_model, min_dk, head_dim), and every realisable combination."""
    dims: tuple[int | None, ...] = space.head_dim or (None,)
    counts = {
        (d, m, hd): head_counts(space, d, m, hd) for d in space.d_model for m in space.min_dk for hd in dims
    }
    combos = tuple(
        (f, d, m, hd, n_layers)
        for f in space.families
        for d in space.d_model
        for m in space.min_dk
        for hd in dims
        for n_layers in space.n_layers
        if len(counts[d, m, hd]) >= MIN_COUNTS[f] and n_layers >= MIN_LAYERS[f]
    )
    return counts, combos


def realisable_families(space: SpaceSpec) -> tuple[str, ...]:
    """The families of ``space.families`` that some d_model, min_dk and depth of the space can realise."""
    return tuple(dict.fromkeys(f for f, *_ in space_combos(space)[1]))


def check_space(s: SpaceSpec) -> None:
    """Every listed value must be usable by some valid config; say which is not and how to fix it."""
    _check_modern(s)
    counts, combos = space_combos(s)
    floor = min(s.min_dk)
    _check_some_heads_valid(s, counts, floor)
    _check_listed_values(s, counts, combos, floor)
    usable = {h for _, d, m, hd, _ in combos for h in counts[d, m, hd]}
    for h in s.heads:
        if h not in usable:
            raise SpecError(_unusable_heads(s, h, floor))


# (d_model, min_dk, head_dim) -> head candidates
Counts = dict[tuple[int, int, "int | None"], tuple[int, ...]]


def _check_some_heads_valid(s: SpaceSpec, counts: Counts, floor: int) -> None:
    """Some head candidate must be valid somewhere."""
    if s.head_dim is not None and not any(counts.values()):
        raise SpecError(
            f"every head_dim in {list(s.head_dim)} is below the d_k floor min_dk {floor}; "
            f"choose head_dim >= {floor} or lower min_dk."
        )
    if not any(counts.values()):
        raise SpecError(
            f"no head count in heads {list(s.heads)} divides any d_model in {list(s.d_model)} with "
            f"d_k >= {floor}; for d_model {s.d_model[-1]} the valid counts are "
            f"{valid_heads(s.d_model[-1], floor) or 'none'}: add some, or lower min_dk."
        )


def _check_listed_values(s: SpaceSpec, counts: Counts, combos: tuple[Combo, ...], floor: int) -> None:
    """Every listed family, d_model, min_dk, head_dim and n_layers is used by some realisable combination."""
    # the values some valid combo uses, by position: (family, d_model, min_dk, head_dim, n_layers)
    used = {i: {c[i] for c in combos} for i in range(5)}

    def d_model_problem(d: int) -> str:
        valid = sorted({h for (d2, _, _), hs in counts.items() if d2 == d for h in hs})
        has = f"only the head counts {valid}" if valid else f"none of the head counts {list(s.heads)}"
        return (
            f"d_model {d} admits {has} at d_k >= {floor}, too few for families {list(s.families)}; "
            f"add head counts from {valid_heads(d, floor)} or remove {d} from d_model."
        )

    listed: tuple[tuple[int, tuple[Any, ...], Callable[[Any], str]], ...] = (
        (
            0,
            s.families,
            lambda f: (
                f"family {f!r} cannot be realised: it needs {MIN_LAYERS[f]}+ layers and {MIN_COUNTS[f]}+ valid "
                f"head counts for one d_model and min_dk; add such n_layers or head counts, or drop {f!r}."
            ),
        ),
        (1, s.d_model, d_model_problem),
        (
            2,
            s.min_dk,
            lambda m: (
                f"min_dk {m} leaves too few valid head counts for every d_model and family; lower it, "
                f"remove it from min_dk, or add a wider d_model."
            ),
        ),
        (
            3,
            s.head_dim or (),
            lambda hd: (
                f"head_dim {hd} is below every d_k floor in min_dk {list(s.min_dk)} or leaves too few head "
                f"counts; choose head_dim >= {floor} or remove {hd} from head_dim."
            ),
        ),
        (
            4,
            s.n_layers,
            lambda n: (
                f"n_layers {n} fits none of the families {list(s.families)} (increasing and decreasing "
                f"need 2+ layers, free 3+); remove it or add 'uniform' to families."
            ),
        ),
    )
    for position, values, problem in listed:
        for value in values:
            if value not in used[position]:
                raise SpecError(problem(value))


def _unusable_heads(s: SpaceSpec, h: int, floor: int) -> str:
    """Why head candidate ``h`` is never valid, and the fix."""
    if not s.kv_options(h):
        return (
            f"head count {h} has no key/value head count in kv_heads {list(s.kv_heads or ())} dividing "
            f"it (heads % kv_heads must be 0); add one of {_divisors(h)} to kv_heads or remove {h} from "
            "heads."
        )
    if s.head_dim is not None:
        why = "no listed family can use it"
    elif any(d % h == 0 for d in s.d_model):
        d = max(d for d in s.d_model if d % h == 0)
        why = f"d_k = {d}/{h} = {d // h} < {floor}" if d // h < floor else "no listed family can use it"
    else:
        why = f"{h} divides no listed d_model"
    return (
        f"head count {h} is never valid ({why}); remove it from heads, lower min_dk or add a wider d_model."
    )


def _divisors(h: int) -> str:
    return ", ".join(str(k) for k in range(1, h + 1) if h % k == 0)


def _check_modern(s: SpaceSpec) -> None:
    """kv_heads candidates each usable by some head candidate; a per-layer kv choice needs kv_heads."""
    if s.kv_per_layer and s.kv_heads is None:
        raise SpecError(
            "'kv_per_layer' in [space] needs kv_heads candidates; add kv_heads = [1, 2, ...] or drop it."
        )
    for k in s.kv_heads or ():
        if not any(h % k == 0 for h in s.heads):
            raise SpecError(
                f"kv_heads {k} divides no head count in heads {list(s.heads)} (heads % kv_heads must be 0); "
                f"choose kv_heads among the divisors of the head counts, e.g. {_divisors(max(s.heads))}."
            )
