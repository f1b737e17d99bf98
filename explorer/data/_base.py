"""The Task object every task returns: fixed train/val/test splits and the input spec the model is built for."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from explorer.errors import ConfigError
from explorer.layout import InputSpec


def check_int(task: str, name: str, value: object, lo: int, hi: int | None = None) -> int:
    """``value`` as an int in ``[lo, hi]`` (no upper end when ``hi`` is None), else a ConfigError naming the
    task's option."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or value < lo
        or (hi is not None and value > hi)
    ):
        upto = f"..{hi}" if hi is not None else " or more"
        raise ConfigError(f"{task} option {name} must be an integer {lo}{upto}, got {value!r}.")
    return int(value)


@dataclass(frozen=True)
class Task:
    """A task with fixed splits: classification, or next-token prediction (``spec.task_kind``).

    ``X`` tensors are ``int64 [n, seq]`` for token inputs or ``float32 [n, seq, n_features]`` for feature
    inputs (``spec.kind`` says which); ``y`` tensors are ``int64 [n]`` with labels in ``[0, spec.n_classes)``
    for classification, or ``int64 [n, seq]`` next tokens for a language model.
    """

    name: str  # "digits", "relations", "text", or the npz file's stem
    spec: InputSpec  # what the model must accept
    train: tuple[torch.Tensor, torch.Tensor]  # (X, y)
    val: tuple[torch.Tensor, torch.Tensor]  # (X, y), used for model selection and early stopping
    test: tuple[torch.Tensor, torch.Tensor]  # (X, y), reported, never used to choose
    description: str = ""  # one line for reports
    # Planted relations (the relations task): relation r links marker token r to the token offsets[r] away.
    # Where set, every trained model is probed for which heads follow which relation
    # (explorer.measure._probe.relation_specialization).
    relation_offsets: tuple[int, ...] = ()
    # sha256 of the text a language-model task was built from (results compare if equal)
    corpus_hash: str = ""

    @property
    def kind(self) -> str:
        """classification | language_model (what the targets are, and so which metric scores the task)."""
        return self.spec.task_kind

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train[1]), "val": len(self.val[1]), "test": len(self.test[1])}
