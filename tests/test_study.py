"""Studies end to end: totals across resumes and workers, recovery from SIGKILL, failures that don't stop the study,
and bad input that changes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
import torch
from click.testing import CliRunner
from optuna.trial import TrialState

from explorer.cli import main
from explorer.errors import SpecError, StorageError, StudyNotFoundError, TrainingDivergedError
from explorer.search.objective import dominated_at_epoch
from explorer.search.spec import load_spec
from explorer.search.study import open_study, prepare_study, run_study
from tests.fixtures import write_tiny_spec as write_spec


def finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'studies.db'}"


def test_dominated_at_epoch():
    peers = [(1.0, [0.5, 0.8]), (3.0, [0.9, 0.95])]
    assert dominated_at_epoch(2, 0.70, 1.5, peers, margin=0.05)  # a faster peer leads by 0.10 at epoch 2
    assert not dominated_at_epoch(2, 0.78, 1.5, peers, margin=0.05)  # within the margin
    assert not dominated_at_epoch(2, 0.50, 0.5, peers, margin=0.05)  # no peer is as fast
    assert not dominated_at_epoch(3, 0.10, 5.0, peers, margin=0.05)  # no peer reached epoch 3
    assert dominated_at_epoch(1, 0.70, 3.0, peers, margin=0.05)  # the slow peer counts once we are as slow


@pytest.mark.slow
def test_run_records_everything_and_total_is_kept_across_resumes(tmp_path, sqlite_url):
    handle = prepare_study(load_spec(write_spec(tmp_path, n_trials=3)), sqlite_url)
    progress = run_study(handle)
    study = handle.study
    assert progress.done == 3 and len(finished(study)) == 3
    for t in finished(study):
        a = t.user_attrs
        heads, d_model = a["heads"], a["d_model"]
        assert a["d_k"] == [d_model // h for h in heads] and all(
            d_model % h == 0 and d_model // h >= 4 for h in heads
        )
        for key in (
            "val_accuracy",
            "test_accuracy",
            "latency_ms",
            "latency_iqr_ms",
            "params",
            "flops",
            "train_time_s",
            "epochs_run",
            "device",
            "torch_version",
            "attention_impl",
            "family",
            "lr",
        ):
            assert key in a, key
        assert a["torch_version"] == torch.__version__ and a["rejected"] == 0
    assert study.user_attrs["spec"]["name"] == "tiny"
    # Completed trials keep their trained weights next to the database, for `explorer heads`.
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        assert (tmp_path / "studies.artifacts" / "tiny" / f"trial-{t.number:05d}.pt").is_file()

    # Running the same spec again does nothing: the total is reached.
    again = prepare_study(load_spec(tmp_path / "tiny.toml"), sqlite_url)
    run_study(again)
    assert len(study.get_trials()) == 3
    # Resuming from the database alone with a higher total tops it up to exactly that total.
    resumed = open_study("tiny", sqlite_url)
    assert resumed.spec == handle.spec
    run_study(resumed, n_trials=5)
    assert len(finished(resumed.study)) == 5
    assert open_study("tiny", sqlite_url).spec.n_trials == 5  # the new total is stored with the study


@pytest.mark.slow
def test_nan_and_oom_fail_one_trial_and_the_study_goes_on(tmp_path, sqlite_url, monkeypatch):
    import explorer.engine.train

    real_fit = explorer.engine.train.fit
    calls = {"n": 0}

    def flaky_fit(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise TrainingDivergedError("training loss became nan at epoch 1 step 3")
        if calls["n"] == 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(explorer.engine.train, "fit", flaky_fit)
    handle = prepare_study(load_spec(write_spec(tmp_path, n_trials=2, epochs=1)), sqlite_url)
    run_study(handle)
    failed = handle.study.get_trials(states=(TrialState.FAIL,))
    assert [t.user_attrs["fail_reason"].split(":")[0] for t in failed] == ["diverged", "out of memory on cpu"]
    assert len(finished(handle.study)) == 2


def test_bad_input_creates_nothing(tmp_path):
    db = tmp_path / "x.db"
    url = f"sqlite:///{db}"
    bad = write_spec(tmp_path, name="bad", extra="\n[space2]\nfoo = 1\n")
    with pytest.raises(SpecError, match="space2"):
        prepare_study(load_spec(bad), url)
    impossible = write_spec(tmp_path, name="imp")
    impossible.write_text(impossible.read_text().replace("heads = [1, 2, 4]", "heads = [3, 5]"))
    with pytest.raises(SpecError):
        prepare_study(load_spec(impossible), url)
    with pytest.raises(StudyNotFoundError, match="does not exist"):
        open_study("nope", url)
    with pytest.raises(StorageError):
        prepare_study(load_spec(write_spec(tmp_path)), "postgresql+psycopg://u:secret@127.0.0.1:1/db")
    assert not db.exists()


def test_cli_errors_are_one_line(tmp_path):
    runner = CliRunner()
    spec = write_spec(tmp_path, extra="\n[budgets]\nmax_latency = 3\n")
    result = runner.invoke(main, ["study", "run", str(spec), "--storage", f"sqlite:///{tmp_path}/a.db"])
    assert result.exit_code != 0 and len(result.stderr.strip().splitlines()) == 1
    assert "max_latency" in result.stderr and "Traceback" not in result.stderr
    result = runner.invoke(main, ["study", "resume", "ghost", "--storage", f"sqlite:///{tmp_path}/b.db"])
    assert result.exit_code != 0 and "no study 'ghost'" in result.stderr
    assert not (tmp_path / "b.db").exists()
    result = runner.invoke(main, ["study", "status", "bad name!"])
    assert result.exit_code != 0 and len(result.stderr.strip().splitlines()) == 1
    url = "postgresql+psycopg://me:hunter2@127.0.0.1:1/db"
    result = runner.invoke(main, ["study", "run", str(write_spec(tmp_path)), "--storage", url])
    assert result.exit_code != 0 and "hunter2" not in result.stderr and "***" in result.stderr


def test_a_changed_spec_under_the_same_name_is_refused(tmp_path, sqlite_url):
    prepare_study(load_spec(write_spec(tmp_path, n_trials=2)), sqlite_url)
    changed = write_spec(tmp_path, n_trials=2, epochs=5)
    with pytest.raises(SpecError, match="different spec"):
        prepare_study(load_spec(changed), sqlite_url)
    # A new total alone is fine.
    prepare_study(load_spec(write_spec(tmp_path, n_trials=7)), sqlite_url)


def _run_workers(tmp_path: Path, url: str, total: int, workers: int, name: str) -> optuna.Study:
    result = CliRunner().invoke(
        main,
        [
            "study",
            "run",
            str(write_spec(tmp_path, name=name, n_trials=total, epochs=1)),
            "--storage",
            url,
            "--workers",
            str(workers),
        ],
    )
    assert result.exit_code == 0, result.stderr
    return optuna.load_study(study_name=name, storage=url)


def _assert_exact(study: optuna.Study, total: int) -> None:
    done = finished(study)
    assert len(done) == total
    running = study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING))
    assert running == []
    numbers = [t.number for t in study.get_trials()]
    assert len(numbers) == len(set(numbers))


@pytest.mark.slow
def test_two_workers_sqlite_produce_exactly_the_total(tmp_path, sqlite_url):
    _assert_exact(_run_workers(tmp_path, sqlite_url, total=6, workers=2, name="w2"), 6)


@pytest.mark.slow
@pytest.mark.postgres
def test_two_workers_postgres_produce_exactly_the_total(tmp_path, postgres_url, study_name):
    _assert_exact(_run_workers(tmp_path, postgres_url, total=6, workers=2, name=study_name), 6)
    # A second machine (another process) with the same URL and spec: nothing left to do, total unchanged.
    _assert_exact(_run_workers(tmp_path, postgres_url, total=6, workers=1, name=study_name), 6)


@pytest.mark.slow
def test_sigkill_mid_trial_then_resume_loses_nothing(tmp_path, sqlite_url):
    env = {**os.environ, "EXPLORER_HEARTBEAT_INTERVAL": "1", "EXPLORER_GRACE_PERIOD": "2"}
    spec = write_spec(
        tmp_path, name="killme", n_trials=3, epochs=60, early=False
    )  # trials of several seconds
    cmd = [sys.executable, "-m", "explorer.cli", "study", "run", str(spec), "--storage", sqlite_url]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        victim = _wait_for_running_trial(proc, "killme", sqlite_url)
        assert victim is not None, "the worker never reached a second trial"
        time.sleep(1.5)  # let its heartbeat land
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    study = optuna.load_study(study_name="killme", storage=sqlite_url)
    before = {t.number: t.values for t in study.get_trials(states=(TrialState.COMPLETE,))}
    assert study.get_trials()[victim.number].state == TrialState.RUNNING
    time.sleep(3)  # past the grace period
    resume = subprocess.run(
        [sys.executable, "-m", "explorer.cli", "study", "resume", "killme", "--storage", sqlite_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resume.returncode == 0, resume.stderr
    study = optuna.load_study(study_name="killme", storage=sqlite_url)
    assert study.get_trials()[victim.number].state == TrialState.FAIL
    retried = [t for t in finished(study) if t.params == victim.params and t.number > victim.number]
    assert retried, "the killed trial's configuration was not retried"
    assert len(finished(study)) == 3
    after = {t.number: t.values for t in study.get_trials(states=(TrialState.COMPLETE,))}
    assert all(after[n] == v for n, v in before.items())


@pytest.mark.slow
def test_status_and_export_retrain_exactly(tmp_path, sqlite_url):
    runner = CliRunner()
    spec = write_spec(tmp_path, name="exp", n_trials=3, epochs=2, early=False)
    assert runner.invoke(main, ["study", "run", str(spec), "--storage", sqlite_url]).exit_code == 0
    listed = json.loads(runner.invoke(main, ["study", "list", "--storage", sqlite_url, "--json"]).stdout)
    assert [(r["name"], r["total"], r["trials"]["COMPLETE"]) for r in listed] == [("exp", 3, 3)]
    status = runner.invoke(main, ["study", "status", "exp", "--storage", sqlite_url, "--json"])
    doc = json.loads(status.stdout)
    assert doc["trials"]["COMPLETE"] == 3 and doc["pareto"] and "***" not in doc["storage"]
    out = tmp_path / "knee.json"
    assert runner.invoke(main, ["export", "exp", "--storage", sqlite_url, "--out", str(out)]).exit_code == 0
    exported = json.loads(out.read_text())
    trained = runner.invoke(main, ["train", "--config", str(out), "--device", "cpu", "--json"])
    assert trained.exit_code == 0, trained.stderr
    doc = json.loads(trained.stdout)
    assert doc["heads"] == exported["model"]["heads"]
    assert doc["val_accuracy"] == pytest.approx(exported["source"]["val_accuracy"], abs=1e-9)


@pytest.mark.slow
def test_confirm_and_heads_from_the_command_line(tmp_path, sqlite_url):
    runner = CliRunner()
    spec = write_spec(tmp_path, name="ev", n_trials=3, epochs=2, early=False)
    assert runner.invoke(main, ["study", "run", str(spec), "--storage", sqlite_url]).exit_code == 0
    result = runner.invoke(
        main, ["confirm", "ev", "--storage", sqlite_url, "--top", "1", "--seeds", "2", "--json"]
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["summary"][0]["label"].startswith("knee") and all(r["n"] == 2 for r in doc["summary"])
    # A single-head configuration is always confirmed: as the reference, or as the knee itself.
    heads_of = [
        [int(h) for h in str(r["heads"]).strip("()[] ").split(",") if h.strip()] for r in doc["summary"]
    ]
    assert any(set(h) == {1} for h in heads_of), heads_of
    out = tmp_path / "rep"
    assert runner.invoke(main, ["report", "ev", "--storage", sqlite_url, "--out", str(out)]).exit_code == 0
    text = (out / "report.md").read_text()
    assert "Confirmed across seeds" in text and "Confirmed over 2 seeds:" in text  # the headline uses them
    result = runner.invoke(
        main, ["heads", "ev", "--storage", sqlite_url, "--out", str(tmp_path / "h"), "--json"]
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert len(doc["heads_needed"]) == len(doc["heads"])
    assert all(0 <= n <= h for n, h in zip(doc["heads_needed"], doc["heads"], strict=True))
    assert doc["val_accuracy"] == pytest.approx(doc["val_accuracy_stored"], abs=1e-9)  # retrained exactly
    assert (tmp_path / "h" / "heads.md").exists()


def _wait_for_running_trial(proc: subprocess.Popen, name: str, url: str, timeout: float = 120):
    """Poll the database until a trial is RUNNING past its latency measurement, after one has completed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        try:
            trials = optuna.load_study(study_name=name, storage=url).get_trials()
        except KeyError:
            continue
        running = [t for t in trials if t.state == TrialState.RUNNING and "latency_ms" in t.user_attrs]
        if any(t.state == TrialState.COMPLETE for t in trials) and running:
            return running[0]
    return None


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_resume_retries_the_interrupted_trial(tmp_path, sqlite_url):
    spec = write_spec(tmp_path, name="ctrlc", n_trials=3, epochs=60, early=False)  # trials of several seconds
    cmd = [sys.executable, "-m", "explorer.cli", "study", "run", str(spec), "--storage", sqlite_url]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        victim = _wait_for_running_trial(proc, "ctrlc", sqlite_url)
        assert victim is not None, "the run never reached a second trial"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "resume with: explorer study resume ctrlc" in err and "Traceback" not in err
    study = optuna.load_study(study_name="ctrlc", storage=sqlite_url)
    interrupted = study.get_trials()[victim.number]
    assert interrupted.state == TrialState.FAIL and "interrupted" in interrupted.user_attrs["fail_reason"]
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert [t.system_attrs["fixed_params"] for t in queued] == [interrupted.params]
    assert not study.get_trials(states=(TrialState.RUNNING,))  # consistent: nothing left RUNNING
    resume = subprocess.run(
        [sys.executable, "-m", "explorer.cli", "study", "resume", "ctrlc", "--storage", sqlite_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resume.returncode == 0, resume.stderr
    study = optuna.load_study(study_name="ctrlc", storage=sqlite_url)
    assert len(finished(study)) == 3
    assert any(t.params == interrupted.params and t.number > interrupted.number for t in finished(study))


@pytest.mark.slow
def test_budgets_become_constraints_and_the_front_is_feasible(tmp_path, sqlite_url):
    # d_model 16 models have ~2-5k parameters, d_model 32 ones ~9-17k: a 6,000 budget splits them.
    spec = write_spec(
        tmp_path,
        name="budget",
        n_trials=6,
        epochs=1,
        sampler="random",
        extra="\n[budgets]\nmax_params = 6000\n",
    )
    handle = prepare_study(load_spec(spec), sqlite_url)
    run_study(handle)
    trials = finished(handle.study)
    assert all(set(t.constraints) == {"params"} for t in trials)  # the same key on every trial
    over = [t for t in trials if t.user_attrs["params"] > 6000]
    under = [t for t in trials if t.user_attrs["params"] <= 6000]
    assert over and under, "the budget should split this space"
    assert all(t.state == TrialState.PRUNED and t.user_attrs["epochs_run"] == 0 for t in over)  # not trained
    assert all(t.constraints["params"] == t.user_attrs["params"] - 6000 for t in trials)
    assert {t.number for t in handle.study.best_trials} <= {t.number for t in under}


RELATIONS_SPEC = """
name = "rel"
n_trials = 6
sampler = "random"
[task]
name = "relations"
options = { n_relations = 2, n_samples = 600 }
epochs = 2
batch_size = 64
[space]
d_model = [16, 32]
n_layers = [1]
heads = [1, 2, 4]
min_dk = 4
families = ["uniform"]
mlp_ratio = [2.0]
[latency]
device = "cpu"
batch_size = 16
[early_stopping]
enabled = false
"""


@pytest.mark.slow
def test_relations_report_states_whether_one_head_per_relation_held(tmp_path, sqlite_url):
    spec = tmp_path / "rel.toml"
    spec.write_text(RELATIONS_SPEC)
    handle = prepare_study(load_spec(spec), sqlite_url)
    run_study(handle)
    out = tmp_path / "rep"
    assert (
        CliRunner().invoke(main, ["report", "rel", "--storage", sqlite_url, "--out", str(out)]).exit_code == 0
    )
    text = (out / "report.md").read_text()
    assert "One head per relation? (relations task, k = 2)" in text
    # The best model with >= k heads per layer was analysed from its stored weights, one clause per layer.
    wide = [
        t
        for t in finished(handle.study)
        if t.state == TrialState.COMPLETE and min(t.user_attrs["heads"]) >= 2
    ]
    best = max(wide, key=lambda t: t.user_attrs["val_accuracy"])
    assert f"Most accurate trial with at least 2 heads in every layer (trial {best.number}," in text
    assert "layer 1: " in text and "in all, heads follow" in text
    # explorer heads adds the same measurement for any trial, per head, to heads.md and relations.csv.
    heads_out = tmp_path / "heads"
    args = [
        "heads",
        "rel",
        "--storage",
        sqlite_url,
        "--trial",
        str(best.number),
        "--out",
        str(heads_out),
        "--json",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    followed = json.loads(result.stdout)["relations_followed"]
    assert [row["layer"] for row in followed] == [0] and followed[0]["heads"] == min(best.user_attrs["heads"])
    assert "## Relations: one head per relation?" in (heads_out / "heads.md").read_text()
    rel = pd.read_csv(heads_out / "relations.csv")
    assert len(rel) == 2 * followed[0]["heads"] and rel["attention"].between(0, 1).all()
