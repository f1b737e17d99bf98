"""Trained weights kept beside the study: exact round trips, pickles refused, a size limit."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch

from explorer.errors import DataError
from explorer.search.artifacts import ARTIFACT_DIR_ENV, ArtifactStore, artifact_root_for
from tests.heads_models import data, tiny_model


class NotATensor:
    pass


def test_artifacts_round_trip_exactly_and_refuse_pickles(tmp_path):
    store = ArtifactStore(tmp_path / "a")
    model = tiny_model()
    path = store.save("s", 7, model)
    assert path == tmp_path / "a" / "s" / "trial-00007.pt" and store.has("s", 7) and not store.has("s", 8)
    state = store.load_state("s", 7)
    assert state.keys() == model.state_dict().keys()
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    fresh = tiny_model(seed=9)
    fresh.load_state_dict(state)
    X, _ = data()
    with torch.no_grad():
        assert torch.equal(fresh(X), model(X))

    with open(store.path("s", 8), "wb") as f:
        pickle.dump({"w": NotATensor()}, f, protocol=2)  # unpickling this would build an arbitrary object
    with pytest.raises(DataError, match="not a plain tensor file"):
        store.load_state("s", 8)
    torch.save({"w": [1, 2]}, store.path("s", 9))  # loads under weights_only, but is no state_dict
    with pytest.raises(DataError, match="state_dict of tensors"):
        store.load_state("s", 9)
    with pytest.raises(DataError, match="no stored weights"):
        store.load_state("s", 10)


def test_artifact_size_limit_evicts_the_oldest_and_prune_keeps_the_chosen(tmp_path):
    model = tiny_model()
    size = ArtifactStore(tmp_path / "probe").save("s", 0, model).stat().st_size
    store = ArtifactStore(tmp_path / "a", max_bytes=int(2.5 * size))
    for n in range(3):
        p = store.save("s", n, model)
        os.utime(p, ns=(n * 10**9, n * 10**9))  # distinct ages whatever the clock's resolution
    store.save("s", 3, model)
    assert [store.has("s", n) for n in range(4)] == [False, False, True, True]
    assert store.total_bytes() <= store.max_bytes
    roomy = ArtifactStore(store.root)  # the default 200 MiB limit
    roomy.save("t", 0, model)
    assert roomy.prune("s", keep={3}) == [store.path("s", 2)]
    assert roomy.has("s", 3) and roomy.has("t", 0)


def test_artifact_root_for(monkeypatch, tmp_path):
    assert artifact_root_for(f"sqlite:///{tmp_path}/x/quick.db") == tmp_path / "x" / "quick.artifacts"
    assert artifact_root_for("sqlite:///studies/quick.db?timeout=30") == Path("studies/quick.artifacts")
    monkeypatch.delenv(ARTIFACT_DIR_ENV, raising=False)
    assert artifact_root_for("postgresql+psycopg://u:p@h/db") == Path("studies/artifacts")
    monkeypatch.setenv(ARTIFACT_DIR_ENV, str(tmp_path / "w"))
    assert artifact_root_for("postgresql+psycopg://u:p@h/db") == tmp_path / "w"
