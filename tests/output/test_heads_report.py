"""Figures of the head analysis, and `explorer heads` on a real trial end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.layout import ModelConfig, TrainConfig
from explorer.measure import _probe as probe, fit
from explorer.output import _heads_plots as heads_plots
from explorer.output._plots import save_png
from tests.heads_models import structured_task

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained():
    task = structured_task()
    model, _ = fit(
        ModelConfig(d_model=16, heads=(4, 2)), task, TrainConfig(epochs=6, lr=5e-3), torch.device("cpu")
    )
    X, y = task.val
    return model.eval(), X, y, probe.head_importance(model, X, y, torch.device("cpu"))


def is_png(path: Path) -> bool:
    data_ = path.read_bytes()
    return data_[:8] == b"\x89PNG\r\n\x1a\n" and len(data_) > 2000


def test_figures_render(trained, tmp_path):
    model, X, y, imp = trained
    curve, layer_curves = probe.masking_curves(model, X, y, imp, torch.device("cpu"))
    maps = [m.numpy() for m in model.attention_maps(X[:2])]
    images = np.random.default_rng(0).random((2, 8, 8))
    digit_maps = [np.full((2, 3, 16, 16), 1 / 16), np.full((2, 1, 16, 16), 1 / 16)]
    figures = {
        "importance": heads_plots.importance_figure(imp, [3, 2]),
        "masking": heads_plots.masking_figure(curve, layer_curves),
        "maps": heads_plots.attention_figure(maps),
        "digits": heads_plots.attention_figure(digit_maps, images, ["a", "b"]),
        "stats": heads_plots.attention_stats_figure(probe.attention_stats(model, X)),
    }
    for name, fig in figures.items():
        assert is_png(save_png(fig, tmp_path / f"{name}.png")), name


@pytest.mark.slow
def test_heads_of_a_real_trial_are_analysed_first_and_then_written(tmp_path):
    """The analysis (explorer.analysis) writes nothing; write_heads writes what it computed."""
    from explorer.analysis import analyse_heads
    from explorer.output import OutputFolder
    from explorer.output._heads_report import write_heads
    from explorer.storage import load_records
    from explorer.study import Study
    from tests.deploy_helpers import run_tiny_study

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_HEARTBEAT_INTERVAL", "1")
        url, _ = run_tiny_study(tmp_path)
    opened = Study.open("tiny", url)
    study, spec, url = opened.optuna_study, opened.spec, opened.url
    before = sorted(p.name for p in tmp_path.iterdir())
    analysis = analyse_heads(load_records(study), spec, url, "knee", torch.device("cpu"))
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written by the analysis
    report = analysis.report
    assert [len(v) for v in report.importance] == list(report.heads) == [len(v) for v in analysis.importance]
    assert len(analysis.example_maps) == len(report.heads) and analysis.example_labels[0].startswith("label ")
    written = write_heads(analysis, OutputFolder(tmp_path / "heads", False))
    names = sorted(p.name for p in written)
    assert names == sorted(
        [
            "heads.md",
            "heads.csv",
            *(f"{f}.png" for f in ("importance", "masking", "attention_maps", "attention_stats")),
        ]
    )
    assert all(is_png(p) for p in written if p.suffix == ".png")
    assert (tmp_path / "heads" / "heads.csv").read_text() == report.table.to_csv(index=False)


def test_analyse_trial_writes_the_heads_files_of_a_stored_trial(tmp_path):
    from explorer.analysis import HeadsReport
    from explorer.output import analyse_trial
    from tests.analysis.test_trial_heads import stored_trial

    records, spec, url, store = stored_trial(tmp_path)
    report, files = analyse_trial(
        records, spec, url, "0", torch.device("cpu"), tmp_path / "heads", store=store, n_examples=1
    )
    assert isinstance(report, HeadsReport) and report.trial == 0
    assert {p.name for p in files} >= {"heads.md", "heads.csv", "importance.png", "masking.png"}
    assert (tmp_path / "heads" / "heads.csv").read_text() == report.table.to_csv(index=False)
