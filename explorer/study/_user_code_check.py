"""A study's own code: the user's task function and model builder, checked before the study stores anything.

* :func:`check_user_model` builds the user's model for a few layouts of the space (the first, one with other
  heads, the last) and runs one batch through each before the storage is touched: a model that ignores the head
  layout, returns the wrong shape or NaN is one error, exit 3, and nothing is stored.
* :func:`code_record` is what the study stores about that code (user attribute ``code``): each reference and the
  sha256 of its source (:func:`explorer.hooks.fingerprint`). :func:`check_code` compares it with the code
  found now, before a resume, a confirm, an export of weights or a heads analysis runs it again: a module that is
  gone or changed is one error naming it (results from other code would not compare).
* :func:`input_record`: what the task feeds the model (its input spec and one line of description), stored
  with the study so the report can state it without loading the data.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any

from explorer.data import Task
from explorer.errors import ConfigError, ExplorerError
from explorer.hooks import fingerprint, is_reference
from explorer.layout import ModelConfig
from explorer.model import CHECK_BATCH, check_model
from explorer.spec import SearchSpace, StudySpec

__all__ = ["CODE_ATTR", "INPUT_ATTR", "check_code", "check_user_model", "code_record", "input_record"]

CODE_ATTR = "code"  # study user attribute: {"task" | "model": {"ref": ..., "sha256": ...}}
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
    builder = spec.model.builder()
    if builder is not None:
        check_model(builder, _door_layouts(spec), task.spec, task.train[0][:CHECK_BATCH])


def _references(spec: StudySpec) -> dict[str, tuple[str, str]]:
    refs = {}
    if is_reference(spec.task.name):
        refs["task"] = (spec.task.name, "task")
    if spec.model.build is not None:
        refs["model"] = (spec.model.build, "model builder")
    return refs


def code_record(spec: StudySpec) -> dict[str, dict[str, str]]:
    """Each of the spec's code references with the sha256 of its source."""
    return {k: {"ref": ref, "sha256": fingerprint(ref, what)} for k, (ref, what) in _references(spec).items()}


def check_code(stored: Mapping[str, Any], spec: StudySpec) -> None:
    """Raise a ConfigError when code the study was created with is missing or has changed (see the module
    docstring); a study stored without a record (no user code, or an older explorer) passes."""
    record = stored.get(CODE_ATTR) or {}
    for key, (ref, what) in _references(spec).items():
        if key not in record:
            continue
        try:
            now = fingerprint(ref, what)
        except ExplorerError as exc:
            raise ConfigError(
                f"study {spec.name!r} was created with {what} {ref!r}, which cannot be loaded here: {exc}"
            ) from None
        if now != record[key].get("sha256"):
            raise ConfigError(
                f"the {what} {ref!r} of study {spec.name!r} changed since the study was created (sha256 "
                f"{record[key].get('sha256', '?')[:12]} then, {now[:12]} now), so new results would not compare; "
                "restore that code, or run the changed code as a study of its own (a new name)."
            )


def input_record(task: Task) -> dict[str, Any]:
    """The task's input spec and description, JSON-ready."""
    return {"spec": dataclasses.asdict(task.spec), "description": task.description, "name": task.name}
