"""A spec's [model] hf and config: the sizes the config gives fill the space, and what the class cannot hold is
one line, exit 3, before anything is created (transformers missing: exit 5)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from explorer.cli import main
from explorer.errors import SpecError
from explorer.spec import spec_from_dict

CONFIG = {"hidden_size": 16, "num_hidden_layers": 2, "intermediate_size": 32}


def spec(hf: str = "bert", config: dict | None = None, task: str = "relations", **space) -> dict:
    return {
        "name": "h",
        "n_trials": 2,
        "task": {"name": task},
        "model": {"hf": hf, "config": config or CONFIG},
        "space": {"heads": [1, 2, 4], **space},
    }


def test_the_config_gives_the_sizes_and_the_class_its_families_and_key_value_heads() -> None:
    bert = spec_from_dict(spec())
    assert (bert.space.d_model, bert.space.n_layers, bert.space.mlp_ratio) == ((16,), (2,), (2.0,))
    assert bert.space.families == ("uniform",) and bert.space.kv_heads is None
    llama = spec_from_dict(spec("llama", task="text"))
    assert llama.space.kv_heads == (1, 2, 4)  # grouped-query attention searched under the grouping rule
    assert spec_from_dict(llama.to_dict(), stored=True) == llama  # stored and read back unchanged
    gpt2 = spec_from_dict(spec("gpt2", {"n_embd": 16, "n_layer": 2}, d_model=[16]))
    assert gpt2.space.n_layers == (2,) and gpt2.model.config == {"n_embd": 16, "n_layer": 2}


@pytest.mark.parametrize(
    ("doc", "words"),
    [
        (
            spec("bart"),
            "not a transformers model type explorer builds; choose one of bert, gpt2, llama, mistral, qwen2, vit",
        ),
        (
            spec(families=["uniform", "increasing"]),
            "BertConfig holds one num_attention_heads for every layer",
        ),
        (spec(kv_heads=[1, 2]), "BertConfig has no num_key_value_heads"),
        (spec("llama", task="text", kv_per_layer=True), "one num_key_value_heads for every layer"),
        (spec(head_dim=8), "remove [space] head_dim"),
        (spec(dropout=0.1), "hidden_dropout_prob / attention_probs_dropout_prob in [model] config"),
        (spec(attention="serial"), "never a loop over heads"),
        (spec(task="text"), "BertConfig has no causal language model"),
        (spec(config={**CONFIG, "num_attention_heads": 4}), "config sets num_attention_heads, which is what"),
        (spec("gpt2", config={**CONFIG, "n_head": 4}), "config sets num_attention_heads"),
        (
            spec(config={**CONFIG, "vocab_size": 30}),
            "config sets vocab_size, which explorer takes from the task",
        ),
        (spec(config=CONFIG, d_model=[32]), "hidden_size = 16 but [space] d_model = 32"),
        (spec(config=CONFIG, d_model=[16, 32]), "[space] d_model lists 2 values"),
        ({**spec(), "model": {"build": "a:b", "hf": "bert"}}, "has both build and hf"),
        ({**spec(), "model": {"config": {"x": 1}}}, 'add hf = "bert"'),
    ],
)
def test_what_the_class_cannot_hold_is_one_spec_error(doc: dict, words: str) -> None:
    with pytest.raises(SpecError) as err:
        spec_from_dict(doc)
    assert words in str(err.value) and "\n" not in str(err.value)


def write(tmp_path: Path, model: str, task: str = "relations", heads: str = "[1, 2]") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(
        f'name = "h"\nn_trials = 1\n[task]\nname = "{task}"\n[model]\n{model}\n[space]\nheads = {heads}\n'
    )
    return path


@pytest.mark.parametrize(
    ("model", "task", "heads", "words"),
    [
        (
            'hf = "bert"\nconfig = { hidden_size = 6, num_hidden_layers = 1 }',
            "relations",
            "[4]",
            "for d_model 6 the valid counts are [1, 2, 3, 6]",
        ),
        (
            'hf = "llama"\nconfig = { hidden_size = 8, num_hidden_layers = 1 }\n[space]\nkv_heads = [3]',
            "text",
            "[2]",
            "kv_heads 3 divides no head count in heads [2]",
        ),
        (
            'hf = "bert"\nconfig = { hidden_size = 8, num_hidden_layers = 1 }',
            "digits",
            "[1, 2]",
            "reads token ids",
        ),
        (
            'hf = "bert"\nconfig = { hidden_size = 8, num_hidden_layers = 1, hiden_act = "relu" }',
            "relations",
            "[1, 2]",
            "did you mean 'hidden_act'",
        ),
        (
            'hf = "vit"\nconfig = { hidden_size = 8, num_hidden_layers = 1 }',
            "relations",
            "[1, 2]",
            "reads images",
        ),
        (
            'hf = "llama"\nconfig = { hidden_size = 8, num_hidden_layers = 2 }\n[space]\nfamilies = ["increasing"]',
            "relations",
            "[1, 2]",
            "LlamaConfig holds one num_attention_heads for every layer",
        ),
        ('hf = "t5"', "relations", "[1, 2]", "choose one of bert, gpt2, llama, mistral, qwen2, vit"),
        (
            'hf = "vit"\nconfig = { hidden_size = 8, num_hidden_layers = 1 }\n[latency]\nseq_len = 8',
            "digits",
            "[1, 2]",
            "a ViT reads whole images, its positions the image's patches",
        ),
    ],
    ids=[
        "heads-do-not-divide-the-width",
        "kv-heads-do-not-divide-the-heads",
        "token-class-on-images",
        "typo",
        "image-class-on-tokens",
        "per-layer-schedule",
        "unknown-type",
        "vit-at-another-length",
    ],
)
def test_study_run_refuses_a_bad_config_in_one_line_and_creates_nothing(tmp_path, model, task, heads, words):
    path = write(tmp_path, model, task, heads)
    if "\n[" in model:  # a second table in the model text: its lines go to the end, under their own table
        head, _, rest = model.partition("\n[")
        table, _, line = rest.partition("]\n")
        text = path.read_text().replace(model, head)
        path.write_text(text + (f"{line}\n" if table == "space" else f"[{table}]\n{line}\n"))
    result = CliRunner().invoke(
        main,
        [
            "study",
            "run",
            str(path),
            "--storage",
            f"sqlite:///{tmp_path}/h.db",
            "--artifacts",
            str(tmp_path / "art"),
        ],
    )
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 3 and len(lines) == 1 and words in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


def test_without_transformers_the_study_is_exit_5_naming_the_extra(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers raises ImportError
    path = write(tmp_path, 'hf = "bert"\nconfig = { hidden_size = 8, num_hidden_layers = 1 }')
    result = CliRunner().invoke(main, ["study", "run", str(path), "--storage", f"sqlite:///{tmp_path}/h.db"])
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 5 and len(lines) == 1 and "explorer[hf]" in lines[0], result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]


@pytest.mark.parametrize("name", ["vit", "llama"])
def test_the_examples_are_transformers_studies_of_uniform_layouts(name: str) -> None:
    from explorer.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "examples" / "hf" / f"{name}.toml")
    assert spec.model.hf == name and spec.space.families == ("uniform",)
    assert (spec.decode is not None) == (name == "llama") and (spec.space.kv_heads is not None) == (
        name == "llama"
    )
