"""Studies end to end: typed records, unique architectures, exact totals across resumes, workers and separate
commands, recovery from SIGKILL and Ctrl-C, failures that don't stop the study, bad input that changes nothing."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import sqlalchemy
import torch
from click.testing import CliRunner
from optuna.trial import TrialState

import explorer
import explorer.measure._evaluate as evaluate_module
import explorer.study._finalist_stage as stage_module
from benchmarks._chaos.processes import workers as worker_pids
from explorer import api
from explorer.answer._horizon import HorizonCheck, Shift, run_plateaued
from explorer.cli import main
from explorer.errors import (
    ConfigError,
    DeviceError,
    ExplorerError,
    SpecError,
    StorageError,
    StudyNotFoundError,
    TrainingDivergedError,
)
from explorer.layout import unit_seed
from explorer.measure import fit as real_fit
from explorer.spec import load_spec
from explorer.storage import (
    DONE_STATES,
    FINALIST_BASE,
    is_bookkeeping,
    load_records,
    load_retimings,
    open_storage,
)
from explorer.study import ArtifactStore, RunOptions, StopReason, Study
from tests.fixtures import plan_study, write_tiny_spec as write_spec

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def finished(study: optuna.Study, role: str = "search") -> list[optuna.trial.FrozenTrial]:
    return [
        t
        for t in study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))
        if not is_bookkeeping(t) and t.user_attrs.get("role", "search") == role
    ]


def keys(study: optuna.Study, role: str = "search") -> list[tuple]:
    """The configuration of every finished trial of a role (with its seed and horizon for finalists)."""
    out = []
    for r in load_records(study):
        if r.role == role and r.state in DONE_STATES:
            out.append((r.key, r.seed, r.epochs_planned) if role == "finalist" else (r.key,))
    return out


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'studies.db'}"


@pytest.mark.slow
def test_run_records_typed_trials_unique_architectures_and_keeps_totals(tmp_path, sqlite_url, one_thread):
    study = plan_study(load_spec(write_spec(tmp_path, n_trials=3)), sqlite_url).study
    summary = api.run(study)
    assert summary.search.done == 3 and summary.finalists is None  # finalists off in this spec
    records = load_records(study.optuna_study)
    assert len(records) == 3 and len({r.key for r in records}) == 3  # three different architectures
    for r in records:
        assert r.role == "search" and r.config is not None and r.seed == r.number  # spec seed 0 + number
        assert all(r.config.d_model % h == 0 and r.config.d_model // h >= 4 for h in r.heads)
        assert r.latency is not None and r.latency.median_ms > 0 and r.params and r.flops
        assert r.history and r.val_size == 270 and r.device and r.torch_version == torch.__version__
        assert r.proposal in ("sampler", "random", "unevaluated") and r.rejected >= 0
        a = study.optuna_study.trials[r.number].user_attrs  # readable for Optuna's own tools
        assert a["heads"] == list(r.heads) and a["d_model"] == r.config.d_model and a["family"] == r.family
        curve = study.optuna_study.trials[r.number].intermediate_values  # the dashboard's learning curve
        assert curve == dict(enumerate(r.history, start=1))
    assert study.optuna_study.metric_names == ["accuracy", "latency"]
    store = ArtifactStore(sqlite_url)  # weights kept for explorer heads, in the folder beside the database
    assert store.write_location.endswith("studies.artifacts") and (tmp_path / "studies.artifacts").is_dir()
    for t in study.optuna_study.get_trials(states=(TrialState.COMPLETE,)):
        assert store.has("tiny", t.number)
    # Running the same spec again does nothing: the total is reached.
    again = plan_study(load_spec(tmp_path / "tiny.toml"), sqlite_url).study
    api.run(again)
    assert len(study.optuna_study.get_trials()) == 3
    # Resuming from the database alone with a higher total tops it up to exactly that total.
    resumed = Study.open("tiny", sqlite_url)
    assert resumed.spec == study.spec
    api.run(resumed, n_trials=5)
    assert len(finished(resumed.optuna_study)) == 5 and len(set(keys(resumed.optuna_study))) == 5
    assert Study.open("tiny", sqlite_url).spec.n_trials == 5  # the new total is stored with the study


@pytest.mark.slow
def test_a_small_space_is_covered_once_then_the_study_says_so(tmp_path, sqlite_url, one_thread):
    spec = write_spec(tmp_path, n_trials=30, epochs=1, sampler="tpe")  # 24 architectures exist
    study = plan_study(load_spec(spec), sqlite_url).study
    summary = api.run(study)
    assert len(set(keys(study.optuna_study))) == len(keys(study.optuna_study)) == 24
    assert summary.search.done == 24 and summary.search.note  # it stopped short of 30, and says why
    assert summary.search.reason is StopReason.EXHAUSTED


@pytest.mark.slow
def test_nan_and_oom_fail_one_trial_and_the_study_goes_on(tmp_path, sqlite_url, monkeypatch, one_thread):
    calls = {"n": 0}

    def flaky_fit(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise TrainingDivergedError("training loss became nan at epoch 1 step 3")
        if calls["n"] == 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(evaluate_module, "fit", flaky_fit)
    study = plan_study(load_spec(write_spec(tmp_path, n_trials=2, epochs=1)), sqlite_url).study
    api.run(study)
    failed = [r for r in load_records(study.optuna_study) if r.state is TrialState.FAIL]
    assert [r.fail_reason.split(":")[0] for r in failed] == [
        "diverged",
        "out of memory on cpu while training",
    ]
    assert len(finished(study.optuna_study)) == 2


def test_bad_input_creates_nothing(tmp_path):
    db = tmp_path / "x.db"
    url = f"sqlite:///{db}"
    bad = write_spec(tmp_path, name="bad", extra="\n[space2]\nfoo = 1\n")
    with pytest.raises(SpecError, match="space2"):
        plan_study(load_spec(bad), url)
    impossible = write_spec(tmp_path, name="imp")
    impossible.write_text(impossible.read_text().replace("heads = [1, 2, 4]", "heads = [3, 5]"))
    with pytest.raises(SpecError):
        plan_study(load_spec(impossible), url)
    with pytest.raises(StudyNotFoundError, match="does not exist"):
        Study.open("nope", url)
    with pytest.raises(StorageError):
        plan_study(load_spec(write_spec(tmp_path)), "postgresql+psycopg://u:secret@127.0.0.1:1/db")
    if not torch.cuda.is_available():
        gpu = write_spec(tmp_path, name="gpu")
        gpu.write_text(gpu.read_text().replace('device = "cpu"', 'device = "cuda"'))
        with pytest.raises(DeviceError, match="CUDA is not available"):
            plan_study(load_spec(gpu), url)
    for bad_options in ({"workers": 0}, {"timeout": -1}, {"threads": 0}):
        with pytest.raises(ConfigError):
            api.run_study(write_spec(tmp_path, name="opts"), url, options=RunOptions(**bad_options))
    assert not db.exists()


@pytest.mark.parametrize(
    "args",
    [["--workers", "0"], ["--timeout", "-1"], ["--threads", "0"], ["--device", "tpu"]],
    ids=lambda a: " ".join(a),
)
def test_rejected_run_options_leave_the_disk_as_it_was(tmp_path, args):
    spec = write_spec(tmp_path, name="opts")
    result = CliRunner().invoke(
        main, ["study", "run", str(spec), "--storage", f"sqlite:///{tmp_path}/o.db", *args]
    )
    assert result.exit_code not in (0, None) and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr and not (tmp_path / "o.db").exists()


def test_a_malformed_cache_age_is_refused_before_the_storage_is_touched(tmp_path):
    spec = write_spec(tmp_path, name="age")
    result = CliRunner().invoke(
        main,
        ["study", "run", str(spec), "--storage", f"sqlite:///{tmp_path}/a.db"],
        env={"EXPLORER_CACHE_MAX_AGE": "a week"},
    )
    assert result.exit_code == 3 and len(result.stderr.strip().splitlines()) == 1
    assert "EXPLORER_CACHE_MAX_AGE='a week' is not a number of days" in result.stderr
    assert not (tmp_path / "a.db").exists()


@pytest.mark.slow
def test_a_total_below_what_is_done_is_refused_and_stores_nothing(tmp_path, sqlite_url, one_thread):
    study = plan_study(load_spec(write_spec(tmp_path, n_trials=2, epochs=1)), sqlite_url).study
    api.run(study)
    with pytest.raises(ConfigError, match="below the 2 search trials"):
        api.run(Study.open("tiny", sqlite_url), n_trials=1)
    with pytest.raises(DeviceError):  # a bad option in the same command: the new total is not stored either
        api.run(Study.open("tiny", sqlite_url), n_trials=9, options=RunOptions(device="tpu"))
    assert Study.open("tiny", sqlite_url).spec.n_trials == 2


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


def test_a_sqlite_url_with_a_query_is_found(tmp_path):
    url = f"sqlite:///{tmp_path / 'q.db'}?timeout=5"
    plan_study(load_spec(write_spec(tmp_path, name="q")), url)
    assert Study.open("q", url).spec.name == "q"  # it used to be reported missing


def test_a_spec_storage_password_is_never_stored(tmp_path, sqlite_url):
    spec = write_spec(tmp_path, name="pw", extra=f'\nstorage = "{sqlite_url}"\n')
    spec.write_text(
        f'storage = "{sqlite_url}"\n' + spec.read_text().replace(f'\nstorage = "{sqlite_url}"\n', "")
    )
    study = plan_study(load_spec(spec)).study
    assert "storage" not in study.optuna_study.user_attrs["spec"]
    pg = write_spec(tmp_path, name="pw2")
    pg.write_text('storage = "postgresql+psycopg://me:hunter2@db/x"\n' + pg.read_text())
    assert "hunter2" not in json.dumps(load_spec(pg).stored())


def test_a_changed_spec_under_the_same_name_is_refused(tmp_path, sqlite_url):
    plan_study(load_spec(write_spec(tmp_path, n_trials=2)), sqlite_url)
    changed = write_spec(tmp_path, n_trials=2, epochs=5)
    with pytest.raises(SpecError, match="different spec"):
        plan_study(load_spec(changed), sqlite_url)
    plan_study(load_spec(write_spec(tmp_path, n_trials=7)), sqlite_url)  # a new total alone is fine


def test_a_creation_killed_before_the_spec_was_stored_is_finished_by_running_the_spec_again(
    tmp_path, sqlite_url, monkeypatch
):
    """A SIGKILL between Optuna's create_study and the spec being stored (benchmarks/chaos.py caught it in 2 of 4
    rounds) left a study that neither `study resume` nor `study run SPEC` would touch, so the name was lost."""
    import explorer.study._study as study_module

    monkeypatch.setattr(study_module, "SPEC_WAIT_S", 0.3)
    monkeypatch.setattr(study_module, "CREATION_GRACE_S", 0.3)
    spec = write_spec(tmp_path, name="halfmade", n_trials=2)
    half = optuna.create_study(study_name="halfmade", storage=sqlite_url, directions=["maximize", "minimize"])
    half.set_user_attr("explorer_version", "0")  # what the killed command had written
    with pytest.raises(SpecError, match="run `explorer study run SPEC` again"):
        Study.open("halfmade", sqlite_url)
    study = plan_study(load_spec(spec), sqlite_url).study
    assert study.spec == load_spec(spec)
    assert Study.open("halfmade", sqlite_url).spec.stored() == load_spec(spec).stored()
    assert optuna.load_study(study_name="halfmade", storage=sqlite_url).user_attrs["task"] == "digits"
    # Not adopted: a spec-less study that already holds trials, or whose objectives differ from the spec's.
    for name, directions, trials in (("used", ["maximize", "minimize"], 1), ("other", ["minimize"], 0)):
        s = optuna.create_study(study_name=name, storage=sqlite_url, directions=directions)
        for _ in range(trials):
            s.enqueue_trial({})
        with pytest.raises(SpecError, match="was not created by explorer"):
            plan_study(load_spec(write_spec(tmp_path, name=name)), sqlite_url)
        assert "spec" not in optuna.load_study(study_name=name, storage=sqlite_url).user_attrs


def _assert_exact(study: optuna.Study, total: int) -> None:
    done = finished(study)
    assert len(done) == total
    assert study.get_trials(states=(TrialState.RUNNING, TrialState.WAITING)) == []
    assert len(set(keys(study))) == total  # no configuration ran twice


def _sigint_default() -> None:
    """Run in the child before exec: Ctrl-C interrupts it even when this test process ignores SIGINT (a shell
    starts background jobs with SIGINT ignored, and an ignored signal stays ignored across exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cli_run(spec: Path, url: str, *extra: str, env: dict | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "explorer", "study", "run", str(spec), "--storage", url, *extra]
    return subprocess.Popen(
        cmd,
        env=env or ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_sigint_default,
    )


@pytest.mark.slow
def test_two_workers_produce_exactly_the_total_with_no_repeats(tmp_path, storage_url, study_name):
    spec = write_spec(tmp_path, name=study_name, n_trials=6, epochs=1)
    result = CliRunner().invoke(main, ["study", "run", str(spec), "--storage", storage_url, "--workers", "2"])
    assert result.exit_code == 0, result.stderr
    _assert_exact(optuna.load_study(study_name=study_name, storage=storage_url), 6)
    # A second machine (another process) with the same URL and spec: nothing left to do, total unchanged.
    assert CliRunner().invoke(main, ["study", "run", str(spec), "--storage", storage_url]).exit_code == 0
    _assert_exact(optuna.load_study(study_name=study_name, storage=storage_url), 6)


@pytest.mark.slow
def test_two_commands_started_together_on_a_new_study(tmp_path, storage_url, study_name):
    """Two separate commands on one new study: one creates it, both work, no configuration runs twice, the
    total is exact, and neither prints a traceback or claims to have stopped short."""
    spec = write_spec(tmp_path, name=study_name, n_trials=8, epochs=1)
    procs = [_cli_run(spec, storage_url), _cli_run(spec, storage_url)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0 and "Traceback" not in err, err
        assert "stopped the" not in err, err
    _assert_exact(optuna.load_study(study_name=study_name, storage=storage_url), 8)


def _wait_for(predicate, proc: subprocess.Popen, what: str, cap: float = 600):
    """Poll until ``predicate()`` is truthy (returning it); fail if the process dies or the cap passes. The cap
    is generous: on a busy machine a trial can take minutes."""
    deadline = time.monotonic() + cap
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                f"the run exited ({proc.returncode}) before {what}: {proc.stderr.read() if proc.stderr else ''}"
            )
        try:
            found = predicate()
        except (KeyError, ValueError):
            found = None
        if found:
            return found
        time.sleep(0.2)
    pytest.fail(f"timed out after {cap} s waiting for {what}")


def _trials_if_there(name: str, url: str) -> list:
    """The study's trials read without creating or changing anything ([] while the run is still creating its
    database: Optuna's own load_study would create the file and its tables, racing the run that creates them)."""
    try:
        storage = open_storage(url, readonly=True, heartbeat=False)
    except StorageError:
        return []
    try:
        return optuna.load_study(study_name=name, storage=storage).get_trials()
    except (KeyError, sqlalchemy.exc.OperationalError):
        return []
    finally:
        storage.engine.dispose()


def _running_after_latency(name: str, url: str, at_least_done: int):
    trials = _trials_if_there(name, url)
    done = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    running = [t for t in trials if t.state == TrialState.RUNNING and "latency_ms" in t.user_attrs]
    return running[0] if len(done) >= at_least_done and running else None


def _both_stalled_with_heartbeats(name: str, url: str) -> bool:
    """Two trials done and two running with their heartbeats stored: each worker has finished its first trial
    (the stalling model holds every worker's second until the release) and runs its second, stalled, so
    whichever worker is killed leaves a trial to retry. A worker still in its first, full-speed trial could
    finish it between this check and the kill and be killed between two trials (seen in CI)."""
    trials = _trials_if_there(name, url)
    done = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    running = [t for t in trials if t.state == TrialState.RUNNING]
    return len(done) >= 2 and len(running) == 2 and all(_heartbeat_landed(url, t._trial_id) for t in running)


def _heartbeat_landed(url: str, trial_id: int) -> bool:
    """Whether the trial's heartbeat is in the SQLite study (so the resume can see it go stale)."""
    with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
        return (
            db.execute("SELECT 1 FROM trial_heartbeats WHERE trial_id = ?", (trial_id,)).fetchone()
            is not None
        )


# The second trial a run's process trains waits this long before each of its 24 batches (2 epochs of 12): it is
# still running when the test kills or interrupts it, while the trial before it and the resume's trials (which
# do not set the variable) train at full speed.
STALL = {"EXPLORER_TEST_STALL": "0.5"}


def _stalling_spec(tmp_path: Path, name: str, total: int) -> Path:
    build = f"{Path(__file__).resolve().parents[1] / 'usermodels.py'}:stalls_its_second_training"
    return write_spec(
        tmp_path, name=name, n_trials=total, epochs=2, early=False, extra=f'\n[model]\nbuild = "{build}"\n'
    )


def _sigkill_then_resume(tmp_path: Path, url: str, name: str, total: int, kill_after_done: int) -> None:
    env = {**ENV, "EXPLORER_HEARTBEAT_INTERVAL": "1", "EXPLORER_GRACE_PERIOD": "2"}
    spec = _stalling_spec(tmp_path, name, total)
    cmd = [sys.executable, "-m", "explorer", "study", "run", str(spec), "--storage", url]
    proc = subprocess.Popen(
        cmd, env={**env, **STALL}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        victim = _wait_for(
            lambda: _running_after_latency(name, url, kill_after_done), proc, "a running trial"
        )
        # then kill at once
        _wait_for(lambda: _heartbeat_landed(url, victim._trial_id), proc, "its heartbeat")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    study = optuna.load_study(study_name=name, storage=url)
    before = {t.number: t.values for t in study.get_trials(states=(TrialState.COMPLETE,))}
    assert study.get_trials()[victim.number].state == TrialState.RUNNING
    # Resumed at once (inside the grace period): it waits for the dead trial to go stale, fails it, retries it.
    # the resume in this process (a command line through click's runner: no second start-up of torch)
    resume = CliRunner().invoke(main, ["study", "resume", name, "--storage", url], env=env)
    assert resume.exit_code == 0, resume.stderr
    assert "stopped the" not in resume.stderr, resume.stderr
    study = optuna.load_study(study_name=name, storage=url)
    killed = [r for r in load_records(study) if r.number == victim.number][0]
    assert killed.state is TrialState.FAIL and "heartbeats" in killed.fail_reason
    retried = [r for r in load_records(study) if r.retry_of == victim.number]
    assert retried and retried[0].state in DONE_STATES and retried[0].seed == killed.seed
    assert len(finished(study)) == total
    after = {t.number: t.values for t in study.get_trials(states=(TrialState.COMPLETE,))}
    assert all(after[n] == v for n, v in before.items())


@pytest.mark.slow
def test_sigkill_mid_study_then_resume_loses_nothing(tmp_path, sqlite_url):
    _sigkill_then_resume(tmp_path, sqlite_url, "killme", total=3, kill_after_done=1)


@pytest.mark.slow
def test_sigkill_during_the_last_trial_does_not_stick_the_study(tmp_path, sqlite_url):
    """Killed while running its last trial, the study used to stay below its total for good: the dead trial
    counted as running and every resume ran nothing."""
    _sigkill_then_resume(tmp_path, sqlite_url, "lastone", total=2, kill_after_done=1)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="finds worker processes through /proc")
def test_one_of_two_workers_killed_the_other_finishes_and_the_command_says_so_truthfully(
    tmp_path, sqlite_url
):
    """SIGKILL of one of 2 workers (benchmarks/chaos.py): the other worker retried its trial and finished the
    search, yet the command exited 2 with "1 worker(s) exited with an error (codes [-9]); rerun with -v"."""
    env = {**ENV, "EXPLORER_HEARTBEAT_INTERVAL": "1", "EXPLORER_GRACE_PERIOD": "2"}
    spec = _stalling_spec(tmp_path, "twokill", 4)
    cmd = [sys.executable, "-m", "explorer", "study", "run", str(spec), "--storage", sqlite_url]
    release = tmp_path / "release"  # made once one worker is killed: the survivor's stalled trial goes on
    proc = subprocess.Popen(
        [*cmd, "--workers", "2"],
        env={**env, **STALL, "EXPLORER_TEST_STALL_UNTIL": str(release)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(lambda: _running_after_latency("twokill", sqlite_url, 1), proc, "a running trial")
        workers = _wait_for(lambda: worker_pids(proc.pid), proc, "the worker processes")
        # Kill only while both workers hold a stalled trial whose heartbeat is stored: whichever worker dies
        # then leaves a trial to retry (killing one between two trials left nothing to retry, seen in CI).
        _wait_for(lambda: _both_stalled_with_heartbeats("twokill", sqlite_url), proc, "two stalled trials")
        os.kill(workers[0], signal.SIGKILL)
        release.touch()
        _, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "stopped the" not in err
    study = optuna.load_study(study_name="twokill", storage=sqlite_url)
    _assert_exact(study, 4)
    assert any(r.retry_of is not None and r.finished for r in load_records(study))


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_resume_retries_the_interrupted_trial(tmp_path, sqlite_url):
    spec = _stalling_spec(tmp_path, "ctrlc", 3)
    proc = _cli_run(spec, sqlite_url, env={**ENV, **STALL})
    try:
        victim = _wait_for(lambda: _running_after_latency("ctrlc", sqlite_url, 1), proc, "a running trial")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "resume with: explorer study resume ctrlc" in err and "Traceback" not in err
    study = optuna.load_study(study_name="ctrlc", storage=sqlite_url)
    interrupted = study.get_trials()[victim.number]
    assert interrupted.state == TrialState.FAIL and "interrupted" in interrupted.user_attrs["fail_reason"]
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert [t.system_attrs["fixed_params"] for t in queued] == [interrupted.params]
    assert queued[0].user_attrs["retry_of"] == interrupted.number
    assert not study.get_trials(states=(TrialState.RUNNING,))  # consistent: nothing left RUNNING
    resume = CliRunner().invoke(main, ["study", "resume", "ctrlc", "--storage", sqlite_url])
    assert resume.exit_code == 0, resume.stderr
    study = optuna.load_study(study_name="ctrlc", storage=sqlite_url)
    assert len(finished(study)) == 3
    assert any(t.params == interrupted.params and t.number > interrupted.number for t in finished(study))


@pytest.mark.slow
def test_budgets_become_constraints_and_over_budget_trials_are_not_trained(tmp_path, sqlite_url, one_thread):
    # d_model 16 models have ~2-5k parameters, d_model 32 ones ~9-17k: a 6,000 budget splits them.
    spec = write_spec(
        tmp_path,
        name="budget",
        n_trials=6,
        epochs=1,
        sampler="random",
        extra="\n[budgets]\nmax_params = 6000\n",
    )
    plan = plan_study(load_spec(spec), sqlite_url)
    study = plan.study
    # the sampler draws a stream of its own on each run, so 6 random draws could all fall on one side (~1.4%):
    # one layout of each width goes first, the rest are drawn
    space = plan.context.space
    for width in (16, 32):
        point = next(p for p in space.points() if p.config.d_model == width)
        study.optuna_study.enqueue_trial(point.params)
    api.run(study)
    trials = finished(study.optuna_study)
    assert len(trials) == 6
    assert all(set(t.constraints) == {"params"} for t in trials)  # the same key on every trial
    records = {r.number: r for r in load_records(study.optuna_study)}
    over = [t for t in trials if records[t.number].params > 6000]
    under = [t for t in trials if records[t.number].params <= 6000]
    assert over and under, "the budget should split this space"
    assert all(t.state == TrialState.PRUNED and records[t.number].epochs_run == 0 for t in over)
    assert all(t.constraints["params"] == records[t.number].params - 6000 for t in trials)


@pytest.mark.slow
def test_a_pilot_chooses_the_horizon_the_grid_trains_and_the_deciding_comparisons_train_twice_as_long(
    tmp_path, sqlite_url, one_thread
):
    spec = write_spec(
        tmp_path,
        name="pil",
        n_trials=3,
        epochs=1,
        finalists=True,
        folds=2,
        pilot=True,
        extra="timing_rounds = 1\nhorizon_cap = 8\nbudget = 12\n",
    )
    study = plan_study(load_spec(spec), sqlite_url).study
    summary = api.run(study)
    plan = summary.plan
    finals = [r for r in load_records(study.optuna_study) if r.role == "finalist" and r.finished]
    ans = explorer.recommend("pil", sqlite_url)
    h = ans.horizon
    assert h.piloted and h.chosen and h.epochs in (2, 4, 8) and h.cap == 8
    # every finished run wrote whether its curve had flattened, as the report judges it (a curve of fewer than 4
    # epochs is too short to judge)
    assert all(r.plateaued is run_plateaued(dataclasses.replace(r, plateaued=None)) for r in finals)
    assert all((r.plateaued is not None) == (r.epochs_run >= 4) for r in finals)
    # the pilot: at most two layouts (the most accurate and the fastest) on the first units, at each horizon
    # it tried and at twice it; it stopped at the first doubling that did not gain
    pilots = [r for r in finals if r.purpose == "pilot"]
    tried = sorted({r.epochs_planned for r in pilots})
    assert tried == [2 * 2**k for k in range(len(h.doublings) + 1)]
    assert h.epochs == (tried[-1] if h.capped else tried[-2])  # at the cap while still gaining: the cap
    assert 1 <= len({r.key for r in pilots}) <= 2
    assert {r.seed for r in pilots} == {unit_seed(0, u) for u in range(plan.start)}
    assert [d.gained for d in h.doublings][:-1] == [True] * (len(h.doublings) - 1)
    assert not h.doublings[-1].gained or h.capped
    # the grid: every layout on the first units at the chosen horizon (a pilot run there is one of them)
    grid = [r for r in finals if r.epochs_planned == h.epochs and r.purpose != "horizon check"]
    assert {r.key for r in grid} == set(plan.keys) and all(r.epochs_run == h.epochs for r in grid)
    assert all(a.n == sum(r.key == a.key for r in grid) for a in ans.candidates)
    # the check: the answer, the best and the next faster layout on the first units at twice the horizon
    checked = {
        r.key
        for r in finals
        if r.epochs_planned == 2 * h.epochs and r.seed in {unit_seed(0, u) for u in range(3)}
    }
    roles = {ans.recommended.key, ans.best.key} | ({ans.next_faster.arch.key} if ans.next_faster else set())
    if summary.finalists.reason in (StopReason.BUDGET, StopReason.MINUTES):  # undecided: nothing to check yet
        assert not any(r.purpose == "horizon check" for r in finals)
    elif roles != {ans.recommended.key}:
        assert roles <= checked and ans.check is not None and not ans.check.pending
        assert {s.layout for s in ans.check.shifts} == roles - {ans.best.key}
    # resuming runs nothing more: the pilot, the grid and the check are pure functions of the records
    before = len([r for r in load_records(study.optuna_study) if r.role == "finalist"])
    assert api.run(Study.open("pil", sqlite_url)).added == 0
    assert len([r for r in load_records(study.optuna_study) if r.role == "finalist"]) == before


@pytest.mark.slow
def test_finalists_start_on_paired_units_spend_the_rest_where_it_decides_and_confirm_continues(
    tmp_path, sqlite_url, one_thread, monkeypatch
):
    spec = write_spec(
        tmp_path, name="fin", n_trials=4, epochs=1, finalists=True, folds=2, extra="timing_rounds = 2\n"
    )
    study = plan_study(load_spec(spec), sqlite_url).study
    summary = api.run(study)
    plan = summary.plan
    assert plan is not None and plan.knee is not None
    n_archs = len(plan.layouts)
    assert plan.budget == 2 * 2 * n_archs  # seeds x folds a layout: what the fixed grid cost
    labels = {run.label for run in plan.runs}
    # the one-head reference at the knee's width and depth, unless the knee (measured, so it varies) is that layout
    one_head_knee = set(plan.knee.config.heads) == {1}
    assert "knee" in labels and ("1 head" in labels or one_head_knee)
    every = [r for r in load_records(study.optuna_study) if r.role == "finalist"]
    assert all(r.state is TrialState.COMPLETE for r in every) and len(every) == summary.finalists.done
    # the horizon check tests a verdict: a stage that ended undecided queued none of its runs
    if summary.finalists.reason in (StopReason.BUDGET, StopReason.MINUTES):
        assert not any(r.purpose == "horizon check" for r in every)
    # the horizon check's runs (twice as long, on the first units) are not the grid's, nor its budget's
    finals = [r for r in every if r.purpose != "horizon check"]
    assert len(finals) <= plan.budget
    assert all(
        r.epochs_planned == 4 and r.seed in {unit_seed(0, u) for u in range(3)}
        for r in every
        if r not in finals
    )
    # the companion study Optuna's tools load: each run's learning curve, and its layout as params
    companion = {
        t.number + FINALIST_BASE: t
        for t in optuna.load_study(study_name="fin/finalists", storage=sqlite_url).trials
    }
    for r in every:
        t = companion[r.number]
        assert t.intermediate_values == dict(enumerate(r.history, start=1)) and len(r.history) == r.epochs_run
        assert [t.params[f"heads_layer{i}"] for i in range(len(r.heads))] == list(r.heads)
        assert (t.params["d_model"], t.params["n_layers"]) == (r.config.d_model, len(r.heads))
    # every layout first trains on the same 3 units (their own seeds, no search trial's) ...
    first = {unit_seed(0, u) for u in range(3)}
    units: dict[str, set[int]] = {}
    for r in finals:
        units.setdefault(r.key, set()).add(r.seed)
    assert len(units) == n_archs and all(first <= seeds for seeds in units.values())
    # ... and a later unit goes to the layouts still deciding the answer, always more than one: paired
    later = collections.Counter(r.seed for r in finals if r.seed not in first)
    assert all(n >= 2 for n in later.values())
    for r in finals:  # unit u is fold u % 2 of replicate u // 2, for every layout
        u = r.seed - unit_seed(0, 0)
        assert (r.fold, r.folds) == (u % 2, 2) and r.fold_seed is not None
    assert len({r.val_size for r in finals}) <= 2 and finals[0].val_size > 270  # a fold of 1,527, not 270
    # the fixed schedule (by default twice a search trial's epochs), never cut
    assert all(r.epochs_planned == 2 and r.epochs_run == 2 for r in finals)
    assert all(not r.latency.cached for r in finals)  # timed afresh, each its own measurement
    assert len(set(keys(study.optuna_study, "finalist"))) == len(every)
    # every finalist is timed again in interleaved rounds with nothing else running, before the stage trains
    # them: the rounds say which layouts are faster, and so where the runs decide
    retimed = load_retimings(study.optuna_study)
    busy = {t.round for t in retimed if t.latency.busy} & {0, 1}  # timed on a busy machine: re-timed once
    rounds = set(range(2 + len(busy)))
    assert len(retimed) == len(rounds) * n_archs and {t.round for t in retimed} == rounds
    assert {t.key for t in retimed} == set(plan.keys)
    # each round in a process of its own, none of them this one: the spread between rounds includes what differs
    # between processes, as a user's own timing of the model does
    pids = {t.round: {u.pid for u in retimed if u.round == t.round} for t in retimed}
    assert all(len(p) == 1 for p in pids.values()) and len({next(iter(p)) for p in pids.values()}) == len(
        rounds
    )
    assert os.getpid() not in {t.pid for t in retimed}
    # Resuming plans the same runs: nothing new.
    assert api.run(Study.open("fin", sqlite_url)).added == 0
    # confirm --until-decided spends at most its budget, where the answer is still open (nothing once decided).
    # 3 runs a layout fit any next round this stage can leave (its smallest: one unit more than the most any
    # layout has, each filling the units it lacks); a smaller budget may fit none, and then nothing runs.
    decided = explorer.recommend("fin", sqlite_url).decided
    budget = 3 * n_archs
    result = CliRunner().invoke(
        main,
        ["confirm", "fin", "--storage", sqlite_url, "--until-decided", "--budget", str(budget), "--json"],
    )
    doc = json.loads(result.stdout)
    queued, reason = doc["finalist_runs_queued"], doc["finalists"]["reason"]
    # exit 6 only where nothing could be queued and the answer is not decided (the stop reason says why)
    assert result.exit_code == (6 if queued == 0 and reason is not None else 0), result.stderr
    # a confirm that moves the answer checks its new deciding comparisons too
    seen = {r.number for r in every}
    checks = sum(
        r.purpose == "horizon check" and r.number not in seen
        for r in load_records(study.optuna_study, roles=("finalist",))
    )
    assert (
        doc["finalist_runs_queued"] <= budget
        and doc["finalists"]["done"] == len(every) + doc["finalist_runs_queued"] + checks
    )
    # an undecided answer either gets runs or a reason: its horizon check's longer runs contradict the verdict
    # (short runs of tiny models can flip), which the answer every command reads says too
    found = explorer.recommend("fin", sqlite_url)
    assert decided or queued > 0 or (reason == "horizon" and found.contradicted)
    assert (reason == "horizon") == found.contradicted
    # a budget that cannot hold the next deciding round queues nothing and says what that round needs (exit 6)
    decided = found.decided
    short = CliRunner().invoke(
        main, ["confirm", "fin", "--storage", sqlite_url, "--until-decided", "--budget", "1"]
    )
    if decided:
        assert short.exit_code == 0, short.stderr
    elif found.contradicted:
        assert short.exit_code == 6 and f"--set finalists.epochs={found.check.long}" in short.stderr
    else:
        assert short.exit_code == 6, short.stderr
        need = int(re.search(r"--until-decided --budget (\d+)", short.stderr).group(1))
        assert need > 1 and f"the next round that decides needs {need} runs" in short.stderr
        again = CliRunner().invoke(
            main,
            ["confirm", "fin", "--storage", sqlite_url, "--until-decided", "--budget", "1", "--json"],
        )
        assert again.exit_code == 6
        stop = json.loads(again.stdout)["finalists"]
        assert (stop["reason"], stop["need"]) == ("budget", need)
        moved = CliRunner().invoke(
            main,
            ["confirm", "fin", "--storage", sqlite_url, "--until-decided", "--budget", str(need), "--json"],
        )
        assert moved.exit_code == 0 and json.loads(moved.stdout)["finalist_runs_queued"] >= 1
    # a verdict the horizon check's longer runs contradict stops the stage for that reason, whatever its grid
    # says: more runs at this horizon cannot decide it, so confirm names the longer study rather than exit 0
    real = explorer.recommend("fin", sqlite_url)
    shift = Shift(
        "answer", real.recommended.key, real.best.key, 2, (0.0, -0.01, 0.01), (0.05, 0.03, 0.07), False, True
    )
    contradicted = dataclasses.replace(real, check=HorizonCheck(2, 4, (shift,)), decided=False)
    with monkeypatch.context() as patched:
        patched.setattr(stage_module, "answer", lambda *args, **kwargs: contradicted)
        stopped = CliRunner().invoke(
            main, ["confirm", "fin", "--storage", sqlite_url, "--until-decided", "--budget", "1", "--json"]
        )
    assert stopped.exit_code == 6, stopped.stderr
    fin = json.loads(stopped.stdout)["finalists"]
    assert fin["reason"] == "horizon" and "--set finalists.epochs=4" in fin["note"] and fin["need"] == 0
    assert fin["to_decide"] is None  # no number of runs at this horizon decides it
    # confirm --seeds 3: every finalist on every unit of 3 replicates (a fixed grid)
    result = CliRunner().invoke(main, ["confirm", "fin", "--storage", sqlite_url, "--seeds", "3", "--json"])
    assert result.exit_code == 0, result.stderr
    grid = {}
    for r in load_records(study.optuna_study, roles=("finalist",)):
        grid.setdefault(r.key, set()).add(r.seed)
    assert all({unit_seed(0, u) for u in range(6)} <= seeds for seeds in grid.values())
    refused = CliRunner().invoke(
        main, ["confirm", "fin", "--storage", sqlite_url, "--seeds", "3", "--until-decided"]
    )
    assert refused.exit_code != 0 and "exclude each other" in refused.stderr
    # a finalist run is named as Optuna's tools show it, and taken back in that form
    out = tmp_path / "run.json"
    exported = CliRunner().invoke(
        main, ["export", "fin", "--storage", sqlite_url, "--trial", "finalists#0", "--out", str(out)]
    )
    assert exported.exit_code == 0, exported.stderr
    assert "wrote trial fin/finalists#0 " in exported.stdout and str(FINALIST_BASE) not in exported.stdout
    assert json.loads(out.read_text())["source"]["trial"] == FINALIST_BASE


@pytest.mark.slow
def test_status_list_and_export_retrain_exactly(tmp_path, sqlite_url, one_thread):
    runner = CliRunner()
    spec = write_spec(tmp_path, name="exp", n_trials=3, epochs=2, early=False)
    assert runner.invoke(main, ["study", "run", str(spec), "--storage", sqlite_url]).exit_code == 0
    listed = json.loads(runner.invoke(main, ["study", "list", "--storage", sqlite_url, "--json"]).stdout)
    assert [(r["name"], r["total"], r["trials"]["COMPLETE"]) for r in listed] == [("exp", 3, 3)]
    status = runner.invoke(main, ["study", "status", "exp", "--storage", sqlite_url, "--json"])
    doc = json.loads(status.stdout)
    assert doc["trials"]["search"]["COMPLETE"] == 3 and len(doc["best"]) == 3
    out = tmp_path / "knee.json"
    assert runner.invoke(main, ["export", "exp", "--storage", sqlite_url, "--out", str(out)]).exit_code == 0
    exported = json.loads(out.read_text())
    trained = runner.invoke(main, ["train", "--config", str(out), "--device", "cpu", "--json"])
    assert trained.exit_code == 0, trained.stderr
    doc = json.loads(trained.stdout)
    assert doc["heads"] == exported["model"]["heads"]
    assert doc["val_accuracy"] == pytest.approx(exported["source"]["val_accuracy"], abs=1e-9)


TEXT_KV_SPEC = """
name = "{name}"
n_trials = 5
sampler = "random"
bench = false

[objectives]
decode = "minimize"

[task]
name = "text"
options = {{ context = 16, max_bytes = 20000 }}
epochs = 1
batch_size = 64

[space]
d_model = [16]
n_layers = [1]
heads = [2, 4]
kv_heads = [1, 2, 4]
families = ["uniform"]

[latency]
device = "cpu"
batch_size = 4
min_run_time = 0.02

[decode]
context = 32
batch_size = 2

[budgets]
max_kv_cache_mb = 1.0

[early_stopping]
enabled = false

[finalists]
top = 1
seeds = 2
folds = 1
epochs = 8                 # long enough to beat a unigram model (else the study has no answer)
timing_rounds = 1
"""


@pytest.mark.slow
def test_a_text_study_with_kv_heads_runs_end_to_end(tmp_path, sqlite_url, one_thread):
    """Bits per byte minimized, decoding measured and re-timed, the whole space searched once, finalists with the
    multi-head and multi-query references, and a report that answers with (heads, kv_heads)."""
    path = tmp_path / "lm.toml"
    path.write_text(TEXT_KV_SPEC.format(name="lm"))
    summary = api.run_study(path, sqlite_url)
    study = Study.open("lm", sqlite_url).optuna_study
    assert [d.name for d in study.directions] == ["MINIMIZE", "MINIMIZE", "MINIMIZE"]
    assert summary.search.done == 5 and not summary.search.note  # the whole space, each architecture once
    search = [r for r in load_records(study) if r.role == "search" and r.finished]
    assert sorted((r.heads[0], r.config.kv_per_layer[0]) for r in search) == [
        (2, 1),
        (2, 2),
        (4, 1),
        (4, 2),
        (4, 4),
    ]
    for r in search:
        t = study.trials[r.number]
        assert t.values[0] == pytest.approx(r.val_bpb) and t.values[2] == pytest.approx(r.decode_ms)
        assert r.task_kind == "language_model" and r.val_bpb_se > 0 and r.history == (r.val_bpb,)
        assert t.user_attrs["constraints"]["kv_cache_mb"] <= 0  # the cache budget is a constraint (met here)
    finals = [r for r in load_records(study) if r.role == "finalist"]
    knee = next(r for r in finals if r.label == "knee").config
    layouts = {(r.config.heads, r.config.kv_per_layer) for r in finals}
    assert (knee.heads, knee.heads) in layouts and (knee.heads, (1,)) in layouts
    kinds = {(t.kind, t.round) for t in load_retimings(study)}
    assert {("decode", 0), ("forward", 0)} <= kinds
    paths = api.report("lm", sqlite_url, out=tmp_path / "report", keep_figures=False)
    md = paths.markdown.read_text()
    assert "key/value head" in md.split("## The answer")[1].split("##")[0]
    assert "| Grouped-query attention keeps" in md


def test_a_failed_retiming_round_is_one_error_line_and_keeps_what_was_timed(tmp_path, sqlite_url):
    from explorer.layout import ModelConfig
    from explorer.storage import arch_key
    from explorer.study._retime import retime

    study = plan_study(load_spec(write_spec(tmp_path, name="rt")), sqlite_url).study
    config = ModelConfig(d_model=16, heads=(2,))
    key = arch_key(config, 1e-3)
    # in this process: one timing per round, stored as it is made
    timed = retime(study, [(key, config)], rounds=2, device=torch.device("cpu"), fresh_processes=False)
    assert [(t.key, t.round, t.pid) for t in timed] == [(key, 0, os.getpid()), (key, 1, os.getpid())]
    # a round whose process cannot open the study: one line naming the round, the stored timings untouched
    lost = dataclasses.replace(study, url=f"sqlite:///{tmp_path / 'elsewhere.db'}")
    with pytest.raises(ExplorerError, match=r"^re-timing round 3 failed: \w+: .*resume rt") as info:
        retime(lost, [(key, config)], rounds=3, device=torch.device("cpu"))
    assert "\n" not in str(info.value)
    assert [(t.round, t.pid) for t in load_retimings(study.optuna_study)] == [
        (0, os.getpid()),
        (1, os.getpid()),
    ]
    # a study in an in-memory database, which no other process can open, is timed in this one
    memory = plan_study(load_spec(write_spec(tmp_path, name="rt-mem")), "sqlite:///:memory:").study
    assert {t.pid for t in retime(memory, [(key, config)], rounds=2, device=torch.device("cpu"))} == {
        os.getpid()
    }


def test_a_changed_spec_says_what_differs_and_which_wins():
    from explorer.study._rerun import differences

    stored = {"seed": 0, "space": {"heads": [1, 2], "d_model": [16]}, "task": {"options": {"k": 1}}}
    given = {"seed": 1, "space": {"heads": [1, 2, 4], "d_model": [16]}, "task": {"options": {"k": 1, "j": 2}}}
    assert differences(stored, given) == [
        "'seed' is 0 stored, 1 in the file",
        "[space] heads is [1, 2] stored, [1, 2, 4] in the file",
        "[task] options.j is absent stored, 2 in the file",
    ]
    assert differences(stored, stored) == []


def test_a_space_of_one_architecture_stops_because_it_is_used_up(tmp_path, sqlite_url):
    """With a total far above the space, the search ends after its one architecture and says why (no 50
    proposals "taken by other workers" with one worker), and the bar's total is the space, not the total."""
    extra = "\n".join(
        ["[space]", "d_model = [16]", "n_layers = [1]", "heads = [2]", "families = ['uniform']"]
    )
    spec = write_spec(tmp_path, name="one", n_trials=1000, epochs=1).read_text().split("[space]")
    rest = spec[1].split("[latency]", 1)[1]
    path = tmp_path / "one.toml"
    path.write_text(spec[0] + extra + "\n[latency]" + rest)
    stages = []
    summary = api.run(
        plan_study(load_spec(path), sqlite_url).study, on_stage=lambda s, n: stages.append((s, n))
    )
    assert summary.search.done == 1 and summary.search.note.startswith(
        "the search space has no architecture left"
    )
    assert summary.search.reason is StopReason.EXHAUSTED
    assert stages[0] == ("search", 1)


def test_a_study_opens_read_only_or_to_write_with_its_spec_and_refuses_a_missing_name(created_study):
    from explorer.errors import StudyNotFoundError

    _, url = created_study
    for write in (False, True):
        study = Study.open("tiny", url, write=write)
        assert study.name == "tiny" and study.spec.n_trials == 3 and study.url == url
        assert study.writable is write and study.writable_copy().writable
        with pytest.raises(StudyNotFoundError, match="no study 'other'"):
            Study.open("other", url, write=write)


def test_note_answer_keeps_the_answer_with_the_study(created_study):
    from explorer.study._study import ANSWER_ATTR

    _, url = created_study
    assert Study.open("tiny", url).note_answer((2, 2), "**The answer**")
    kept = optuna.load_study(study_name="tiny", storage=url).user_attrs[ANSWER_ATTR]
    assert kept["heads"] == [2, 2] and kept["opening"] == "**The answer**"


def test_the_artifact_store_of_a_study_opened_to_read_writes_where_it_is_told(created_study, tmp_path):
    from explorer.study import artifact_store

    _, url = created_study
    store = artifact_store(Study.open("tiny", url), location=str(tmp_path / "weights"))
    assert isinstance(store, ArtifactStore) and not store.has("tiny", 0)
    assert store.writable  # a writable storage: weights retrained for a report are kept
    assert store.write_location == str(tmp_path / "weights") and store.storage_url == url
