"""Each head's importance on the user's examples (Michel et al.'s gate gradients), and the plans built on it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from explorer.errors import ConfigError  # noqa: E402
from explorer.pretrained import (  # noqa: E402
    HeadImportance,
    HeadPlan,
    global_plan,
    head_cost,
    head_importance,
    head_layout,
    plan_by_importance,
)
from tests.pretrained.tiny_models import BATCH, attention, bert, llama  # noqa: E402


def _silence(model, layer: int, head: int) -> None:
    """Zero the output projection's columns of one head: the model then discards that head's output."""
    a = attention(model, layer)
    dense = a.o_proj if hasattr(a, "o_proj") else a.output.dense
    width = head_layout(model).head_dim
    with torch.no_grad():
        dense.weight[:, head * width : (head + 1) * width] = 0


def _examples(model) -> dict[str, torch.Tensor]:
    tokens = torch.randint(50, (24, 7), generator=torch.Generator().manual_seed(2))
    if hasattr(attention(model, 0), "o_proj"):
        return {"input_ids": tokens}
    with torch.inference_mode():
        return {"input_ids": tokens, "labels": model(input_ids=tokens).logits.argmax(-1)}


@pytest.mark.parametrize("build", [llama, bert], ids=["llama", "bert"])
def test_a_head_the_model_discards_has_importance_zero_and_the_others_do_not(build) -> None:
    model = build()
    _silence(model, 1, 2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = [p.requires_grad for p in model.parameters()]
    found = head_importance(model, _examples(model), batch_size=10)
    assert found.examples == 24 and [len(s) for s in found.scores] == [4, 4]
    assert found.scores[1][2] == 0.0
    assert all(s > 0 for i, layer in enumerate(found.scores) for h, s in enumerate(layer) if (i, h) != (1, 2))
    # the model is left as it was: weights, gradient flags, no gradients, eval mode
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert [p.requires_grad for p in model.parameters()] == flags
    assert all(p.grad is None for p in model.parameters())
    # measured again: the same scores
    again = head_importance(model, _examples(model), batch_size=10)
    assert all(np.array_equal(a, b) for a, b in zip(found.scores, again.scores, strict=True))


def test_the_plans_keep_the_most_important_heads_and_drop_a_discarded_one_first() -> None:
    model = llama()
    _silence(model, 0, 1)
    found = head_importance(model, _examples(model))
    plan = plan_by_importance(model, found, heads=(3, 2), kv_heads=(1, 1))
    assert 1 not in plan.keep[0] and len(plan.keep[0]) == 3
    ranked = sorted(range(4), key=lambda h: -found.scores[1][h])
    assert plan.keep[1] == tuple(sorted(ranked[:2]))
    full = head_cost(model).parameters
    one_head = head_cost(model, plan_by_importance(model, found, (3, 4), (1, 2))).parameters
    anchor = global_plan(model, found, parameters=one_head)
    assert anchor.keep[0] == (0, 2, 3) and anchor.keep[1] == (0, 1, 2, 3)  # the discarded head went first
    assert head_cost(model, anchor).parameters <= one_head < full
    smallest = global_plan(
        model, found, parameters=head_cost(model, HeadPlan(((0,), (0,)), (1, 1))).parameters
    )
    assert smallest.heads == (1, 1)  # every layer keeps a head
    assert smallest.keep[0] != (1,)  # never the discarded one
    with pytest.raises(ConfigError, match="with one head a layer, more than the 10 asked"):
        global_plan(model, found, parameters=10)


def test_normalized_scores_have_unit_norm_per_layer() -> None:
    found = HeadImportance((np.array([3.0, 4.0]), np.zeros(2)), examples=1)
    first, second = found.normalized()
    assert np.allclose(first, [0.6, 0.8]) and np.array_equal(second, [0.0, 0.0])


def test_bad_examples_and_plans_are_refused_in_one_line() -> None:
    model = bert()
    with pytest.raises(ConfigError, match=r"needs labels \(the task's classes\)"):
        head_importance(model, {"input_ids": BATCH})
    with pytest.raises(ConfigError, match=r"input_ids of shape \[examples, tokens\]"):
        head_importance(model, {"input_ids": BATCH[0]})
    found = head_importance(llama(), {"input_ids": BATCH})
    with pytest.raises(ConfigError, match="layer 1 has 4 heads and the plan keeps 5; keep 1 to 4"):
        plan_by_importance(llama(), found, heads=(2, 5), kv_heads=(1, 1))
    with pytest.raises(ConfigError, match="has 2 layers, and the plan gives heads for 1"):
        plan_by_importance(llama(), found, heads=(2,), kv_heads=(1,))
