"""A study's own code: the user's task function and model builder, checked before the study stores anything.

* :func:`check_user_model` builds the user's model for a few layouts of the space (the first, one with other
  heads, the last) and runs one batch through each before the storage is touched: a model that ignores the head
  layout, returns the wrong shape or NaN is one error, exit 3, and nothing is stored.
* What the study stores about that code, and the check that it is unchanged, are
  :mod:`explorer.study._code_record` (no torch: a read-only command checks it too).
* :func:`input_record`: what the task feeds the model (its input spec and one line of description), stored
  with the study so the report can state it without loading the data.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from explorer.data import Task
from explorer.layout import ModelConfig
from explorer.model import CHECK_BATCH, check_model
from explorer.spec import SearchSpace, StudySpec
from explorer.study._model_builder import model_builder

INPUT_ATTR = "task_input"  # study user attribute: the task's input spec and description


def _door_layouts(spec: StudySpec) -> list[ModelConfig]:
    """The first layout of the space, the first with other heads, and the last: two layouts that differ in
    their heads show whether a model follows the layout at all."""
    first = other = last = None
    for cfg in itertools.islice(SearchSpace(spec.space).enumerate_configs(), 1000):
        first = first or cfg
        if other is None and cfg.heads != first.heads:
            other = cfg
        last = cfg
    return list({c.key(): c for c in (first, other, last) if c is not None}.values())


def check_user_model(spec: StudySpec, task: Task) -> None:
    """Check the spec's ``[model] build`` (if any) on a few layouts and one batch of ``task``; raise a
    ConfigError naming it."""
    builder = model_builder(spec)
    if builder is not None:
        check_model(builder, _door_layouts(spec), task.spec, task.train[0][:CHECK_BATCH])


def input_record(task: Task) -> dict[str, Any]:
    """The task's input spec and description, JSON-ready."""
    return {"spec": dataclasses.asdict(task.spec), "description": task.description, "name": task.name}
