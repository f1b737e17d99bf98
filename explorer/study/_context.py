"""The run context: what one process of a study run works with, resolved once.

A run asks the same questions at every step: which device (a name such as ``auto``, resolved against this
machine), which task (loading it reads and checks the data, or runs the user's function), which search space
(built from the spec and checked), which model builder, where the study lives and where trained weights go.
:func:`resolve_context` answers the first four once, before the storage is touched (the run's plan,
:func:`explorer.study._run_plan.plan_run`); :meth:`RunContext.opened` adds the storage URL and the artifact store once
the study is open. The attention bench, the workers, the objective and the re-timing take their answers from the
context. A spawned worker rebuilds the process-local parts of its plan's context (task, model builder) on the
device its plan carries, without checking them again (:meth:`explorer.study._run_plan.PortableStudyRunPlan.rebuild`),
and a re-timing round builds its own on the command's device (:func:`context_on`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from explorer.data import Task, load_task
from explorer.measure import resolve_device
from explorer.model import ModelBuilder
from explorer.spec import SearchSpace, StudySpec
from explorer.study._artifacts import ArtifactStore
from explorer.study._model_builder import model_builder


@dataclass(frozen=True)
class RunContext:
    """What a process of a study run works with, resolved once (see the module docstring)."""

    device: torch.device  # where this process times and trains
    task: Task  # the study's task, loaded and checked
    space: SearchSpace  # the study's search space, built and checked
    builder: ModelBuilder | None = None  # the user's model function ([model] build); None: explorer's own
    storage_url: str | None = None  # where the study lives (None until it is open)
    store: ArtifactStore | None = None  # where trained weights go (None: not kept)

    def opened(self, storage_url: str, store: ArtifactStore | None) -> RunContext:
        """This context for the study open at ``storage_url``, whose weights go to ``store``."""
        return dataclasses.replace(self, storage_url=storage_url, store=store)

    def on(self, device: torch.device | None) -> RunContext:
        """This context on ``device`` (None or the same device: this context itself)."""
        return self if device is None or device == self.device else dataclasses.replace(self, device=device)


def resolve_context(spec: StudySpec, device: str | None = None) -> RunContext:
    """Build ``spec``'s search space, load its task, and resolve the device named ``device`` (default: the spec's
    latency device), in that order: an empty or impossible space, a missing or malformed data file, and a device
    this machine does not have each fail here, before anything is written."""
    space = SearchSpace(spec.space)
    task = load_task(spec.task.name, **spec.task.options)
    return RunContext(resolve_device(device or spec.latency.device), task, space, model_builder(spec))


def context_on(spec: StudySpec, device: torch.device) -> RunContext:
    """``spec``'s context on ``device``, resolved already by the command that checked the run (a re-timing
    round's process, or rounds timed in the command's own): nothing is checked again."""
    task = load_task(spec.task.name, **spec.task.options)
    return RunContext(device, task, SearchSpace(spec.space), model_builder(spec))
