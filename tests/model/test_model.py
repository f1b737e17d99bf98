from __future__ import annotations

import pytest
import torch

from explorer.errors import DataError
from explorer.layout import InputSpec, ModelConfig
from explorer.model import build_model, set_attention_impl
from explorer.model._model import Encoder

TOKENS = InputSpec(kind="tokens", seq_len=7, n_classes=5, vocab_size=11)
FEATURES = InputSpec(kind="features", seq_len=6, n_classes=3, n_features=4)


def _model(heads=(2, 4, 8), spec=FEATURES, seed=0, **kw) -> Encoder:
    torch.manual_seed(seed)
    return build_model(ModelConfig(d_model=32, heads=heads, **kw), spec).eval()


def _features(b: int = 3) -> torch.Tensor:
    return torch.randn(b, FEATURES.seq_len, FEATURES.n_features, generator=torch.Generator().manual_seed(1))


def test_logits_shape_for_tokens_and_features():
    tokens = torch.randint(0, TOKENS.vocab_size, (5, TOKENS.seq_len))
    assert _model(spec=TOKENS)(tokens).shape == (5, TOKENS.n_classes)
    assert _model(spec=FEATURES)(_features(4)).shape == (4, FEATURES.n_classes)
    # shorter sequences use the first positions; longer ones are an error naming the fix
    assert _model(spec=TOKENS)(tokens[:, :3]).shape == (5, TOKENS.n_classes)
    with pytest.raises(DataError, match="seq_len=7"):
        _model(spec=TOKENS)(torch.zeros(1, 9, dtype=torch.long))


def test_per_layer_heads_come_from_config():
    cfg = ModelConfig.from_schedule(64, 4, "increasing:2-8", min_dk=8)
    model = build_model(cfg, FEATURES)
    assert [b.attn.n_heads for b in model.blocks] == list(cfg.heads) == [2, 4, 4, 8]
    assert [b.attn.d_k for b in model.blocks] == [32, 16, 16, 8]
    assert model.blocks[0].mlp.fc1.out_features == 4 * 64


def test_num_params_counts_every_trainable_parameter():
    model = _model(spec=TOKENS)
    assert model.num_params() == sum(p.numel() for p in model.parameters())
    d, L, hidden = 32, 3, 128
    per_block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (d * hidden + hidden) + (hidden * d + d)
    expected = (
        TOKENS.vocab_size * d
        + TOKENS.seq_len * d
        + L * per_block
        + 2 * d
        + d * TOKENS.n_classes
        + TOKENS.n_classes
    )
    assert model.num_params() == expected
    model.pos.requires_grad_(False)
    assert model.num_params() == expected - TOKENS.seq_len * d


def test_init_is_small_and_biases_zero():
    model = _model()
    for w in (model.head.weight, model.blocks[0].attn.qkv.weight, model.pos):
        assert 0.01 < w.std() < 0.02 and w.abs().max() <= 0.04 + 1e-6
    assert torch.all(model.blocks[0].attn.qkv.bias == 0) and torch.all(model.blocks[1].mlp.fc2.bias == 0)


def test_attention_impls_give_the_same_logits():
    model = _model()
    x = _features()
    with torch.no_grad():
        outs = {impl: set_attention_impl(model, impl)(x) for impl in ("fused", "merged", "serial")}
    assert not torch.allclose(outs["fused"], torch.zeros_like(outs["fused"]))
    torch.testing.assert_close(outs["merged"], outs["fused"], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(outs["serial"], outs["fused"], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("impl", ["fused", "merged", "serial"])
def test_head_mask_equals_zeroing_that_heads_input_to_the_output_projection(impl):
    heads, layer, head = (2, 4, 8), 1, 2
    model = _model(heads, attention=impl)
    x = _features()
    masks = [None, torch.ones(4), None]
    masks[layer][head] = 0.0
    dk = 32 // heads[layer]
    with torch.no_grad():
        masked = model(x, head_masks=masks)
        plain = model(x)
        model.blocks[layer].attn.proj.weight[:, head * dk : (head + 1) * dk] = 0.0
        zeroed = model(x)
    assert not torch.allclose(masked, plain, atol=1e-4)
    torch.testing.assert_close(masked, zeroed, atol=1e-5, rtol=1e-4)


def test_head_masks_must_cover_every_layer():
    with pytest.raises(ValueError, match="3 layers"):
        _model()(_features(), head_masks=[None])


def test_attention_maps_shapes_and_rows_sum_to_one():
    model = _model().train()
    maps = model.attention_maps(_features(2))
    assert [tuple(m.shape) for m in maps] == [(2, h, 6, 6) for h in (2, 4, 8)]
    for m in maps:
        torch.testing.assert_close(m.sum(-1), torch.ones(m.shape[:-1]))
        assert (m >= 0).all()
    assert model.training, "attention_maps must restore the training mode"


def test_flops_grow_with_batch_and_depth():
    shallow, deep = _model((4,)), _model((4, 4, 4))
    assert shallow.flops(2) == 2 * shallow.flops(1)  # every term is linear in the batch
    assert deep.flops(4) > deep.flops(1) > shallow.flops(1)
    # each extra block adds the same matmul cost, whatever its head count
    T, d, hidden = FEATURES.seq_len, 32, 4 * 32
    per_block = 2 * T * 4 * d * d + 2 * 2 * T * T * d + 2 * 2 * T * d * hidden
    assert deep.flops(1) - shallow.flops(1) == 2 * per_block
    assert _model((1, 2, 8)).flops(1) == deep.flops(1)
    embed_and_head = 2 * T * FEATURES.n_features * d + 2 * d * FEATURES.n_classes
    assert shallow.flops(1) == embed_and_head + per_block


def test_model_cost_is_the_trainable_parameters_and_the_models_own_flops():
    from explorer.model import model_cost

    spec = InputSpec(kind="features", seq_len=4, n_classes=3, n_features=2)
    model = build_model(ModelConfig(d_model=8, heads=(2,)), spec)
    example = torch.randn(1, 4, 2)
    params, flops = model_cost(model, example)
    assert params == sum(p.numel() for p in model.parameters()) and flops == model.flops(1) > 0
    model.head.requires_grad_(False)
    frozen = sum(p.numel() for p in model.head.parameters())
    assert frozen > 0 and model_cost(model, example)[0] == params - frozen  # frozen weights are not counted
    plain = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 3))
    assert model_cost(plain, example) == (27, 2 * 8 * 3)  # counted on the example by torch's flop counter
