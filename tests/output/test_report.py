"""write_report end to end on synthetic studies: files, images, escaping, partial studies, failures."""

from __future__ import annotations

import re
import struct

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState, create_trial

from explorer.errors import ConfigError, NoCompletedTrialsError
from explorer.insight import analysis as an
from explorer.insight import rules
from explorer.output import plots
from explorer.output.report import write_report
from tests.fixtures import make_study

BENCH = [
    {"impl": "serial", "median_ms": 12.4, "iqr_ms": 0.3},
    {"impl": "merged", "median_ms": 3.1, "iqr_ms": 0.1},
    {"impl": "fused", "median_ms": 2.5, "iqr_ms": 0.1},
]
EVIL = "<script>alert(1)</script>"


def png_size(path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_report_writes_every_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    study = make_study(80, storage=url, states={"FAIL": 3, "PRUNED": 5}, max_latency_ms=2.5, bench=BENCH)
    paths = write_report(study, tmp_path / "out", url)

    assert set(paths.figures) == {
        "pareto",
        "heads",
        "dk",
        "family",
        "pareto_heads",
        "importance",
        "hypervolume",
        "bench",
    }
    for key, png in paths.figures.items():
        w, h = png_size(png)
        assert w >= 400 and h >= 250, key
        assert png.stat().st_size > 10_000, f"{key}.png looks empty"
    trials = pd.read_csv(paths.trials_csv)
    assert len(trials) == 88
    assert {
        "heads",
        "d_k",
        "heads_max",
        "dk_min",
        "param_d_model",
        "feasible",
        "fail_reason",
        "val_history",
    } <= set(trials)
    pareto = pd.read_csv(paths.pareto_csv)
    assert len(pareto) == len(an.pareto_front(an.trials_table(study))) > 0
    assert pareto["feasible"].all()

    md = paths.markdown.read_text()
    order = [
        md.index(s) for s in ("## Recommendation", "## Evidence", "## Rules of thumb", "## Study account")
    ]
    assert order == sorted(order)
    for rule in rules.rules_of_thumb(an.trials_table(study), BENCH):
        assert rule.rule in md
    assert "Merged heads are faster | supported" in md
    assert "explorer study resume synthetic --storage sqlite:///" in md
    assert "Partial study" not in md
    html = paths.html.read_text()
    assert html.count("src='data:image/png;base64,") == len(paths.figures)
    assert ".png'" not in html  # nothing refers to a file next to it: self-contained
    assert not list(tmp_path.glob(".out.*"))  # the temporary folder was moved into place


def test_html_and_markdown_escape_user_text(tmp_path):
    study = make_study(25, name=f"evil{EVIL}", states={"FAIL": 1})
    study.set_user_attr("task", EVIL)
    failed = [t for t in study.get_trials() if t.state == TrialState.FAIL]
    assert failed
    paths = write_report(study, tmp_path / "out")
    html, md = paths.html.read_text(), paths.markdown.read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<title>evil&lt;script&gt;" in html
    prose = re.sub(r"```.*?```|`[^`]*`", "", md, flags=re.S)  # code is shown literally by Markdown renderers
    assert "<script>" not in prose and "&lt;script&gt;" in prose


def test_partial_study_is_stated(tmp_path):
    study = make_study(20, states={"RUNNING": 2}, n_trials_target=40)
    md = write_report(study, tmp_path / "out").markdown.read_text()
    assert "Partial study" in md
    assert "2 trial(s) still RUNNING" in md and "20 of the spec's 40 trials finished" in md
    assert "explorer study resume synthetic" in md


def test_no_completed_trial_raises_and_writes_nothing(tmp_path):
    study = optuna.create_study(study_name="empty", directions=["maximize", "minimize"])
    study.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"fail_reason": "oom"}))
    with pytest.raises(
        NoCompletedTrialsError, match="study 'empty' has no completed trial yet; run `explorer study run"
    ):
        write_report(study, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_all_infeasible_study_still_reports(tmp_path):
    study = make_study(12, max_latency_ms=1e-6)
    md = write_report(study, tmp_path / "out").markdown.read_text()
    assert "No recommendation: no COMPLETE feasible trial" in md


def test_rewrite_replaces_and_refuses_foreign_folders(tmp_path):
    study = make_study(15)
    out = tmp_path / "out"
    write_report(study, out)
    (out / "stale.png").write_bytes(b"old")
    write_report(study, out)
    assert not (out / "stale.png").exists()  # the old report was replaced as a whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not a report folder"):
        write_report(study, foreign)
    assert (foreign / "notes.txt").read_text() == "keep me"


def test_crash_leaves_the_previous_report_whole(tmp_path, monkeypatch):
    study = make_study(15)
    out = tmp_path / "out"
    before = write_report(study, out).markdown.read_text()

    def boom(df):
        raise RuntimeError("disk full")

    monkeypatch.setattr(plots, "family_figure", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        write_report(study, out)
    assert (out / "report.md").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left behind


def test_importance_figure_without_enough_trials():
    fig = plots.importance_figure(pd.DataFrame(columns=["objective", "param", "importance"]), "needs >= 10")
    assert "needs >= 10" in fig.axes[0].texts[0].get_text()
