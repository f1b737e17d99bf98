"""Trained weights through optuna.artifacts: round trips, where they live, the size limit, refusing pickles, and
report files replaced in place. Storage-dependent tests run on SQLite and (with a server) PostgreSQL."""

from __future__ import annotations

import io
import os
import pickle

import optuna
import pytest
import torch
from optuna.artifacts import get_all_artifact_meta
from optuna.trial import TrialState
from torch import nn

from explorer.errors import DataError, MissingExtraError, StorageError
from explorer.storage import ARTIFACTS_ENV, check_artifact_location, open_storage
from explorer.study import ArtifactStore
from explorer.study._artifacts import artifact_root_for, open_backend

optuna.logging.set_verbosity(optuna.logging.ERROR)


def tiny(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


@pytest.fixture
def study(storage_url, study_name):
    storage = open_storage(storage_url, heartbeat=False)
    return optuna.create_study(study_name=study_name, storage=storage, directions=["maximize", "minimize"])


class NotATensor:
    pass


def test_weights_round_trip_exactly_and_show_on_the_trial(study, storage_url, tmp_path, monkeypatch):
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    store = ArtifactStore(storage_url, str(tmp_path / "art"), storage=study._storage)
    running = study.ask()
    model = tiny()
    artifact_id = store.save(study.study_name, running.number, model)
    assert store.has(study.study_name, running.number) and not store.has(study.study_name, 99)
    state = store.load_state(study.study_name, running.number)
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    # Optuna's own readers (and optuna-dashboard) see the file on the trial that produced it.
    metas = get_all_artifact_meta(study.trials[running.number], storage=study._storage)
    assert [(m.artifact_id, m.filename) for m in metas] == [(artifact_id, f"trial-{running.number:05d}.pt")]
    # A finished trial is frozen: weights stored for it later (a retrain) hang on the study instead.
    study.tell(running, [0.5, 1.0])
    again = store.save(study.study_name, running.number, tiny(1))
    assert again in {m.artifact_id for m in get_all_artifact_meta(study)}
    assert not (tmp_path / "art" / artifact_id).exists()  # the replaced file is removed from the store
    fresh = ArtifactStore(storage_url, str(tmp_path / "art"))  # a second process: its own connection
    assert torch.equal(fresh.load_state(study.study_name, running.number)["0.weight"], tiny(1)[0].weight)


def test_a_reader_finds_weights_where_they_were_written(study, storage_url, tmp_path, monkeypatch):
    """The index records the location, so another process (another cwd, no options) reads the same store; an
    explicit location or EXPLORER_ARTIFACTS overrides it (a share mounted elsewhere)."""
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    writer = ArtifactStore(storage_url, str(tmp_path / "shared"), storage=study._storage)
    writer.save(study.study_name, study.ask().number, tiny())
    monkeypatch.chdir(tmp_path)
    reader = ArtifactStore(storage_url)  # default location would be elsewhere
    assert reader.write_location != writer.write_location and reader.has(study.study_name, 0)
    moved = tmp_path / "mounted-elsewhere"
    (tmp_path / "shared").rename(moved)
    assert not ArtifactStore(storage_url).has(study.study_name, 0)
    monkeypatch.setenv(ARTIFACTS_ENV, str(moved))
    assert ArtifactStore(storage_url).has(study.study_name, 0)
    assert (
        ArtifactStore(storage_url, str(moved)).load_state(study.study_name, 0).keys()
        == tiny().state_dict().keys()
    )


def test_relative_locations_are_recorded_absolute_and_reads_create_nothing(
    study, storage_url, tmp_path, monkeypatch
):
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    writer = ArtifactStore(storage_url, "rel-art", storage=study._storage)
    writer.save(study.study_name, study.ask().number, tiny())
    assert writer.index(study.study_name)[0]["location"] == str(tmp_path / "a" / "rel-art")
    monkeypatch.chdir(tmp_path / "b")  # another process, another folder: the recorded path still resolves
    reader = ArtifactStore(storage_url)
    assert reader.has(study.study_name, 0) and not reader.has(study.study_name, 5)
    assert list((tmp_path / "b").iterdir()) == []  # looking (also in the default location) created nothing


def test_size_limit_removes_the_oldest_and_prune_keeps_the_chosen(study, storage_url, tmp_path):
    probe = ArtifactStore(storage_url, str(tmp_path / "probe"), storage=study._storage)
    probe.save(study.study_name, study.ask().number, tiny())
    size = probe.total_bytes(study.study_name)
    store = ArtifactStore(storage_url, str(tmp_path / "a"), max_bytes=int(2.5 * size), storage=study._storage)
    numbers = [0] + [study.ask().number for _ in range(3)]
    for n in numbers:
        store.save(study.study_name, n, tiny())
    assert [store.has(study.study_name, n) for n in numbers] == [False, False, True, True]
    assert store.total_bytes(study.study_name) <= store.max_bytes
    assert len(os.listdir(tmp_path / "a")) == 2  # evicted files are gone from the store, not just unindexed
    roomy = ArtifactStore(storage_url, str(tmp_path / "a"), storage=study._storage)
    assert roomy.prune(study.study_name, keep={numbers[3]}) == [numbers[2]]
    assert roomy.has(study.study_name, numbers[3])


def test_planted_pickles_and_non_state_dicts_are_refused(study, storage_url, tmp_path):
    store = ArtifactStore(storage_url, str(tmp_path / "a"), storage=study._storage)
    trial = study.ask()
    artifact_id = store.save(study.study_name, trial.number, tiny())
    backend = store.backend(store.write_location)
    backend.write(artifact_id, io.BytesIO(pickle.dumps({"w": NotATensor()}, protocol=2)))
    with pytest.raises(DataError, match="not a plain tensor file"):
        store.load_state(study.study_name, trial.number)
    buf = io.BytesIO()
    torch.save({"w": [1, 2]}, buf)  # loads under weights_only, but is no state_dict
    backend.write(artifact_id, io.BytesIO(buf.getvalue()))
    with pytest.raises(DataError, match="state_dict of tensors"):
        store.load_state(study.study_name, trial.number)
    with pytest.raises(DataError, match="no stored weights"):
        store.load_state(study.study_name, 42)
    os.remove(tmp_path / "a" / artifact_id)
    assert not store.has(study.study_name, trial.number)  # indexed, but the file is gone: retrain it


def test_study_files_are_replaced_in_place(study, storage_url, tmp_path):
    store = ArtifactStore(storage_url, str(tmp_path / "a"), storage=study._storage)
    fig = tmp_path / "pareto.png"
    fig.write_bytes(b"first")
    first = store.save_file(study.study_name, fig)
    fig.write_bytes(b"second")
    assert store.save_file(study.study_name, fig) == first
    assert [m.filename for m in get_all_artifact_meta(study)] == ["pareto.png"]  # no stale copies listed
    assert (tmp_path / "a" / first).read_bytes() == b"second"


def test_location_forms_and_one_line_errors(tmp_path):
    assert artifact_root_for(f"sqlite:///{tmp_path}/x/quick.db") == tmp_path / "x" / "quick.artifacts"
    assert str(artifact_root_for("postgresql+psycopg://u:p@h/db")) == "studies/artifacts"
    assert check_artifact_location(f"file://{tmp_path}/w") == f"file://{tmp_path}/w"
    (tmp_path / "f").write_text("")
    cases = [
        ("ftp://host/x", StorageError, "unknown scheme"),
        ("s3://bucket/prefix", StorageError, "must be s3://BUCKET"),
        (str(tmp_path / "f"), StorageError, "is a file"),
        ("   ", StorageError, "empty"),
    ]
    if importlib_missing("boto3"):
        cases.append(("s3://bucket", MissingExtraError, "explorer\\[s3\\]"))
    for location, kind, message in cases:
        with pytest.raises(kind, match=message) as info:
            check_artifact_location(location)
        assert "\n" not in str(info.value)
    assert check_artifact_location("s3://bucket", importable=False) == "s3://bucket"  # form only
    assert not (tmp_path / "w").exists()  # checking creates nothing
    open_backend(str(tmp_path / "w"))
    assert (tmp_path / "w").is_dir()


def importlib_missing(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is None


@pytest.mark.postgres
@pytest.mark.slow
def test_heads_from_a_third_process_reads_weights_two_workers_stored(postgres_url, study_name, tmp_path):
    """Two worker processes share a PostgreSQL study and an artifact location; a third process, in another
    folder and given only the storage URL, analyses a trial's heads from the stored weights (no retraining)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from tests.deploy_helpers import write_tiny_spec

    root = Path(__file__).resolve().parents[1]
    shared = tmp_path / "shared-artifacts"
    spec = write_tiny_spec(tmp_path, name=study_name, n_trials=3)  # the space holds 3 layouts
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "EXPLORER_HEARTBEAT_INTERVAL": "1",
        "EXPLORER_STORAGE": postgres_url,
    }
    env.pop(ARTIFACTS_ENV, None)
    run = [
        sys.executable,
        "-m",
        "explorer",
        "study",
        "run",
        str(spec),
        "--workers",
        "2",
        "--artifacts",
        str(shared),
    ]
    done = subprocess.run(
        [*run, "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["search"]["done"] == 3
    storage = open_storage(postgres_url, heartbeat=False)
    study = optuna.load_study(study_name=study_name, storage=storage)
    index = ArtifactStore(postgres_url, storage=storage).index(study_name)
    assert sorted(index) == [t.number for t in study.trials if t.state is TrialState.COMPLETE]
    assert {e["location"] for e in index.values()} == {str(shared)}
    writers = {m.artifact_id for t in study.trials for m in get_all_artifact_meta(t, storage=storage)}
    assert writers == {e["artifact_id"] for e in index.values()}  # each on the trial that trained it

    elsewhere = tmp_path / "third"
    elsewhere.mkdir()
    heads = [
        sys.executable,
        "-m",
        "explorer",
        "-v",
        "heads",
        study_name,
        "--trial",
        "knee",
        "--out",
        "h",
        "--json",
    ]
    third = subprocess.run(heads, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr
    assert "loaded the weights of trial" in third.stderr and "retraining" not in third.stderr
    assert ArtifactStore(postgres_url, storage=storage).index(study_name) == index  # nothing re-stored
    assert json.loads(third.stdout)["trial"] in index and (elsewhere / "h" / "heads.md").is_file()


def test_store_for_keeps_weights_beside_a_study_storage_and_a_second_store_reads_them(tmp_path):
    from explorer.study import store_for

    url = f"sqlite:///{tmp_path / 'w.db'}"
    number = optuna.create_study(study_name="w", storage=url).ask().number
    model = tiny(3)
    writer = store_for(url, location=str(tmp_path / "weights"))
    assert isinstance(writer, ArtifactStore) and writer.save("w", number, model)
    reader = store_for(url, location=str(tmp_path / "weights"), writable=False)
    assert reader.has("w", number) and not reader.writable
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in reader.load_state("w", number).items())
    assert reader.save("w", number, tiny(4)) == ""  # a read-only store keeps nothing


def test_a_copied_study_folder_reads_its_own_weights_not_the_originals(tmp_path):
    """The index records where each file was written, absolute; a study folder copied elsewhere (its database
    and NAME.artifacts beside it) must read the copy's files, not those of the folder it came from."""
    import shutil

    original = tmp_path / "original"
    original.mkdir()
    url = f"sqlite:///{original / 'w.db'}"
    number = optuna.create_study(study_name="w", storage=url).ask().number
    artifact_id = ArtifactStore(url).save("w", number, tiny(1))
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    torch.save(tiny(2).state_dict(), original / "w.artifacts" / artifact_id)  # the original's file changes
    state = ArtifactStore(f"sqlite:///{copy / 'w.db'}").load_state("w", number)
    assert all(torch.equal(v, tiny(1).state_dict()[k]) for k, v in state.items())
