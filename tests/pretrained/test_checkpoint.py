"""Shrunk models saved as checkpoints that ``from_pretrained`` loads in a fresh process, with trust_remote_code and
without explorer: the same logits, the per-layer heads in config.json, and (for the causal LM) the same greedy
tokens through the key/value cache. Bad folders and classes are refused, and a checkpoint that would not load back
is not written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("transformers")
from explorer.errors import ConfigError, ExportMismatchError  # noqa: E402
from explorer.pretrained import MODELING_FILE, HeadPlan, head_layout, save_shrunk, shrink  # noqa: E402
from explorer.pretrained._checkpoint import _config_doc  # noqa: E402
from tests.pretrained.tiny_models import BATCH, bert, llama, outputs  # noqa: E402

# layer 0 keeps its 4 heads (Llama: with its 2 key/value heads), layer 1 keeps 2 (Llama: sharing 1)
PLANS = {
    "llama": HeadPlan(((0, 1, 2, 3), (0, 3)), (2, 1)),
    "bert": HeadPlan(((0, 1, 2, 3), (1, 2)), (4, 2)),
}
AUTO_CLASS = {"llama": "AutoModelForCausalLM", "bert": "AutoModelForSequenceClassification"}

# Run in a fresh interpreter, outside the repository: loads each folder with its auto class, and reports what it
# loaded, the logits on the batch, the greedy tokens (causal LM), and whether explorer was imported on the way.
LOADER = """
import json, sys
import torch, transformers

folders, batch, out = json.loads(sys.argv[1]), torch.tensor(json.loads(sys.argv[2])), sys.argv[3]
report = {}
for family, (folder, auto) in folders.items():
    model, info = getattr(transformers, auto).from_pretrained(
        folder, trust_remote_code=True, output_loading_info=True
    )
    model.eval()
    attentions = [m for m in model.modules() if type(m).__name__ in ("LlamaAttention", "BertSelfAttention")]
    entry = {
        "class": type(model).__name__,
        "info": {key: sorted(map(str, value)) for key, value in info.items()},
        "num_query_heads": model.config.num_query_heads,
        "num_kv_heads": model.config.num_kv_heads,
        "query_rows": [(m.q_proj if hasattr(m, "q_proj") else m.query).out_features for m in attentions],
        "key_rows": [(m.k_proj if hasattr(m, "k_proj") else m.key).out_features for m in attentions],
    }
    with torch.inference_mode():
        entry["logits"] = model(input_ids=batch).logits.tolist()
        if family == "llama":
            entry["generated"] = model.generate(batch, max_new_tokens=4, do_sample=False).tolist()
    try:
        getattr(transformers, auto).from_pretrained(folder)
    except ValueError as error:
        entry["without_trust"] = str(error).splitlines()[0]
    report[family] = entry
report["explorer_imported"] = sorted(m for m in sys.modules if m.split(".")[0] == "explorer")
with open(out, "w") as f:  # not stdout, where transformers asks whether to trust the code
    json.dump(report, f)
"""


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    """Both families shrunk, saved, and loaded back in one fresh process: (shrunk models, folders, report)."""
    root = tmp_path_factory.mktemp("shrunk")
    models = {"llama": shrink(llama(), PLANS["llama"]), "bert": shrink(bert(), PLANS["bert"])}
    folders = {family: save_shrunk(model, root / family) for family, model in models.items()}
    env = os.environ | {
        "HF_MODULES_CACHE": str(root / "modules"),  # where transformers copies the folder's modeling file
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
    }
    folders_arg = json.dumps({f: [str(folders[f]), AUTO_CLASS[f]] for f in folders})
    args = folders_arg, json.dumps(BATCH.tolist()), str(root / "report.json")
    run = subprocess.run(
        [sys.executable, "-c", LOADER, *args],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return models, folders, json.loads((root / "report.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "bert"])
def test_a_shrunk_checkpoint_loads_in_a_fresh_process_with_its_heads_and_logits(round_trip, family):
    models, folders, report = round_trip
    entry, heads, kv = report[family], list(PLANS[family].heads), list(PLANS[family].kv_heads)
    assert report["explorer_imported"] == []
    assert entry["class"] == f"Shrunk{type(models[family]).__name__}"
    assert entry["info"] == {
        "missing_keys": [],
        "unexpected_keys": [],
        "mismatched_keys": [],
        "error_msgs": [],
    }
    assert (entry["num_query_heads"], entry["num_kv_heads"]) == (heads, kv)
    assert (entry["query_rows"], entry["key_rows"]) == ([8 * h for h in heads], [8 * k for k in kv])
    diff = (torch.tensor(entry["logits"]) - outputs(models[family])).abs().max()
    assert diff <= 1e-5
    assert "contains custom code which must be executed" in entry["without_trust"]

    config = json.loads((folders[family] / "config.json").read_text())
    assert (config["num_query_heads"], config["num_kv_heads"]) == (heads, kv)
    assert config["num_attention_heads"] == 4  # the stock field keeps the original, which sets the head width
    assert config["model_type"] == f"shrunk_{family}"
    assert config["auto_map"][AUTO_CLASS[family]] == f"modeling_shrunk.{entry['class']}"
    assert config["auto_map"]["AutoConfig"] == f"modeling_shrunk.Shrunk{family.title()}Config"
    modeling = (folders[family] / MODELING_FILE).read_text()
    imports = {line.split()[1] for line in modeling.splitlines() if line.startswith(("import ", "from "))}
    assert imports == {"__future__", "typing", "torch", "transformers"}


@pytest.mark.slow
def test_the_causal_lm_generates_the_same_tokens_through_its_cache_after_the_round_trip(round_trip):
    models, _, report = round_trip
    model = models["llama"]
    with torch.inference_mode():
        cached = model.generate(BATCH, max_new_tokens=4, do_sample=False)
        uncached = model.generate(BATCH, max_new_tokens=4, do_sample=False, use_cache=False)
        static = model.generate(BATCH, max_new_tokens=4, do_sample=False, cache_implementation="static")
    assert cached.shape == (BATCH.shape[0], BATCH.shape[1] + 4)
    assert torch.equal(cached, uncached)  # the cache holds each layer's own key/value heads
    assert torch.equal(static, cached)  # a preallocated cache too (its layers are sized on first use)
    assert report["llama"]["generated"] == cached.tolist()


def test_a_base_model_round_trips_in_this_process(tmp_path):
    """LlamaModel and BertModel save too; save_shrunk's own check loads them back (their hidden states)."""
    for family, model in (("llama", llama().model), ("bert", bert(model_class="BertModel"))):
        shrunk = shrink(model, PLANS[family])
        folder = save_shrunk(shrunk, tmp_path / family)
        config = json.loads((folder / "config.json").read_text())
        assert config["architectures"] == [f"Shrunk{type(model).__name__}"]
        assert config["num_query_heads"] == list(PLANS[family].heads)


def test_a_model_cast_to_half_precision_passes_its_own_check(tmp_path):
    """Its rotary frequencies were cast too, which from_pretrained rebuilds in float32: not a mismatch."""
    model = shrink(llama().to(torch.bfloat16), PLANS["llama"])
    folder = save_shrunk(model, tmp_path / "out")
    assert json.loads((folder / "config.json").read_text())["dtype"] == "bfloat16"


def test_a_folder_with_files_in_it_or_a_file_is_refused(tmp_path):
    model = llama()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "model.safetensors").write_text("")
    with pytest.raises(
        ConfigError, match="is a folder with files in it; save a shrunk checkpoint into a new"
    ):
        save_shrunk(model, tmp_path / "old")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is a file; save a shrunk checkpoint into a new or empty folder"):
        save_shrunk(model, tmp_path / "file")
    (tmp_path / "empty").mkdir()
    assert (save_shrunk(model, tmp_path / "empty", check=False) / MODELING_FILE).is_file()


def test_a_class_the_modeling_file_cannot_rebuild_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"BertForMaskedLM cannot be saved .* save its base model"):
        save_shrunk(bert(model_class="BertForMaskedLM"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_that_would_not_load_back_is_not_written(tmp_path, monkeypatch):
    """config.json made to list the wrong heads: the weights no longer fit the classes, and nothing is written."""
    model = shrink(llama(), PLANS["llama"])

    def wrong_heads(path, layout, shrunk_class):
        return _config_doc(path, layout, shrunk_class) | {"num_query_heads": [4, 4], "num_kv_heads": [2, 2]}

    monkeypatch.setattr("explorer.pretrained._checkpoint._config_doc", wrong_heads)
    with pytest.raises(ExportMismatchError, match="reads the folder back with mismatched keys: .*q_proj"):
        save_shrunk(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.iterdir())  # the staging folder is gone too


def test_outputs_that_differ_beyond_the_tolerance_are_a_mismatch(tmp_path):
    model = shrink(llama(), PLANS["llama"])
    with pytest.raises(
        ExportMismatchError, match=r"differ from the shrunk model's by up to .* \(tolerance -1\)"
    ):
        save_shrunk(model, tmp_path / "out", tolerance=-1)
    assert head_layout(model).heads == (4, 2) and not model.training
