"""The report's figures: the numbers they draw (explorer.output._plot_data) tested as tables, and each figure
rendered."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from explorer.measurements import QUALITY_METRICS
from explorer.output import _plots as plots
from explorer.output._plot_data import effect_data, pareto_data, quality


def table() -> pd.DataFrame:
    """Four searched architectures: one over budget, one without a schedule family the figures order."""
    return pd.DataFrame(
        {
            "number": [0, 1, 2, 3],
            "d_model": [32, 32, 64, 64],
            "heads": [(1, 1), (4, 2), (8, 8), (2, 4)],
            "kv_heads": [(1, 1), (4, 2), (2, 2), (2, 4)],
            "heads_max": [1, 4, 8, 4],
            "dk_min": [32, 8, 8, 16],
            "family": ["uniform", "decreasing", "uniform", "increasing"],
            "attention_kind": ["multi-head", "multi-head", "grouped-query", "multi-head"],
            "val_accuracy": [0.80, 0.90, 0.95, 0.85],
            "val_low": [0.75, 0.88, 0.93, 0.80],
            "val_high": [0.84, 0.92, 0.97, 0.89],
            "quality": [0.80, 0.90, 0.95, 0.85],
            "latency_ms": [1.0, 2.0, 50.0, 3.0],
            "latency_low": [0.9, 1.8, 45.0, 2.7],
            "latency_high": [1.1, 2.2, 55.0, 3.3],
            "feasible": [True, True, False, None],
        }
    )


def test_pareto_data_splits_the_cloud_and_puts_the_finalists_in_percent():
    t = table()
    front = t.iloc[[1, 0]]  # given slowest first: drawn fastest first
    data = pareto_data(t, front, knee=t.iloc[1], finalists=t.iloc[[2]])
    assert data.points["acc"].tolist() == pytest.approx([80.0, 90.0, 95.0, 85.0])
    assert data.infeasible["number"].tolist() == [2]  # unknown feasibility counts as feasible
    assert data.levels == [1, 4, 8] and data.families == ["uniform", "increasing", "decreasing"]
    assert data.front["number"].tolist() == [0, 1] and data.front["acc"].tolist() == pytest.approx([80, 90])
    f = data.finalists.iloc[0]
    assert (f["x"], f["x_low"], f["x_high"]) == (50.0, 45.0, 55.0)
    assert (f["y"], f["y_low"], f["y_high"]) == pytest.approx((95.0, 93.0, 97.0))
    assert f["label"] == "8,8 kv 2,2"  # kv heads named where they differ from the heads
    assert data.knee.y == pytest.approx(90.0)
    assert data.knee.text == "recommended: heads 4,2 (d_model 32)\n90.00% at 2 ms"
    assert data.log_x  # 1 ms to 50 ms
    assert not pareto_data(t.iloc[[0, 1]], front).log_x and pareto_data(t, front.iloc[:0]).finalists is None


def test_quality_is_bits_per_byte_as_stored_for_a_language_model():
    metric = QUALITY_METRICS["language_model"]
    t = table().assign(quality_low=lambda d: d["quality"] - 0.1)
    assert quality(t, metric).tolist() == t["quality"].tolist()
    assert quality(t, metric, "val_low").tolist() == t["quality_low"].tolist()
    assert quality(t, None).tolist() == pytest.approx([80.0, 90.0, 95.0, 85.0])


def test_effect_data_orders_levels_and_adds_decoding_where_measured():
    t = table()
    data = effect_data(t, "family", plots.FAMILY_ORDER)
    assert data.levels == ["uniform", "increasing", "decreasing"]
    assert data.widths == [32, 64] and data.columns == ["acc", "latency_ms"]
    decoded = effect_data(t.assign(decode_ms=[0.1, np.nan, 0.2, 0.3]), "heads_max")
    assert decoded.levels == [1, 4, 8] and decoded.columns == ["acc", "latency_ms", "decode_ms"]
    unordered = effect_data(t, "attention_kind", ("multi-query", "multi-head"))
    assert unordered.levels == ["multi-head", "grouped-query"]  # listed first, then the rest sorted
    assert effect_data(t.assign(dk_min=np.nan), "dk_min").points.empty


def test_every_figure_renders_and_an_empty_table_says_so(tmp_path):
    t = table()
    figures = {
        "pareto": plots.pareto_figure(t, t.iloc[[0, 1]], t.iloc[1], t.iloc[[2]], 8),
        "heads": plots.heads_figure(t),
        "dk": plots.dk_figure(t, [16.0]),
        "family": plots.family_figure(t),
        "kv": plots.kv_figure(t),
        "heatmap": plots.heads_heatmap(t.iloc[[0, 1]]),
        "empty": plots.pareto_figure(t.iloc[:0], t.iloc[:0]),
    }
    for name, fig in figures.items():
        assert plots.save_png(fig, tmp_path / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name
    legend = [h.get_label() for h in figures["pareto"].axes[0].get_legend().legend_handles]
    assert legend[-3:] == ["search front (2)", "finalists: mean over seeds,\n95% intervals", "recommended"]
    assert "over budget (1)" in legend
    assert figures["empty"].axes[0].texts[0].get_text() == "no architecture finished its search budget"


def test_the_margins_label_and_the_curves_legend_cover_no_layout():
    """The trade-off figure's "minus the margin" beside no layout's label, even for a layout at the fastest end
    just below the margin (where a label at the left edge of the axes fell on it); the learning curves' legend
    outside the axes the curves fill."""
    import dataclasses

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from explorer.answer import answer
    from explorer.output._evidence_plots import curves_figure, evidence_figure
    from explorer.spec import spec_from_dict
    from explorer.storage import load_records
    from tests.fixtures import make_study

    study = make_study(30, finalists=3)
    records = load_records(study)
    ans = answer(records, spec_from_dict(study.user_attrs["spec"]))
    rival = next(c for c in ans.verdicts if c.arch.key != ans.best.key)
    low = -ans.margin * 1.02  # just below the margin, at the fastest end
    near = dataclasses.replace(
        rival,
        latency_ratio=0.5 * min(c.latency_ratio for c in ans.verdicts),
        versus_best=dataclasses.replace(rival.versus_best, diff=low, low=low - 0.01, high=low + 0.01),
    )
    moved = dataclasses.replace(ans, verdicts=tuple(near if c is rival else c for c in ans.verdicts))
    fig = evidence_figure(moved, 64)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    ax = fig.axes[0]
    label = next(t for t in ax.texts if "margin" in t.get_text())
    names = [t for t in ax.texts if t is not label]
    assert len(names) == len(ans.verdicts)
    box = label.get_window_extent(renderer)
    for name in names:
        assert not box.overlaps(name.get_window_extent(renderer)), name.get_text()

    fig = curves_figure(ans, records)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    ax = fig.axes[0]
    assert ax.get_legend().get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
