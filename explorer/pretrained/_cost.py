"""What a model with fewer heads costs: its parameters, and the bytes its key/value cache grows by per token.

:func:`head_cost` reads a model as it is, or, given a plan, what :func:`~explorer.pretrained.shrink` would make of
it, counted from the shapes alone (no copy is made), so a search can price many plans of a large model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from explorer.pretrained._layout import HeadLayout, head_layout
from explorer.pretrained._plan import HeadPlan, check_plan


@dataclass(frozen=True)
class HeadCost:
    """A model's size, and its decoding cache per token where it has one."""

    parameters: int  # every parameter of the model, shared ones once
    kv_bytes_per_token: (
        int | None
    )  # keys and values one position adds to the cache, all layers; None: no cache


def _attention_parameters(layout: HeadLayout, heads: tuple[int, ...], kv_heads: tuple[int, ...]) -> int:
    """Parameters of the attention projections that depend on the heads, for these head counts: query, key and
    value rows (weights and biases), and the output projection's columns (its bias does not depend on them)."""
    hidden, width, bias = layout.hidden_size, layout.head_dim, int(layout.qkv_bias)
    return sum(
        (h + 2 * k) * width * (hidden + bias) + h * width * hidden
        for h, k in zip(heads, kv_heads, strict=True)
    )


def head_cost(model: nn.Module, plan: HeadPlan | None = None, dtype: torch.dtype | None = None) -> HeadCost:
    """The parameters of ``model`` (after ``plan``, when one is given) and, for a causal LM, its key/value cache's
    bytes per token: the sum over layers of ``2 (K and V) x kv_heads x head_dim x bytes per element``, in
    ``dtype`` (default: the attention weights')."""
    layout = check_plan(model, plan) if plan is not None else head_layout(model)
    parameters = sum(p.numel() for p in model.parameters())
    kv_heads = layout.kv_heads
    if plan is not None:  # the model's parameters, its attention's swapped for the plan's
        parameters += _attention_parameters(layout, plan.heads, plan.kv_heads)
        parameters -= _attention_parameters(layout, layout.heads, layout.kv_heads)
        kv_heads = plan.kv_heads
    if layout.family != "llama":  # an encoder keeps no cache
        return HeadCost(parameters, None)
    size = torch.empty((), dtype=dtype or layout.dtype).element_size()
    return HeadCost(parameters, sum(2 * k * layout.head_dim * size for k in kv_heads))
