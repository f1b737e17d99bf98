"""The report's section on a trained checkpoint's heads (``[model] pretrained``): which checkpoint the layouts were
cut from, each head's importance as the cut measured it, and which heads the answer keeps.

The importance is measured again here exactly as the study measured it (:attr:`PretrainedBuilder.importance`: the
training split's first examples against the original's own predictions), so the table shows what chose the heads.
Where the checkpoint is not on this machine (a report written elsewhere), or its files differ from those the study
recorded, the section says so and shows no scores.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from explorer.answer import Answer
from explorer.errors import ExplorerError
from explorer.hooks import checkpoint_digest
from explorer.output._fmt import heads
from explorer.output._render import Block, Heading, Para, Table
from explorer.pretrained import PretrainedBuilder
from explorer.spec import StudySpec
from explorer.study import model_builder


def pretrained_blocks(spec: StudySpec, ans: Answer, code: Mapping[str, Any] | None = None) -> list[Block]:
    """The checkpoint's heads: a paragraph and a table of importance by layer and head (nothing for a study that
    does not start from a checkpoint). ``code``: the study's record of its checkpoint's sha256; a checkpoint
    whose files differ now is not the one the study cut, and its scores are not shown."""
    if spec.model.pretrained is None:
        return []
    builder = model_builder(spec)
    assert isinstance(builder, PretrainedBuilder)  # a [model] pretrained spec's
    where = spec.model.pretrained
    b: list[Block] = [Heading(3, "The checkpoint's heads")]
    try:
        then = ((code or {}).get("checkpoint") or {}).get("sha256")
        now = checkpoint_digest(where)
        if then is not None and now != then:
            why = f"has changed since the study cut it (sha256 {then[:12]} then, {now[:12]} now)"
            return [*b, Para([f"The checkpoint at {where!r} {why}, so its heads' importance is not shown."])]
        importance = builder.importance
        checkpoint = builder.checkpoint
    except (ExplorerError, OSError) as exc:
        why = f"cannot be read here ({exc})"
        return [*b, Para([f"The checkpoint at {where!r} {why}, so its heads' importance is not shown."])]
    kept = builder.plan(ans.recommended.config).keep if ans.recommended is not None else None
    normalized = importance.normalized()
    rows = []
    for i, scores in enumerate(normalized):
        row: dict[str, str | int] = {"layer": i}
        row |= {f"head {h}": f"{float(v):.2f}" for h, v in enumerate(scores)}
        if kept is not None:
            row["kept by the answer"] = ", ".join(str(h) for h in kept[i])
        rows.append(row)
    answer_text = (
        f"; the answer ({heads(ans.recommended.config.heads)} heads per layer) keeps the heads in the last column"
        if ans.recommended is not None
        else ""
    )
    b.append(
        Para(
            [
                f"Every layout was cut from the checkpoint at {spec.model.pretrained!r} ({checkpoint.architecture}, "
                f"{checkpoint.layers} layers of {checkpoint.heads} query heads sharing {checkpoint.kv_heads} "
                f"key/value heads, {checkpoint.parameters:,} parameters): each layer keeps its most important "
                "heads and mean-pools its key/value heads into the layout's groups, then trains as recovery with "
                "distillation from the original. A head's importance is the mean absolute gradient of the loss "
                "with respect to a gate on its output (Michel et al. 2019), on the training split's first "
                f"{importance.examples} examples against "
                + (
                    "the text's next tokens"
                    if checkpoint.causal
                    else "the original's own predictions (no label)"
                )
                + f", each layer's scores divided by their norm{answer_text}."
            ]
        )
    )
    b.append(Table(pd.DataFrame(rows)))
    return b
