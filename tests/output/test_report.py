"""write_report end to end on synthetic studies: files, the answer first, escaping, partial studies, and a
folder whose other files are never touched."""

from __future__ import annotations

import re
import struct

import pandas as pd
import pytest
from optuna.trial import TrialState

from explorer.analysis import _rules as rules
from explorer.errors import ConfigError, NoCompletedTrialsError
from explorer.output import ReportInput, _plots as plots, write_report
from explorer.output._result_folders import MANIFEST
from explorer.spec import spec_from_dict
from explorer.storage import load_records
from tests.fixtures import LM_SPEC, lm_finalists, lm_search, make_study

BENCH = [
    {"impl": "serial", "median_ms": 12.4, "iqr_ms": 0.3, "d_model": 64, "heads": 8},
    {"impl": "merged", "median_ms": 3.1, "iqr_ms": 0.1},
    {"impl": "fused", "median_ms": 2.5, "iqr_ms": 0.1},
]
EVIL = "<script>alert(1)</script>"


def data_of(study, storage=None) -> ReportInput:
    spec = spec_from_dict(study.user_attrs["spec"])
    return ReportInput(spec, tuple(load_records(study)), tuple(study.user_attrs.get("bench") or ()), storage)


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_report_writes_every_file_and_leads_with_the_answer(tmp_path):
    study = make_study(80, states={TrialState.FAIL: 3, TrialState.PRUNED: 5}, bench=BENCH, finalists=3)
    paths = write_report(data_of(study, "sqlite:///x.db"), tmp_path / "out")
    names = {p.name for p in paths.files}
    figures = {
        "pareto",
        "evidence",
        "curves",
        "heads",
        "dk",
        "family",
        "pareto_heads",
        "hypervolume",
        "bench",
    }
    assert {f"{f}.png" for f in figures} | {
        "report.md",
        "report.html",
        "trials.csv",
        "architectures.csv",
    } <= names
    for f in figures:
        w, h = png_size(tmp_path / "out" / f"{f}.png")
        assert w >= 400 and h >= 250 and (tmp_path / "out" / f"{f}.png").stat().st_size > 10_000, f
    trials = pd.read_csv(tmp_path / "out" / "trials.csv")
    assert len(trials) == 80 + 8 + 4 * 3 and {"heads", "d_k", "role", "seed", "fail_reason"} <= set(trials)
    assert trials["heads"].str.match(r"^\d+(,\d+)*$").all()  # "4,2" at the CSV edge
    md = paths.markdown.read_text()
    order = [
        md.index(s)
        for s in ("## The answer", "## Evidence from the search", "## Rules of thumb", "## Study account")
    ]
    assert order == sorted(order)
    answer = md[md.index("## The answer") : md.index("## Evidence")]
    assert "mean of 3 runs of a fixed 30 epochs" in answer and "Confidence:" in answer  # the finalists' mean
    for rule in rules.rules_of_thumb(load_records(study), BENCH):
        assert rule.rule in md
    assert "Merged heads are faster | supported" in md
    assert "explorer study resume synthetic --storage sqlite:///x.db" in md
    assert "Configurations rejected while sampling: 0" not in md  # every count in the account is counted
    assert "Partial study" not in md
    html = paths.html.read_text()
    assert html.count("src='data:image/png;base64,") == len(figures)


def test_every_interval_in_the_report_stays_inside_0_to_100_percent(tmp_path):
    study = make_study(40, finalists=3, noise=0.03)
    md = write_report(data_of(study), tmp_path / "out").markdown.read_text()
    for low, high in re.findall(r"(\d+\.\d+)% \[(?:\d+\.\d+), (\d+\.\d+)\]", md):
        assert 0 <= float(low) <= 100 and 0 <= float(high) <= 100
    for low, high in re.findall(r"\[(-?\d+\.\d+), (-?\d+\.\d+)\] validation", md):
        assert 0 <= float(low) <= float(high) <= 100


def test_html_and_markdown_escape_user_text(tmp_path):
    study = make_study(25, states={TrialState.FAIL: 1})
    records = tuple(
        r.__class__(**{**r.__dict__, "fail_reason": EVIL, "device": EVIL}) for r in load_records(study)
    )
    data = ReportInput(spec_from_dict(study.user_attrs["spec"]), records)
    paths = write_report(data, tmp_path / "out")
    html, md = paths.html.read_text(), paths.markdown.read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    prose = re.sub(r"```.*?```|`[^`]*`", "", md, flags=re.S)
    # Markdown is not HTML-escaped (it reads as written, "p < 0.05"); only a would-be tag is backslash-escaped
    assert not re.search(r"(?<!\\)<script>", prose) and "\\<script>" in prose and "&lt;" not in prose


def test_partial_study_is_stated(tmp_path):
    study = make_study(20, states={TrialState.RUNNING: 2}, n_trials_target=40)
    md = write_report(data_of(study), tmp_path / "out").markdown.read_text()
    assert "Partial study" in md
    assert "2 trial(s) still RUNNING" in md and "20 of the spec's 40 search trials finished" in md


def test_no_completed_trial_raises_and_writes_nothing(tmp_path):
    study = make_study(0, states={TrialState.FAIL: 2}, n_trials_target=5)
    with pytest.raises(NoCompletedTrialsError, match="no completed search trial yet"):
        write_report(data_of(study), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_all_infeasible_study_still_reports(tmp_path):
    study = make_study(12, max_latency_ms=1e-6)
    md = write_report(data_of(study), tmp_path / "out").markdown.read_text()
    assert "No answer" in md


def test_a_folder_holding_other_files_is_never_emptied(tmp_path):
    """`--out .` once deleted a whole folder because it held a report.md: now only the report's own files are
    written, and a folder holding anything else is refused unless --force, which still leaves it alone."""
    study = make_study(15)
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("keep me")
    (home / "report.md").write_text("my own report, not explorer's")
    with pytest.raises(ConfigError, match="--force"):
        write_report(data_of(study), home)
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt", "report.md"]
    assert (home / "report.md").read_text() == "my own report, not explorer's"
    write_report(data_of(study), home, force=True)
    assert (home / "notes.txt").read_text() == "keep me" and (home / MANIFEST).exists()


def test_rewriting_replaces_the_reports_own_files_only(tmp_path):
    study = make_study(15)
    out = tmp_path / "out"
    write_report(data_of(study), out)
    (out / "mine.txt").write_text("added by the user after the report")
    manifest = (out / MANIFEST).read_text().split()
    (out / MANIFEST).write_text("\n".join([*manifest, "old_figure.png"]) + "\n")
    (out / "old_figure.png").write_bytes(b"a figure an earlier report wrote")
    write_report(data_of(study), out)  # a folder explorer wrote: no --force needed
    assert not (out / "old_figure.png").exists()  # the earlier report's leftover is gone
    assert (out / "mine.txt").exists()  # the user's file stays


def test_a_failure_while_rendering_leaves_the_previous_report_whole(tmp_path, monkeypatch):
    study = make_study(15)
    out = tmp_path / "out"
    before = {p.name: p.read_bytes() for p in write_report(data_of(study), out).files}

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(plots, "family_figure", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        write_report(data_of(study), out)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name in before} == before
    assert not list(tmp_path.glob("**/.*.tmp"))


def test_an_unwritable_out_is_one_error_before_any_work(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="cannot write into --out"):
        write_report(data_of(make_study(5)), tmp_path / "file" / "sub")
    with pytest.raises(ConfigError, match="is a file"):
        write_report(data_of(make_study(5)), tmp_path / "file")


def test_a_language_model_kv_study_reports_bits_per_byte_a_kv_layout_and_the_rule(tmp_path):
    """The report of a text study searching kv heads: loss wording, (heads, kv_heads), the saving against
    multi-head attention, decoding, the kv figure and the grouped-query verdict."""
    finals = lm_finalists()
    paths = write_report(ReportInput(LM_SPEC, tuple(lm_search(noise=0.002) + finals)), tmp_path / "out")
    md = paths.markdown.read_text()
    answer = md.split("## The answer")[1].split("##")[0]
    assert "**Use 4 heads per layer with 2 key/value heads (grouped-query attention" in answer
    assert "validation bits per byte, lower is better" in answer and "accuracy" not in answer
    assert "per generated token" in answer and "key/value cache of 512 positions" in answer
    assert "Saving against multi-head attention:" in answer and "at equal quality" in answer
    assert "2.00x smaller" in answer  # the cache: 2 of 4 key/value heads, exact
    assert "| val bits/byte |" in md and "val acc" not in md
    rule = next(line for line in md.splitlines() if line.startswith("| Grouped-query attention keeps"))
    assert "| supported |" in rule
    assert "kv.png" in {p.name for p in paths.files}
    trials = pd.read_csv(paths.out_dir / "trials.csv")
    assert {"kv_heads", "val_bpb", "decode_ms", "attention_kind"} <= set(trials.columns)


def test_a_classic_study_report_has_no_kv_section(tmp_path):
    paths = write_report(data_of(make_study(40)), tmp_path / "out")
    md = paths.markdown.read_text()
    assert "Grouped-query" not in md and "kv.png" not in {p.name for p in paths.files}
    assert "validation accuracy" in md and "bits per byte" not in md


def test_the_report_says_where_its_files_are_and_which_answer_it_names(tmp_path):
    from explorer.output import ReportPaths

    study = make_study(24)
    paths = write_report(data_of(study), tmp_path / "out")
    assert isinstance(paths, ReportPaths) and paths.out_dir == tmp_path / "out"
    assert paths.markdown == tmp_path / "out" / "report.md" and paths.html in paths.files
    assert paths.answer is not None and paths.answer.recommended is not None
    assert all(p.parent == paths.out_dir and p.is_file() for p in paths.files)
