"""explorer.layout._hf_families: the transformers architectures explorer builds, and the config keys a spec
leaves to the study (head counts) or to the task."""

from __future__ import annotations

import pytest

from explorer.errors import SpecError
from explorer.layout import HEAD_KEYS, HF_FAMILIES, HF_TYPES, TASK_KEYS, HFFamily, canonical_key
from explorer.spec import spec_from_dict

CONFIG = {"hidden_size": 16, "num_hidden_layers": 2, "intermediate_size": 32}


def hf_spec(hf: str = "bert", config: dict | None = None) -> dict:
    return {
        "name": "h",
        "n_trials": 2,
        "task": {"name": "relations"},
        "model": {"hf": hf, "config": config or CONFIG},
        "space": {"heads": [1, 2, 4]},
    }


def test_every_hf_type_is_a_family_and_an_unknown_type_is_refused_naming_them():
    assert set(HF_TYPES) == set(HF_FAMILIES) and all(isinstance(f, HFFamily) for f in HF_FAMILIES.values())
    with pytest.raises(SpecError) as err:
        spec_from_dict(hf_spec("bart"))
    assert ", ".join(HF_TYPES) in str(err.value)


def test_a_family_builds_its_classifier_or_its_causal_lm():
    llama, bert = HF_FAMILIES["llama"], HF_FAMILIES["bert"]
    assert llama.decoder and llama.model_class(True) == "LlamaForCausalLM"
    assert llama.model_class(False) == "LlamaForSequenceClassification"
    assert not bert.decoder and bert.model_class(True) == bert.classifier
    assert HF_FAMILIES["vit"].auto_class(False) == "AutoModelForImageClassification"


def test_canonical_key_reads_a_familys_own_names():
    gpt2 = HF_FAMILIES["gpt2"]
    assert canonical_key(gpt2, "n_head") == "num_attention_heads"
    assert canonical_key(gpt2, "vocab_size") == "vocab_size"
    assert canonical_key(HF_FAMILIES["bert"], "n_head") == "n_head"


@pytest.mark.parametrize("key", HEAD_KEYS)
def test_a_config_setting_a_head_count_is_refused(key):
    with pytest.raises(SpecError, match=f"config sets {key}, which is what the study searches"):
        spec_from_dict(hf_spec("llama", {**CONFIG, key: 2}))


@pytest.mark.parametrize("key", TASK_KEYS)
def test_a_config_setting_what_the_task_gives_is_refused(key):
    with pytest.raises(SpecError, match=f"config sets {key}, which explorer takes from the task"):
        spec_from_dict(hf_spec("bert", {**CONFIG, key: 2}))
