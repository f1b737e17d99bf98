"""The BERT example checkpoint script trains a BertForSequenceClassification on the relations task and saves what
explorer.pretrained reads, with explorer's conventions for a BERT on a token task (the pad as the extra id)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from explorer.data import load_task  # noqa: E402
from explorer.pretrained import inspect_checkpoint, load_checkpoint  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "pretrained" / "train_bert.py"


def _script():
    spec = importlib.util.spec_from_file_location("train_bert", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bert_example_saves_a_checkpoint_that_is_read_as_a_bert_classifier(tmp_path: Path) -> None:
    script = _script()
    out = tmp_path / "bert-relations"
    lines: list[str] = []
    held_out, seconds = script.train(out, steps=3, seed=0, log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("step 3/3: train loss")
    assert 0.0 <= held_out <= 1.0 and seconds > 0
    task = load_task("relations", seed=0, **script.TASK)
    found = inspect_checkpoint(out)
    assert (found.architecture, found.layers, found.heads, found.head_dim, found.hidden) == (
        "BertForSequenceClassification",
        2,
        8,
        8,
        64,
    )
    saved = json.loads((out / "config.json").read_text())
    assert saved["pad_token_id"] == saved["vocab_size"] - 1 == task.spec.vocab_size
    assert saved["max_position_embeddings"] == task.spec.seq_len
    assert saved["bos_token_id"] is None and saved["eos_token_id"] is None
    model = load_checkpoint(found)
    assert model.config.num_labels == task.spec.n_classes == 8  # config.json keeps it as id2label
    x = task.val[0][:5]
    with torch.inference_mode():
        logits = model(input_ids=x).logits
    assert logits.shape == (5, task.spec.n_classes)
