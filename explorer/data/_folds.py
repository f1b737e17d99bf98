"""Cross-validation folds over a task's labelled examples, and the quality a model must beat to have learned.

A classification task's training and validation splits are pooled into its *labelled* examples; :func:`fold_task`
cuts them into ``k`` stratified folds (seeded) and returns the task with fold ``i`` as its validation split and the
other folds as its training split. The test split is kept apart, untouched, in every fold. Over the ``k`` folds every
labelled example is validated exactly once, so a layout's cross-validated accuracy rests on all of them (1,527
images for digits) instead of one fixed validation split (270), and two layouts trained on the same fold with the
same seed are a *pair*: their difference is free of that fold's difficulty.

A language-model task is not cut into folds (its windows overlap and its splits are contiguous text):
:func:`fold_task` refuses it, and such a study keeps the task's fixed split (``folds = 1``).

:func:`chance_level` is the quality a model that learned nothing gets: the majority-class rate of the validation
split under the training split's most frequent class, or the cross-entropy (bits per byte) of a unigram model
of the training bytes on the validation bytes, for a language model.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from explorer.data._base import Task
from explorer.errors import ConfigError, DataError
from explorer.layout import MAX_FOLDS


def labelled(task: Task) -> tuple[torch.Tensor, torch.Tensor]:
    """The task's training and validation examples, pooled (the test split is not among them)."""
    return torch.cat([task.train[0], task.val[0]]), torch.cat([task.train[1], task.val[1]])


def fold_task(task: Task, fold: int, folds: int, seed: int) -> Task:
    """``task`` with fold ``fold`` of ``folds`` stratified folds of its labelled examples (cut by ``seed``) as
    the validation split, the other folds as the training split, and the test split unchanged."""
    if task.kind != "classification":
        raise ConfigError(
            f"task {task.name!r} is a language model: its splits are contiguous text, not cut into folds; "
            "set folds = 1 in [finalists]."
        )
    if not 2 <= folds <= MAX_FOLDS:
        raise ConfigError(f"folds must be 2..{MAX_FOLDS}, got {folds}.")
    if not 0 <= fold < folds:
        raise ConfigError(f"fold must be 0..{folds - 1}, got {fold}.")
    X, y = labelled(task)
    labels = y.numpy()
    smallest = int(np.bincount(labels)[np.unique(labels)].min())
    if smallest < folds:
        raise DataError(
            f"task {task.name!r} has a class with only {smallest} labelled example(s), too few for {folds} "
            f"stratified folds; lower folds in [finalists] to at most {max(smallest, 1)} (1 keeps the fixed split)."
        )
    from sklearn.model_selection import StratifiedKFold  # a second of imports, for the processes that split

    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed % 2**32)
    train_idx, val_idx = list(splitter.split(np.zeros(len(labels)), labels))[fold]
    train_t, val_t = torch.from_numpy(np.sort(train_idx)), torch.from_numpy(np.sort(val_idx))
    return Task(
        name=task.name,
        spec=task.spec,
        train=(X[train_t], y[train_t]),
        val=(X[val_t], y[val_t]),
        test=task.test,
        description=f"{task.description}; fold {fold + 1} of {folds}" if task.description else "",
        relation_offsets=task.relation_offsets,
        corpus_hash=task.corpus_hash,
    )


def chance_level(task: Task) -> float:
    """What learning nothing scores on the validation split: the share of it in the training split's most
    frequent class (accuracy), or a unigram model's bits per byte (a language model; add-one smoothing)."""
    y_train, y_val = task.train[1].reshape(-1), task.val[1].reshape(-1)
    counts = torch.bincount(y_train, minlength=task.spec.n_classes).double()
    if task.kind == "classification":
        return float((y_val == int(counts.argmax())).double().mean())
    probs = (counts + 1.0) / (counts.sum() + len(counts))
    return float(-torch.log2(probs[y_val]).mean()) if len(y_val) else math.nan
