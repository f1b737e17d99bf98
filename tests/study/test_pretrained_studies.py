"""Tiny studies of a trained checkpoint's heads ([model] pretrained, a Llama and a BERT saved as a transformers user
saves them): search, finalists with the original among them, the report, and `export --format hf`, whose folder
`from_pretrained(..., trust_remote_code=True)` loads in a fresh process with the per-layer heads the study chose and
the test accuracy the study recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from explorer.api import load, trials
from explorer.cli import main
from explorer.hooks import checkpoint_digest
from explorer.pretrained import PretrainedBuilder
from explorer.spec import load_spec
from explorer.study import CODE_ATTR, model_builder
from tests.pretrained import tiny_checkpoints

pytest.importorskip("transformers")

STUDIES = {
    "bert": ("relations", tiny_checkpoints.RELATIONS, "", tiny_checkpoints.bert),
    "llama": ("text", tiny_checkpoints.TEXT, "\n[decode]\ncontext = 16\n", tiny_checkpoints.llama),
}
# the test split's accuracy of the exported folder, computed in a fresh process as a transformers user would
LOAD = """
import json, sys, torch, transformers
from explorer.data import load_task
out, task, options, causal = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "llama"
config = transformers.AutoConfig.from_pretrained(out, trust_remote_code=True)
loader = transformers.AutoModelForCausalLM if causal else transformers.AutoModelForSequenceClassification
model = loader.from_pretrained(out, trust_remote_code=True).eval()
x, y = load_task(task, **options).test
with torch.inference_mode():
    logits = model(input_ids=x, **({"use_cache": False} if causal else {})).logits
print(json.dumps({"accuracy": (logits.argmax(-1) == y).float().mean().item(),
                  "heads": config.num_query_heads, "kv": config.num_kv_heads}))
"""


def spec_text(family: str, folder: Path) -> str:
    task, options, extra, _ = STUDIES[family]
    inline = ", ".join(f"{k} = {v}" for k, v in options.items())
    return f"""name = "pt-{family}"
n_trials = 2
bench = false

[task]
name = "{task}"
options = {{ {inline} }}
epochs = 1
batch_size = 32

[model]
pretrained = "{folder}"

[space]
lr = 1e-3
heads = [2, 4]
families = ["uniform"]
{extra}
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
timing_rounds = 1
"""


def run(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.stderr[-3000:]
    return result


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bert", "llama"])
def test_a_checkpoint_study_weighs_the_original_and_exports_the_cut_it_trained(
    tmp_path: Path, family
) -> None:
    task, options, _, save = STUDIES[family]
    folder = save(tmp_path / "checkpoint")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(family, folder))
    where = ["--storage", f"sqlite:///{tmp_path}/s.db"]
    art = ["--artifacts", str(tmp_path / "art")]
    run("study", "run", str(spec), *where, *art)
    builder = model_builder(load_spec(spec))
    assert isinstance(builder, PretrainedBuilder) and builder.path == str(folder)
    table = trials(f"pt-{family}", f"sqlite:///{tmp_path}/s.db")
    finalists = table[table["role"] == "finalist"].sort_values("number").to_dict("records")
    original = [t for t in finalists if t["label"] == "original"]
    assert original and original[0]["heads"] == (4, 4)  # the original model is always weighed
    run("report", f"pt-{family}", *where, "--out", str(tmp_path / "report"))
    report = (tmp_path / "report" / "report.md").read_text()
    assert "original" in report and "### The checkpoint's heads" in report
    # a cut has at most the checkpoint's key/value heads: multi-head attention at 4 heads is no layout it weighs
    assert "Against multi-head attention" not in report
    cut = next(t for t in finalists if t["label"] != "original" and t["state"] == "COMPLETE")
    exported = json.loads(
        run(
            "export",
            f"pt-{family}",
            *where,
            *art,
            "--trial",
            str(cut["number"]),
            "--format",
            "hf",
            "--out",
            str(tmp_path / "hf"),
            "--json",
        ).stdout
    )
    assert exported["weights"] and exported["max_abs_logit_diff"] <= 1e-4
    assert exported["trust_remote_code"] and exported["loads_with"].startswith("AutoModelFor")
    loaded = subprocess.run(
        [sys.executable, "-c", LOAD, str(tmp_path / "hf"), task, json.dumps(options), family],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    found = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert found["heads"] == list(cut["heads"])
    assert found["accuracy"] == pytest.approx(cut["test_accuracy"], abs=1e-6)  # what the study measured


def test_a_checkpoint_study_refuses_an_export_a_run_config_would_rebuild(tmp_path: Path) -> None:
    folder = tiny_checkpoints.bert(tmp_path / "checkpoint")
    spec = tmp_path / "spec.toml"
    spec.write_text(
        spec_text("bert", folder)
        .replace("n_trials = 2", "n_trials = 1")
        .replace("[finalists]", "[finalists]\nenabled = false")
    )
    where = ["--storage", f"sqlite:///{tmp_path}/s.db"]
    run("study", "run", str(spec), *where, "--artifacts", str(tmp_path / "art"))
    for fmt, out in (("config", "r.json"), ("state", "w.pt")):
        result = CliRunner().invoke(
            main, ["export", "pt-bert", *where, "--trial", "0", "--format", fmt, "--out", str(tmp_path / out)]
        )
        assert result.exit_code == 3, result.stderr
        assert f"--format {fmt} cannot be loaded back" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / out).exists()


def test_a_checkpoint_changed_since_the_study_is_refused_on_resume_and_named_in_the_report(
    tmp_path: Path,
) -> None:
    folder = tiny_checkpoints.bert(tmp_path / "checkpoint")
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text("bert", folder).replace("[finalists]", "[finalists]\nenabled = false"))
    where = ["--storage", f"sqlite:///{tmp_path}/s.db"]
    run("study", "run", str(spec), *where, "--artifacts", str(tmp_path / "art"), "--set", "n_trials=1")
    recorded = load("pt-bert", f"sqlite:///{tmp_path}/s.db").study.user_attrs[CODE_ATTR]["checkpoint"]
    assert recorded["sha256"] == checkpoint_digest(folder)
    config = folder / "config.json"
    config.write_text(config.read_text().replace('"hidden_act": "gelu"', '"hidden_act": "relu"'))
    resumed = CliRunner().invoke(main, ["study", "run", str(spec), *where, "--set", "n_trials=2"])
    assert resumed.exit_code == 3 and "changed since the study was created" in resumed.stderr
    run("report", "pt-bert", *where, "--out", str(tmp_path / "report"))
    assert "has changed since the study cut it" in (tmp_path / "report" / "report.md").read_text()
