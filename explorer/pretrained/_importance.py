"""How much a trained model's loss on the user's data leans on each attention head, and the plans that follow.

:func:`head_importance` measures what Michel et al. (2019, "Are Sixteen Heads Really Better than One?") call a
head's importance: a gate ``xi_h`` multiplies head ``h``'s output where it enters the layer's output projection
(Llama's ``o_proj``, BERT's ``attention.output.dense``), every gate is 1 (the model as trained), and the importance
is the expected absolute gradient of the loss with respect to the gate, ``E |dL/dxi_h|``, a first-order estimate of
what masking the head would cost. The expectation is taken batch by batch (the absolute value of each batch's
gradient, weighted by its size): a proxy for the per-example expectation that costs one backward pass a batch.
The loss is the model's own (``labels`` given: a classifier's cross-entropy; a causal LM's next-token
cross-entropy on its input when none are). Parameters get no gradients and are left as they were.

A head whose output the model discards (its columns of the output projection are zero) has importance exactly 0.

Two plans are built from the scores: :func:`plan_by_importance` keeps a given number of heads in each layer, the
most important ones (the per-layer plans a search proposes); :func:`global_plan` removes the globally least
important heads, their scores normalized per layer by their L2 norm as Michel et al. do, until the model has no
more than a given number of parameters: the proxy rule of the pruning tools (LLM-Pruner, FLAP, Torch-Pruning
choose by a score and a global ratio), kept as the anchor the measured answer is compared with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from explorer.errors import ConfigError
from explorer.limits import BATCH
from explorer.pretrained._cost import head_cost
from explorer.pretrained._layout import attention_modules, head_layout
from explorer.pretrained._plan import HeadPlan


@dataclass(frozen=True)
class HeadImportance:
    """Per layer, each query head's importance (``E |dL/dxi_h|``) on the examples it was measured on."""

    scores: tuple[np.ndarray, ...]  # one [heads] array per layer
    examples: int  # how many examples the expectation is over

    def normalized(self) -> tuple[np.ndarray, ...]:
        """Each layer's scores divided by their L2 norm (a layer whose heads all score 0 stays 0)."""
        return tuple(s / n if (n := float(np.linalg.norm(s))) > 0 else s for s in self.scores)


def _output_projection(family: str, attention: Any) -> nn.Linear:
    return attention.o_proj if family == "llama" else attention.output.dense


def head_importance(
    model: nn.Module, examples: Mapping[str, torch.Tensor], batch_size: int = 32
) -> HeadImportance:
    """Each head's importance for ``model``'s loss on ``examples`` (``input_ids`` [N, T]; ``labels`` [N] for a
    classifier, optional for a causal LM; ``attention_mask`` optional), ``batch_size`` examples a pass."""
    family, attentions = attention_modules(model)
    layout = head_layout(model)
    ids = examples.get("input_ids")
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2 or len(ids) == 0:
        raise ConfigError(
            "head importance needs examples with input_ids of shape [examples, tokens] and at least one example; "
            "give the task's tokens."
        )
    labels = examples.get("labels")
    if labels is None and family != "llama":
        raise ConfigError(
            f"head importance on {layout.architecture} needs labels (the task's classes); give examples['labels']."
        )
    batch_size = int(BATCH.check(batch_size, "head importance batch_size"))
    gates = [torch.ones(h, requires_grad=True) for h in layout.heads]
    grads = [np.zeros(h) for h in layout.heads]

    def gate(layer: int):  # noqa: ANN202 (a forward pre-hook)
        def hook(_module: nn.Module, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
            x = args[0]  # [B, T, heads * head_dim], the heads' outputs side by side
            g = gates[layer].to(dtype=x.dtype, device=x.device)
            shaped = x.view(*x.shape[:-1], layout.heads[layer], layout.head_dim) * g[:, None]
            return (shaped.view(x.shape), *args[1:])

        return hook

    trainable = [p.requires_grad for p in model.parameters()]
    was_training = model.training
    handles = [
        _output_projection(family, a).register_forward_pre_hook(gate(i)) for i, a in enumerate(attentions)
    ]
    try:
        for p in model.parameters():
            p.requires_grad_(False)
        model.eval()  # dropout off: the importance of the model as it answers
        n = len(ids)
        for start in range(0, n, batch_size):
            batch = {"input_ids": ids[start : start + batch_size]}
            if "attention_mask" in examples:
                batch["attention_mask"] = examples["attention_mask"][start : start + batch_size]
            batch["labels"] = batch["input_ids"] if labels is None else labels[start : start + batch_size]
            # a clone is a normal tensor even when the caller made the examples under inference_mode
            loss = model(**{k: v.clone() for k, v in batch.items()}).loss
            for i, g in enumerate(torch.autograd.grad(loss, gates)):
                grads[i] += np.abs(g.detach().double().numpy()) * len(batch["input_ids"]) / n
    finally:
        for h in handles:
            h.remove()
        for p, flag in zip(model.parameters(), trainable, strict=True):
            p.requires_grad_(flag)
        model.train(was_training)
    return HeadImportance(tuple(grads), len(ids))


def plan_by_importance(
    model: nn.Module, importance: HeadImportance, heads: Sequence[int], kv_heads: Sequence[int]
) -> HeadPlan:
    """The plan keeping ``heads[i]`` heads of layer ``i``, its most important ones (ties: the lower index), served
    by ``kv_heads[i]`` key/value heads."""
    layout = head_layout(model)
    if len(heads) != layout.layers or len(importance.scores) != layout.layers:
        raise ConfigError(
            f"{layout.architecture} has {layout.layers} layers, and the plan gives heads for {len(heads)} and the "
            f"importance scores {len(importance.scores)}; give one entry per layer."
        )
    keep = []
    for i, (count, scores) in enumerate(zip(heads, importance.scores, strict=True)):
        if not 1 <= count <= layout.heads[i]:
            raise ConfigError(
                f"layer {i} has {layout.heads[i]} heads and the plan keeps {count}; keep 1 to {layout.heads[i]}."
            )
        order = sorted(range(len(scores)), key=lambda h: (-scores[h], h))
        keep.append(tuple(sorted(order[:count])))
    return HeadPlan(tuple(keep), tuple(kv_heads))


def _kv_for(kept: int, original_kv: int) -> int:
    """Key/value heads for ``kept`` query heads: the most, up to the layer's original number, that divide them."""
    return max(k for k in range(1, min(kept, original_kv) + 1) if kept % k == 0)


def global_plan(model: nn.Module, importance: HeadImportance, parameters: int) -> HeadPlan:
    """The anchors' rule: remove the globally least important heads (scores normalized per layer; ties: the
    later layer, the higher index), each layer keeping one, until the model has at most ``parameters``
    parameters; each layer keeps as many key/value heads as divide its heads, up to its original number."""
    layout = head_layout(model)
    keep = [list(range(h)) for h in layout.heads]
    normalized = importance.normalized()
    removable = sorted(
        (float(normalized[i][h]), -i, -h) for i in range(layout.layers) for h in range(layout.heads[i])
    )

    def plan() -> HeadPlan:
        return HeadPlan(
            tuple(tuple(k) for k in keep),
            tuple(_kv_for(len(k), kv) for k, kv in zip(keep, layout.kv_heads, strict=True)),
        )

    current = plan()
    for _, minus_layer, minus_head in removable:
        if head_cost(model, current).parameters <= parameters:
            return current
        layer = -minus_layer
        if len(keep[layer]) > 1:
            keep[layer].remove(-minus_head)
            current = plan()
    if head_cost(model, current).parameters > parameters:
        raise ConfigError(
            f"{layout.architecture} keeps {head_cost(model, current).parameters:,} parameters with one head a "
            f"layer, more than the {parameters:,} asked; ask for at least that many."
        )
    return current
