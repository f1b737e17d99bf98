"""Llama and BERT with a number of attention heads of their own in each layer: the classes a checkpoint written by
explorer's head surgery names in its config's ``auto_map``.

This file is copied beside the weights as ``modeling_shrunk.py`` and imports only torch and transformers, so
``transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)`` (``AutoModel``, or
``AutoModelForSequenceClassification`` for BERT) rebuilds the model without explorer installed. The config keeps
the stock fields, which hold one head count for every layer (the original model's), and beside them the heads of
each layer as OpenELM's config lists them: ``num_query_heads`` and ``num_kv_heads``, one entry per layer. Each
model class builds the stock model from the stock fields, then gives each layer's attention the projections its
entries size. The stock forward passes read their head counts off the projections (``view(..., -1, head_dim)``)
and the few attributes set here: Llama's ``num_key_value_groups``, BERT's ``num_attention_heads`` and
``all_head_size``. The head width stays the stock one (Llama's ``head_dim``, BERT's ``hidden_size`` divided by
``num_attention_heads``).

Written for transformers 5, whose attention modules keep no other head count.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    BertModel,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaModel,
)


class ShrunkLlamaConfig(LlamaConfig):
    """LlamaConfig with the query and key/value heads of each layer."""

    model_type = "shrunk_llama"
    num_query_heads: list[int] | None = None  # query heads of each layer; None: num_attention_heads in each
    num_kv_heads: list[int] | None = None  # key/value heads of each layer; None: num_key_value_heads in each


class ShrunkBertConfig(BertConfig):
    """BertConfig with the heads of each layer (BERT's key/value heads are its query heads)."""

    model_type = "shrunk_bert"
    num_query_heads: list[int] | None = None  # heads of each layer; None: num_attention_heads in each
    num_kv_heads: list[int] | None = None  # equal to num_query_heads, stated as the Llama config states it


def layer_heads(config: Any, layers: int) -> list[tuple[int, int]]:
    """(query heads, key/value heads) of each of ``layers`` layers, from the config's per-layer lists (or the stock
    fields where it has none)."""
    uniform_kv = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    heads = config.num_query_heads or [config.num_attention_heads] * layers
    kv_heads = config.num_kv_heads or [uniform_kv] * layers
    if len(heads) != layers or len(kv_heads) != layers:
        raise ValueError(
            f"num_query_heads has {len(heads)} entries and num_kv_heads {len(kv_heads)}, and the model "
            f"{layers} layers; give one entry per layer in each."
        )
    for i, (h, k) in enumerate(zip(heads, kv_heads, strict=True)):
        if not 1 <= k <= h or h % k:
            raise ValueError(f"layer {i}: {k} key/value heads do not divide its {h} query heads.")
    return list(zip(heads, kv_heads, strict=True))


def _linear(old: nn.Linear, in_features: int, out_features: int) -> nn.Linear:
    """A projection like ``old`` (bias or not, device, dtype) with other sizes; its weights are loaded after."""
    factory = {"device": old.weight.device, "dtype": old.weight.dtype}
    return nn.Linear(in_features, out_features, bias=old.bias is not None, **factory)


def resize_llama_attention(attention: Any, heads: int, kv_heads: int) -> None:
    """Give a ``LlamaAttention`` ``heads`` query heads and ``kv_heads`` key/value heads of its head width."""
    hidden, width = attention.q_proj.in_features, attention.head_dim
    attention.q_proj = _linear(attention.q_proj, hidden, heads * width)
    attention.k_proj = _linear(attention.k_proj, hidden, kv_heads * width)
    attention.v_proj = _linear(attention.v_proj, hidden, kv_heads * width)
    attention.o_proj = _linear(attention.o_proj, heads * width, attention.o_proj.out_features)
    attention.num_key_value_groups = heads // kv_heads  # the query heads sharing one key/value head


def resize_bert_attention(attention: Any, heads: int) -> None:
    """Give a ``BertAttention`` (its ``self`` and ``output``) ``heads`` heads of its head width."""
    inner = attention.self
    hidden, width = inner.query.in_features, inner.attention_head_size
    inner.query = _linear(inner.query, hidden, heads * width)
    inner.key = _linear(inner.key, hidden, heads * width)
    inner.value = _linear(inner.value, hidden, heads * width)
    inner.num_attention_heads, inner.all_head_size = heads, heads * width
    dense = attention.output.dense
    attention.output.dense = _linear(dense, heads * width, dense.out_features)


def _resize_llama_layers(layers: Any, config: Any) -> None:
    for layer, (heads, kv_heads) in zip(layers, layer_heads(config, len(layers)), strict=True):
        resize_llama_attention(layer.self_attn, heads, kv_heads)


def _resize_bert_layers(layers: Any, config: Any) -> None:
    for layer, (heads, _) in zip(layers, layer_heads(config, len(layers)), strict=True):
        resize_bert_attention(layer.attention, heads)


class ShrunkLlamaModel(LlamaModel):
    """LlamaModel whose layers have the heads ``num_query_heads`` and ``num_kv_heads`` list."""

    config_class = ShrunkLlamaConfig

    def __init__(self, config: ShrunkLlamaConfig):
        super().__init__(config)
        _resize_llama_layers(self.layers, config)


class ShrunkLlamaForCausalLM(LlamaForCausalLM):
    """LlamaForCausalLM whose layers have the heads ``num_query_heads`` and ``num_kv_heads`` list."""

    config_class = ShrunkLlamaConfig

    def __init__(self, config: ShrunkLlamaConfig):
        super().__init__(config)
        _resize_llama_layers(self.model.layers, config)


class ShrunkBertModel(BertModel):
    """BertModel whose layers have the heads ``num_query_heads`` lists."""

    config_class = ShrunkBertConfig

    def __init__(self, config: ShrunkBertConfig, add_pooling_layer: bool = True):
        super().__init__(config, add_pooling_layer=add_pooling_layer)
        _resize_bert_layers(self.encoder.layer, config)


class ShrunkBertForSequenceClassification(BertForSequenceClassification):
    """BertForSequenceClassification whose layers have the heads ``num_query_heads`` lists."""

    config_class = ShrunkBertConfig

    def __init__(self, config: ShrunkBertConfig):
        super().__init__(config)
        _resize_bert_layers(self.bert.encoder.layer, config)
