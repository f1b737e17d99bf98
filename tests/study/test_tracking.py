"""MLflow tracking: a study's trials, finalist runs and answer logged to a real MLflow store, read back with
MLflow's own API; a tracking server that is down costs nothing."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import socket
import subprocess
import sys
import time
import urllib.request

import optuna
import pytest
from click.testing import CliRunner
from optuna.trial import TrialState

import explorer
from explorer.cli import main
from explorer.spec._tracking_spec import MLFLOW_ENV
from explorer.storage import FINALIST_BASE
from explorer.study import Study, _mlflow_tracking as tracking, log_answer
from explorer.study._mlflow_tracking import sync_trials
from tests.fixtures import make_study, write_tiny_spec

mlflow = pytest.importorskip("mlflow")


def _study(tmp_path, monkeypatch, uri: str, apart: bool = False):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    make_study(
        6,
        storage=url,
        name="tracked",
        finalists=2,
        states={TrialState.PRUNED: 2, TrialState.FAIL: 1},
        apart=apart,
    )
    monkeypatch.setenv(MLFLOW_ENV, uri)
    study = optuna.load_study(study_name="tracked", storage=url)
    return study, Study.open("tracked", url).spec


def _runs(uri: str) -> list:
    client = mlflow.MlflowClient(uri)
    experiment = client.get_experiment_by_name("tracked")
    return client, client.search_runs([experiment.experiment_id], max_results=1000)


@pytest.mark.parametrize("apart", [False, True], ids=["finalists-inside", "finalists-apart"])
def test_every_finished_trial_is_one_run_with_its_heads_and_finalists_group_under_their_layout(
    tmp_path, monkeypatch, apart
):
    """The same for a study made before the finalist runs were kept apart and for one whose finalist runs live
    in its companion study (trial FINALIST_BASE + n to explorer, named by its Optuna study and number too)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    study, spec = _study(tmp_path, monkeypatch, uri, apart)
    result = sync_trials(study, spec)
    assert result["error"] is None and result["not_logged"] == []
    client, runs = _runs(uri)
    trials = {int(r.data.tags["explorer.trial"]): r for r in runs if "explorer.trial" in r.data.tags}
    finished = [
        t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    ]
    numbers = [t.number for t in finished]
    if apart:
        companion = optuna.load_study(study_name="tracked/finalists", storage=study._storage)
        finished += companion.trials
        numbers += [FINALIST_BASE + t.number for t in companion.trials]
        assert trials[FINALIST_BASE].data.tags["explorer.optuna_trial"] == "tracked/finalists#0"
    assert sorted(trials) == sorted(numbers)
    search = [t for t in finished if t.user_attrs["role"] == "search" and t.state is TrialState.COMPLETE]
    first = trials[search[0].number]
    heads = search[0].user_attrs["heads"]
    assert first.data.params["heads"] == ",".join(map(str, heads))
    assert [first.data.params[f"heads_layer{i}"] for i in range(len(heads))] == [str(h) for h in heads]
    assert first.data.metrics["latency_ms"] == pytest.approx(search[0].user_attrs["latency_ms"])
    history = client.get_metric_history(first.info.run_id, "val_accuracy")
    assert [m.step for m in history] == list(range(1, len(search[0].user_attrs["history"]) + 1))
    pruned = [r for r in trials.values() if r.data.tags["explorer.state"] == "PRUNED"]
    assert len(pruned) == 2 and all(r.info.status == "FINISHED" for r in pruned)
    assert [r.info.status for r in trials.values() if r.data.tags["explorer.state"] == "FAIL"] == ["FAILED"]
    layouts = {
        r.info.run_id: r.data.tags["explorer.layout"]
        for r in runs
        if r.data.tags["explorer.role"] == "layout"
    }
    finals = [r for r in trials.values() if r.data.tags["explorer.role"] == "finalist"]
    assert finals and all(
        layouts[r.data.tags["mlflow.parentRunId"]] == r.data.params["heads"] for r in finals
    )
    # each layout's parent carries its evidence: the mean of its runs with the interval, their count, latency
    parents = {r.info.run_id: r for r in runs if r.data.tags["explorer.role"] == "layout"}
    for rid, parent in parents.items():
        children = [
            r.data.metrics["val_accuracy"] for r in finals if r.data.tags["mlflow.parentRunId"] == rid
        ]
        m = parent.data.metrics
        assert m["runs"] == len(children) > 0
        assert min(children) - 1e-9 <= m["val_accuracy_mean"] <= max(children) + 1e-9
        assert m["val_accuracy_mean_low"] <= m["val_accuracy_mean"] <= m["val_accuracy_mean_high"]
        assert m["latency_ms_low"] <= m["latency_ms"] <= m["latency_ms_high"] and m["latency_ms"] > 0
    # a second sync finds every trial logged and adds nothing
    assert sync_trials(study, spec)["logged_now"] == 0
    assert len(_runs(uri)[1]) == len(runs)
    assert study.user_attrs["tracking"]["not_logged"] == []


def test_an_unreachable_tracking_server_costs_one_warning_and_the_study_records_what_was_not_logged(
    tmp_path, monkeypatch, caplog
):
    study, spec = _study(tmp_path, monkeypatch, "http://127.0.0.1:9")
    before = len(study.trials)
    with caplog.at_level(logging.WARNING, logger="explorer"):
        warned: set[str] = set()
        result = sync_trials(study, spec, warned=warned)
        sync_trials(study, spec, warned=warned)  # a second stage of the same command: no second warning
    assert result["error"] and "127.0.0.1:9" in result["uri"]
    finished = [
        t.number for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    ]
    assert result["not_logged"] == finished
    assert study.user_attrs["tracking"]["not_logged"] == finished
    assert len([r for r in caplog.records if "MLflow" in r.getMessage()]) == 1
    assert len(study.trials) == before
    url = f"sqlite:///{tmp_path / 'study.db'}"
    status = CliRunner().invoke(main, ["study", "status", "tracked", "--storage", url])
    assert (
        f"MLflow http://127.0.0.1:9 experiment tracked: {len(finished)} finished trials not logged"
        in status.output
    )


def test_the_answer_is_a_run_with_the_report_and_the_config_as_artifacts(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    study, spec = _study(tmp_path, monkeypatch, uri)
    (tmp_path / "report.md").write_text("**Use 4,4 heads per layer**\n")
    (tmp_path / "pareto.png").write_bytes(b"\x89PNG fake")
    (tmp_path / "answer-config.json").write_text("{}")
    files = [tmp_path / "report.md", tmp_path / "pareto.png", tmp_path / "answer-config.json"]
    ans = explorer.recommend("tracked", f"sqlite:///{tmp_path / 'study.db'}")
    rid = log_answer(study, spec, ans, files)
    client, runs = _runs(uri)
    answer = client.get_run(rid)
    heads = ans.recommended.heads
    assert answer.data.tags["explorer.role"] == "answer"
    assert [answer.data.params[f"heads_layer{i}"] for i in range(len(heads))] == [str(h) for h in heads]
    m = answer.data.metrics  # the answer's numbers, as the report states them
    assert m["val_accuracy"] == pytest.approx(ans.recommended.quality.estimate)
    assert m["val_accuracy_low"] <= m["val_accuracy"] <= m["val_accuracy_high"]
    assert m["latency_ms"] == pytest.approx(ans.recommended.latency.estimate)
    assert m["probability"] == pytest.approx(ans.confidence) and m["decided"] == float(ans.decided)
    assert answer.data.tags["mlflow.note.content"].startswith("**Use 4,4")
    listed = {a.path for a in client.list_artifacts(rid)} | {
        a.path for a in client.list_artifacts(rid, "figures")
    }
    assert {"report.md", "answer-config.json", "figures/pareto.png"} <= listed
    assert any("explorer.trial" in r.data.tags for r in runs)  # the trials were logged on the way


def test_a_server_down_after_a_sync_keeps_what_was_logged_and_the_answer_warns_once(
    tmp_path, monkeypatch, caplog
):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    study, spec = _study(tmp_path, monkeypatch, uri)
    first = sync_trials(study, spec)
    assert first["not_logged"] == [] and len(first["logged"]) == len(study.trials)

    def down(uri: str):
        raise ConnectionError("refused")

    monkeypatch.setattr(tracking, "_client", down)
    with caplog.at_level(logging.WARNING, logger="explorer"):
        again = sync_trials(study, spec)
        assert (
            log_answer(study, spec, explorer.recommend("tracked", f"sqlite:///{tmp_path / 'study.db'}"), [])
            is None
        )
    assert again["error"] == "ConnectionError: refused"
    assert again["not_logged"] == [] and again["logged"] == first["logged"]  # as the last sync found them
    lines = [r.getMessage() for r in caplog.records if "MLflow" in r.getMessage()]
    # one per command: the sync, the report
    assert len(lines) == 2 and "and the answer not logged" in lines[1]


def test_a_report_that_logs_what_an_outage_left_clears_the_studys_record_of_it(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    study, spec = _study(tmp_path, monkeypatch, uri)
    monkeypatch.setattr(tracking, "_client", lambda uri: (_ for _ in ()).throw(ConnectionError("refused")))
    assert sync_trials(study, spec)["not_logged"]  # the outage, recorded with the study
    url = f"sqlite:///{tmp_path / 'study.db'}"
    status = CliRunner().invoke(main, ["study", "status", "tracked", "--storage", url])
    assert "finished trials not logged" in status.output
    monkeypatch.undo()  # the server is back; a report backfills
    monkeypatch.setenv(MLFLOW_ENV, uri)
    explorer.report("tracked", url, out=tmp_path / "report")
    record = optuna.load_study(study_name="tracked", storage=url).user_attrs["tracking"]
    assert record["not_logged"] == [] and record["error"] is None and record["logged_now"] > 0
    status = CliRunner().invoke(main, ["study", "status", "tracked", "--storage", url])
    assert status.exit_code == 0 and "not logged" not in status.output
    # what the report used: a study opened to read gets the record through a writable connection of its own
    opened = explorer.api.load("tracked", url).study
    assert not opened.writable and opened.note_tracking(record | {"not_logged": [7]})
    assert optuna.load_study(study_name="tracked", storage=url).user_attrs["tracking"]["not_logged"] == [7]


def test_a_missing_mlflow_is_one_warning_naming_the_extra(tmp_path, monkeypatch, caplog):
    study, spec = _study(tmp_path, monkeypatch, f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if the tracking extra were not installed
    with caplog.at_level(logging.WARNING, logger="explorer"):
        result = sync_trials(study, spec)
    assert result["error"] == "RuntimeError: MLflow is not installed: pip install 'explorer[tracking]'"
    assert [r.getMessage() for r in caplog.records if "MLflow" in r.getMessage()][0].count("pip install") == 1


def test_a_study_without_tracking_logs_nothing(tmp_path, monkeypatch):
    study, spec = _study(tmp_path, monkeypatch, "off")
    assert sync_trials(study, spec) is None and "tracking" not in study.user_attrs


@pytest.mark.slow
def test_a_tracked_study_run_and_report_log_trials_finalists_and_the_answer(tmp_path, monkeypatch):
    """As a user runs it: [tracking] in the spec, `study run`, then `report`; read back with MLflow's API."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(MLFLOW_ENV, raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    extra = f'\n[tracking]\nmlflow = "{uri}"\n'
    write_tiny_spec(tmp_path, n_trials=2, epochs=1, finalists=True, extra=extra)
    sets = ["finalists.ladder=false", "finalists.seeds=1", "finalists.timing_rounds=1"]
    run = CliRunner().invoke(
        main, ["study", "run", "tiny.toml", "--no-bench", *(a for s in sets for a in ("--set", s))]
    )
    assert run.exit_code == 0, run.output
    assert CliRunner().invoke(main, ["report", "tiny"]).exit_code == 0
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id], max_results=1000)
    roles = [r.data.tags["explorer.role"] for r in runs]
    study = optuna.load_study(study_name="tiny", storage="sqlite:///studies/tiny.db")
    finals = optuna.load_study(study_name="tiny/finalists", storage="sqlite:///studies/tiny.db")
    finished = [t for t in study.trials + finals.trials if t.state is TrialState.COMPLETE]
    assert roles.count("search") == sum(t.user_attrs["role"] == "search" for t in finished) == 2
    assert roles.count("finalist") == sum(t.user_attrs["role"] == "finalist" for t in finished) > 0
    assert roles.count("answer") == 1 and roles.count("layout") >= 1
    searched = [r for r in runs if r.data.tags["explorer.role"] == "search"]
    assert all("heads_layer0" in r.data.params for r in searched)
    (answer,) = [r for r in runs if r.data.tags["explorer.role"] == "answer"]
    files = {a.path for a in client.list_artifacts(answer.info.run_id)}
    assert {"report.md", "answer-config.json", "figures"} <= files
    assert study.user_attrs["tracking"]["not_logged"] == []


@pytest.mark.slow
def test_an_unreachable_tracking_server_costs_a_run_one_warning_line_and_no_trial(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(MLFLOW_ENV, "http://127.0.0.1:9")
    write_tiny_spec(tmp_path, n_trials=2, epochs=1)
    run = CliRunner().invoke(main, ["study", "run", "tiny.toml", "--no-bench", "--json"])
    assert run.exit_code == 0, run.output
    assert [line for line in run.stderr.splitlines() if "MLflow" in line] == [
        next(
            line
            for line in run.stderr.splitlines()
            if line.startswith("MLflow tracking at http://127.0.0.1:9")
        )
    ]
    doc = json.loads(run.stdout)
    assert doc["complete"] and doc["search"]["done"] == 2 and doc["tracking"]["not_logged"] == [0, 1]


def _full_mlflow_missing() -> str | None:
    """Why no `mlflow server` can run here (None: it can): the server is in the full package, not the
    tracking extra's mlflow-skinny."""
    try:
        importlib.metadata.version("mlflow")
    except importlib.metadata.PackageNotFoundError:
        return "the full mlflow package (its server) is not installed: pip install mlflow"
    return None


@pytest.fixture
def mlflow_server(tmp_path, monkeypatch):
    """A real `mlflow server` over HTTP on 127.0.0.1 (its store a SQLite file in tmp_path), or skip."""
    if reason := _full_mlflow_missing():
        pytest.skip(reason)
    for off in ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK"):  # nothing leaves the machine
        monkeypatch.setenv(off, "true")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    folder = tmp_path / "server"
    folder.mkdir()
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}", "--workers", "1"]
    log = (folder / "server.log").open("wb")
    server = subprocess.Popen(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start: {(folder / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.mark.slow
def test_json_commands_parse_and_runs_carry_metrics_with_an_mlflow_server_over_http(
    tmp_path, monkeypatch, mlflow_server
):
    """MLflow's client prints "View run ... at: URL" for every run it ends on a tracking server: none of it may
    reach a command's stdout, which holds one JSON document."""
    study, spec = _study(tmp_path, monkeypatch, mlflow_server)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    result = CliRunner().invoke(
        main, ["report", "tracked", "--storage", url, "--out", str(tmp_path / "report"), "--json"]
    )
    assert result.exit_code == 0, result.stderr
    assert "View run" not in result.stdout and json.loads(result.stdout)["study"] == "tracked"
    status = CliRunner().invoke(main, ["study", "status", "tracked", "--storage", url, "--json"])
    assert status.exit_code == 0 and json.loads(status.stdout)["tracking"]["not_logged"] == []
    client, runs = _runs(mlflow_server)
    roles = [r.data.tags["explorer.role"] for r in runs]
    assert roles.count("answer") == 1 and roles.count("layout") >= 1 and roles.count("search") > 0
    (answer,) = [r for r in runs if r.data.tags["explorer.role"] == "answer"]
    assert {"val_accuracy", "latency_ms", "probability", "decided"} <= set(answer.data.metrics)
    assert all("runs" in r.data.metrics for r in runs if r.data.tags["explorer.role"] == "layout")
    assert "report.md" in {a.path for a in client.list_artifacts(answer.info.run_id)}


def test_runs_are_named_as_people_read_trials_layouts_carry_params_and_no_answer_logs_no_run(
    tmp_path, monkeypatch
):
    """Run names give the trial as Optuna's tools and the report name it (tracked/finalists#3), not explorer's
    internal number; each layout's parent run has the layout's params, so runs filter by heads; a study with no
    answer logs its trials and no empty answer run; the tracking record names its trials the same way."""
    import dataclasses

    from explorer.storage import trial_label

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    study, spec = _study(tmp_path, monkeypatch, uri, apart=True)
    result = sync_trials(study, spec)
    assert result["logged_trials"] == [trial_label("tracked", n) for n in result["logged"]]
    assert result["not_logged_trials"] == []
    client, runs = _runs(uri)
    finals = [r for r in runs if r.data.tags["explorer.role"] == "finalist"]
    assert finals and all(r.info.run_name.startswith("trial tracked/finalists#") for r in finals)
    assert not any(str(FINALIST_BASE)[:4] in r.info.run_name for r in runs)
    search = next(r for r in runs if r.data.tags["explorer.role"] == "search")
    assert search.info.run_name.startswith(f"trial tracked#{search.data.tags['explorer.trial']} ")
    parents = [r for r in runs if r.data.tags["explorer.role"] == "layout"]
    assert parents
    for parent in parents:
        layout = parent.data.tags["explorer.layout"]
        assert parent.data.params["heads"] == layout
        assert [parent.data.params[f"heads_layer{i}"] for i in range(len(layout.split(",")))] == layout.split(
            ","
        )
        assert {"d_model", "n_layers", "d_k"} <= set(parent.data.params)
        assert "seed" not in parent.data.params  # a run's own, not its layout's
    found = explorer.recommend("tracked", f"sqlite:///{tmp_path / 'study.db'}")
    none = dataclasses.replace(found, recommended=None, no_answer="nothing learned")
    assert log_answer(study, spec, none, []) is None
    client, after = _runs(uri)
    assert not [r for r in after if r.data.tags["explorer.role"] == "answer"] and len(after) == len(runs)


def test_an_outage_names_the_trials_it_left_unlogged_as_people_read_them(tmp_path, monkeypatch):
    from explorer.storage import trial_label

    study, spec = _study(tmp_path, monkeypatch, "http://127.0.0.1:9", apart=True)
    result = sync_trials(study, spec)
    assert result["not_logged"] and result["not_logged_trials"] == [
        trial_label("tracked", n) for n in result["not_logged"]
    ]
    assert any(label.startswith("tracked/finalists#") for label in result["not_logged_trials"])
