"""Per-layer head and key/value-head layouts decoded from the search space's positions.

A space that searches key/value heads or a head width builds its layouts from the spec's head candidates only:
a ramp steps through the *candidates* between its ends (not through every count that divides d_model, as the
classic space does), so every layer's count is one the spec listed and has a key/value candidate dividing it.

Key/value heads are read from positions in [0, 1], like the heads (``heads_q*``): layer ``i`` takes the count
at its position among the kv candidates that divide its head count (heads % kv_heads == 0), so an invalid pair
cannot be drawn. One position ``kv_q`` read by every layer (the default: the same relative place in each layer's
list, so uniform heads get uniform kv heads, 0 is multi-query everywhere and 1 the largest listed count), or one
per layer, ``kv_q0 .. kv_q{L-1}`` (``[space] kv_per_layer = true``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

from explorer.layout._space_spec import SpaceSpec

KV_SHARED = "kv_q"  # the one position every layer reads (kv_per_layer = false)
_RAMP = re.compile(r"^(increasing|decreasing):(\d+)-(\d+)$")


def pick(u: float, k: int) -> int:
    """Position ``u`` in [0, 1] as an index into ``k`` ordered items (equal-width bins)."""
    return min(max(int(u * k), 0), k - 1)


def candidate_heads(schedule: str, counts: tuple[int, ...], n_layers: int) -> tuple[int, ...]:
    """Per-layer head counts of a schedule the space drew, ramps stepping through ``counts`` (ascending)."""
    if schedule.startswith("uniform:"):
        return (int(schedule.split(":")[1]),) * n_layers
    if m := _RAMP.match(schedule):
        family, a, b = m.group(1), int(m.group(2)), int(m.group(3))
        lo, hi = sorted((a, b))
        steps = [h for h in counts if lo <= h <= hi]
        if n_layers == 1:
            ramp = [steps[0]]
        else:  # the spacing of explorer.layout._schedules.expand_schedule: half-way positions round up
            ramp = [steps[math.floor(i * (len(steps) - 1) / (n_layers - 1) + 0.5)] for i in range(n_layers)]
        return tuple(ramp if family == "increasing" else ramp[::-1])
    return tuple(int(h) for h in schedule.split(","))


def kv_param_names(space: SpaceSpec, layers: int) -> list[str]:
    """The kv position parameters of a space whose deepest model has ``layers`` layers (none without kv)."""
    if space.kv_heads is None:
        return []
    return [f"kv_q{i}" for i in range(layers)] if space.kv_per_layer else [KV_SHARED]


def kv_layout(space: SpaceSpec, heads: tuple[int, ...], params: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The kv heads per layer that ``params`` select for ``heads`` (None: the space does not search them)."""
    if space.kv_heads is None:
        return None
    out = []
    for i, h in enumerate(heads):
        options = space.kv_options(h)
        u = float(params.get(f"kv_q{i}" if space.kv_per_layer else KV_SHARED, 0.0))
        out.append(options[pick(u, len(options))])
    return tuple(out)


def kv_params(space: SpaceSpec, heads: tuple[int, ...]) -> Iterator[dict[str, float]]:
    """For every kv layout reachable with ``heads``, the positions that select it (the middle of their bins)."""
    if space.kv_heads is None:
        yield {}
        return
    sizes = [len(space.kv_options(h)) for h in heads]
    if space.kv_per_layer:
        for idx in itertools.product(*(range(n) for n in sizes)):
            yield {f"kv_q{i}": (k + 0.5) / n for i, (k, n) in enumerate(zip(idx, sizes, strict=True))}
        return
    # One position for all layers: the layout changes only where some layer's bin edge lies.
    edges = sorted({k / n for n in sizes for k in range(n + 1)})
    seen = set()
    for a, b in itertools.pairwise(edges):
        u = (a + b) / 2
        layout = tuple(pick(u, n) for n in sizes)
        if layout not in seen:
            seen.add(layout)
            yield {KV_SHARED: u}
