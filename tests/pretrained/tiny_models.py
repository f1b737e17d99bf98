"""Tiny random transformers models for the head-surgery tests, built from their config classes (nothing
downloaded): a Llama causal LM with grouped key/value heads and a BERT classifier, both 2 layers of 4 heads of
width 8. Weights are drawn wider than the classes' default (initializer_range 0.2), so that removing one head moves
the logits well above float noise."""

from __future__ import annotations

import torch

VOCAB = 50
BATCH = torch.randint(VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))  # [sequences, tokens]


def llama(seed: int = 0, **settings):
    """LlamaForCausalLM: hidden 32, 2 layers, 4 heads sharing 2 key/value heads, head_dim 8, vocab 50."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        **{
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 8,
            "intermediate_size": 64,
            "vocab_size": VOCAB,
            "max_position_embeddings": 64,
            "initializer_range": 0.2,
            "bos_token_id": None,
            "eos_token_id": None,  # so greedy decoding always makes every token asked for
            "pad_token_id": 0,
        }
        | settings
    )
    return transformers.LlamaForCausalLM(config).eval()


def llama_with_biases(seed: int = 0):
    """:func:`llama` with biases on every attention projection, drawn at random (the class starts them at zero)."""
    model = llama(seed, attention_bias=True)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("_proj.bias"):
                p.normal_(std=0.5)
    return model


def bert(seed: int = 0, model_class: str = "BertForSequenceClassification", **settings):
    """BertForSequenceClassification (or another BERT class): hidden 32, 2 layers, 4 heads, 3 labels, vocab 50."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(
        **{
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "intermediate_size": 64,
            "vocab_size": VOCAB,
            "max_position_embeddings": 64,
            "num_labels": 3,
            "initializer_range": 0.2,
        }
        | settings
    )
    return getattr(transformers, model_class)(config).eval()


def outputs(model) -> torch.Tensor:
    """The model's logits on the fixed batch."""
    with torch.inference_mode():
        return model(input_ids=BATCH).logits


def attention(model, layer: int):
    """Layer ``layer``'s attention module (LlamaAttention, or BertAttention)."""
    base = model.base_model
    return base.layers[layer].self_attn if hasattr(base, "layers") else base.encoder.layer[layer].attention
