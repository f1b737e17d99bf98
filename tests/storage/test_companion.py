"""The searched architectures alone in the study Optuna's tools load; the finalist runs and re-timings in its
companion study NAME/finalists, which explorer's commands read as part of the study; a study made before (its
finalist runs inside it) reads, reports and runs as it did, and says what Optuna's tools show of it."""

from __future__ import annotations

import json

import optuna
import pandas as pd
import pytest
import torch
from click.testing import CliRunner
from optuna.trial import TrialState, create_trial

from explorer import api
from explorer.cli import main
from explorer.storage import (
    FINALIST_BASE,
    RETIMED_ATTR,
    companion_name,
    is_bookkeeping,
    load_records,
    load_retimings,
    local_number,
    parent_name,
)
from explorer.study import ArtifactStore, Study, list_studies, study_status
from explorer.study._catalog import INSIDE_NOTE
from explorer.study._study import ANSWER_ATTR
from tests.fixtures import latency, make_study, write_tiny_spec


def _opening(url: str, out) -> str:
    """The report's answer paragraph."""
    blocks = api.report("syn", url, out=out).markdown.read_text().split("\n\n")
    return next(b for b in blocks if b.startswith("**"))


def _front_roles(url: str) -> set[str]:
    """The roles of the trials on the front Optuna's own reader gives (best_trials)."""
    return {t.user_attrs["role"] for t in optuna.load_study(study_name="syn", storage=url).best_trials}


def test_names_and_numbers_map_both_ways():
    assert (
        companion_name("quickstart") == "quickstart/finalists"
        and parent_name("quickstart/finalists") == "quickstart"
    )
    assert parent_name("quickstart") is None and parent_name("/finalists") is None
    assert local_number("q", 7) == ("q", 7) and local_number("q", FINALIST_BASE + 7) == ("q/finalists", 7)


def test_a_study_made_before_reads_as_before_and_says_what_optunas_tools_show(tmp_path):
    """Finalist runs inside the study (a database made before they were kept apart) and the same study kept
    apart give the same records, the same answer and the same listing; only the old one carries the note."""
    inside, apart = f"sqlite:///{tmp_path / 'inside.db'}", f"sqlite:///{tmp_path / 'apart.db'}"
    make_study(30, storage=inside, name="syn", finalists=3)
    make_study(30, storage=apart, name="syn", finalists=3, apart=True)
    old, new = api.load("syn", inside), api.load("syn", apart)
    assert [r.role for r in old.records] == [r.role for r in new.records]
    finals_old = [r for r in old.records if r.role == "finalist"]
    finals_new = [r for r in new.records if r.role == "finalist"]
    assert len(finals_new) == 12 and all(r.number < FINALIST_BASE for r in finals_old)
    assert [r.number - FINALIST_BASE for r in finals_new] == list(range(12))
    assert [r.val_accuracy for r in finals_old] == [r.val_accuracy for r in finals_new]
    assert old.answer.recommended.heads == new.answer.recommended.heads
    assert old.answer.confidence == pytest.approx(new.answer.confidence)
    assert _opening(inside, tmp_path / "r1") == _opening(apart, tmp_path / "r2")  # word for word
    # Optuna's own reader: the old study's front holds finalist runs, the new one's searched trials only
    assert "finalist" in _front_roles(inside) and _front_roles(apart) == {"search"}
    status_old, status_new = study_status("syn", inside), study_status("syn", apart)
    assert status_old["note"] == INSIDE_NOTE and status_old["finalists_study"] is None
    assert status_new["note"] == "" and status_new["finalists_study"] == "syn/finalists"
    assert (
        status_old["trials"]
        == status_new["trials"]
        == {"search": {"COMPLETE": 30}, "finalist": {"COMPLETE": 12}}
    )
    (row_old,), (row_new,) = list_studies(inside), list_studies(apart)  # the companion is no row of its own
    assert row_old["trials"] == row_new["trials"] == {"COMPLETE": 42}
    assert row_old["finalists"] is None and row_new["finalists"] == {
        "study": "syn/finalists",
        "trials": {"COMPLETE": 12},
    }
    text = CliRunner().invoke(main, ["study", "status", "syn", "--storage", inside])
    assert text.exit_code == 0 and "note: made before explorer kept finalist runs apart" in text.output
    best = CliRunner().invoke(main, ["study", "status", "syn", "--storage", apart]).output
    assert (
        "syn/finalists#" in best and "#10000" not in best
    )  # its best runs, named as Optuna's tools name them
    listed = CliRunner().invoke(main, ["study", "list", "--storage", apart])
    assert listed.exit_code == 0 and "finalist runs in syn/finalists" in listed.output
    assert "syn/finalists " not in listed.output.split("finalist runs in")[0]


def test_reading_creates_no_companion_and_the_report_labels_it_with_the_answer(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    make_study(20, storage=url, name="syn", finalists=3, apart=True)
    api.report("syn", url, out=tmp_path / "report")
    trials = pd.read_csv(tmp_path / "report" / "trials.csv")
    finalist = trials[trials["number"] >= FINALIST_BASE].iloc[0]  # named as Optuna's tools name it, beside
    assert finalist["optuna_trial"] == f"syn/finalists#{finalist['number'] - FINALIST_BASE}"
    assert trials[trials["number"] < FINALIST_BASE]["optuna_trial"].str.match(r"^syn#\d+$").all()
    kept = optuna.load_study(study_name="syn", storage=url).user_attrs[ANSWER_ATTR]
    companion = optuna.load_study(study_name="syn/finalists", storage=url)
    assert companion.user_attrs[ANSWER_ATTR] == kept and companion.user_attrs["finalists_of"] == "syn"
    assert "finalist runs of the explorer study 'syn'" in companion.user_attrs["about"]
    url2 = f"sqlite:///{tmp_path / 'none.db'}"
    make_study(10, storage=url2, name="bare")
    study_status("bare", url2)
    api.report("bare", url2, out=tmp_path / "r2")
    assert [s.study_name for s in optuna.get_all_study_summaries(url2)] == ["bare"]


def test_the_finalist_stage_writes_to_one_place_and_keeps_an_old_study_where_it_was(tmp_path):
    inside, apart = f"sqlite:///{tmp_path / 'inside.db'}", f"sqlite:///{tmp_path / 'apart.db'}"
    make_study(10, storage=inside, name="syn", finalists=2)
    make_study(10, storage=apart, name="syn")
    old, new = Study.open("syn", inside, write=True), Study.open("syn", apart, write=True)
    assert old.stage_study("finalist") is old.optuna_study and old.stage_study("search") is old.optuna_study
    assert [s.study_name for s in optuna.get_all_study_summaries(inside)] == ["syn"]
    companion = new.stage_study("finalist")
    assert companion.study_name == "syn/finalists" and companion.user_attrs["finalists_of"] == "syn"
    assert (
        companion.directions == new.optuna_study.directions
        and companion.metric_names == new.optuna_study.metric_names
    )
    # found, not made
    assert Study.open("syn", apart, write=True).stage_study("finalist")._study_id == companion._study_id


def test_weights_and_notes_of_a_companion_trial_go_by_explorer_number(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    make_study(3, storage=url, name="syn")
    companion = Study.open("syn", url, write=True).stage_study("finalist")
    companion.add_trial(
        create_trial(state=TrialState.COMPLETE, values=[0.5, 1.0], user_attrs={"role": "finalist"})
    )
    companion.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"role": "finalist", "retry_of": 0}))
    companion.set_user_attr("fail_reason:1", "its worker stopped")
    companion.set_user_attr(RETIMED_ATTR, [{"key": "k", "round": 0, "latency": latency(1.0).to_dict()}])
    store = ArtifactStore(url, str(tmp_path / "art"))
    model = torch.nn.Linear(2, 2)
    store.save("syn", FINALIST_BASE, model)
    store.save("syn", 1, torch.nn.Linear(2, 3))
    assert set(store.index("syn")) == {1, FINALIST_BASE} and store.has("syn", FINALIST_BASE)
    assert torch.equal(store.load_state("syn", FINALIST_BASE)["weight"], model.weight)
    assert not store.has("syn", 0)  # the search trial #0 is not the companion's #0
    # a finished trial's weights hang on its (companion) study, named by its number there
    assert [a.filename for a in optuna.artifacts.get_all_artifact_meta(companion)] == ["trial-00000.pt"]
    parent = optuna.load_study(study_name="syn", storage=url)
    (ok, failed) = load_records(parent, ("finalist",))
    assert (ok.number, failed.number, failed.retry_of) == (FINALIST_BASE, FINALIST_BASE + 1, FINALIST_BASE)
    assert failed.fail_reason == "its worker stopped"
    assert [t.key for t in load_retimings(parent)] == ["k"]
    store.prune("syn", keep={1})
    assert set(store.index("syn")) == {1}


@pytest.mark.slow
def test_a_study_run_keeps_its_finalists_apart_and_every_command_reads_them(tmp_path, monkeypatch):
    """As a user runs it: `study run` with finalists, then status, list, report, export --trial of a finalist
    run; optuna.load_study(NAME) holds the searched architectures only."""
    monkeypatch.chdir(tmp_path)
    write_tiny_spec(tmp_path, n_trials=3, epochs=1, finalists=True)
    sets = ["finalists.ladder=false", "finalists.seeds=1", "finalists.timing_rounds=1"]
    run = CliRunner().invoke(
        main, ["study", "run", "tiny.toml", "--no-bench", *(a for s in sets for a in ("--set", s))]
    )
    assert run.exit_code == 0, run.output
    url = "sqlite:///studies/tiny.db"
    study = optuna.load_study(study_name="tiny", storage=url)
    searched = [t for t in study.trials if not is_bookkeeping(t)]
    assert {t.user_attrs["role"] for t in searched} == {"search"} and RETIMED_ATTR not in study.user_attrs
    assert study.best_trials and all(t.params for t in study.best_trials)
    companion = optuna.load_study(study_name="tiny/finalists", storage=url)
    finals = [t for t in companion.trials if t.state == TrialState.COMPLETE]
    assert finals and all(t.user_attrs["role"] == "finalist" for t in finals)
    # no sampled positions: the layout alone, as params the dashboard's plots of the companion read
    assert all(
        set(t.params)
        == {"d_model", "n_layers"} | {f"heads_layer{i}" for i in range(len(t.user_attrs["heads"]))}
        for t in finals
    )
    assert companion.user_attrs[RETIMED_ATTR] and companion.user_attrs["finalists_of"] == "tiny"
    status = json.loads(CliRunner().invoke(main, ["study", "status", "tiny", "--json"]).stdout)
    assert status["finalists_study"] == "tiny/finalists" and status["note"] == ""
    assert status["trials"]["finalist"]["COMPLETE"] == len(finals)
    (row,) = json.loads(CliRunner().invoke(main, ["study", "list", "--json"]).stdout)
    assert row["name"] == "tiny" and row["finalists"]["study"] == "tiny/finalists"
    assert CliRunner().invoke(main, ["report", "tiny"]).exit_code == 0
    assert companion.user_attrs[ANSWER_ATTR] == study.user_attrs[ANSWER_ATTR]
    number = FINALIST_BASE + finals[0].number
    out = CliRunner().invoke(
        main, ["export", "tiny", "--trial", str(number), "--format", "state", "--out", "w.pt"]
    )
    assert out.exit_code == 0, out.output
    assert f"trial tiny/finalists#{finals[0].number} " in out.output and (tmp_path / "w.pt").is_file()
    opened = Study.open("tiny", url, write=True)
    assert ArtifactStore(url).has("tiny", number)  # its weights, stored by the run in the companion
    assert opened.stage_study("finalist").study_name == "tiny/finalists"


@pytest.mark.slow
def test_two_workers_run_the_finalist_stage_in_the_companion_on_each_storage(
    tmp_path, monkeypatch, storage_url, study_name, one_thread
):
    """Many workers, SQLite and PostgreSQL: the search in the study, every planned finalist run exactly once in
    its companion, nothing left running or queued, and a second command finds nothing left to do."""
    monkeypatch.chdir(tmp_path)
    spec = write_tiny_spec(tmp_path, name=study_name, n_trials=3, epochs=1, finalists=True)
    sets = ["finalists.ladder=false", "finalists.timing_rounds=1"]
    args = ["study", "run", str(spec), "--storage", storage_url, "--no-bench", "--workers", "2"]
    args += [a for s in sets for a in ("--set", s)]
    run = CliRunner().invoke(main, args)
    assert run.exit_code == 0, run.output
    study = optuna.load_study(study_name=study_name, storage=storage_url)
    companion = optuna.load_study(study_name=f"{study_name}/finalists", storage=storage_url)
    # the search's own trials (and those it closed without running, beyond its total: no role)
    assert {t.user_attrs.get("role") for t in study.trials if not is_bookkeeping(t)} == {"search"}
    done = [t for t in companion.trials if t.state == TrialState.COMPLETE]
    # a run is its layout, its seed and its horizon (the horizon check retrains a unit at twice the grid's)
    runs = [
        (
            json.dumps(t.user_attrs["finalist"]["model"], sort_keys=True),
            t.user_attrs["seed"],
            t.user_attrs["finalist"].get("epochs"),
        )
        for t in done
    ]
    assert done and len(runs) == len(set(runs))  # no finalist run trained twice
    assert not [
        t for t in study.trials + companion.trials if t.state in (TrialState.RUNNING, TrialState.WAITING)
    ]
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert len(optuna.load_study(study_name=f"{study_name}/finalists", storage=storage_url).trials) == len(
        companion.trials
    )
    records = api.load(study_name, storage_url).records
    assert sorted(r.number for r in records if r.role == "finalist") == sorted(
        FINALIST_BASE + t.number
        for t in companion.trials
        if t.user_attrs.get("role") == "finalist"
        and not {"surplus", "duplicate_of", "exhausted"} & set(t.user_attrs)
    )


def test_a_study_and_its_companion_are_read_as_one_study():
    from explorer.storage import (
        find_companion,
        keeps_finalists_inside,
        label_companion,
        number_base,
        study_parts,
        trials_of,
    )

    storage = optuna.storages.InMemoryStorage()
    parent = optuna.create_study(study_name="syn", storage=storage)
    parent.add_trial(create_trial(state=TrialState.COMPLETE, value=1.0, user_attrs={"role": "search"}))
    assert find_companion(parent) is None and study_parts(parent) == [(parent, 0)]
    companion = optuna.create_study(study_name=companion_name("syn"), storage=storage)
    companion.add_trial(create_trial(state=TrialState.COMPLETE, value=2.0, user_attrs={"role": "finalist"}))
    companion.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"role": "finalist"}))
    label_companion(companion, parent)
    found = find_companion(parent)
    assert found is not None and found.study_name == companion_name("syn")
    assert "syn" in found.user_attrs.values() and f"{FINALIST_BASE:,}" in found.user_attrs["about"]
    assert [base for _, base in study_parts(parent)] == [0, FINALIST_BASE]
    assert (number_base("syn"), number_base(companion_name("syn"))) == (0, FINALIST_BASE)
    every = [(t.user_attrs["role"], base) for t, base in trials_of(parent)]
    assert every == [("search", 0), ("finalist", FINALIST_BASE), ("finalist", FINALIST_BASE)]
    assert len(list(trials_of(parent, states=(TrialState.COMPLETE,)))) == 2
    assert not keeps_finalists_inside(parent)  # its finalists are apart
    parent.add_trial(create_trial(state=TrialState.COMPLETE, value=1.0, user_attrs={"role": "finalist"}))
    assert keeps_finalists_inside(parent)  # a study made before keeps its finalist runs inside


def test_a_trial_is_named_by_the_optuna_study_it_lives_in_and_its_number_there():
    from explorer.storage import FINALIST_BASE, trial_label

    assert trial_label("quickstart", 12) == "quickstart#12"
    assert trial_label("quickstart", FINALIST_BASE + 4) == "quickstart/finalists#4"
