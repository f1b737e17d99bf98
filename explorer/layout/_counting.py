"""How many architectures a search space expands to, counted without listing them.

A free family over ``L`` layers and ``n`` head counts holds ``n^L`` minus the monotone sequences; with key/value
heads each layout multiplies again. :func:`count_layouts` gives the number
:meth:`explorer.spec._search_space.SearchSpace.points` would yield, in arithmetic (big integers), so a space of 10^40
architectures is refused at the door (explorer.limits.LAYOUTS) in microseconds instead of being listed.

The counts, per realisable (family, d_model, min_dk, head_dim, n_layers) combination with ``n`` valid head
counts and mlp ratios ``m``:

* head layouts: uniform ``n``; increasing and decreasing ``n(n-1)/2``; free ``NM(n) = n^L - 2 C(n+L-1, L) + n``
  (every sequence minus the non-decreasing and non-increasing ones, the constant ones counted in both);
* key/value layouts of one head layout, where kv heads are searched (``w(h)``: the kv candidates dividing
  ``h``): one position per layer gives the product of ``w(h_i)``; one position shared by every layer gives
  ``1 + |{k / w(h_i) : 0 < k < w(h_i)}|`` (the bin edges it crosses), which is ``1 + sum of phi(b)`` over the
  ``b >= 2`` dividing some ``w(h_i)``. Summed over the free family's sequences this is ``NM(n)`` plus, for each
  such ``b``, ``phi(b) (NM(n) - NM(n - a_b))`` where ``a_b`` counts the head counts whose ``w`` ``b`` divides
  (the sequences avoiding those are the free sequences over the others).

tests/layout/test_counting.py checks every formula against the enumeration on small spaces.
"""

from __future__ import annotations

import math
from functools import cache
from typing import cast

from explorer.layout._space_spec import SpaceSpec, space_combos


def _non_monotone(n: int, layers: int) -> int:
    """Sequences of ``layers`` picks from ``n`` ordered values that are neither non-decreasing nor
    non-increasing."""
    if n < 1:
        return 0
    # int ** int is typed Any (a negative exponent makes a float); layers is never negative
    return cast(int, n**layers) - 2 * math.comb(n + layers - 1, layers) + n


@cache
def _phi(b: int) -> int:
    """Euler's totient: the fractions k/b in lowest terms with 0 < k < b."""
    return sum(1 for k in range(1, b + 1) if math.gcd(k, b) == 1)


def _divisors(w: int) -> set[int]:
    return {b for b in range(2, w + 1) if w % b == 0}


def _shared(widths: set[int]) -> int:
    """Key/value layouts one shared position selects over layers whose kv option counts are ``widths``."""
    return 1 + sum(_phi(b) for b in set().union(*(_divisors(w) for w in widths)))


@cache
def _ramp_positions(steps: int, layers: int) -> tuple[int, ...]:
    """How many layers take each of a ramp's ``steps`` counts (the spacing of explorer.layout._layouts)."""
    if layers == 1:
        return (1,) + (0,) * (steps - 1)
    used = [0] * steps
    for i in range(layers):
        used[math.floor(i * (steps - 1) / (layers - 1) + 0.5)] += 1
    return tuple(used)


def _kv_total(space: SpaceSpec, family: str, counts: tuple[int, ...], layers: int) -> int:
    """Head layouts times their key/value layouts, summed over the family's head layouts."""
    w = [len(space.kv_options(h)) for h in counts]
    n = len(w)
    if family == "uniform":
        return sum(x**layers for x in w) if space.kv_per_layer else sum(w)
    if family in ("increasing", "decreasing"):
        total = 0
        for i in range(n - 1):
            for j in range(i + 1, n):
                used = _ramp_positions(j - i + 1, layers)
                if space.kv_per_layer:
                    total += math.prod(w[i + t] ** k for t, k in enumerate(used))
                else:
                    total += _shared({w[i + t] for t, k in enumerate(used) if k})
        return total
    if space.kv_per_layer:  # sum over free sequences of the product: all, minus the two monotone kinds
        power_sum: int = sum(x**layers for x in w)
        homogeneous = [1] + [0] * layers  # complete homogeneous symmetric polynomial h_k(w), k = 0..layers
        for x in w:
            for k in range(1, layers + 1):
                homogeneous[k] += x * homogeneous[k - 1]
        return cast(int, sum(w) ** layers) - 2 * homogeneous[layers] + power_sum
    total = _non_monotone(n, layers)
    for b in set().union(*(_divisors(x) for x in w)):
        avoiding = sum(1 for x in w if x % b)
        total += _phi(b) * (_non_monotone(n, layers) - _non_monotone(avoiding, layers))
    return total


def count_layouts(space: SpaceSpec) -> int:
    """The number of architectures :meth:`explorer.spec._search_space.SearchSpace.points` yields for ``space``."""
    counts, combos = space_combos(space)
    total = 0
    modern = space.kv_heads is not None or space.head_dim is not None
    for family, d_model, min_dk, head_dim, layers in combos:
        valid = counts[d_model, min_dk, head_dim]
        n = len(valid)
        if modern and space.kv_heads is not None:
            total += _kv_total(space, family, valid, layers)
        elif family == "uniform":
            total += n
        elif family in ("increasing", "decreasing"):
            total += n * (n - 1) // 2
        else:
            total += _non_monotone(n, layers)
    return total * len(space.mlp_ratio)
