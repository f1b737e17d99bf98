"""Head surgery on trained transformers models: the heads a plan keeps are the heads that stay, their weights cut
exactly, and key/value heads regrouped by mean-pooling."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from explorer.pretrained import HeadPlan, head_layout, shrink  # noqa: E402
from explorer.pretrained._surgery import kv_sources  # noqa: E402
from tests.pretrained.tiny_models import attention, bert, llama, llama_with_biases, outputs  # noqa: E402

WIDTH = 8  # the tiny models' head width
MODELS = {"llama": llama, "llama with biases": llama_with_biases, "bert": bert}


def output_projection(model, layer: int) -> torch.nn.Linear:
    a = attention(model, layer)
    return a.o_proj if hasattr(a, "o_proj") else a.output.dense


def zero_head(model, layer: int, head: int) -> None:
    """Zero the output projection's columns of one head: the head then adds nothing to the layer's output."""
    with torch.no_grad():
        output_projection(model, layer).weight[:, head * WIDTH : (head + 1) * WIDTH] = 0


def gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


@pytest.mark.parametrize("family", list(MODELS))
def test_keeping_every_head_gives_the_same_logits_bit_for_bit(family):
    model = MODELS[family]()
    shrunk = shrink(model, HeadPlan.unchanged(model))
    assert shrunk is not model
    assert torch.equal(outputs(shrunk), outputs(model))


@pytest.mark.parametrize("family", list(MODELS))
def test_pruning_a_head_that_adds_nothing_leaves_the_logits(family):
    """Head 1 of layer 0 is silenced (its output columns zeroed): removing it changes nothing, removing head 2
    (which still speaks) does. Layer 0 keeps 3 heads, each with a key/value head of its own (the head it used);
    with biases, the kept heads' query, key and value biases must follow them."""
    model = MODELS[family]()
    zero_head(model, layer=0, head=1)
    before = outputs(model)
    kv = head_layout(model).kv_heads[1]
    without_1 = shrink(model, HeadPlan(((0, 2, 3), (0, 1, 2, 3)), (3, kv)))
    without_2 = shrink(model, HeadPlan(((0, 1, 3), (0, 1, 2, 3)), (3, kv)))
    assert head_layout(without_1).heads == (3, 4)
    torch.testing.assert_close(outputs(without_1), before, rtol=0, atol=1e-5)
    assert gap(outputs(without_2), before) > 1e-3


def test_pruned_weights_are_the_kept_heads_rows_and_columns():
    model = bert()
    shrunk = shrink(model, HeadPlan(((1, 3), (0, 1, 2, 3)), (2, 4)))
    old, new = attention(model, 0), attention(shrunk, 0)
    rows = torch.cat([torch.arange(8, 16), torch.arange(24, 32)])  # heads 1 and 3
    assert torch.equal(new.self.query.weight, old.self.query.weight[rows])
    assert torch.equal(new.self.value.bias, old.self.value.bias[rows])
    assert torch.equal(new.output.dense.weight, old.output.dense.weight[:, rows])
    assert torch.equal(new.output.dense.bias, old.output.dense.bias)
    assert (new.self.num_attention_heads, new.self.all_head_size) == (2, 16)


def test_regrouping_key_value_heads_that_are_already_equal_leaves_the_logits():
    """Layer 0's two key/value heads are made equal, then merged into one (mean-pooled): nothing changes; merging
    two that differ does."""
    model = llama()
    plan = HeadPlan(((0, 1, 2, 3), (0, 1, 2, 3)), (1, 2))
    merged_while_different = outputs(shrink(model, plan))
    with torch.no_grad():
        for linear in (attention(model, 0).k_proj, attention(model, 0).v_proj):
            linear.weight[WIDTH:] = linear.weight[:WIDTH]
    before = outputs(model)
    shrunk = shrink(model, plan)
    assert head_layout(shrunk).kv_heads == (1, 2)
    assert attention(shrunk, 0).num_key_value_groups == 4
    torch.testing.assert_close(outputs(shrunk), before, rtol=0, atol=1e-5)
    assert gap(merged_while_different, before) > 1e-3


def test_a_key_value_head_per_query_head_copies_the_head_each_used():
    """4 key/value heads for 4 query heads (2 before): each query head gets a copy of the head it used."""
    model = llama()
    shrunk = shrink(model, HeadPlan(((0, 1, 2, 3), (0, 1, 2, 3)), (4, 4)))
    old = attention(model, 0).k_proj.weight.view(2, WIDTH, -1)
    assert torch.equal(attention(shrunk, 0).k_proj.weight.view(4, WIDTH, -1), old[[0, 0, 1, 1]])
    torch.testing.assert_close(outputs(shrunk), outputs(model), rtol=0, atol=1e-5)


def test_a_group_averages_each_original_key_value_head_once():
    """Kept heads 0, 1 and 2 in one group: heads 0 and 1 used key/value head 0, head 2 used head 1; the new head
    is the plain mean of heads 0 and 1 (not 2:1 weighted)."""
    assert kv_sources((0, 1, 2), 1, heads=4, old_kv_heads=2) == [[0, 1]]
    assert kv_sources((0, 1, 2, 3), 2, heads=4, old_kv_heads=2) == [[0], [1]]
    assert kv_sources((0, 3), 2, heads=4, old_kv_heads=2) == [[0], [1]]
    model = llama()
    shrunk = shrink(model, HeadPlan(((0, 1, 2), (0, 1, 2, 3)), (1, 2)))
    for name in ("k_proj", "v_proj"):
        old = getattr(attention(model, 0), name).weight.view(2, WIDTH, -1)
        new = getattr(attention(shrunk, 0), name).weight
        assert torch.equal(new, (old[0] + old[1]) / 2)


def test_the_model_given_is_left_unchanged_and_the_copy_says_its_heads():
    model = llama()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    shrunk = shrink(model, HeadPlan(((0, 1, 2, 3), (0, 3)), (2, 1)))
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert head_layout(model).heads == (4, 4) and not hasattr(model.config, "num_query_heads")
    assert (shrunk.config.num_query_heads, shrunk.config.num_kv_heads) == ([4, 2], [2, 1])
    assert outputs(shrunk).shape == outputs(model).shape


def test_a_shrunk_model_can_be_shrunk_again():
    """Head indices of a second plan count the heads the first left (layer 1's heads 0 and 3 are now 0 and 1)."""
    model = llama()
    zero_head(model, layer=1, head=3)
    once = shrink(model, HeadPlan(((0, 1, 2, 3), (0, 3)), (2, 1)))
    twice = shrink(once, HeadPlan(((0, 1, 2, 3), (0,)), (2, 1)))
    assert head_layout(twice).heads == (4, 1)
    torch.testing.assert_close(outputs(twice), outputs(once), rtol=0, atol=1e-5)


def test_a_shrunk_model_gives_the_same_logits_under_each_attention_implementation():
    """sdpa and eager attention both read each layer's own key/value grouping (num_key_value_groups)."""
    shrunk = shrink(llama(), HeadPlan(((0, 1, 2, 3), (0, 3)), (1, 2)))
    fused = outputs(shrunk)
    shrunk.set_attn_implementation("eager")
    assert shrunk.config._attn_implementation == "eager"
    torch.testing.assert_close(outputs(shrunk), fused, rtol=0, atol=1e-5)
