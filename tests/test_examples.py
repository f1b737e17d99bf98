"""The example outside the package (examples/vit: a ViT and a data loader written as a user would) through the
whole workflow, as a user runs it from the repository's root: `python -m explorer study run` with 2 workers (a
process of its own, once a module), then `report`, `export`, `heads`, `train` and `bench` on what it stored (in
this process, through click's runner: the same command line without a second start-up of torch)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from explorer.cli import main

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_thread")


def explorer(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def command(*args: str) -> Result:
    """``explorer *args`` in this process, from the repository's root (where the example's paths are relative
    to). A command sets torch's thread count (``--threads``, default 1): the module's tests run under
    ``one_thread``, which puts it back after them."""
    cwd = Path.cwd()
    os.chdir(REPO)
    try:
        return CliRunner().invoke(main, list(args), env={"HF_HUB_OFFLINE": "1"})
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def vit_study(tmp_path_factory) -> tuple[str, Path]:
    tmp = tmp_path_factory.mktemp("vit")
    url = f"sqlite:///{tmp / 'vit.db'}"
    done = explorer(
        "study",
        "run",
        "examples/vit/vit.toml",
        "--workers",
        "2",
        "--storage",
        url,
        "--artifacts",
        str(tmp / "artifacts"),
        # the example as written, with one re-timing round (a fresh process each) instead of two
        *("--set", "finalists.timing_rounds=1"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return url, tmp


@pytest.mark.slow
def test_the_example_vit_runs_reports_and_exports_with_parity(vit_study) -> None:
    url, tmp = vit_study
    report = command("report", "example-vit", "--storage", url, "--out", str(tmp / "report"))
    assert report.exit_code == 0, report.stderr[-3000:]
    text = (tmp / "report" / "report.md").read_text()
    assert "`examples/vit/model.py:build`" in text  # the report names the user's model
    assert "8 x 8 images (1 channel) cut into 2 x 2 patches: a 4 x 4 grid of 16 tokens" in text
    assert re.search(r"\*\*(Use|Not decided yet:) \d", text)  # the answer leads, decided or not
    out = tmp / "vit.onnx"
    export = command(
        "export",
        "example-vit",
        "--storage",
        url,
        "--artifacts",
        str(tmp / "artifacts"),
        "--format",
        "onnx",
        "--out",
        str(out),
        "--json",
    )
    assert export.exit_code == 0, export.stderr[-3000:]
    doc = json.loads(export.stdout)
    assert doc["max_abs_logit_diff"] <= 1e-4 and doc["test_examples"] == 135 and out.is_file()
    bench = command("bench", "model", str(out), "--json")  # the shipped file runs on ONNX Runtime
    assert bench.exit_code == 0, bench.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["state", "pt2", "config"])
def test_the_example_exports_in_every_format_and_retrains_from_its_config(vit_study, fmt: str) -> None:
    url, tmp = vit_study
    out = tmp / {"state": "vit.pt", "pt2": "vit.pt2", "config": "vit.json"}[fmt]
    done = command(
        "export",
        "example-vit",
        "--storage",
        url,
        "--artifacts",
        str(tmp / "artifacts"),
        "--format",
        fmt,
        "--out",
        str(out),
        "--json",
    )
    assert done.exit_code == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    if fmt != "config":
        assert doc["max_abs_logit_diff"] <= 1e-4  # loaded back (the state file rebuilds the user's ViT)
        return
    assert json.loads(out.read_text())["build"] == "examples/vit/model.py:build"
    again = command("train", "--config", str(out), "--json")  # the run config rebuilds the user's model
    assert again.exit_code == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["build"] == "examples/vit/model.py:build"


@pytest.mark.slow
def test_the_example_answer_as_a_hugging_face_config(vit_study) -> None:
    transformers = pytest.importorskip("transformers")
    url, tmp = vit_study
    done = command("export", "example-vit", "--storage", url, "--format", "hf", "--out", str(tmp / "hf"))
    assert done.exit_code == 0, done.stderr[-3000:]
    # says the weights stay
    assert "AutoConfig.from_pretrained" in done.stdout and "A config only" in done.stdout
    config = transformers.AutoConfig.from_pretrained(tmp / "hf")
    heads = json.loads((tmp / "hf" / "config.json").read_text())["explorer"]["heads"]
    assert config.model_type == "vit" and config.patch_size == 2 and config.image_size == 8
    if len(set(heads)) == 1:
        assert config.num_attention_heads == heads[0]
    else:
        assert config.num_query_heads == heads


@pytest.mark.slow
def test_the_heads_of_the_users_vit_are_analysed(vit_study) -> None:
    url, tmp = vit_study  # its attention is explorer.MultiHeadAttention: masking reaches it
    done = command(
        "heads",
        "example-vit",
        "--storage",
        url,
        "--artifacts",
        str(tmp / "artifacts"),
        "--out",
        str(tmp / "heads"),
        "--json",
    )
    assert done.exit_code == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert len(doc["importance"]) == 2 and [len(v) for v in doc["importance"]] == doc["heads"]
    assert (tmp / "heads" / "heads.md").is_file()


@pytest.mark.slow
def test_transformers_missing_is_one_line(vit_study, monkeypatch) -> None:
    url, tmp = vit_study
    monkeypatch.setitem(sys.modules, "transformers", None)
    hf = CliRunner().invoke(
        main, ["export", "example-vit", "--storage", url, "--format", "hf", "--out", str(tmp / "hf2")]
    )
    assert hf.exit_code == 5 and "pip install 'explorer[hf]'" in hf.stderr
    assert len(hf.stderr.strip().splitlines()) == 1 and not (tmp / "hf2").exists()


def test_python_dash_m_explorer_is_the_command() -> None:
    done = explorer("space", "--d-model", "64", "--min-dk", "16", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["heads"] == [1, 2, 4]
