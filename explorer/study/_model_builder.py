"""The model a study's layouts are built as: explorer's own, the user's function, a transformers class built from
its config, or a trained checkpoint cut to each layout's heads (which measures head importance on the study's
task, so it is made from the whole spec)."""

from __future__ import annotations

from explorer.model import ModelBuilder
from explorer.spec import StudySpec


def model_builder(spec: StudySpec) -> ModelBuilder | None:
    """The builder of ``spec``'s layouts (:meth:`explorer.spec.ModelSpec.builder`, or for ``[model] pretrained``
    an :class:`explorer.pretrained.PretrainedBuilder` on the spec's task); None for explorer's own models."""
    model = spec.model
    if model.pretrained is not None:
        from explorer.pretrained import PretrainedBuilder

        assert model.distill is not None  # the spec states it for a checkpoint (explorer.spec._goals.DISTILL)
        return PretrainedBuilder.of(model.pretrained, spec.task.name, spec.task.options, model.distill)
    return model.builder()
