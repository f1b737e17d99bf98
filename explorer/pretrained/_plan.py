"""Which heads of a trained model to keep: the plan head surgery carries out, and its checks.

A plan says, for each layer, which of the layer's query heads stay (their indices, sorted) and how many key/value
heads serve them afterwards. It checks itself as it is made (each layer keeps a head, indices once and in order,
key/value heads that divide the kept query heads) and against a model in :func:`check_plan` (as many layers, indices
the layer has, and for BERT as many key/value heads as heads). Every refusal is a one-line
:class:`~explorer.errors.ConfigError` naming the problem and the fix.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from explorer.errors import ConfigError
from explorer.pretrained._layout import HeadLayout, head_layout


@dataclass(frozen=True)
class HeadPlan:
    """Per layer, the original query-head indices kept and the number of key/value heads after regrouping.

    Args:
        keep: one tuple per layer of the query heads that stay, sorted, none twice, at least one.
        kv_heads: one entry per layer: the key/value heads the kept heads share, a divisor of their number.
    """

    keep: tuple[tuple[int, ...], ...]
    kv_heads: tuple[int, ...]

    def __post_init__(self) -> None:
        # lists and numpy integers are accepted and kept as tuples of ints: a plan is hashable, compares equal
        # however it was written, and cannot change after its checks
        object.__setattr__(self, "keep", tuple(tuple(_whole(h) for h in layer) for layer in self.keep))
        object.__setattr__(self, "kv_heads", tuple(_whole(k) for k in self.kv_heads))
        if not self.keep:
            raise ConfigError("the plan has no layer; give one keep tuple and one kv_heads entry per layer.")
        if len(self.keep) != len(self.kv_heads):
            raise ConfigError(
                f"the plan keeps heads in {len(self.keep)} layers and gives key/value heads for "
                f"{len(self.kv_heads)}; give one kv_heads entry per layer."
            )
        for i, (kept, kv) in enumerate(zip(self.keep, self.kv_heads, strict=True)):
            _check_layer(i, kept, kv)

    @classmethod
    def unchanged(cls, model: nn.Module) -> HeadPlan:
        """The plan that keeps every head of ``model`` and its key/value heads as they are."""
        layout = head_layout(model)
        return cls(tuple(tuple(range(h)) for h in layout.heads), layout.kv_heads)

    @property
    def heads(self) -> tuple[int, ...]:
        """The query heads of each layer after the surgery."""
        return tuple(len(kept) for kept in self.keep)


def _whole(value: Any) -> Any:
    """An integer of any integer type as an int; anything else as it is, for the checks to refuse by name."""
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value


def _check_layer(i: int, kept: Sequence[int], kv: int) -> None:
    """One layer's entries, alone: whole indices, at least one, once each, in order; key/value heads that divide."""
    if not kept:
        raise ConfigError(f"layer {i} keeps no head; keep at least one head in every layer.")
    for h in kept:
        if isinstance(h, bool) or not isinstance(h, int):
            raise ConfigError(f"layer {i} keeps {h!r}, which is not a head index; give whole numbers.")
        if h < 0:
            raise ConfigError(f"layer {i} keeps head {h}; head indices start at 0.")
    twice = sorted({h for h in kept if kept.count(h) > 1})
    if twice:
        raise ConfigError(f"layer {i} keeps head {twice[0]} twice; list each kept head once.")
    if list(kept) != sorted(kept):
        raise ConfigError(
            f"layer {i} keeps heads {tuple(kept)} out of order; list them sorted: {tuple(sorted(kept))}."
        )
    n = len(kept)
    if isinstance(kv, bool) or not isinstance(kv, int) or kv < 1:
        raise ConfigError(f"layer {i} has {kv!r} key/value heads; give a whole number of at least 1.")
    if kv > n:
        raise ConfigError(
            f"layer {i} keeps {n} query heads and asks for {kv} key/value heads; give at most {n}, one per query head."
        )
    if n % kv:
        divisors = ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)
        raise ConfigError(
            f"layer {i}: {kv} key/value heads do not divide its {n} kept query heads; give one of {divisors}."
        )


def check_plan(model: nn.Module, plan: HeadPlan) -> HeadLayout:
    """``plan`` against ``model`` (a one-line ConfigError where it does not fit); the model's layout as it is."""
    layout = head_layout(model)
    name = layout.architecture
    if len(plan.keep) != layout.layers:
        raise ConfigError(
            f"the plan has {len(plan.keep)} layers and {name} has {layout.layers}; give one keep tuple and one "
            "kv_heads entry per layer."
        )
    for i, (kept, kv, heads) in enumerate(zip(plan.keep, plan.kv_heads, layout.heads, strict=True)):
        if kept[-1] >= heads:
            raise ConfigError(
                f"layer {i} keeps head {kept[-1]}, and {name}'s layer {i} has heads 0 to {heads - 1}; keep "
                f"indices below {heads}."
            )
        if layout.family == "bert" and kv != len(kept):
            raise ConfigError(
                f"layer {i} keeps {len(kept)} heads with {kv} key/value heads, and BERT has no grouped key/value "
                f"heads; set kv_heads[{i}] = {len(kept)}."
            )
    return layout
