"""The answer kept with the study as its user attribute, where optuna-dashboard and optuna.load_study see it."""

from __future__ import annotations

import optuna
import pytest

from explorer import api
from explorer.study._study import ANSWER_ATTR
from tests.fixtures import make_study


def test_the_report_keeps_the_answer_as_a_study_attribute(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    make_study(8, storage=url, name="syn", finalists=3)
    # what the task fed the model, as a run stores it: the report then opens with a "**Model:**" paragraph
    optuna.load_study(study_name="syn", storage=url).set_user_attr("task_input", {"description": "digits"})
    paths = api.report("syn", url, out=tmp_path / "report")
    kept = optuna.load_study(study_name="syn", storage=url).user_attrs[ANSWER_ATTR]
    heads = ",".join(map(str, kept["heads"]))
    blocks = paths.markdown.read_text().split("\n\n")
    assert any(b.startswith("**Model:**") for b in blocks)  # a bold paragraph before the answer's
    assert kept["opening"].startswith(f"**Use {heads} heads per layer**")
    assert kept["opening"] in blocks  # the whole paragraph, as the report writes it
    # a report that keeps nothing with the study (`report --no-artifacts`) leaves the attribute alone
    assert api.report("syn", url, out=tmp_path / "again", keep_figures=False).markdown.is_file()
    assert optuna.load_study(study_name="syn", storage=url).user_attrs[ANSWER_ATTR] == kept


def test_where_optuna_dashboard_is_installed_the_answer_is_the_studys_note(tmp_path):
    dashboard = pytest.importorskip("optuna_dashboard", reason="the dashboard extra is not installed")
    url = f"sqlite:///{tmp_path / 's.db'}"
    make_study(8, storage=url, name="syn", finalists=3, apart=True)
    api.report("syn", url, out=tmp_path / "report")
    for name in ("syn", "syn/finalists"):
        study = optuna.load_study(study_name=name, storage=url)
        note = dashboard.get_note(study)
        assert study.user_attrs[ANSWER_ATTR]["opening"] in note and note.startswith("## The answer")
