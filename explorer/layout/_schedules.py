"""The head rules and per-layer schedules: which head counts a width admits, and compact schedules expanded.

The two rules every variant obeys (SEED_SUMMARY.md, rule 5):

* ``d_model % heads == 0``: each head gets an integer ``d_k = d_model // heads``;
* ``d_k >= min_dk``: below a floor (about 16 in the tutorial) each head's capacity is starved.

:func:`valid_heads` lists the head counts that obey both; :func:`expand_schedule` is the one place a compact
per-layer schedule ("uniform:8", "increasing:4-16", "decreasing:16-4", "4,4,8,16") becomes per-layer head
counts; :func:`expand_kv_schedule` and :func:`expand_head_dim` do the same for key/value heads and head widths.
Nothing is ever rounded silently: a schedule that cannot be met is a :class:`ConfigError` naming the valid
choices.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import NamedTuple

from explorer.errors import ConfigError
from explorer.limits import HEADS

SCHEDULE_FAMILIES = ("uniform", "increasing", "decreasing", "free")


def valid_heads(d_model: int, min_dk: int = 1) -> list[int]:
    """Every head count ``h`` with ``d_model % h == 0`` and ``d_model // h >= min_dk``, ascending."""
    if d_model < 1:
        raise ConfigError(f"d_model must be a positive integer, got {d_model}.")
    if min_dk < 1:
        raise ConfigError(f"min_dk must be a positive integer, got {min_dk}.")
    return [h for h in _divisors(d_model) if d_model // h >= min_dk]


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` ascending, in O(sqrt(n)) steps (a width of 10^9 answers at once)."""
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return small + [n // k for k in reversed(small) if k * k != n]


def check_heads(h: int, d_model: int, min_dk: int, valid: list[int]) -> None:
    if h < 1:
        raise ConfigError(
            f"the number of heads must be at least 1, got {h}; choose from {', '.join(map(str, valid))}."
        )
    if h not in valid:
        why = (
            f"{d_model} is not divisible by {h}"
            if d_model % h
            else f"d_k = {d_model}/{h} = {d_model // h} is below the floor {min_dk}"
        )
        raise ConfigError(
            f"{h} heads is not valid for d_model={d_model}, min_dk={min_dk} ({why}); "
            f"choose from {', '.join(map(str, valid)) or 'none (lower min_dk)'}."
        )


_RAMP = re.compile(r"^(increasing|decreasing):(\d+)-(\d+)$")
_UNIFORM = re.compile(r"^(?:uniform:)?(\d+)$")
_LIST = re.compile(r"^\d+(?:,\d+)+$")


def _ramp_ends(m: re.Match[str], what: str) -> tuple[str, int, int]:
    """A matched ramp ``family:A-B`` as (family, low end, high end); ends in the wrong order raise."""
    family, a, b = m.group(1), int(m.group(2)), int(m.group(3))
    lo, hi = (a, b) if family == "increasing" else (b, a)
    if lo > hi:
        raise ConfigError(
            f"{what}: {family} needs its first count {'<=' if family == 'increasing' else '>='} its second; "
            f"write '{family}:{b}-{a}' or the other family."
        )
    return family, lo, hi


def _per_layer(text: str, n_layers: int, what: str, counts: str) -> tuple[int, ...]:
    """A matched per-layer list ``4,4,8`` as a tuple; a length other than ``n_layers`` raises."""
    values = tuple(int(t) for t in text.split(","))
    if len(values) != n_layers:
        raise ConfigError(
            f"{what} lists {len(values)} {counts} but the model has {n_layers} layers; "
            f"give exactly one count per layer."
        )
    return values


def expand_schedule(
    schedule: str, n_layers: int, d_model: int, min_dk: int = 1, *, free_width: bool = False
) -> tuple[int, ...]:
    """Expand a compact head schedule into one head count per layer.

    Forms:
      * ``uniform:H`` (or just ``H``): H heads in every layer;
      * ``increasing:A-B``: A heads in the first layer rising to B in the last, through the valid head
        counts between A and B, spread evenly over the layers (``increasing:4-16`` over 4 layers at
        d_model 256 gives 4, 8, 8, 16); ``decreasing:B-A`` is the mirror image;
      * ``h1,h2,...``: one explicit count per layer (the "free" family).

    Every count must divide ``d_model`` and leave ``d_k >= min_dk``; otherwise a :class:`ConfigError`
    names the valid counts. Ramps pass only through valid counts by construction, and their endpoints
    must be valid themselves. With ``free_width`` (the head width is set apart by ``head_dim``, which carries
    the d_k floor) every positive count is valid and a ramp passes through every count between its ends.
    """
    if n_layers < 1:
        raise ConfigError(f"the number of layers must be at least 1, got {n_layers}.")
    valid = None if free_width else valid_heads(d_model, min_dk)

    def check(h: int) -> None:
        if valid is not None:
            check_heads(h, d_model, min_dk, valid)
        elif h < 1:
            raise ConfigError(f"the number of heads must be a positive integer, got {h}.")
        else:  # any count is valid with a head width of its own: bound it before a ramp lists its steps
            HEADS.check(h, f"a head count in schedule {schedule!r}")

    text = schedule.strip().replace(" ", "")
    if m := _UNIFORM.match(text):
        h = int(m.group(1))
        check(h)
        return (h,) * n_layers
    if m := _RAMP.match(text):
        family, lo, hi = _ramp_ends(m, f"schedule {schedule!r}")
        check(lo)
        check(hi)
        steps = [h for h in valid if lo <= h <= hi] if valid is not None else list(range(lo, hi + 1))
        return _ramp(steps, n_layers, family)
    if _LIST.match(text):
        heads = _per_layer(text, n_layers, f"schedule {schedule!r}", "head counts")
        for h in heads:
            check(h)
        return heads
    raise ConfigError(
        f"cannot read head schedule {schedule!r}; write 'uniform:8', 'increasing:4-16', "
        f"'decreasing:16-4' or a per-layer list such as '4,4,8,16'."
    )


def _ramp(steps: list[int], n_layers: int, family: str) -> tuple[int, ...]:
    """``n_layers`` counts rising through ``steps`` from its first to its last (mirrored for "decreasing")."""
    if n_layers == 1:
        ramp = [steps[0]]
    else:
        # Half-way positions round up (not to even, as round() does), so a ramp steps evenly.
        ramp = [steps[math.floor(i * (len(steps) - 1) / (n_layers - 1) + 0.5)] for i in range(n_layers)]
    return tuple(ramp if family == "increasing" else ramp[::-1])


def valid_kv_heads(heads: int) -> list[int]:
    """Every key/value head count that ``heads`` query heads can share evenly (the divisors), ascending."""
    if heads < 1:
        raise ConfigError(f"the number of heads must be a positive integer, got {heads}.")
    return _divisors(heads)


def check_kv(kv: int, heads: int, layer: int) -> None:
    if kv < 1 or heads % kv:
        raise ConfigError(
            f"{kv} key/value heads is not valid for {heads} query heads in layer {layer} "
            f"(heads % kv_heads must be 0); choose from {', '.join(map(str, valid_kv_heads(heads)))}."
        )


def expand_kv_schedule(schedule: str, heads: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """Expand a compact key/value-head schedule into one kv count per layer, for per-layer query ``heads``.

    Forms, as for :func:`expand_schedule`:
      * ``uniform:K`` (or just ``K``): K key/value heads in every layer (1 is multi-query attention);
      * ``increasing:A-B`` / ``decreasing:B-A``: a ramp through the counts between A and B that divide the
        head count of at least one layer, spread evenly over the layers (``decreasing:8-2`` over 4 layers of
        8 heads gives 8, 4, 4, 2);
      * ``k1,k2,...``: one count per layer.

    Every layer must then satisfy ``heads % kv_heads == 0``; otherwise a :class:`ConfigError` names the layer
    and its valid counts.
    """
    heads = tuple(int(h) for h in heads)
    if not heads:
        raise ConfigError("a kv_heads schedule needs at least one layer of heads.")
    n_layers = len(heads)
    text = schedule.strip().replace(" ", "")
    if m := _UNIFORM.match(text):
        kv = (int(m.group(1)),) * n_layers
    elif m := _RAMP.match(text):
        family, lo, hi = _ramp_ends(m, f"kv_heads schedule {schedule!r}")
        possible = sorted({k for h in heads for k in valid_kv_heads(h)})
        for end in (lo, hi):
            if end not in possible:
                raise ConfigError(
                    f"kv_heads schedule {schedule!r}: {end} key/value heads divides no layer's head count "
                    f"{list(heads)}; choose ends from {', '.join(map(str, possible))}."
                )
        steps = [k for k in possible if lo <= k <= hi]
        kv = _ramp(steps, n_layers, family)
    elif _LIST.match(text):
        kv = _per_layer(text, n_layers, f"kv_heads schedule {schedule!r}", "counts")
    else:
        raise ConfigError(
            f"cannot read kv_heads schedule {schedule!r}; write 'uniform:2', 'increasing:1-4', "
            f"'decreasing:8-2' or a per-layer list such as '4,4,2,1'."
        )
    for layer, (k, h) in enumerate(zip(kv, heads, strict=True)):
        check_kv(k, h, layer)
    return kv


def expand_head_dim(
    value: int | str | tuple[int, ...] | list[int], n_layers: int, min_dk: int = 1
) -> tuple[int, ...]:
    """One head width per layer from ``value``: an int or ``"64"``/``"uniform:64"`` (every layer), or a
    per-layer list (``"64,64,128"`` or a sequence). Each width must be at least ``min_dk`` (the d_k floor)."""
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if m := _UNIFORM.match(text):
            dims: tuple[int, ...] = (int(m.group(1)),) * n_layers
        elif _LIST.match(text):
            dims = tuple(int(t) for t in text.split(","))
        else:
            raise ConfigError(
                f"cannot read head_dim {value!r}; write one width such as '64' "
                f"or one per layer such as '64,64,128'."
            )
    elif isinstance(value, bool):
        raise ConfigError(f"head_dim must be an integer or one integer per layer, got {value!r}.")
    elif isinstance(value, int):
        dims = (value,) * n_layers
    else:
        dims = tuple(int(d) for d in value)
    if len(dims) != n_layers:
        raise ConfigError(
            f"head_dim lists {len(dims)} widths but the model has {n_layers} layers; "
            f"give one width or one per layer."
        )
    for d in dims:
        if d < max(1, min_dk):
            raise ConfigError(
                f"head_dim {d} is below the d_k floor min_dk={min_dk}; choose head_dim >= {max(1, min_dk)} "
                f"(or lower min_dk)."
            )
    return dims


class HeadPair(NamedTuple):
    """One valid (query heads, key/value heads) pair and the width of each head."""

    heads: int
    kv_heads: int
    d_k: int

    @property
    def group(self) -> int:
        """Query heads sharing one key/value head."""
        return self.heads // self.kv_heads


def valid_head_pairs(
    d_model: int, min_dk: int = 1, head_dim: int | None = None, max_heads: int | None = None
) -> list[HeadPair]:
    """Every valid (heads, kv_heads) pair with its d_k, ordered by heads then kv_heads.

    Without ``head_dim`` the heads are :func:`valid_heads` (d_k = d_model / heads). With it, every head has
    that width (it must be >= ``min_dk``) and any count from 1 to ``max_heads`` is valid (default
    ``d_model // head_dim``: projections no wider than the residual stream). kv_heads divides heads.
    """
    if head_dim is None:
        heads = valid_heads(d_model, min_dk)
        return [HeadPair(h, k, d_model // h) for h in heads for k in valid_kv_heads(h)]
    if d_model < 1:
        raise ConfigError(f"d_model must be a positive integer, got {d_model}.")
    (dk,) = expand_head_dim(head_dim, 1, min_dk)
    top = max(1, d_model // dk) if max_heads is None else max_heads
    if top < 1:
        raise ConfigError(f"max_heads must be at least 1, got {top}.")
    return [HeadPair(h, k, dk) for h in range(1, top + 1) for k in valid_kv_heads(h)]


def schedule_family(heads: tuple[int, ...] | list[int]) -> str:
    """The family a per-layer head tuple belongs to: uniform, increasing, decreasing or free."""
    pairs = list(itertools.pairwise(heads))
    if all(a == b for a, b in pairs):
        return "uniform"
    if all(a <= b for a, b in pairs):
        return "increasing"
    if all(a >= b for a, b in pairs):
        return "decreasing"
    return "free"
