"""benchmarks/pretrained_rule.py end to end on a tiny study of a trained checkpoint: the answer, the anchors' rule at
the same parameter count and the original, each trained and timed, written as JSON and as a record; and the
refusal of a spec that is not a checkpoint study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("transformers")

import torch  # noqa: E402

from benchmarks import pretrained_rule  # noqa: E402
from benchmarks.common import ROOT  # noqa: E402
from explorer.cli import main as explorer_main  # noqa: E402
from explorer.data import load_task  # noqa: E402
from explorer.layout import ModelConfig  # noqa: E402
from explorer.model import HFBuilder  # noqa: E402

# one relation (2 classes): what a 2-layer BERT of width 16 learns in a few hundred steps, so the study's
# finalists beat chance and it has an answer (tests/pretrained/tiny_checkpoints.bert's random weights do not)
OPTIONS = {"n_relations": 1, "seq_len": 10, "vocab_size": 10, "n_samples": 2000}


def trained_bert(folder: Path, steps: int = 300) -> Path:
    """tiny_checkpoints' BERT (2 layers of 4 heads of width 4) trained ``steps`` steps on :data:`OPTIONS`."""
    task = load_task("relations", **OPTIONS)
    config = {"hidden_size": 16, "num_hidden_layers": 2, "intermediate_size": 32, "initializer_range": 0.2}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = (
            HFBuilder.of("bert", config)
            .build(ModelConfig(d_model=16, heads=(4, 4), mlp_ratio=2.0), task.spec)
            .hf
        )
        x, y = task.train
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        for _ in range(steps):
            i = torch.randint(len(x), (32,))
            loss = model(input_ids=x[i], labels=y[i]).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.save_pretrained(folder)
    return folder


def spec_text(folder: Path) -> str:
    inline = ", ".join(f"{k} = {v}" for k, v in OPTIONS.items())
    return f"""name = "pt-rule"
n_trials = 2
bench = false

[task]
name = "relations"
options = {{ {inline} }}
epochs = 1
batch_size = 32

[model]
pretrained = "{folder}"

[space]
lr = 1e-3
families = ["uniform"]

[latency]
device = "cpu"
batch_size = 8
min_run_time = 0.02

[early_stopping]
enabled = false

[finalists]
top = 1
references = false
ladder = true
seeds = 1
epochs = 1
pilot = false
timing_rounds = 1

[answer]
margin = 30
"""


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_the_answer_is_put_beside_the_anchors_rule_and_the_original(tmp_path: Path) -> None:
    folder = trained_bert(tmp_path / "checkpoint")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(folder))
    storage = f"sqlite:///{tmp_path}/s.db"
    ran = CliRunner().invoke(
        explorer_main, ["study", "run", str(spec), "--storage", storage, "--artifacts", str(tmp_path / "art")]
    )
    assert ran.exit_code == 0, ran.output[-3000:]
    out, record = tmp_path / "rule.json", tmp_path / "rule.md"
    args = ["--spec", str(spec), "--storage", storage, "--seeds", "1", "--rounds", "1"]
    pretrained_rule.main([*args, "--json", str(out), "--record", str(record)])
    doc = json.loads(out.read_text())
    layouts = doc["layouts"]
    assert list(layouts) == ["the answer", "the anchors' rule, same parameters", "the original"]
    answer, anchor, original = layouts.values()
    assert anchor["parameters"] <= answer["parameters"] <= original["parameters"]
    assert original["heads"] == [4, 4] and original["kv_heads"] == [4, 4]
    for layout in layouts.values():
        assert [run["seed"] for run in layout["runs"]] == [0] and len(layout["forward_ms"]) == 1
        assert 0 <= layout["runs"][0]["val"] <= 1 and layout["runs"][0]["test_bpb"] is None
    assert original["summary"]["val_diff"]["mean"] == 0 and original["summary"]["forward_ratio"] == 1
    text = record.read_text()
    assert text.startswith("# A pretrained study's answer beside the anchors' rule")
    assert f"- command: `python -m benchmarks.pretrained_rule {' '.join(args)}" in text
    assert doc["command"] in text and "| the anchors' rule, same parameters |" in text


def test_a_spec_that_is_not_a_checkpoint_study_is_refused(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        pretrained_rule.main(
            ["--spec", str(ROOT / "studies" / "quickstart.toml"), "--json", str(tmp_path / "x")]
        )
    assert exit_.value.code == 3
    assert "is not a [model] pretrained study" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
