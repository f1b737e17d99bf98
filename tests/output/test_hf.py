"""`explorer export --format hf`: config.json files that transformers loads and builds models from."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from optuna.trial import TrialState

from explorer.errors import ConfigError, MissingExtraError
from explorer.layout import InputSpec, ModelConfig
from explorer.output._hf_export import hf_config, nearest_uniform, write_hf_config
from explorer.spec import spec_from_dict
from explorer.storage import TrialRecord

transformers = pytest.importorskip("transformers")

SPEC = spec_from_dict(
    {
        "name": "hf",
        "n_trials": 1,
        "task": {"name": "digits"},
        "space": {"d_model": [32], "n_layers": [2], "heads": [2, 4]},
    }
)
IMAGES = InputSpec("features", 16, 10, n_features=4, image=(8, 8, 1), patch=2)
TOKENS = InputSpec("tokens", 12, 5, vocab_size=20)
TEXT = InputSpec("tokens", 12, 20, vocab_size=20, task_kind="language_model")


def record(cfg: ModelConfig) -> TrialRecord:
    return TrialRecord(
        number=7, state=TrialState.COMPLETE, role="finalist", config=cfg, lr=1e-3, seed=0, epochs_planned=3
    )


def layer_heads(model) -> list[tuple[int, int]]:
    """(query heads, key/value heads) of every attention layer of a transformers model built from a config."""
    out = []
    for m in model.modules():  # read off the projections: heads = their width / the head width
        q, k = (
            getattr(m, "q_proj", None) or getattr(m, "query", None),
            getattr(m, "k_proj", None) or getattr(m, "key", None),
        )
        dk = getattr(m, "head_dim", None) or getattr(m, "attention_head_size", None)
        if isinstance(q, transformers.pytorch_utils.nn.Linear) and k is not None and dk:
            out.append((q.out_features // dk, k.out_features // dk))
    return out


@pytest.mark.parametrize(
    ("spec", "family", "model_class", "cfg"),
    [
        (IMAGES, "vit", "ViTModel", ModelConfig(d_model=32, heads=(4, 4))),
        (TOKENS, "bert", "BertModel", ModelConfig(d_model=32, heads=(2, 2))),
        (TEXT, "llama", "LlamaModel", ModelConfig(d_model=32, heads=(4, 4), kv_heads=(2, 2))),
    ],
)
def test_a_uniform_answer_loads_and_builds_with_its_heads(
    tmp_path: Path, spec, family, model_class, cfg
) -> None:
    doc, lost = hf_config(record(cfg), SPEC, spec)
    assert lost == [] and doc["explorer"]["per_layer"] is False
    write_hf_config(doc, tmp_path / "out")
    loaded = transformers.AutoConfig.from_pretrained(tmp_path / "out")
    assert loaded.model_type == family and loaded.num_attention_heads == cfg.heads[0]
    assert loaded.hidden_size == 32 and loaded.num_hidden_layers == 2
    model = getattr(transformers, model_class)(loaded)
    assert layer_heads(model) == list(zip(cfg.heads, cfg.kv_per_layer, strict=True))
    if family == "vit":
        assert (loaded.image_size, loaded.patch_size, loaded.num_channels) == (8, 2, 1)


def test_a_per_layer_answer_carries_the_lists_and_names_what_the_stock_config_cannot(tmp_path: Path) -> None:
    cfg = ModelConfig(d_model=32, heads=(2, 4, 4))
    doc, lost = hf_config(record(cfg), SPEC, IMAGES)
    assert doc["num_attention_heads"] == 4  # the nearest uniform layout
    assert lost == ["layer 0: 2 heads, d_k 16"]
    write_hf_config(doc, tmp_path)
    loaded = transformers.AutoConfig.from_pretrained(tmp_path)
    assert loaded.num_query_heads == [2, 4, 4] and loaded.num_kv_heads == [2, 4, 4]
    assert loaded.head_dims == [16, 8, 8] and loaded.explorer["per_layer"] is True
    assert layer_heads(transformers.ViTModel(loaded)) == [(4, 4)] * 3  # the stand-in builds


def test_grouped_query_heads_in_an_encoder_are_named_as_lost() -> None:
    doc, lost = hf_config(record(ModelConfig(d_model=32, heads=(4, 4), kv_heads=(1, 1))), SPEC, TOKENS)
    assert lost == ["layer 0: 1 key/value heads", "layer 1: 1 key/value heads"]
    assert doc["num_kv_heads"] == [1, 1]


def test_nearest_uniform() -> None:
    assert (
        nearest_uniform([2, 4, 4]) == 4 and nearest_uniform([1, 4]) == 4 and nearest_uniform([1, 2, 8]) == 2
    )
    assert nearest_uniform([3, 4], ok=lambda h: 32 % h == 0) == 4


def test_out_must_be_a_folder_and_transformers_must_be_installed(tmp_path: Path, monkeypatch) -> None:
    doc, _ = hf_config(record(ModelConfig(d_model=32, heads=(4, 4))), SPEC, IMAGES)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        write_hf_config(doc, tmp_path / "file")
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(MissingExtraError, match=r"pip install 'explorer\[hf\]'"):
        write_hf_config(doc, tmp_path / "new")
    assert not (tmp_path / "new").exists()
    json.dumps(doc)  # plain JSON


def test_the_json_says_whether_the_weights_were_exported() -> None:
    from types import SimpleNamespace

    from explorer.output import ExportResult

    record = SimpleNamespace(number=3, heads=(2, 2))
    config_only = ExportResult(record, Path("d"), "hf", None, 0, None).to_dict("s")  # type: ignore[arg-type]
    assert config_only["weights"] is False and config_only["loads_with"] is None
    model = ExportResult(record, Path("d"), "hf", 0.0, 9, 1.0, loader="AutoModelForCausalLM").to_dict("s")  # type: ignore[arg-type]
    assert model["weights"] is True and model["loads_with"] == "AutoModelForCausalLM"
