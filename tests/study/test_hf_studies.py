"""Tiny studies of transformers architectures (bert, vit, llama) built from their configs: search, finalists,
report and `export --format hf`, whose folder `from_pretrained` loads with the same logits on the test split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from explorer.cli import main
from explorer.data import DATA_SEED, load_task
from explorer.layout import HF_FAMILIES
from explorer.model import hf_inputs, load_exported

transformers = pytest.importorskip("transformers")

COMMON = """
[latency]
device = "cpu"
batch_size = 8
min_run_time = 0.02

[early_stopping]
enabled = false
"""
STUDIES = {
    "bert": ("relations", "{ n_samples = 300, seq_len = 10, vocab_size = 10 }", "[1, 2]", "", "folds = 2"),
    "vit": ("digits", "{ patch = 4 }", "[1, 2]", "", "folds = 2"),
    "llama": (
        "text",
        "{ max_bytes = 12000, context = 16 }",
        "[2]",
        "\n[decode]\ncontext = 32\n",
        "folds = 1",
    ),
}


def spec_text(family: str) -> str:
    task, options, heads, extra, folds = STUDIES[family]
    return f"""name = "hf-{family}"
n_trials = 2
bench = false

[task]
name = "{task}"
options = {options}
epochs = 1
batch_size = 32

[model]
hf = "{family}"
config = {{ hidden_size = 8, num_hidden_layers = 1, intermediate_size = 16 }}

[space]
heads = {heads}
{extra}{COMMON}
[finalists]
top = 1
references = false
{folds}
seeds = 1
epochs = 1
timing_rounds = 1
"""


def run(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.stderr[-3000:]
    return result


@pytest.mark.slow
@pytest.mark.parametrize("family", ["bert", "vit", "llama"])
def test_a_transformers_study_runs_reports_and_exports_a_model_from_pretrained_loads(tmp_path: Path, family):
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text(family))
    where = ["--storage", f"sqlite:///{tmp_path}/s.db"]
    art = ["--artifacts", str(tmp_path / "art")]
    run("study", "run", str(spec), *where, *art)
    run("report", f"hf-{family}", *where, "--out", str(tmp_path / "report"))
    report = (tmp_path / "report" / "report.md").read_text()
    cls = HF_FAMILIES[family].model_class(family == "llama")
    assert f"transformers' `{cls}`, built from a {HF_FAMILIES[family].config_class}" in report
    if family == "llama":  # decoding and the key/value cache, as for explorer's own decoder
        assert "decoding (ms/token)" in report and "kv cache" in report
    done = run(
        "export",
        f"hf-{family}",
        *where,
        *art,
        "--trial",
        "0",
        "--format",
        "hf",
        "--out",
        str(tmp_path / "hf"),
        "--json",
    )
    doc = json.loads(done.stdout)
    assert doc["weights"] and doc["max_abs_logit_diff"] <= 1e-4
    assert {"config.json", "model.safetensors"} <= {p.name for p in (tmp_path / "hf").iterdir()}
    # what a transformers user does with the folder: load it and run the test split
    loader = getattr(transformers, doc["loads_with"])
    model = loader.from_pretrained(tmp_path / "hf").eval()
    assert (
        type(model).__name__ == cls and model.config.explorer["run_config"]["model"]["heads"] == doc["heads"]
    )
    # the folder says what rebuilds the test split its logits were checked on
    split = model.config.explorer["test_split"]
    assert (split["task"], split["options"], split["data_seed"]) == (
        STUDIES[family][0],
        _options(family),
        DATA_SEED,
    )
    task = load_task(split["task"], seed=split["data_seed"], **split["options"])
    assert len(task.test[0]) == doc["test_examples"]
    extra = {"use_cache": False} if family == "llama" else {}
    with torch.inference_mode():
        logits = model(**hf_inputs(task.test[0], task.spec, HF_FAMILIES[family]), **extra).logits
    assert logits.shape[0] == len(task.test[0]) and torch.isfinite(logits).all()
    # the same trial as a state file: loaded back into the transformers class its run config names
    state = json.loads(
        run(
            "export",
            f"hf-{family}",
            *where,
            *art,
            "--trial",
            "0",
            "--format",
            "state",
            "--out",
            str(tmp_path / "w.pt"),
            "--json",
        ).stdout
    )
    assert state["max_abs_logit_diff"] <= 1e-4 and load_exported(tmp_path / "w.pt").format == "state"
    if family == "bert":  # the trial's run config rebuilds the same transformers class in `explorer train`
        heads = CliRunner().invoke(
            main, ["heads", f"hf-{family}", *where, "--trial", "0", "--out", str(tmp_path / "heads")]
        )
        assert heads.exit_code == 3 and len(heads.stderr.strip().splitlines()) == 1
        assert "'hf:bert'" in heads.stderr and "cannot mask" in heads.stderr
        run("export", f"hf-{family}", *where, "--trial", "0", "--out", str(tmp_path / "run.json"))
        again = json.loads(run("train", "--config", str(tmp_path / "run.json"), "--json").stdout)
        assert again["build"] == "hf:bert" and again["heads"] == doc["heads"]


def _options(family: str) -> dict:
    return {
        "bert": {"n_samples": 300, "seq_len": 10, "vocab_size": 10},
        "vit": {"patch": 4},
        "llama": {"max_bytes": 12000, "context": 16},
    }[family]


@pytest.mark.parametrize(
    ("family", "language_model"),
    [
        ("bert", False),
        ("gpt2", False),
        ("gpt2", True),
        ("llama", False),
        ("vit", False),
        ("mistral", True),
        ("qwen2", False),
    ],
)
def test_every_family_exports_a_folder_that_loads_with_the_same_logits(
    tmp_path: Path, family, language_model
):
    from explorer.data import Task
    from explorer.layout import InputSpec, ModelConfig
    from explorer.model import HFBuilder
    from explorer.output._hf_export import write_hf_model

    if family == "vit":
        spec = InputSpec(kind="features", seq_len=4, n_classes=3, n_features=12, image=(4, 4, 3), patch=2)
        X = torch.randn(6, 4, 12)
    else:
        kind = "language_model" if language_model else "classification"
        spec = InputSpec(
            kind="tokens", seq_len=8, n_classes=11 if language_model else 3, vocab_size=11, task_kind=kind
        )
        X = torch.randint(11, (6, 8))
    y = torch.randint(3, (6,)) if not language_model else torch.randint(11, (6, 8))
    task = Task("t", spec, (X, y), (X, y), (X, y))
    torch.manual_seed(0)
    model = HFBuilder.of(family, {}).build(ModelConfig(d_model=16, heads=(2, 2)), spec).eval()
    path, diff, agreement, loader = write_hf_model(model, task, tmp_path / "out", {"trial": 1}, 1e-4)
    assert diff <= 1e-4 and agreement == 1.0 and (path / "model.safetensors").is_file()
    assert loader == HF_FAMILIES[family].auto_class(language_model)
    loaded = getattr(transformers, loader).from_pretrained(path)
    assert loaded.config.explorer == {"trial": 1} and loaded.config.num_attention_heads == 2


def test_an_export_that_does_not_match_writes_nothing(tmp_path: Path) -> None:
    from explorer.data import Task
    from explorer.errors import ExportMismatchError
    from explorer.layout import InputSpec, ModelConfig
    from explorer.model import HFBuilder
    from explorer.output._hf_export import write_hf_model

    spec = InputSpec(kind="tokens", seq_len=8, n_classes=3, vocab_size=11)
    X, y = torch.randint(11, (4, 8)), torch.randint(3, (4,))
    model = HFBuilder.of("bert", {}).build(ModelConfig(d_model=16, heads=(2,)), spec).eval()
    with pytest.raises(ExportMismatchError, match="nothing was written"):
        write_hf_model(model, Task("t", spec, (X, y), (X, y), (X, y)), tmp_path / "out", {}, -1.0)
    assert list(tmp_path.iterdir()) == []  # no folder, no staging left behind
