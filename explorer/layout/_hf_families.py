"""The transformers architectures a study can search (``[model] hf``), described without importing transformers.

Each :class:`HFFamily` names a transformers model type, its config class, the model class explorer builds for
each kind of task (sequence or image classification, causal language model), the ``AutoModelFor...`` class that
loads an export back, and what its config can hold: one ``num_attention_heads`` for every layer (no stock class
here holds a per-layer list), ``num_key_value_heads`` (grouped-query attention) and ``head_dim`` where the class
has them. :mod:`explorer.spec._hf_check` checks a spec against this table before any work, and
:mod:`explorer.model._hfmodel` builds from it; keeping it free of torch keeps reading a spec instant.

Config keys fall in three groups. The heads (``num_attention_heads``, ``num_key_value_heads``) are what the study
searches, so a spec's ``config`` may not set them. The layout's other sizes (``hidden_size``,
``num_hidden_layers``, ``intermediate_size``, ``head_dim``) come from ``[space]``; a ``config`` may repeat them
only with the space's one value. The task's sizes (vocabulary, labels, positions, image and patch) come from the
task. Everything else (activations, norms, dropout, rope...) is the user's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HEAD_KEYS = ("num_attention_heads", "num_key_value_heads")  # what the study searches
TASK_KEYS = (
    "vocab_size",
    "num_labels",
    "id2label",
    "label2id",
    "max_position_embeddings",
    "image_size",
    "patch_size",
    "num_channels",
    "pad_token_id",
)


@dataclass(frozen=True)
class HFFamily:
    """One transformers architecture as explorer builds it (see the module docstring)."""

    model_type: str  # transformers' model type, the value of [model] hf
    config_class: str  # the transformers config class
    classifier: str  # the class built for a classification task
    causal_lm: str | None  # the class built for a language-model task (None: the architecture has none)
    inputs: str  # "tokens" (input_ids) or "images" (pixel_values, through the class's own patch embedding)
    kv_heads: bool = False  # the config holds num_key_value_heads (grouped-query attention)
    head_dim: bool = False  # the config holds head_dim (head width apart from hidden_size / heads)
    per_layer: bool = False  # the config holds a head count per layer
    aliases: dict[str, str] = field(default_factory=dict)  # the config's own names -> the canonical ones
    mlp_key: str = "intermediate_size"  # the config's name for the MLP width
    # the config's dropout settings (for the message refusing [space] dropout)
    dropout_keys: tuple[str, ...] = ()

    @property
    def decoder(self) -> bool:
        """Whether the class has a causal language model (and so a key/value cache to decode with)."""
        return self.causal_lm is not None

    def model_class(self, language_model: bool) -> str:
        """The class built for a task: the causal LM for a language model, else the classifier."""
        return (self.causal_lm or self.classifier) if language_model else self.classifier

    def auto_class(self, language_model: bool) -> str:
        """The ``AutoModelFor...`` class that loads an export of this family back."""
        if language_model:
            return "AutoModelForCausalLM"
        return (
            "AutoModelForImageClassification"
            if self.inputs == "images"
            else "AutoModelForSequenceClassification"
        )


_GPT2_ALIASES = {
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_positions": "max_position_embeddings",
    "n_inner": "intermediate_size",
}

HF_FAMILIES: dict[str, HFFamily] = {
    "bert": HFFamily(
        "bert",
        "BertConfig",
        "BertForSequenceClassification",
        None,
        "tokens",
        dropout_keys=("hidden_dropout_prob", "attention_probs_dropout_prob"),
    ),
    "vit": HFFamily(
        "vit",
        "ViTConfig",
        "ViTForImageClassification",
        None,
        "images",
        dropout_keys=("hidden_dropout_prob", "attention_probs_dropout_prob"),
    ),
    "llama": HFFamily(
        "llama",
        "LlamaConfig",
        "LlamaForSequenceClassification",
        "LlamaForCausalLM",
        "tokens",
        kv_heads=True,
        head_dim=True,
        dropout_keys=("attention_dropout",),
    ),
    "mistral": HFFamily(
        "mistral",
        "MistralConfig",
        "MistralForSequenceClassification",
        "MistralForCausalLM",
        "tokens",
        kv_heads=True,
        head_dim=True,
        dropout_keys=("attention_dropout",),
    ),
    "qwen2": HFFamily(
        "qwen2",
        "Qwen2Config",
        "Qwen2ForSequenceClassification",
        "Qwen2ForCausalLM",
        "tokens",
        kv_heads=True,
        head_dim=True,
        dropout_keys=("attention_dropout",),
    ),
    "gpt2": HFFamily(
        "gpt2",
        "GPT2Config",
        "GPT2ForSequenceClassification",
        "GPT2LMHeadModel",
        "tokens",
        aliases=_GPT2_ALIASES,
        mlp_key="n_inner",
        dropout_keys=("resid_pdrop", "embd_pdrop", "attn_pdrop"),
    ),
}
HF_TYPES = tuple(sorted(HF_FAMILIES))


def canonical_key(family: HFFamily, key: str) -> str:
    """``key`` under its canonical name (GPT-2's ``n_head`` is ``num_attention_heads``)."""
    return family.aliases.get(key, key)
