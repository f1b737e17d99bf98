"""A trained transformers model's attention as it stands, layer by layer: its family, query heads, key/value heads
and head width, read off the projections (so a model already shrunk reads as shrunk).

Two families are supported: Llama (every Llama class, e.g. ``LlamaForCausalLM``; grouped key/value heads) and
BERT encoders (e.g. ``BertModel``, ``BertForSequenceClassification``; as many key/value heads as query heads);
the checkpoint format covers four of their classes (:mod:`explorer.pretrained._checkpoint`). Any other model is
refused with a one-line :class:`~explorer.errors.ConfigError` naming its architecture. transformers 5 or later
is needed: before it, Llama's attention kept head counts of its own that its forward reshapes with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from explorer.errors import ConfigError, EnvironmentLackError
from explorer.model import require_transformers

Family = Literal["llama", "bert"]

SUPPORTED = "Llama (LlamaForCausalLM, LlamaModel) or BERT (BertModel, BertForSequenceClassification)"


@dataclass(frozen=True)
class HeadLayout:
    """The heads of a model's attention, per layer, as they are now."""

    family: Family  # "llama" (grouped key/value heads) or "bert" (key/value heads = query heads)
    architecture: str  # the model's class name, as messages name it
    heads: tuple[int, ...]  # query heads of each layer
    kv_heads: tuple[int, ...]  # key/value heads of each layer
    head_dim: int  # the width of every head (unchanged by the surgery)
    hidden_size: int  # the width of the residual stream the projections read and write
    qkv_bias: bool  # whether the query, key and value projections have biases
    dtype: torch.dtype  # the attention's weights' (what a key/value cache holds when the model runs in it)

    @property
    def layers(self) -> int:
        return len(self.heads)


def attention_modules(model: nn.Module) -> tuple[Family, list[Any]]:
    """The model's family and its self-attention modules in layer order (``LlamaAttention``, or ``BertAttention``
    whose ``self`` and ``output.dense`` hold the projections); a one-line ConfigError for any other model."""
    transformers = require_transformers("head surgery on a pretrained model")
    if int(transformers.__version__.split(".")[0]) < 5:
        raise EnvironmentLackError(
            f"head surgery needs transformers 5 or later, whose attention reads its head counts off its "
            f"projections, and this is {transformers.__version__}; run pip install -U 'transformers>=5'."
        )
    from transformers.models.bert.modeling_bert import BertAttention, BertPreTrainedModel
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaPreTrainedModel

    architecture = type(model).__name__
    if isinstance(model, LlamaPreTrainedModel):
        family: Family = "llama"
        found: list[Any] = [m for m in model.modules() if isinstance(m, LlamaAttention)]
    elif isinstance(model, BertPreTrainedModel):
        family = "bert"
        found = [m for m in model.modules() if isinstance(m, BertAttention)]
        if any(m.is_cross_attention for m in found):
            raise ConfigError(
                f"{architecture} has cross-attention layers (add_cross_attention), which head surgery does not "
                "plan; give a BERT encoder without them."
            )
    else:
        raise ConfigError(
            f"{architecture} is not an architecture head surgery supports; give a {SUPPORTED} model."
        )
    if not found:
        raise ConfigError(f"{architecture} has no attention layer to shrink; give a {SUPPORTED} model.")
    return family, found


def _llama_heads(attention: Any) -> tuple[int, int, int]:
    width = attention.head_dim
    return attention.q_proj.out_features // width, attention.k_proj.out_features // width, width


def _bert_heads(attention: Any) -> tuple[int, int, int]:
    inner = attention.self
    heads = inner.query.out_features // inner.attention_head_size
    return heads, heads, inner.attention_head_size


def head_layout(model: nn.Module) -> HeadLayout:
    """The query heads, key/value heads and head width of each of ``model``'s attention layers."""
    family, attentions = attention_modules(model)
    read = _llama_heads if family == "llama" else _bert_heads
    counts = [read(a) for a in attentions]
    widths = {width for _, _, width in counts}
    if len(widths) != 1:
        raise ConfigError(
            f"{type(model).__name__}'s layers have heads of widths {sorted(widths)}; head surgery needs one head "
            "width in every layer."
        )
    first = attentions[0].q_proj if family == "llama" else attentions[0].self.query
    return HeadLayout(
        family=family,
        architecture=type(model).__name__,
        heads=tuple(h for h, _, _ in counts),
        kv_heads=tuple(k for _, k, _ in counts),
        head_dim=widths.pop(),
        hidden_size=first.in_features,
        qkv_bias=first.bias is not None,
        dtype=first.weight.dtype,
    )
