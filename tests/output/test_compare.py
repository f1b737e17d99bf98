"""`explorer compare`: several studies' fronts in one table and one figure, labelled with device and runtime."""

from __future__ import annotations

import json

import optuna
import pytest
from click.testing import CliRunner
from optuna.trial import TrialState, create_trial

from explorer.answer import compare_fronts
from explorer.answer._compare_fronts import COMPARE_COLUMNS, study_setup
from explorer.cli import main
from explorer.errors import EXIT_BAD_INPUT, EXIT_NO_RESULT
from explorer.layout import ModelConfig
from explorer.measurements import LatencyResult
from explorer.output._compare_figure import compare_figure
from explorer.output._plots import save_png
from explorer.spec import spec_from_dict
from explorer.storage import TrialRecord, record_from_trial

optuna.logging.set_verbosity(optuna.logging.ERROR)

# (heads, accuracy, latency ms): 4 heads is dominated (slower and less accurate than 2 heads)
LAYOUTS = [((1, 1), 0.80, 1.0), ((2, 2), 0.90, 1.5), ((4, 4), 0.85, 2.0), ((8, 8), 0.93, 3.0)]


def record(number: int, heads, acc: float, ms: float, device: str, runtime: str) -> TrialRecord:
    lat = LatencyResult(
        ms, ms * 0.05, 8, 16, 1, device, "float32", 5, samples_ms=(ms * 0.98, ms, ms * 1.02), runtime=runtime
    )
    return TrialRecord(
        number=number,
        state=TrialState.COMPLETE,
        role="search",
        config=ModelConfig(d_model=16, heads=heads),
        lr=3e-3,
        seed=number,
        epochs_planned=2,
        history=(acc,),
        val_accuracy=acc,
        test_accuracy=acc,
        val_size=300,
        latency=lat,
        params=1000,
        device=device,
    )


def records(device: str, runtime: str, speed: float = 1.0) -> list[TrialRecord]:
    return [record(i, h, a, ms * speed, device, runtime) for i, (h, a, ms) in enumerate(LAYOUTS)]


def add_study(url: str, name: str, recs: list[TrialRecord]) -> None:
    """A stored study whose trials carry exactly what the objective writes (read back by record_from_trial)."""
    spec = spec_from_dict(
        {
            "name": name,
            "n_trials": max(1, len(recs)),
            "task": {"name": "digits"},
            "space": {"d_model": [16], "n_layers": [2], "heads": [1, 2, 4, 8]},
        }
    )
    study = optuna.create_study(study_name=name, storage=url, directions=["maximize", "minimize"])
    study.set_user_attr("spec", spec.stored())
    for r in recs:
        attrs = {
            **r.arch_attrs(),
            "val_accuracy": r.val_accuracy,
            "test_accuracy": r.test_accuracy,
            "history": list(r.history),
            "val_size": r.val_size,
            "latency": r.latency.to_dict(),
            "latency_ms": r.latency_ms,
            "params": r.params,
            "device": r.device,
        }
        study.add_trial(
            create_trial(state=TrialState.COMPLETE, values=[r.val_accuracy, r.latency_ms], user_attrs=attrs)
        )
        assert record_from_trial(study.trials[-1]).latency == r.latency


def test_fronts_are_labelled_with_device_and_runtime():
    df = compare_fronts(
        [("cpu", records("cpu (Xeon)", "eager")), ("ort", records("cpu (Xeon)", "onnxruntime", 0.5))]
    )
    assert list(df.columns) == COMPARE_COLUMNS
    for name, runtime in (("cpu", "eager"), ("ort", "onnxruntime")):
        rows = df[df["study"] == name]
        assert [tuple(h) for h in rows["heads"]] == [(1, 1), (2, 2), (8, 8)]  # (4, 4) is dominated
        assert set(rows["runtime"]) == {runtime} and set(rows["device"]) == {"cpu (Xeon)"}
        assert rows["label"].iloc[0] == f"{name} (cpu (Xeon), {runtime}, batch 8)"
        assert rows["knee"].sum() == 1
    ort = df[df["study"] == "ort"]["latency_ms"].to_numpy()
    cpu = df[df["study"] == "cpu"]["latency_ms"].to_numpy()
    assert ort == pytest.approx(cpu * 0.5, rel=0.05)  # each study keeps its own figures
    assert study_setup([]).runtime == "unknown"


def test_figure_draws_every_study(tmp_path):
    df = compare_fronts([("a", records("cpu", "eager")), ("b", records("cuda (H200)", "eager", 0.1))])
    fig = compare_figure(df)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("cuda (H200)" in t for t in labels) and any(t.startswith("a (cpu") for t in labels)
    assert save_png(fig, tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


@pytest.fixture
def storage(tmp_path):
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    add_study(url, "eager", records("cpu (Xeon)", "eager"))
    add_study(url, "onnx", records("cpu (Xeon)", "onnxruntime", 0.6))
    add_study(url, "empty", [])
    return url


def test_cli_writes_one_figure_and_one_table(storage, tmp_path):
    out = tmp_path / "cmp"
    result = CliRunner().invoke(
        main, ["compare", "eager", "onnx", "--storage", storage, "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["studies"] == ["eager", "onnx"] and len(doc["rows"]) == 6
    assert {r["runtime"] for r in doc["rows"]} == {"eager", "onnxruntime"}
    assert sorted(p.name for p in out.iterdir()) == [
        ".explorer-report",
        "compare.csv",
        "compare.md",
        "compare.png",
    ]
    assert "## onnx (cpu (Xeon), onnxruntime, batch 8)" in (out / "compare.md").read_text()
    text = CliRunner().invoke(main, ["compare", "eager", "onnx", "--storage", storage, "--out", str(out)])
    # each study's answer, as its report names it, then the search fronts (labelled as such)
    assert text.exit_code == 0 and "eager: provisional answer" in text.stdout
    assert "search-front architectures (one run each)" in text.stdout
    assert set(doc["answers"]) == {"eager", "onnx"} and doc["answers"]["eager"]["evidence"] == "search"


def test_bad_compare_inputs_are_one_line_and_write_nothing(storage, tmp_path):
    out = tmp_path / "cmp"
    (tmp_path / "a-file").write_text("")
    cases = [
        (["eager"], EXIT_BAD_INPUT, "at least two studies"),
        (["eager", "eager"], EXIT_BAD_INPUT, "named twice"),
        (["eager", "nosuch"], EXIT_BAD_INPUT, "no study 'nosuch'"),
        (["eager", "empty"], EXIT_NO_RESULT, "no completed search trial"),
        (["eager", "onnx", "--out", str(tmp_path / "a-file")], EXIT_BAD_INPUT, "is a file"),
    ]
    for args, code, message in cases:
        full = [*args, "--storage", storage] + ([] if "--out" in args else ["--out", str(out)])
        result = CliRunner().invoke(main, ["compare", *full])
        assert result.exit_code == code, (args, result.output)
        assert message in result.stderr and result.stderr.count("\n") == 1 and result.stdout == ""
    assert not out.exists()


def test_write_compare_writes_the_table_its_markdown_and_the_figure(tmp_path):
    from explorer.answer import csv_ready
    from explorer.output import write_compare

    df = compare_fronts([("a", records("cpu", "eager")), ("b", records("cpu", "eager", 0.5))])
    files = write_compare(df, tmp_path / "out")
    assert sorted(p.name for p in files) == ["compare.csv", "compare.md", "compare.png"]
    assert (tmp_path / "out" / "compare.csv").read_text() == csv_ready(df).to_csv(index=False)
    assert (tmp_path / "out" / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## a" in (tmp_path / "out" / "compare.md").read_text()
