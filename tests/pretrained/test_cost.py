"""What a shrunk model costs, against a count by hand on the tiny configs: its parameters and, for a causal LM,
the bytes its key/value cache grows by per token."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from explorer.pretrained import HeadCost, HeadPlan, head_cost, shrink  # noqa: E402
from tests.pretrained.tiny_models import bert, llama  # noqa: E402

HIDDEN, WIDTH, MLP, VOCAB = 32, 8, 64, 50


def llama_by_hand(heads: tuple[int, ...], kv_heads: tuple[int, ...]) -> int:
    """Embedding and LM head (untied), final norm; per layer q, k, v, o (no biases), gate/up/down, two norms."""
    total = 2 * VOCAB * HIDDEN + HIDDEN
    for h, k in zip(heads, kv_heads, strict=True):
        total += (h + 2 * k) * WIDTH * HIDDEN + h * WIDTH * HIDDEN + 3 * HIDDEN * MLP + 2 * HIDDEN
    return total


def bert_by_hand(heads: tuple[int, ...]) -> int:
    """Word, position (64) and type (2) embeddings and their norm; per layer q, k, v and the output dense with
    biases, its norm, the feed-forward with biases and its norm; the pooler and the 3-label classifier."""
    total = (VOCAB + 64 + 2) * HIDDEN + 2 * HIDDEN
    for h in heads:
        total += 3 * (h * WIDTH * HIDDEN + h * WIDTH) + (h * WIDTH * HIDDEN + HIDDEN) + 2 * HIDDEN
        total += HIDDEN * MLP + MLP + MLP * HIDDEN + HIDDEN + 2 * HIDDEN
    return total + HIDDEN * HIDDEN + HIDDEN + HIDDEN * 3 + 3


def test_a_llama_model_and_its_shrunk_copy_are_counted_as_by_hand():
    model = llama()
    plan = HeadPlan(((0, 1, 2, 3), (0, 3)), (2, 1))
    # float32: layer 0 keeps 2 key/value heads (2 x 2 x 8 x 4 bytes), layer 1 one (2 x 1 x 8 x 4)
    assert head_cost(model) == HeadCost(llama_by_hand((4, 4), (2, 2)), 2 * (2 + 2) * WIDTH * 4)
    expected = HeadCost(llama_by_hand((4, 2), (2, 1)), 128 + 64)
    assert expected.parameters == 20_256
    assert head_cost(shrink(model, plan)) == expected
    assert head_cost(model, plan) == expected  # priced from the shapes, no copy made


def test_the_cache_is_counted_in_the_dtype_asked_for():
    model = llama()
    assert head_cost(model, dtype=torch.bfloat16).kv_bytes_per_token == 2 * (2 + 2) * WIDTH * 2
    assert head_cost(model.to(torch.float16)).kv_bytes_per_token == 2 * (2 + 2) * WIDTH * 2


def test_a_bert_model_is_counted_as_by_hand_and_keeps_no_cache():
    model = bert()
    plan = HeadPlan(((0, 1, 2, 3), (1, 2)), (4, 2))
    assert head_cost(model) == HeadCost(bert_by_hand((4, 4)), None)
    assert head_cost(shrink(model, plan)) == head_cost(model, plan) == HeadCost(bert_by_hand((4, 2)), None)
