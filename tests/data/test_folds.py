"""explorer.data._folds: the stratified folds a finalist run validates on, and what learning nothing scores."""

from __future__ import annotations

import pytest
import torch

from explorer.data import Task, chance_level, fold_task, load_task
from explorer.errors import ConfigError
from explorer.layout import MAX_FOLDS


def _tiny(y_train: list[int], y_val: list[int]) -> Task:
    digits = load_task("digits")
    features = digits.train[0][:1]
    return Task(
        "tiny",
        digits.spec,
        (features.repeat(len(y_train), 1, 1), torch.tensor(y_train)),
        (features.repeat(len(y_val), 1, 1), torch.tensor(y_val)),
        digits.test,
    )


def test_chance_level_is_the_validation_share_of_the_most_frequent_training_class():
    assert chance_level(_tiny([3, 3, 3, 1], [3, 1, 1, 2])) == pytest.approx(0.25)
    assert chance_level(_tiny([1, 1, 3], [1, 1, 1, 2])) == pytest.approx(0.75)


def test_the_folds_of_a_task_cover_its_labelled_examples_once_and_keep_the_test_split():
    task = load_task("digits")
    labelled = len(task.train[1]) + len(task.val[1])
    vals = [fold_task(task, fold, 3, seed=7) for fold in range(3)]
    assert sum(len(v.val[1]) for v in vals) == labelled
    assert all(len(v.train[1]) + len(v.val[1]) == labelled for v in vals)
    assert all(torch.equal(v.test[0], task.test[0]) for v in vals)
    again = fold_task(task, 1, 3, seed=7)
    assert torch.equal(again.val[0], vals[1].val[0])  # the seed fixes the cut
    with pytest.raises(ConfigError, match=f"folds must be 2..{MAX_FOLDS}"):
        fold_task(task, 0, MAX_FOLDS + 1, seed=7)
