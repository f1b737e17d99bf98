"""The three attention implementations agree, and match torch.nn.MultiheadAttention on the same weights."""

from __future__ import annotations

import pytest
import torch

from explorer.errors import ConfigError
from explorer.model import MultiHeadAttention, attention_flops, set_attention_impl

IMPLS = ("fused", "merged", "serial")


def _mha(d_model: int, heads: int, seed: int = 0, **layout: object) -> MultiHeadAttention:
    torch.manual_seed(seed)
    return MultiHeadAttention(d_model, heads, **layout).eval()


@pytest.mark.parametrize(("d_model", "heads"), [(64, 1), (64, 8), (96, 6), (48, 16)])
def test_three_paths_agree(d_model, heads):
    m = _mha(d_model, heads)
    x = torch.randn(3, 11, d_model)
    outs = {}
    for impl in IMPLS:
        m.impl = impl
        outs[impl] = m(x)[0]
    torch.testing.assert_close(outs["merged"], outs["fused"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outs["serial"], outs["fused"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", [{}, {"n_kv_heads": 2, "causal": True}], ids=["mha", "grouped-causal"])
@pytest.mark.parametrize("impl", IMPLS)
def test_gradients_agree(impl, layout):
    m = _mha(32, 4, **layout)
    x = torch.randn(2, 5, 32)
    m.impl = "fused"
    m(x)[0].square().sum().backward()
    ref = m.qkv.weight.grad.clone()
    m.zero_grad()
    m.impl = impl
    m(x)[0].square().sum().backward()
    torch.testing.assert_close(m.qkv.weight.grad, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("impl", IMPLS)
def test_matches_torch_multihead_attention(impl):
    d_model, heads = 64, 8
    m = _mha(d_model, heads)
    m.impl = impl
    ref = torch.nn.MultiheadAttention(d_model, heads, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(m.qkv.weight)
        ref.in_proj_bias.copy_(m.qkv.bias)
        ref.out_proj.weight.copy_(m.proj.weight)
        ref.out_proj.bias.copy_(m.proj.bias)
    x = torch.randn(4, 9, d_model)
    expected, expected_w = ref(x, x, x, need_weights=True, average_attn_weights=False)
    y, w = m(x, need_weights=True)
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w, expected_w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("impl", IMPLS)
def test_head_mask_removes_exactly_one_head(impl):
    d_model, heads, dk = 32, 4, 8
    m = _mha(d_model, heads)
    m.impl = impl
    x = torch.randn(2, 6, d_model)
    mask = torch.ones(heads)
    mask[2] = 0
    masked = m(x, head_mask=mask)[0]
    # Removing head 2 = zeroing its columns of W_O.
    with torch.no_grad():
        m.proj.weight[:, 2 * dk : 3 * dk] = 0
    torch.testing.assert_close(masked, m(x)[0], rtol=1e-5, atol=1e-6)


def test_attention_weights_are_distributions():
    m = _mha(32, 4)
    _, w = m(torch.randn(2, 7, 32), need_weights=True)
    assert w.shape == (2, 4, 7, 7)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 7))


def test_divisibility_is_an_error_not_a_rounding():
    with pytest.raises(ConfigError, match="not divisible"):
        MultiHeadAttention(64, 6)
    with pytest.raises(ConfigError, match="impl must be one of"):
        MultiHeadAttention(64, 4, impl="flash")


def test_set_attention_impl_switches_every_module():
    model = torch.nn.Sequential(MultiHeadAttention(16, 2), MultiHeadAttention(16, 4))
    set_attention_impl(model, "serial")
    assert [m.impl for m in model] == ["serial", "serial"]
    with pytest.raises(ConfigError):
        set_attention_impl(model, "nope")


def test_flops_do_not_depend_on_head_count_and_grow_with_shape():
    base = attention_flops(8, 197, 384)
    assert base == 2 * 8 * 197 * 384 * 4 * 384 + 4 * 8 * 197 * 197 * 384
    assert attention_flops(16, 197, 384) == 2 * base
    assert attention_flops(8, 394, 384) > 2 * base - 1  # quadratic term makes it more than double
