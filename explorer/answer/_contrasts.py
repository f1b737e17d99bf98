"""What other layouts at the answer's width and depth cost or gain against it: one head, the tutorial's 8 heads,
the next faster layout and, for a key/value study, multi-head and multi-query attention.

Every quality difference is paired on the units both layouts ran (:func:`explorer.answer._paired.paired`), and
every latency a ratio within the re-timing rounds both were timed in (:func:`explorer.answer._rule.ratio`),
so these rows and the answer's class are computed the same way from the same runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from explorer.answer._evidence_grid import Grid
from explorer.answer._finalists import DEFAULT_HEADS, KV_REFERENCES, with_kv
from explorer.answer._paired import PairedDifference, paired
from explorer.answer._rule import ratio
from explorer.answer._tables import Architecture, CostAxis
from explorer.layout import ModelConfig


@dataclass(frozen=True)
class Costs:
    """What the comparisons read: the evidence grid and each layout's timings by round (rows: ``keys``)."""

    grid: Grid | None  # None: the answer rests on the search (one run per architecture, nothing paired)
    keys: tuple[str, ...]
    # [layouts, rounds] ms on the answer's cost axis (NaN: not timed in that round)
    times: npt.NDArray[np.float64]
    tie: float  # relative time difference counted as equal


@dataclass(frozen=True)
class Contrast:
    """What another layout at the same width and depth costs or gains against the recommendation."""

    name: str  # "1 head per layer", "8 heads per layer", "next faster layout", "multi-head attention" ...
    other: Architecture | None  # None: not measured in this study
    quality: PairedDifference | None  # other minus recommended, paired by unit (None: nothing paired)
    quality_diff: float  # other minus recommended, mean validation quality (accuracy, or bits per byte)
    latency_ratio: float  # other / recommended, within re-timing rounds
    latency_tie: bool  # the ratio is within the tie tolerance of 1
    note: str = ""
    decode_ratio: float = math.nan  # other / recommended, decoding ms per token (NaN: not measured)
    cache_ratio: float = math.nan  # other / recommended, key/value-cache bytes per token


def find(archs: Sequence[Architecture], want: ModelConfig) -> Architecture | None:
    """The architecture with ``want``'s width, depth, heads, key/value heads and head width (any lr, MLP)."""
    c = want
    for a in archs:
        o = a.config
        if (o.d_model, o.heads, o.kv_per_layer, o.d_k) == (c.d_model, c.heads, c.kv_per_layer, c.d_k):
            return a
    return None


def _ratio_of(a: Architecture, b: Architecture, costs: Costs, axis: CostAxis) -> float:
    if a.key in costs.keys and b.key in costs.keys:
        r = ratio(costs.times, costs.keys.index(a.key), costs.keys.index(b.key))
        if not math.isnan(r):
            return r
    x, y = a.cost(axis), b.cost(axis)
    return math.nan if x is None or y is None else x.estimate / y.estimate


def versus(
    other: Architecture, rec: Architecture, costs: Costs, level: float = 0.95
) -> PairedDifference | None:
    """``other`` minus ``rec``, paired on the units both ran, its interval at ``level`` (None with fewer than
    two)."""
    g = costs.grid
    if g is None or other.key not in g.keys or rec.key not in g.keys:
        return None
    a, b = g.common(other.key, rec.key)
    return paired(a, b, level=level, span=g.span) if len(a) >= 2 else None


def _contrast(
    name: str, rec: Architecture, other: Architecture | None, missing: str, costs: Costs, axis: CostAxis
) -> Contrast:
    if other is None:
        return Contrast(name, None, None, math.nan, math.nan, False, missing)
    if other.key == rec.key:
        return Contrast(name, other, None, 0.0, 1.0, True, "the recommendation itself", 1.0, 1.0)
    r = _ratio_of(other, rec, costs, axis)
    return Contrast(
        name,
        other,
        versus(other, rec, costs),
        other.quality.estimate - rec.quality.estimate,
        r,
        abs(r - 1) <= costs.tie if not math.isnan(r) else False,
        decode_ratio=(other.decode.estimate / rec.decode.estimate)
        if other.decode and rec.decode
        else math.nan,
        cache_ratio=other.config.kv_cache_bytes_per_token() / rec.config.kv_cache_bytes_per_token(),
    )


def _merge_same(rows: Sequence[Contrast]) -> list[Contrast]:
    """One row per layout: a layout that is two of the alternatives (the 1-head layout is often also the next
    faster one) is named once with both names."""
    merged: list[Contrast] = []
    for c in rows:
        twin = next(
            (i for i, m in enumerate(merged) if c.other and m.other and m.other.key == c.other.key), None
        )
        if twin is None:
            merged.append(c)
        else:
            merged[twin] = dataclasses.replace(merged[twin], name=f"{merged[twin].name}; also the {c.name}")
    return merged


def _uniform_heads(base: ModelConfig, heads: int) -> ModelConfig | None:
    """``base``'s width and depth with ``heads`` heads in every layer: classic heads (d_k = d_model / heads), or
    where ``base``'s heads have one width of their own (a space with ``head_dim``, a trained checkpoint's), heads of
    that width."""
    if base.head_dim is not None and len(set(base.d_k)) == 1:
        return ModelConfig(d_model=base.d_model, heads=(heads,) * base.n_layers, head_dim=base.d_k)
    if base.d_model % heads:
        return None
    return ModelConfig(d_model=base.d_model, heads=(heads,) * base.n_layers)


def contrasts(
    rec: Architecture,
    measured: Sequence[Architecture],
    next_faster: Architecture | None,
    costs: Costs,
    axis: CostAxis,
    kv_study: bool,
) -> tuple[Contrast, ...]:
    """The named alternatives to ``rec`` among ``measured`` (its width and depth), each against it, and
    ``next_faster``: the layout just faster than it (the one the answer's text names)."""
    base = rec.config
    folk = next((h for h in range(DEFAULT_HEADS[0], DEFAULT_HEADS[1] + 1) if base.d_model % h == 0), None)
    missing = "not measured at this width and depth"
    one, eight = _uniform_heads(base, 1), _uniform_heads(base, folk) if folk else None
    rows = [
        _contrast(
            "1 head per layer", rec, find(measured, one) if one is not None else None, missing, costs, axis
        ),
        _contrast(
            f"{folk} heads per layer (the tutorial's default)" if folk else "8-16 heads per layer",
            rec,
            find(measured, eight) if eight else None,
            missing if folk else f"no count in 8-16 divides d_model {base.d_model}",
            costs,
            axis,
        ),
        _contrast("next faster layout", rec, next_faster, "no finalist is faster", costs, axis),
    ]
    if kv_study:  # the ends grouped-query attention sits between, at the same heads
        for label, kv in zip(KV_REFERENCES, (None, 1), strict=True):
            name = f"{label} attention (kv_heads = {'heads' if kv is None else kv})"
            rows.append(_contrast(name, rec, find(measured, with_kv(base, kv)), missing, costs, axis))
    return tuple(_merge_same(rows))
