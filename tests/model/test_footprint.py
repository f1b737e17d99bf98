"""Memory estimates from a model's shape, before it is built: the parameter count is exactly the built model's,
and the estimate grows with what it should."""

from __future__ import annotations

import pytest
import torch

from explorer.errors import LimitError
from explorer.layout import InputSpec, ModelConfig
from explorer.model import attention_bytes, build_model, check_config_limits, inference_bytes, training_bytes
from explorer.model._footprint import param_count, shape_of

TOKENS = InputSpec(kind="tokens", seq_len=12, n_classes=5, vocab_size=30)
FEATURES = InputSpec(kind="features", seq_len=16, n_classes=10, n_features=4)
TEXT = InputSpec(kind="tokens", seq_len=20, n_classes=256, vocab_size=256, task_kind="language_model")
CONFIGS = [
    ModelConfig(d_model=32, heads=(1, 2, 4)),
    ModelConfig(d_model=48, heads=(6, 3), mlp_ratio=2.5),
    ModelConfig(d_model=32, heads=(4, 4), kv_heads=(2, 1)),
    ModelConfig(d_model=32, heads=(3, 5), head_dim=(16, 8)),
]


@pytest.mark.parametrize("spec", [TOKENS, FEATURES, TEXT], ids=["tokens", "features", "language model"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.key())
def test_the_count_is_the_built_models(cfg, spec):
    with torch.random.fork_rng(devices=[]):
        model = build_model(cfg, spec)
    assert param_count(shape_of(cfg), spec) == model.num_params()


def test_the_estimates_grow_with_batch_depth_and_positions():
    small, deep = ModelConfig(d_model=32, heads=(2,)), ModelConfig(d_model=32, heads=(2,) * 8)
    assert training_bytes(shape_of(small), TOKENS, 64) > training_bytes(shape_of(small), TOKENS, 8)
    assert training_bytes(shape_of(deep), TOKENS, 8) > training_bytes(shape_of(small), TOKENS, 8)
    assert training_bytes(shape_of(small), TOKENS, 8) > inference_bytes(shape_of(small), TOKENS, 8)
    assert inference_bytes(shape_of(small), TEXT, 1, kv_len=4000) > inference_bytes(
        shape_of(small), TEXT, 1, 40
    )
    assert attention_bytes(384, 8, 8, 2000, 8, False) > 4 * 8 * 8 * 2000 * 2000  # the scores dominate


def test_config_limits_name_the_part_that_is_too_large():
    check_config_limits(CONFIGS[0])
    with pytest.raises(LimitError, match="the layers of the model is 300, above the limit of 256"):
        check_config_limits(ModelConfig(d_model=8, heads=(1,) * 300))
    with pytest.raises(LimitError, match="the MLP width of the model is"):
        check_config_limits(ModelConfig(d_model=64, heads=(1,), mlp_ratio=1e6))


def test_a_shape_holds_a_configs_width_mlp_and_each_layers_heads():
    from explorer.model import Shape

    shape = shape_of(ModelConfig(d_model=32, heads=(4, 4), kv_heads=(2, 1), mlp_ratio=2.5))
    assert isinstance(shape, Shape) and shape == Shape(32, 80, ((4, 2, 8), (4, 1, 8)))


def test_check_model_fits_is_the_largest_estimate_and_refuses_what_memory_cannot_hold(monkeypatch):
    from explorer.model import check_model_fits

    cfg = CONFIGS[0]
    shape = shape_of(cfg)
    need = check_model_fits(cfg, TOKENS, train_batch=16, infer_batch=4)
    assert need == max(training_bytes(shape, TOKENS, 16), inference_bytes(shape, TOKENS, 4))
    assert check_model_fits(cfg, TOKENS, train_batch=None, infer_batch=4) == inference_bytes(shape, TOKENS, 4)
    monkeypatch.setenv("EXPLORER_MAX_MEMORY_MB", "1")
    with pytest.raises(LimitError, match="the big one"):
        check_model_fits(
            ModelConfig(d_model=512, heads=(8,) * 4),
            TOKENS,
            train_batch=512,
            infer_batch=4,
            what="the big one",
        )
