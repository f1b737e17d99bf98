"""benchmarks/pretrained_export.py end to end on a tiny study of a trained Llama: the answer exported, loaded by
from_pretrained in a fresh process and scored there as explorer scores it (the same bits per byte as the run it
exported), written as JSON and as a record; and the refusal of a spec that is not a checkpoint study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from benchmarks import pretrained_export  # noqa: E402
from benchmarks.common import ROOT  # noqa: E402
from tests.pretrained import tiny_checkpoints  # noqa: E402
from tests.study.test_pretrained_studies import run  # noqa: E402
from tests.test_benchmark_pretrained_rule import spec_text, trained_bert  # noqa: E402


@pytest.mark.slow
@pytest.mark.usefixtures("one_thread")
def test_the_export_loads_in_a_fresh_process_with_the_figures_the_study_measured(tmp_path: Path) -> None:
    folder = trained_bert(tmp_path / "checkpoint")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(folder))
    storage, art = f"sqlite:///{tmp_path}/s.db", str(tmp_path / "art")
    run("study", "run", str(spec), "--storage", storage, "--artifacts", art)
    out, record = tmp_path / "export.json", tmp_path / "export.md"
    args = ["--spec", str(spec), "--storage", storage, "--artifacts", art]
    pretrained_export.main([*args, "--json", str(out), "--record", str(record)])
    doc = json.loads(out.read_text())
    assert doc["metric"] == "accuracy" and doc["loaded"]["class"].startswith("Shrunk")
    assert doc["loaded"]["heads"] == doc["answer"]["heads"]
    # scored in another process by plain torch, the export reads what the study recorded of the run it wrote
    for split in ("val", "test"):
        assert doc["loaded"][split] == pytest.approx(doc["exported_run"][split], rel=1e-5)
    low, high = doc["answer"]["quality_low"], doc["answer"]["quality_high"]
    assert doc["within_interval"] == (low <= doc["loaded"]["val"] <= high)
    assert doc["export_check"]["max_abs_logit_diff"] <= doc["export_check"]["tolerance"]
    text = record.read_text()
    assert text.startswith("# A pretrained study's export, loaded back")
    assert doc["command"] in text and "| the export loaded in a fresh process" in text


@pytest.mark.usefixtures("one_thread")
def test_the_fresh_process_scores_a_language_model_as_explorer_does(tmp_path: Path) -> None:
    import torch
    from transformers import LlamaForCausalLM

    from explorer.data import load_task
    from explorer.measure._train import evaluate_split

    folder = tiny_checkpoints.llama(tmp_path / "checkpoint")
    task = {"name": "text", "options": tiny_checkpoints.TEXT}
    got = pretrained_export._load_and_score(folder, "AutoModelForCausalLM", task, tmp_path / "modules")
    model = LlamaForCausalLM.from_pretrained(folder).eval()

    class Logits(torch.nn.Module):  # explorer's batch in, logits out, as explorer's HFModel reads a Llama
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return model(input_ids=x, use_cache=False).logits

    split = load_task("text", **tiny_checkpoints.TEXT)
    for name in ("val", "test"):
        x, y = getattr(split, name)
        assert got[name] == pytest.approx(evaluate_split(Logits(), x, y, torch.device("cpu")).bits, rel=1e-5)
        assert got[f"{name}_examples"] == len(x)
    assert got["heads"] == [4, 4] and got["class"] == "LlamaForCausalLM"


def test_a_spec_that_is_not_a_checkpoint_study_is_refused(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        pretrained_export.main(
            ["--spec", str(ROOT / "studies" / "quickstart.toml"), "--json", str(tmp_path / "x")]
        )
    assert exit_.value.code == 3
    assert "is not a [model] pretrained study" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
