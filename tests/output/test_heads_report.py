"""Figures of the head analysis, and `explorer heads` on a real trial end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from explorer.engine import probe
from explorer.engine.config import ModelConfig, TrainConfig
from explorer.engine.train import fit
from explorer.output import heads_plots
from explorer.output.plots import save_png
from tests.heads_models import structured_task

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained():
    task = structured_task()
    model, _ = fit(ModelConfig(d_model=16, heads=(4, 2)), task, TrainConfig(epochs=6, lr=5e-3), "cpu")
    X, y = task.val
    return model.eval(), X, y, probe.head_importance(model, X, y, "cpu")


def is_png(path: Path) -> bool:
    data_ = path.read_bytes()
    return data_[:8] == b"\x89PNG\r\n\x1a\n" and len(data_) > 2000


def test_figures_render(trained, tmp_path):
    model, X, y, imp = trained
    curve, layer_curves = probe.masking_curves(model, X, y, imp, "cpu")
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
