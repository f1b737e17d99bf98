"""A trained transformers checkpoint read, checked and sized before its weights are loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from explorer.errors import ConfigError, LimitError
from explorer.pretrained import Checkpoint, inspect_checkpoint, load_checkpoint
from tests.pretrained import tiny_models

transformers = pytest.importorskip("transformers")


def _saved(folder: Path, family: str, **settings) -> torch.nn.Module:
    model = tiny_models.llama(**settings) if family == "llama" else tiny_models.bert(**settings)
    model.save_pretrained(folder)
    return model


@pytest.mark.parametrize("family", ["llama", "bert"])
def test_a_checkpoint_is_read_from_its_config_and_weight_headers_then_loads_as_saved(
    tmp_path: Path, family: str
) -> None:
    original = _saved(tmp_path, family)
    found = inspect_checkpoint(tmp_path)
    assert isinstance(found, Checkpoint)
    assert found.model_type == family and found.causal == (family == "llama")
    assert (found.layers, found.heads, found.head_dim, found.hidden) == (2, 4, 8, 32)
    assert found.kv_heads == (2 if family == "llama" else 4)
    stored = sum(p.numel() for p in original.state_dict().values())
    tied = family == "llama" and original.config.tie_word_embeddings
    assert found.parameters == stored - (original.lm_head.weight.numel() if tied else 0)
    assert found.weight_bytes == 4 * found.parameters  # float32
    assert torch.equal(tiny_models.outputs(load_checkpoint(found)), tiny_models.outputs(original))


def test_a_path_that_is_not_a_checkpoint_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no checkpoint at .*give the folder that save_pretrained wrote"):
        inspect_checkpoint(tmp_path / "missing")
    (tmp_path / "weights.safetensors").write_bytes(b"")
    with pytest.raises(ConfigError, match="is a file, not a transformers checkpoint folder"):
        inspect_checkpoint(tmp_path / "weights.safetensors")
    with pytest.raises(ConfigError, match="holds no config.json, so it is not a transformers checkpoint"):
        inspect_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        inspect_checkpoint(tmp_path)


def test_an_architecture_whose_heads_cannot_be_regrouped_is_named(tmp_path: Path) -> None:
    config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4, vocab_size=50, n_positions=32)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path)
    with pytest.raises(
        ConfigError, match=r"GPT2LMHeadModel \(model_type 'gpt2'\) .* cannot regroup; .*bert, llama"
    ):
        inspect_checkpoint(tmp_path)


def test_a_class_of_a_supported_family_that_is_not_cut_is_named(tmp_path: Path) -> None:
    tiny_models.bert(model_class="BertForMaskedLM").save_pretrained(tmp_path)
    with pytest.raises(
        ConfigError, match="holds a BertForMaskedLM, a class whose heads explorer does not cut"
    ):
        inspect_checkpoint(tmp_path)


def test_pickled_weights_are_refused_without_being_read(tmp_path: Path) -> None:
    _saved(tmp_path, "llama")
    (tmp_path / "model.safetensors").unlink()
    (tmp_path / "pytorch_model.bin").write_bytes(b"a pickle explorer must never open")
    with pytest.raises(
        ConfigError, match=r"only in pickle files \(pytorch_model.bin\).*safe_serialization=True"
    ):
        inspect_checkpoint(tmp_path)


def test_a_corrupt_weight_file_is_refused_in_one_line(tmp_path: Path) -> None:
    _saved(tmp_path, "llama")
    (tmp_path / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(ConfigError, match="is not a readable safetensors file"):
        inspect_checkpoint(tmp_path)


def test_a_checkpoint_too_large_for_this_machine_is_refused_before_loading_with_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _saved(tmp_path, "llama", vocab_size=8000)  # 0.5 million parameters: its recovery needs about 10 MB
    monkeypatch.setenv("EXPLORER_MAX_MEMORY_MB", "1")
    with pytest.raises(LimitError, match=r"checkpoint .* needs about .* but .* is available"):
        inspect_checkpoint(tmp_path)


def test_the_memory_a_recovery_needs_counts_more_than_the_weights_and_the_optimizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _saved(tmp_path, "llama", vocab_size=8000)
    weights = inspect_checkpoint(tmp_path).parameters * 4
    # room for the teacher, the candidate, its gradients and Adam's two moments, but not the activations
    monkeypatch.setenv("EXPLORER_MAX_MEMORY_MB", str(6 * weights // 10**6))
    with pytest.raises(LimitError, match=r"checkpoint .* needs about"):
        inspect_checkpoint(tmp_path)
    monkeypatch.setenv("EXPLORER_MAX_MEMORY_MB", str(8 * weights // 10**6))
    assert inspect_checkpoint(tmp_path).parameters * 4 == weights


def test_heads_that_do_not_divide_are_refused(tmp_path: Path) -> None:
    _saved(tmp_path, "llama")
    config = json.loads((tmp_path / "config.json").read_text())
    config["num_key_value_heads"] = 3
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="4 query heads and 3 key/value heads, which do not divide them"):
        inspect_checkpoint(tmp_path)
