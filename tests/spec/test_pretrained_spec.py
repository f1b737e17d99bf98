"""A spec's [model] pretrained: the checkpoint's config fills the space's sizes and head candidates, and what
surgery cannot make of it is one line before anything is created (read from config.json alone: no torch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer.errors import SpecError
from explorer.spec import spec_from_dict

LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 8,
    "intermediate_size": 172,
}
BERT = {
    "model_type": "bert",
    "architectures": ["BertForSequenceClassification"],
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
}


def checkpoint(tmp_path: Path, config: dict) -> str:
    folder = tmp_path / config["model_type"]
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def spec(
    path: str, task: str = "text", model: dict | None = None, finalists: dict | None = None, **space
) -> dict:
    return {
        "name": "p",
        "n_trials": 2,
        "task": {"name": task},
        "model": {"pretrained": path, **(model or {})},
        "space": dict(space),
        "finalists": finalists or {},
    }


def test_the_checkpoint_gives_the_sizes_and_the_head_candidates(tmp_path: Path) -> None:
    llama = spec_from_dict(spec(checkpoint(tmp_path, LLAMA)))
    s = llama.space
    assert (s.d_model, s.n_layers, s.head_dim, s.heads, s.kv_heads) == (
        (64,),
        (4,),
        (8,),
        (1, 2, 4, 8),
        (1, 2, 4),
    )
    assert s.mlp_ratio == (172 / 64,)
    assert llama.finalists.folds == 1  # the fixed split: the checkpoint learned the training split
    assert spec_from_dict(llama.stored(), stored=True) == llama  # stored and read back unchanged
    without_space = {
        k: v for k, v in spec(checkpoint(tmp_path, BERT), task="relations").items() if k != "space"
    }
    bert = spec_from_dict(without_space)  # the checkpoint fills the whole space
    assert bert.space.heads == (1, 2, 4) and bert.space.kv_heads is None and bert.finalists.folds == 1
    assert bert.model.distill == 0.5  # the default, stated in the spec as it runs
    # a stored spec reads back where the checkpoint is gone (a report on another machine)
    (tmp_path / "bert" / "config.json").unlink()
    assert spec_from_dict(bert.stored(), stored=True) == bert


@pytest.mark.parametrize(
    ("config", "task", "model", "finalists", "space", "fragments"),
    [
        (LLAMA, "text", {}, {}, {"heads": [4, 8, 16]}, ("heads lists 16", "from 1 to 8")),
        (LLAMA, "text", {}, {}, {"heads": [2, 8], "kv_heads": [1, 8]}, ("kv_heads lists 8", "from 1 to 4")),
        (LLAMA, "text", {}, {}, {"heads": [2, 4]}, ("always a candidate", "its 8")),
        (LLAMA, "text", {}, {}, {"kv_heads": [1, 2]}, ("kv_heads must list its 4",)),
        (LLAMA, "digits", {}, {}, {}, ("causal language model", "classifies")),
        (BERT, "text", {}, {}, {}, ("encoder classifier", "language modelling")),
        (BERT, "relations", {}, {}, {"kv_heads": [1, 2, 4]}, ("BERT", "remove [space] kv_heads")),
        (LLAMA, "text", {}, {}, {"d_model": [32]}, ("d_model is [32]", "checkpoint's is 64")),
        (LLAMA, "text", {"hf": "llama"}, {}, {}, ("both pretrained and hf",)),
        (BERT, "relations", {}, {"folds": 5}, {}, ("'folds' in [finalists] is 5", "training split")),
        (LLAMA, "text", {}, {}, {"attention": "serial"}, ("never a loop over heads",)),
        (
            BERT | {"architectures": ["BertModel"]},
            "relations",
            {},
            {},
            {},
            ("BertModel", "without a task head"),
        ),
    ],
)
def test_what_surgery_cannot_make_is_one_line(
    tmp_path, config, task, model, finalists, space, fragments
) -> None:
    with pytest.raises(SpecError) as err:
        spec_from_dict(spec(checkpoint(tmp_path, config), task, model, finalists, **space))
    message = str(err.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message


def test_a_folder_that_is_not_a_checkpoint_or_not_regroupable_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no checkpoint folder there"):
        spec_from_dict(spec(str(tmp_path / "missing")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="holds no config.json"):
        spec_from_dict(spec(str(tmp_path / "empty")))
    gpt2 = checkpoint(tmp_path, {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]})
    with pytest.raises(SpecError, match="model_type 'gpt2' .* cannot regroup; it can regroup bert, llama"):
        spec_from_dict(spec(gpt2))


def test_distill_weighs_a_pretrained_recovery_and_nothing_else(tmp_path: Path) -> None:
    assert spec_from_dict(spec(checkpoint(tmp_path, LLAMA), model={"distill": 0.25})).model.distill == 0.25
    with pytest.raises(SpecError, match="'distill' in \\[model\\] weighs distillation from a trained model"):
        spec_from_dict(
            {"name": "p", "task": {"name": "digits"}, "model": {"distill": 0.5}, "space": {"heads": [1]}}
        )
    with pytest.raises(SpecError, match="distill"):
        spec_from_dict(spec(checkpoint(tmp_path, LLAMA), model={"distill": 1.5}))
