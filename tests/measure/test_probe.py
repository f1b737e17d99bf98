"""Probes of a model's heads: importance, masking, attention statistics, planted relations."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from explorer.analysis import _heads as heads
from explorer.layout import ModelConfig, TrainConfig
from explorer.measure import _probe as probe, fit
from explorer.measure._train import evaluate
from tests.heads_models import SPEC, data, kill_head, structured_task, tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")


def test_importance_of_a_disabled_head_is_exactly_zero():
    model = tiny_model()
    kill_head(model, 0, 1)
    X, y = data()
    imp = probe.head_importance(model, X, y, torch.device("cpu"), batch_size=16)
    assert [len(v) for v in imp] == [4, 2]
    assert imp[0][1] == 0.0
    assert all(imp[0][h] > 1e-4 for h in (0, 2, 3)) and all(imp[1] > 1e-4)
    for v in imp:  # L2-normalized per layer
        assert np.linalg.norm(v) == pytest.approx(1.0)
    assert model.blocks[0].attn.impl == "fused"  # the analysis restores the model's attention path


def test_importance_is_the_mean_absolute_per_example_gradient():
    model = tiny_model(seed=3)
    X, y = data(12)
    imp = probe.head_importance(model, X, y, torch.device("cpu"), batch_size=5)
    total = [torch.zeros(h) for h in (4, 2)]
    for i in range(len(y)):  # the definition, one example at a time
        masks = [torch.ones(h, requires_grad=True) for h in (4, 2)]
        torch.nn.functional.cross_entropy(model(X[i : i + 1], head_masks=masks), y[i : i + 1]).backward()
        for t, m in zip(total, masks, strict=True):
            t += m.grad.abs()
    for got, want in zip(imp, total, strict=True):
        np.testing.assert_allclose(got, (want / want.norm()).numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("impl", ["fused", "merged", "serial"])
def test_masking_a_head_is_removing_it(impl):
    masked, removed = tiny_model(impl=impl), tiny_model(impl=impl)
    kill_head(removed, 1, 0)
    X, _ = data()
    with torch.no_grad():
        a = masked(X, head_masks=[None, torch.tensor([0.0, 1.0])])
        b = removed(X)
        c = masked(X)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert (a - c).abs().max() > 1e-4  # and the head did matter


@pytest.fixture(scope="module")
def trained():
    task = structured_task()
    model, result = fit(
        ModelConfig(d_model=16, heads=(4, 2)), task, TrainConfig(epochs=10, lr=5e-3), torch.device("cpu")
    )
    assert result.val_accuracy > 0.6  # learned something, so masking has something to lose
    X, y = task.val
    imp = probe.head_importance(model, X, y, torch.device("cpu"))
    return model.eval(), X, y, imp


def test_masking_curves_and_heads_needed_agree(trained):
    model, X, y, imp = trained
    curve, layer_curves = probe.masking_curves(model, X, y, imp, torch.device("cpu"))
    assert list(curve["n_masked"]) == list(range(7))
    assert curve["accuracy"].iloc[0] == pytest.approx(evaluate(model, X, y, torch.device("cpu")))
    assert curve["importance"].iloc[1:].is_monotonic_increasing  # least important first
    assert sorted(zip(curve["layer"].iloc[1:], curve["head"].iloc[1:], strict=True)) == [
        (0, 0),
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 0),
        (1, 1),
    ]

    tolerances = [-1.0, 0.0, 0.01, 0.05, 0.2, 1.0]
    needed = [heads.heads_needed(layer_curves, (4, 2), tolerance=t) for t in tolerances]
    assert needed[0] == [4, 2] and needed[-1] == [0, 0]  # nothing may go / anything may go
    for looser, stricter in zip(needed[1:], needed[:-1], strict=True):
        # more tolerance, fewer heads needed
        assert all(a <= b for a, b in zip(looser, stricter, strict=True))
    base = curve["accuracy"].iloc[0]
    for layer, (n_heads, need) in enumerate(zip((4, 2), needed[2], strict=True)):
        assert 0 <= need <= n_heads
        c = layer_curves[layer_curves["layer"] == layer].set_index("n_masked")["accuracy"]
        assert (c.loc[: n_heads - need] >= base - 0.01 - 1e-12).all()  # every step it may take stays within
        if need > 0:
            assert c.loc[n_heads - need + 1] < base - 0.01  # and the next one would not
    assert heads.heads_needed(layer_curves, (4, 2)) == needed[2]  # the default tolerance is one point


def test_uniform_attention_has_entropy_log_t_and_identical_heads_are_maximally_similar():
    model = tiny_model(heads_=(4,), seed=5)
    attn, dk, C = model.blocks[0].attn, 4, 16  # head 3 gets head 2's queries and keys: the same maps
    with torch.no_grad():
        attn.qkv.weight[: 2 * C].normal_(0.0, 1.0)  # sharp queries and keys: far from uniform attention
        for part in (0, C):
            attn.qkv.weight[part : part + dk] = 0.0  # head 0: no queries or keys -> uniform attention
            attn.qkv.bias[part : part + dk] = 0.0
            attn.qkv.weight[part + 3 * dk : part + 4 * dk] = attn.qkv.weight[part + 2 * dk : part + 3 * dk]
            attn.qkv.bias[part + 3 * dk : part + 4 * dk] = attn.qkv.bias[part + 2 * dk : part + 3 * dk]
    X, _ = data()
    stats = probe.attention_stats(model, X, batch_size=20).set_index("head")
    assert stats.loc[0, "entropy"] == pytest.approx(math.log(SPEC.seq_len), abs=1e-6)  # float32 softmax
    assert (stats.loc[[1, 2, 3], "entropy"] < math.log(SPEC.seq_len) - 0.05).all()
    assert stats.loc[2, "most_similar"] == 3 and stats.loc[2, "similarity_max"] == pytest.approx(
        1.0, abs=1e-9
    )
    pairs = probe.attention_pairs(model, X)
    assert len(pairs) == 6 and pairs["similarity"].between(0, 1 + 1e-12).all()
    top = heads.redundant_pairs(pairs, threshold=0.999)
    assert (top.iloc[0]["head_a"], top.iloc[0]["head_b"]) == (2, 3)
    assert pairs["similarity"].idxmax() == pairs.index[(pairs["head_a"] == 2) & (pairs["head_b"] == 3)][0]


def test_unpatchify_inverts_the_digits_patches():
    from explorer.data._digits import patchify

    img = np.arange(2 * 64, dtype=np.float32).reshape(2, 8, 8)
    for p in (1, 2, 4):
        np.testing.assert_array_equal(probe.unpatchify(patchify(img, p)), img)


def test_specialization_from_hand_made_maps():
    # Two examples, T = 6; marker 0 then its target 1 position later, marker 1 then its target 2 positions back.
    X = np.array([[0, 5, 9, 7, 1, 8], [9, 0, 6, 1, 7, 7]])
    offsets = [1, -2]
    B, H, T = 2, 3, 6
    maps = np.full((B, H, T, T), 1.0 / T)
    for b in range(B):
        m0 = list(X[b]).index(0)
        m1 = list(X[b]).index(1)
        maps[b, 0, m0] = 0.0
        maps[b, 0, m0, m0 + 1] = 1.0  # head 0: marker 0 -> its target
        maps[b, 1, m1 - 2] = 0.0
        maps[b, 1, m1 - 2, m1] = 1.0  # head 1: relation 1's target -> its marker (the other direction)
    table = probe.specialization_from_maps([maps], X, offsets)
    att = table.set_index(["head", "relation"])["attention"]
    assert att[(0, 0)] == pytest.approx(1.0) and att[(1, 1)] == pytest.approx(1.0)
    assert att[(2, 0)] == pytest.approx(1 / T) and att[(2, 1)] == pytest.approx(1 / T)  # head 2: uniform
    summary = heads.specialized_heads(table)
    assert summary.to_dict(orient="records") == [
        {
            "layer": 0,
            "heads": 3,
            "specialized": 2,
            "relations_covered": 2,
            "k": 2,
            "relations": "0,1",
            "shared": 0,
            "detail": "1: 0; 2: 1",
        }
    ]
    assert heads.relations_followed(summary) == {0, 1}
    # A second layer where only relation 1 is followed adds no relation; the network-wide count stays 2.
    layer1 = table.assign(layer=1, attention=np.where(table["relation"] == 1, table["attention"], 0.0))
    both = heads.specialized_heads(pd.concat([table, layer1]))
    assert both["relations"].tolist() == ["0,1", "1"] and heads.relations_followed(both) == {0, 1}
    assert heads.describe_specialization(both) == (
        "layer 1: 2 of 3 heads follow a relation (head 1: relation 0, head 2: relation 1); "
        "layer 2: 1 of 3 heads follow a relation (head 2: relation 1); in all, heads follow 2 of the 2 relations"
    )
    # One head may follow several relations: the check does not assume "one head, one relation".
    shared = table.assign(attention=np.where(table["head"] == 2, 0.4, table["attention"]))
    one = heads.specialized_heads(shared)
    assert one[["specialized", "shared", "detail"]].to_dict(orient="records") == [
        {"specialized": 3, "shared": 1, "detail": "1: 0; 2: 1; 3: 0,1"}
    ]
    assert heads.describe_specialization(one).endswith("and 1 head follows more than one")


def test_attention_statistics_has_a_row_per_head_and_a_row_per_pair_of_heads():
    from explorer.measure import attention_statistics

    model = tiny_model(heads_=(4, 2))
    X, _ = data(n=20)
    stats, pairs = attention_statistics(model, X, batch_size=8)
    assert len(stats) == 4 + 2 and stats["entropy"].between(0, math.log(SPEC.seq_len) + 1e-6).all()
    assert len(pairs) == 6 + 1 and pairs["similarity"].between(0, 1 + 1e-9).all()  # pairs within a layer


def test_relation_specialization_reads_a_token_models_maps_along_each_relation():
    from explorer.layout import InputSpec
    from explorer.measure import attention_maps, relation_specialization
    from explorer.model import build_model

    spec = InputSpec(kind="tokens", seq_len=6, n_classes=2, vocab_size=10)
    torch.manual_seed(0)
    model = build_model(ModelConfig(d_model=16, heads=(2,)), spec).eval()
    X = torch.tensor([[0, 5, 9, 7, 1, 8], [9, 0, 6, 1, 7, 7]])
    table = relation_specialization(model, X, [1, -2])
    assert len(table) == 2 * 2 and set(table["relation"]) == {0, 1}
    maps = attention_maps(model, X)[0].numpy()
    there = maps[[0, 1], :, [0, 1], [1, 2]].mean(axis=0)  # marker 0 -> the token after it, both examples
    back = maps[[0, 1], :, [1, 2], [0, 1]].mean(axis=0)
    got = table[table["relation"] == 0].sort_values("head")["attention"].to_numpy()
    assert np.allclose(got, np.maximum(there, back))
