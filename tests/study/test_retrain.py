"""explorer.study._retrain: a trial's trained model from its stored weights, on the split its run trained on."""

from __future__ import annotations

import dataclasses

import optuna
import pytest
import torch

from explorer.data import fold_task, load_task
from explorer.errors import DataError
from explorer.layout import LatencyConfig
from explorer.model import build_model
from explorer.study import record_task, store_for, trained_model
from tests.fixtures import record


@pytest.fixture(scope="module")
def digits():
    return load_task("digits")


def test_record_task_is_the_fold_a_finalist_run_validated_on_else_the_task(digits):
    search = record(0, (2, 2), 0.8, 1.0)
    assert record_task(digits, search) is digits
    finalist = dataclasses.replace(search, fold=1, folds=3, fold_seed=7)
    assert torch.equal(record_task(digits, finalist).val[0], fold_task(digits, 1, 3, 7).val[0])


def test_trained_model_loads_the_stored_weights_in_eval_mode(digits, tmp_path):
    url = f"sqlite:///{tmp_path / 't.db'}"
    number = optuna.create_study(study_name="t", storage=url).ask().number
    rec = dataclasses.replace(record(number, (2, 2), 0.8, 1.0, d_model=16), epochs_planned=1)
    model = build_model(rec.config, digits.spec)
    store = store_for(url, location=str(tmp_path / "weights"))
    store.save("t", number, model)
    loaded = trained_model("t", rec, digits, LatencyConfig(), store)
    assert not loaded.training
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in loaded.state_dict().items())
    with pytest.raises(DataError, match="has no trained configuration"):
        trained_model("t", dataclasses.replace(rec, history=()), digits, LatencyConfig(), store)
