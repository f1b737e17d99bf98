"""Head surgery: a trained model with fewer attention heads, its weights cut from the original's.

:func:`shrink` returns a copy of the model (the input is left as it was) whose layer ``i`` has ``len(keep[i])``
query heads and ``kv_heads[i]`` key/value heads:

* query rows, and the output projection's columns (Llama's ``o_proj``, BERT's ``attention.output.dense``), of the
  kept heads are sliced out exactly; the output projection's bias stays whole;
* key and value heads are regrouped by mean-pooling, as Ainslie et al. (2023, "GQA") convert a multi-head
  checkpoint to grouped heads: new group ``j`` serves the kept query heads at positions ``[j*m, (j+1)*m)`` of
  ``keep[i]`` (``m = len(keep[i]) / kv_heads[i]``), and its key and value projections (weights and biases) are
  the mean of the original key/value heads those query heads used (query head ``h`` uses key/value head
  ``h // (heads / kv_heads)``). Each original key/value head counts once, however many of the group's query
  heads used it: a group that takes two query heads from one original group and one from another averages the
  two original heads equally. A group whose query heads all used one original head gets that head exactly, so
  a plan that keeps every head with its key/value heads gives bit-identical outputs, and so does one that gives
  each kept query head a key/value head of its own.

BERT has no grouped key/value heads: its key and value heads are sliced as its query heads are. The per-layer
head counts are written on the copy's config as ``num_query_heads`` and ``num_kv_heads`` (what
:func:`~explorer.pretrained.save_shrunk` writes into ``config.json``). The copy is a deep copy: for a while the
process holds both models.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from explorer.pretrained._layout import attention_modules
from explorer.pretrained._plan import HeadPlan, check_plan


def _head_rows(linear: nn.Linear, width: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A projection's weight as ``[heads, width, in]`` and bias as ``[heads, width]`` (views)."""
    weight = linear.weight.view(-1, width, linear.in_features)  # [heads, width, in]
    bias = None if linear.bias is None else linear.bias.view(-1, width)  # [heads, width]
    return weight, bias


def _rows_of(linear: nn.Linear, heads: list[int], width: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The rows of the listed heads, in that order: ``[len(heads) * width, in]`` and its bias."""
    weight, bias = _head_rows(linear, width)
    index = torch.tensor(heads, device=weight.device)
    picked = weight.index_select(0, index).reshape(-1, linear.in_features)  # [kept * width, in]
    return picked, None if bias is None else bias.index_select(0, index).reshape(-1)


def _pooled_rows(
    linear: nn.Linear, groups: list[list[int]], width: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One head per group, the mean of the group's heads (a single head is taken as it is, not averaged)."""
    weight, bias = _head_rows(linear, width)

    def pool(rows: torch.Tensor, group: list[int]) -> torch.Tensor:
        return rows[group[0]] if len(group) == 1 else rows[group].mean(dim=0)

    pooled = torch.stack([pool(weight, g) for g in groups])  # [groups, width, in]
    pooled_bias = None if bias is None else torch.stack([pool(bias, g) for g in groups]).reshape(-1)
    return pooled.reshape(-1, linear.in_features), pooled_bias


def _columns_of(linear: nn.Linear, heads: list[int], width: int) -> torch.Tensor:
    """An output projection's columns of the listed heads: ``[out, len(heads) * width]``."""
    weight = linear.weight.view(linear.out_features, -1, width)  # [out, heads, width]
    index = torch.tensor(heads, device=weight.device)
    return weight.index_select(1, index).reshape(linear.out_features, -1)  # [out, kept * width]


def kv_sources(keep: tuple[int, ...], kv_heads: int, heads: int, old_kv_heads: int) -> list[list[int]]:
    """For each new key/value group, the original key/value heads its query heads used, each once, in order."""
    per_group, old_group = len(keep) // kv_heads, heads // old_kv_heads
    return [
        sorted({h // old_group for h in keep[j * per_group : (j + 1) * per_group]}) for j in range(kv_heads)
    ]


def _load(linear: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
    linear.weight.copy_(weight)
    if bias is not None:
        linear.bias.copy_(bias)


def _shrink_llama(attention: Any, keep: tuple[int, ...], kv_heads: int) -> None:
    from explorer.pretrained._modeling_shrunk import resize_llama_attention  # imports transformers

    width = attention.head_dim
    heads = attention.q_proj.out_features // width
    groups = kv_sources(keep, kv_heads, heads, attention.k_proj.out_features // width)
    kept = list(keep)
    q = _rows_of(attention.q_proj, kept, width)
    k = _pooled_rows(attention.k_proj, groups, width)
    v = _pooled_rows(attention.v_proj, groups, width)
    o = _columns_of(attention.o_proj, kept, width), attention.o_proj.bias
    resize_llama_attention(attention, len(keep), kv_heads)
    for linear, (weight, bias) in zip(
        (attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj), (q, k, v, o), strict=True
    ):
        _load(linear, weight, bias)


def _shrink_bert(attention: Any, keep: tuple[int, ...]) -> None:
    from explorer.pretrained._modeling_shrunk import resize_bert_attention  # imports transformers

    inner, dense = attention.self, attention.output.dense
    width, kept = inner.attention_head_size, list(keep)
    q, k, v = (_rows_of(linear, kept, width) for linear in (inner.query, inner.key, inner.value))
    o = _columns_of(dense, kept, width), dense.bias
    resize_bert_attention(attention, len(keep))
    inner = attention.self
    for linear, (weight, bias) in zip(
        (inner.query, inner.key, inner.value, attention.output.dense), (q, k, v, o), strict=True
    ):
        _load(linear, weight, bias)


def shrink(model: nn.Module, plan: HeadPlan) -> Any:
    """A copy of the transformers ``model`` with the heads ``plan`` keeps (see the module docstring); ``model``
    is left unchanged. A plan that does not fit the model is a one-line ConfigError and nothing is copied."""
    check_plan(model, plan)
    shrunk: Any = copy.deepcopy(model)
    family, attentions = attention_modules(shrunk)
    with torch.no_grad():
        for attention, keep, kv in zip(attentions, plan.keep, plan.kv_heads, strict=True):
            if family == "llama":
                _shrink_llama(attention, keep, kv)
            else:
                _shrink_bert(attention, keep)
    shrunk.config.num_query_heads = list(plan.heads)
    shrunk.config.num_kv_heads = list(plan.kv_heads)
    return shrunk
