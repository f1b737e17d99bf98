"""Grouped-query / multi-query attention, head width apart from d_model / h, causal masking and the kv cache.

The references here are written out independently of explorer.model._attention: grouped-query attention as
ordinary attention over key/value heads repeated explicitly, and "today's" multi-head attention as the
[B, T, 3, H, dk] computation the module had before key/value heads existed.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from explorer.errors import ConfigError
from explorer.layout import InputSpec, ModelConfig, valid_head_pairs, valid_heads, valid_kv_heads
from explorer.layout._schedules import expand_head_dim, expand_kv_schedule
from explorer.model import CausalLM, KVCache, MultiHeadAttention, attention_flops, build_model
from explorer.model._attention import causal_mask
from explorer.model._model import Encoder

IMPLS = ("fused", "merged", "serial")
LM_SPEC = InputSpec(kind="tokens", seq_len=16, n_classes=40, vocab_size=40, task_kind="language_model")
FEATURES = InputSpec(kind="features", seq_len=6, n_classes=3, n_features=4)


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on a shared 2-core machine run fastest on one thread."""


def _mha(d_model, heads, kv=None, head_dim=None, causal=False, seed=0) -> MultiHeadAttention:
    torch.manual_seed(seed)
    m = MultiHeadAttention(d_model, heads, n_kv_heads=kv, head_dim=head_dim, causal=causal).eval()
    with torch.no_grad():  # non-zero biases, so a wrong bias slice cannot hide
        m.qkv.bias.normal_(0, 0.1)
        m.proj.bias.normal_(0, 0.1)
    return m


def _repeat_reference(m: MultiHeadAttention, x: torch.Tensor, causal: bool) -> torch.Tensor:
    """Attention with each key/value head repeated for its group of query heads, then ordinary softmax."""
    B, T, _ = x.shape
    H, Hkv, dk = m.n_heads, m.n_kv_heads, m.d_k
    w, b = m.qkv.weight, m.qkv.bias
    q = F.linear(x, w[: H * dk], b[: H * dk]).view(B, T, H, dk).transpose(1, 2)
    k = (
        F.linear(x, w[H * dk : (H + Hkv) * dk], b[H * dk : (H + Hkv) * dk])
        .view(B, T, Hkv, dk)
        .transpose(1, 2)
    )
    v = F.linear(x, w[(H + Hkv) * dk :], b[(H + Hkv) * dk :]).view(B, T, Hkv, dk).transpose(1, 2)
    k, v = k.repeat_interleave(H // Hkv, dim=1), v.repeat_interleave(H // Hkv, dim=1)  # [B, H, T, dk]
    scores = q @ k.transpose(-2, -1) / math.sqrt(dk)
    if causal:
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    y = torch.softmax(scores, -1) @ v  # [B, H, T, dk]
    return m.proj(y.transpose(1, 2).reshape(B, T, H * dk))


def _todays_output(m: MultiHeadAttention, x: torch.Tensor, impl: str) -> torch.Tensor:
    """The multi-head module as it was before key/value heads: one [B, T, 3, H, dk] projection."""
    B, T, C = x.shape
    H, dk = m.n_heads, m.d_k
    if impl == "serial":
        outs = []
        for h in range(H):
            rows = [slice(part * C + h * dk, part * C + (h + 1) * dk) for part in range(3)]
            q, k, v = (F.linear(x, m.qkv.weight[r], m.qkv.bias[r]) for r in rows)
            outs.append(torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(dk), dim=-1) @ v)
        return m.proj(torch.cat(outs, dim=-1))
    q, k, v = m.qkv(x).reshape(B, T, 3, H, dk).permute(2, 0, 3, 1, 4).unbind(0)
    if impl == "fused":
        y = F.scaled_dot_product_attention(q, k, v)
    else:
        y = torch.softmax((q @ k.transpose(-2, -1)) / math.sqrt(dk), dim=-1) @ v
    return m.proj(y.transpose(1, 2).reshape(B, T, C))


# ------------------------------------------------------------------------------------ attention paths


@pytest.mark.parametrize(
    ("d_model", "heads", "kv", "head_dim"),
    [(64, 8, 2, None), (64, 8, 1, None), (48, 6, 3, None), (32, 4, 2, 24), (40, 3, 1, 16), (64, 8, 8, 4)],
)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("impl", IMPLS)
def test_grouped_paths_equal_explicit_repeat(d_model, heads, kv, head_dim, causal, impl):
    m = _mha(d_model, heads, kv, head_dim, causal)
    m.impl = impl
    x = torch.randn(2, 7, d_model)
    with torch.no_grad():
        torch.testing.assert_close(m(x)[0], _repeat_reference(m, x, causal), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("impl", IMPLS)
def test_kv_equal_heads_is_todays_module_bit_for_bit(impl):
    for d_model, heads in [(64, 1), (64, 8), (96, 6)]:
        m = _mha(d_model, heads, kv=heads)
        m.impl = impl
        assert m.qkv.weight.shape == (3 * d_model, d_model) and m.proj.weight.shape == (d_model, d_model)
        x = torch.randn(3, 11, d_model)
        with torch.no_grad():
            assert torch.equal(m(x)[0], _todays_output(m, x, impl))


@pytest.mark.parametrize("impl", IMPLS)
def test_kv_equal_heads_matches_torch_multihead_attention(impl):
    cfg = ModelConfig(d_model=32, heads=(4,), kv_heads=(4,), head_dim=8)
    assert cfg.kv_heads is None and cfg.head_dim is None  # stored as the classic layout
    m = _mha(32, 4, kv=cfg.kv_per_layer[0], head_dim=cfg.d_k[0])
    m.impl = impl
    ref = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    with torch.no_grad():
        ref.in_proj_weight.copy_(m.qkv.weight)
        ref.in_proj_bias.copy_(m.qkv.bias)
        ref.out_proj.weight.copy_(m.proj.weight)
        ref.out_proj.bias.copy_(m.proj.bias)
        x = torch.randn(2, 9, 32)
        torch.testing.assert_close(m(x)[0], ref(x, x, x, need_weights=False)[0], rtol=1e-5, atol=1e-5)


def test_weights_stored_before_kv_heads_still_load():
    old = build_model(ModelConfig(d_model=32, heads=(2, 4)), FEATURES)
    same = build_model(ModelConfig(d_model=32, heads=(2, 4), kv_heads=(2, 4), head_dim=(16, 8)), FEATURES)
    same.load_state_dict(old.state_dict())  # strict: same names and shapes
    grouped = build_model(ModelConfig(d_model=32, heads=(2, 4), kv_heads=(1, 2)), FEATURES)
    with pytest.raises(RuntimeError, match="size mismatch"):
        grouped.load_state_dict(old.state_dict())


@pytest.mark.parametrize("impl", IMPLS)
def test_head_mask_removes_one_query_head_of_a_group(impl):
    m = _mha(32, 4, kv=2, head_dim=12)
    m.impl = impl
    x = torch.randn(2, 6, 32)
    mask = torch.ones(4)
    mask[1] = 0
    with torch.no_grad():
        masked = m(x, head_mask=mask)[0]
        m.proj.weight[:, 12:24] = 0  # head 1's columns of W_O
        torch.testing.assert_close(masked, m(x)[0], rtol=1e-5, atol=1e-6)


def test_weights_are_per_query_head_and_rows_sum_to_one():
    m = _mha(32, 8, kv=2, causal=True)
    _, w = m(torch.randn(2, 5, 32), need_weights=True)
    assert w.shape == (2, 8, 5, 5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 8, 5))
    assert torch.all(w.triu(diagonal=1) == 0)  # nothing attends to the future


def test_module_errors_name_the_valid_choices():
    with pytest.raises(ConfigError, match="choose from 1, 2, 4, 8"):
        MultiHeadAttention(64, 8, n_kv_heads=3)
    with pytest.raises(ConfigError, match="not divisible"):
        MultiHeadAttention(64, 6)
    MultiHeadAttention(64, 6, head_dim=16)  # with head_dim the count need not divide d_model


def test_causal_mask_with_a_cache_before_the_queries():
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]
    assert torch.equal(causal_mask(3, 3), torch.ones(3, 3, dtype=torch.bool).tril())


# ------------------------------------------------------------------------------------ language model


def _lm(heads=(4, 4), kv=(2, 1), head_dim=None, impl="fused", seed=0) -> CausalLM:
    torch.manual_seed(seed)
    cfg = ModelConfig(d_model=32, heads=heads, kv_heads=kv, head_dim=head_dim, attention=impl)
    model = build_model(cfg, LM_SPEC)
    assert isinstance(model, CausalLM)
    return model.eval()


@pytest.mark.parametrize("impl", IMPLS)
def test_causal_mask_blocks_the_future(impl):
    model = _lm(impl=impl)
    x = torch.randint(0, 40, (2, 10), generator=torch.Generator().manual_seed(1))
    changed = x.clone()
    changed[:, 6] = (changed[:, 6] + 1) % 40
    with torch.no_grad():
        a, b = model(x), model(changed)
    assert a.shape == (2, 10, 40)
    torch.testing.assert_close(a[:, :6], b[:, :6], rtol=0, atol=1e-6)  # earlier positions: unchanged
    assert (a[:, 6:] - b[:, 6:]).abs().amax() > 1e-3  # the changed position and after: changed


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("heads", "kv", "head_dim"), [((4, 4), (4, 4), None), ((4, 8), (2, 1), None), ((3, 6), (1, 3), 8)]
)
def test_incremental_decoding_equals_the_full_forward(impl, heads, kv, head_dim):
    model = _lm(heads, kv, head_dim, impl)
    x = torch.randint(0, 40, (3, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(x)  # [B, T, V]
        cache = model.new_cache(3)
        steps = [model.step(x[:, :5], cache)] + [model.step(x[:, t : t + 1], cache) for t in range(5, 12)]
    assert cache.length == 12
    torch.testing.assert_close(steps[-1][:, -1], full[:, -1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-5, atol=1e-5)


def test_cache_refuses_to_overflow_and_positions_are_bounded():
    model = _lm()
    cache = model.new_cache(1, max_len=4)
    with torch.no_grad():
        model.step(torch.zeros(1, 4, dtype=torch.long), cache)
        with pytest.raises(ConfigError, match="no room"):
            model.step(torch.zeros(1, 1, dtype=torch.long), cache)


def test_cache_bytes_match_a_hand_count():
    cfg = ModelConfig(d_model=64, heads=(8, 4, 2), kv_heads=(2, 1, 2), min_dk=8)
    # d_k = 8, 16, 32; per position: 2 (K, V) x (2 x 8 + 1 x 16 + 2 x 32) floats of 4 bytes
    per_token = 2 * (2 * 8 + 1 * 16 + 2 * 32) * 4
    assert cfg.kv_cache_bytes_per_token() == per_token == 768
    assert cfg.kv_cache_bytes_per_token("bfloat16") == per_token // 2
    assert cfg.kv_cache_bytes(context=100, batch_size=3) == per_token * 300
    mha = ModelConfig(d_model=64, heads=(8, 4, 2), min_dk=8)
    assert mha.kv_cache_bytes_per_token() == 3 * 2 * 64 * 4  # full multi-head: 2 x d_model per layer
    torch.manual_seed(0)
    model = CausalLM(
        cfg, InputSpec(kind="tokens", seq_len=20, n_classes=7, vocab_size=7, task_kind="language_model")
    )
    cache = model.new_cache(3)
    with torch.no_grad():
        model.step(torch.zeros(3, 11, dtype=torch.long), cache)
    assert cache.nbytes() == cfg.kv_cache_bytes(11, 3) == model.kv_cache_bytes(11, 3)
    assert model.kv_cache_bytes_per_token() == per_token


def test_parameters_and_flops_account_for_kv_heads_and_head_dim():
    d, h, kv, hd = 32, 4, 2, 12
    enc = build_model(ModelConfig(d_model=d, heads=(h,), kv_heads=(kv,), head_dim=hd), FEATURES)
    attn = enc.blocks[0].attn
    assert attn.qkv.weight.shape == ((h + 2 * kv) * hd, d) and attn.proj.weight.shape == (d, h * hd)
    n_attn = (h + 2 * kv) * hd * (d + 1) + (h * hd + 1) * d
    base = build_model(ModelConfig(d_model=d, heads=(h,)), FEATURES)
    assert enc.num_params() - base.num_params() == n_attn - (4 * d * d + 4 * d)
    B, T = 2, FEATURES.seq_len
    projections = 2 * B * T * d * (h + 2 * kv) * hd + 2 * B * T * h * hd * d
    scores = 2 * 2 * B * T * T * h * hd
    assert attention_flops(B, T, d, h, kv, hd) == projections + scores
    assert enc.flops(B) - base.flops(B) == projections + scores - attention_flops(B, T, d)
    assert attention_flops(B, T, d, h, h) == attention_flops(B, T, d)  # kv = heads: today's count


def test_encoder_is_unchanged_for_classification():
    model = build_model(ModelConfig(d_model=32, heads=(2, 4)), FEATURES)
    assert isinstance(model, Encoder) and not any(b.attn.causal for b in model.blocks)


# ------------------------------------------------------------------------------------ config


def test_kv_schedules_expand_like_head_schedules():
    assert expand_kv_schedule("uniform:2", (8, 8, 4)) == (2, 2, 2)
    assert expand_kv_schedule("2", (8, 8)) == (2, 2)
    assert expand_kv_schedule("decreasing:8-2", (8, 8, 8, 8)) == (8, 4, 4, 2)
    assert expand_kv_schedule("increasing:1-4", (2, 4, 4, 8)) == (1, 2, 2, 4)
    assert expand_kv_schedule("4,4,2,1", (8, 8, 8, 8)) == (4, 4, 2, 1)


@pytest.mark.parametrize(
    ("schedule", "heads", "message"),
    [
        (
            "uniform:3",
            (8, 8),
            "3 key/value heads is not valid for 8 query heads in layer 0.*choose from 1, 2, 4, 8",
        ),
        ("4,3", (4, 4), "3 key/value heads is not valid for 4 query heads in layer 1.*choose from 1, 2, 4"),
        ("increasing:4-2", (8,), "increasing needs its first count <= its second"),
        (
            "decreasing:8-3",
            (8, 8),
            "3 key/value heads divides no layer's head count.*choose ends from 1, 2, 4, 8",
        ),
        ("2,2", (4, 4, 4), "lists 2 counts but the model has 3 layers"),
        ("lots", (4,), "cannot read kv_heads schedule"),
        ("uniform:0", (4,), "0 key/value heads"),
    ],
)
def test_kv_schedule_errors_name_the_valid_choices(schedule, heads, message):
    with pytest.raises(ConfigError, match=message):
        expand_kv_schedule(schedule, heads)


def test_head_dim_rules():
    assert expand_head_dim(64, 3) == (64, 64, 64) and expand_head_dim("32,64", 2, 16) == (32, 64)
    assert expand_head_dim("uniform:16", 2) == (16, 16)
    with pytest.raises(ConfigError, match="below the d_k floor min_dk=16; choose head_dim >= 16"):
        expand_head_dim(8, 2, 16)
    with pytest.raises(ConfigError, match="lists 3 widths but the model has 2 layers"):
        expand_head_dim("8,8,8", 2)
    with pytest.raises(ConfigError, match="cannot read head_dim"):
        expand_head_dim("wide", 2)
    # with head_dim, a head count need not divide d_model; the floor applies to head_dim
    cfg = ModelConfig.from_schedule(96, 3, "increasing:5-7", min_dk=16, head_dim=32)
    assert cfg.heads == (5, 6, 7) and cfg.d_k == (32, 32, 32)
    with pytest.raises(ConfigError, match="5 heads is not valid.*96 is not divisible by 5"):
        ModelConfig.from_schedule(96, 1, "5", min_dk=16)


def test_valid_head_pairs_obey_the_rules_and_miss_none():
    for d_model, min_dk in [(64, 8), (96, 16), (512, 64)]:
        pairs = valid_head_pairs(d_model, min_dk)
        expected = {(h, k) for h in valid_heads(d_model, min_dk) for k in range(1, h + 1) if h % k == 0}
        assert {(p.heads, p.kv_heads) for p in pairs} == expected
        assert all(p.d_k == d_model // p.heads >= min_dk and p.group == p.heads // p.kv_heads for p in pairs)
    with_dim = valid_head_pairs(64, 16, head_dim=16)
    assert {p.heads for p in with_dim} == {1, 2, 3, 4} and all(p.d_k == 16 for p in with_dim)
    assert valid_kv_heads(12) == [1, 2, 3, 4, 6, 12]
    with pytest.raises(ConfigError, match="choose head_dim >= 16"):
        valid_head_pairs(64, 16, head_dim=8)


def test_keys_and_dicts_stay_what_they_were_without_kv_heads():
    old = ModelConfig(d_model=64, heads=(4, 8), min_dk=8)
    assert old.key() == "d64_h4-8_mlp4_fused"  # the format stored in caches and studies
    assert set(old.to_dict()) == {
        "d_model",
        "heads",
        "min_dk",
        "mlp_ratio",
        "dropout",
        "attention",
        "schedule",
    }
    explicit = ModelConfig(d_model=64, heads=(4, 8), min_dk=8, kv_heads=(4, 8), head_dim=(16, 8))
    assert explicit == old and explicit.key() == old.key()
    grouped = ModelConfig(d_model=64, heads=(4, 8), min_dk=8, kv_heads=(2, 2))
    wide = ModelConfig(d_model=64, heads=(4, 8), min_dk=8, head_dim=(32, 32))
    assert len({old.key(), grouped.key(), wide.key()}) == 3
    for cfg in (old, grouped, wide, ModelConfig.from_schedule(64, 2, "4", kv_heads="uniform:1", head_dim=24)):
        assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    assert grouped.groups == (2, 4) and old.kv_per_layer == (4, 8)


def test_kv_cache_arguments_are_checked():
    with pytest.raises(ConfigError, match="dtype must be one of"):
        ModelConfig(d_model=8, heads=(2,)).kv_cache_bytes_per_token("int8")
    with pytest.raises(ConfigError, match="batch_size >= 1"):
        KVCache([(1, 4)], 0, 4)
