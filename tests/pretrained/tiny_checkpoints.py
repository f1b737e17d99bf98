"""Tiny trained-model checkpoints on explorer's own tasks, saved as a transformers user saves them: a Llama causal
LM on the text task and a BERT classifier on the relations task, built as explorer's ``[model] hf`` builds them
(the task's vocabulary, positions and classes) with wide random weights (initializer_range 0.2), so that cutting
a head moves the logits well above float noise. Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import torch

from explorer.data import load_task
from explorer.layout import ModelConfig
from explorer.model import HFBuilder

TEXT = {"max_bytes": 12000, "context": 16}
RELATIONS = {"n_samples": 300, "seq_len": 10, "vocab_size": 10}


def save(folder: Path, family: str, task: str, options: dict, heads: int = 4, kv: int | None = None) -> Path:
    """A 2-layer model of ``heads`` heads of width 4 (hidden 16; Llama: ``kv`` key/value heads) for ``task``,
    saved with ``save_pretrained`` into ``folder``."""
    spec = load_task(task, **options).spec
    config = {"hidden_size": 16, "num_hidden_layers": 2, "intermediate_size": 32, "initializer_range": 0.2}
    cfg = ModelConfig(
        d_model=16, heads=(heads,) * 2, kv_heads=None if kv is None else (kv,) * 2, mlp_ratio=2.0
    )
    torch.manual_seed(0)
    model = HFBuilder.of(family, config).build(cfg, spec).hf
    model.save_pretrained(folder)
    return folder


def llama(folder: Path) -> Path:
    """LlamaForCausalLM on the text task (:data:`TEXT`): 4 query heads sharing 2 key/value heads a layer."""
    return save(folder, "llama", "text", TEXT, heads=4, kv=2)


def bert(folder: Path) -> Path:
    """BertForSequenceClassification on the relations task (:data:`RELATIONS`): 4 heads a layer."""
    return save(folder, "bert", "relations", RELATIONS, heads=4)
