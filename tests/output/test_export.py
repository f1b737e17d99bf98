"""`explorer export --format` and `explorer bench model`: trained weights out of a real (tiny) study, checked
against PyTorch on the test split, timed back, and every bad input refused in one line with nothing written."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import stat
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from explorer import api
from explorer.cli import main
from explorer.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, DataError
from explorer.measure import bench_model, load_run_config
from explorer.model import load_exported
from explorer.model._export_files import check_pt2
from explorer.output._export import PARITY_TOLERANCE
from explorer.study import Study, artifact_store
from tests.deploy_helpers import run_tiny_study

has_onnx = all(importlib.util.find_spec(p) for p in ("onnx", "onnxruntime", "onnxscript"))


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A finished 2-trial digits study whose weights are in the artifact store; (url, folder)."""
    folder = tmp_path_factory.mktemp("export-study")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_HEARTBEAT_INTERVAL", "1")
        url, summary = run_tiny_study(folder)
    assert summary.complete
    return url, folder


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def listing(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_state_export_carries_the_weights_config_and_the_study_figure(study, tmp_path):
    url, _ = study
    out = tmp_path / "knee.pt"
    result = cli("export", "tiny", "--storage", url, "--format", "state", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (
        doc["max_abs_logit_diff"] == 0.0 and doc["test_examples"] > 100 and doc["prediction_agreement"] == 1.0
    )
    exported = load_exported(out)
    opened = Study.open("tiny", url, write=True)
    stored = artifact_store(opened).load_state("tiny", doc["trial"])
    model = exported.make_runner(torch.zeros(1, 16, 4), torch.device("cpu"), 1)  # builds without error
    assert model.runtime == "eager"
    assert exported.meta["run_config"]["model"]["heads"] == doc["heads"]
    assert exported.meta["run_config"]["source"]["trial"] == doc["trial"]
    lat = exported.meta["study_latency"]
    assert (
        lat["low"] <= lat["median_ms"] <= lat["high"] and lat["batch_size"] == 8 and lat["runtime"] == "eager"
    )
    raw = torch.load(out, weights_only=True)
    assert all(torch.equal(raw["state_dict"][k], v) for k, v in stored.items())  # the study's own weights

    bench = cli("bench", "model", str(out), "--min-run-time", "0.05", "--json")
    assert bench.exit_code == 0, bench.output
    b = json.loads(bench.stdout)
    assert b["runtime"] == "eager" and b["latency"]["batch_size"] == 8 and b["latency"]["threads"] == 1
    assert b["same_setup"] is True and isinstance(b["within_spread"], bool)
    assert b["within_spread"] == (lat["low"] <= b["latency_ms"] <= lat["high"])
    assert b["ratio_to_study"] == pytest.approx(b["latency_ms"] / lat["median_ms"])


def test_config_export_is_the_run_config(study, tmp_path):
    url, _ = study
    out = tmp_path / "knee.json"
    result = api.export("tiny", out, "knee", url)
    run = load_run_config(out)
    assert result.format == "config" and result.max_abs_diff is None
    assert run.model.heads == result.record.heads and run.train.seed == result.record.seed


def test_evicted_weights_are_retrained_exactly(study, tmp_path):
    url, _ = study
    opened = Study.open("tiny", url, write=True)
    store = artifact_store(opened)
    before = store.load_state("tiny", 1)
    assert store.prune("tiny", keep=set()) == [0, 1]
    result = api.export("tiny", tmp_path / "t1.pt", "1", url, "state")
    assert store.has("tiny", 1)  # retrained, then kept again
    after = torch.load(tmp_path / "t1.pt", weights_only=True)["state_dict"]
    assert result.max_abs_diff == 0.0
    assert all(torch.allclose(after[k], v, atol=1e-6) for k, v in before.items())


def test_bad_export_inputs_are_one_line_and_write_nothing(study, tmp_path, monkeypatch):
    url, folder = study
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-dir").mkdir()
    cases = [
        (["tiny", "--format", "tflite", "--out", str(tmp_path / "m")], 2, "tflite"),
        (["tiny", "--format", "state", "--out", str(tmp_path / "a-dir")], EXIT_BAD_INPUT, "is a folder"),
        (
            ["tiny", "--format", "state", "--out", str(tmp_path / "a-file" / "m.pt")],
            EXIT_BAD_INPUT,
            "not a writable folder",
        ),
        (
            ["nosuch", "--format", "state", "--out", str(tmp_path / "m.pt")],
            EXIT_BAD_INPUT,
            "no study 'nosuch'",
        ),
        (
            ["tiny", "--trial", "77", "--format", "state", "--out", str(tmp_path / "m.pt")],
            EXIT_BAD_INPUT,
            "no trial tiny#77",
        ),
    ]
    before_study, before_tmp = listing(folder), listing(tmp_path)
    for args, code, message in cases:
        result = cli("export", *args[:1], "--storage", url, *args[1:])
        assert result.exit_code == code, (args, result.output)
        assert message in result.stderr and result.stdout == ""
        if code != 2:
            assert result.stderr.count("\n") == 1  # one line
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnxscript" else real(name, *a)
    )
    result = cli("export", "tiny", "--storage", url, "--format", "onnx", "--out", str(tmp_path / "m.onnx"))
    assert result.exit_code == EXIT_ENVIRONMENT and "explorer[onnx]" in result.stderr
    assert listing(folder) == before_study and listing(tmp_path) == before_tmp  # nothing written anywhere


def test_bench_model_refuses_files_it_cannot_trust(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("ran code",))

    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"state_dict": Evil()}))
    torch.save({"state_dict": {"w": torch.zeros(2)}}, tmp_path / "plain.pt")  # tensors, but not from export
    (tmp_path / "model.h5").write_text("x")
    cases = [
        (tmp_path / "missing.onnx", "no model file"),
        (tmp_path / "evil.pt", "not a plain tensor file"),
        (tmp_path / "plain.pt", "not written by `explorer export`"),
        (tmp_path / "model.h5", "cannot tell the format"),
    ]
    for path, message in cases:
        result = cli("bench", "model", str(path))
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert message in result.stderr and result.stderr.count("\n") == 1 and "ran code" not in result.output


@pytest.mark.slow
def test_pt2_export_loads_only_plain_archives(study, tmp_path):
    url, _ = study
    out = tmp_path / "knee.pt2"
    result = api.export("tiny", out, "knee", url, "pt2")
    assert result.max_abs_diff is not None and result.max_abs_diff <= 1e-6
    timed = bench_model(out, min_run_time=0.05)
    assert timed.latency.runtime == "torch.export" and timed.same_setup is True
    # The same archive with one weight marked as pickled: torch.export.load would unpickle it; we refuse.
    tampered = tmp_path / "tampered.pt2"
    with zipfile.ZipFile(out) as src, zipfile.ZipFile(tampered, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("_weights_config.json"):
                doc = json.loads(data)
                first = next(iter(doc["config"].values()))
                first["use_pickle"] = True
                data = json.dumps(doc).encode()
            dst.writestr(item, data)
    with pytest.raises(DataError, match="pickled objects"):
        check_pt2(tampered)
    check_pt2(out)  # the real one passes


@pytest.mark.slow
@pytest.mark.skipif(not has_onnx, reason="needs the onnx extra")
def test_onnx_export_matches_pytorch_on_the_test_split(study, tmp_path):
    url, _ = study
    out = tmp_path / "knee.onnx"
    result = cli("export", "tiny", "--storage", url, "--format", "onnx", "--out", str(out), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["max_abs_logit_diff"] <= PARITY_TOLERANCE and doc["prediction_agreement"] == 1.0
    assert doc["tolerance"] == PARITY_TOLERANCE and out.is_file()
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~_umask()  # as the user's umask makes a file
    exported = load_exported(out)
    assert exported.format == "onnx" and exported.meta["run_config"]["source"]["trial"] == doc["trial"]
    timed = bench_model(out, batch_size=3, min_run_time=0.05)
    assert (
        timed.latency.runtime == "onnxruntime" and timed.latency.batch_size == 3 and timed.same_setup is False
    )


def test_export_trial_writes_a_numbered_trials_weights_that_match_pytorch(study, tmp_path):
    from explorer.output import export_trial
    from explorer.storage import load_records

    url, _ = study
    opened = Study.open("tiny", url)
    stored, spec, url = opened.optuna_study, opened.spec, opened.url
    records = load_records(stored)
    store = artifact_store(Study.open("tiny", url, write=True))
    result = export_trial(records, spec, "1", tmp_path / "one.pt", fmt="state", store=store, storage=url)
    assert result.record.number == 1 and result.path == tmp_path / "one.pt" and result.format == "state"
    assert result.max_abs_diff == 0.0 and result.agreement == 1.0 and result.examples > 100
    assert load_exported(result.path).meta["run_config"]["source"]["trial"] == 1
