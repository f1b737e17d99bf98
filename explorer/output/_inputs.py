"""The report's line on what was measured: which model realised the layouts, and what the task fed it (for
images: the size, the patch and the patch grid), from what the study stored when it was created."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from explorer.layout import HF_FAMILIES
from explorer.output._render import Block, Bold, Code, Para, Span
from explorer.spec import StudySpec


def _input_text(stored: Mapping[str, Any], own_model: bool) -> str:
    spec = stored.get("spec") or {}
    image: Sequence[int] = spec.get("image") or ()
    patch = spec.get("patch") or 0
    if len(image) == 3 and patch:
        h, w, c = image
        channels = f"{c} channel{'s' if c != 1 else ''}"
        return (
            f"{h} x {w} images ({channels}) cut into {patch} x {patch} patches: a {h // patch} x {w // patch} "
            f"grid of {spec.get('seq_len')} tokens of {spec.get('n_features')} values"
            + (", each patch one position with its own learned position embedding" if own_model else "")
        )
    if spec.get("kind") == "tokens":
        return f"{spec.get('seq_len')} tokens per example from a vocabulary of {spec.get('vocab_size')}"
    return f"{spec.get('seq_len')} positions of {spec.get('n_features')} features per example"


def _hf_model(spec: StudySpec) -> list[Span]:
    """The transformers class that realised the layouts, and what each layout set in its config."""
    family = HF_FAMILIES[str(spec.model.hf)]
    cls = family.model_class(spec.task.kind == "language_model")
    heads = "num_attention_heads" + (" and num_key_value_heads" if family.kv_heads else "")
    return [
        "transformers' ",
        Code(cls),
        f", built from a {family.config_class} (",
        Code(f'hf = "{family.model_type}"'),
        f") with each layout's {heads} and the study's config for the rest",
    ]


def input_blocks(spec: StudySpec, stored: Mapping[str, Any] | None) -> list[Block]:
    """One paragraph: the model (the user's builder, by name, or explorer's own) and the task's input; nothing
    for a study stored before these facts were (and using explorer's own model)."""
    if spec.model.build is None and spec.model.hf is None and not stored:
        return []
    if spec.model.hf is not None:
        model: list[Span] = _hf_model(spec)
    elif spec.model.build is not None:
        model = ["the user's model, built from each layout by ", Code(spec.model.build)]
    else:
        model = ["explorer's own encoder"]
    own = spec.model.build is None and spec.model.hf is None
    parts: list[Span] = [Bold("Model: "), *model, "."]
    if stored:
        parts += [
            " ",
            Bold("Input: "),
            f"{_input_text(stored, own)} ({stored.get('description') or 'the task'}).",
        ]
    return [Para(parts)]
