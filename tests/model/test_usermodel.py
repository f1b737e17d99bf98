"""A model from the user's builder: checked on its layout and one batch, then trained and timed like our own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from explorer.data import load_task
from explorer.errors import ConfigError
from explorer.layout import LatencyConfig, ModelConfig, TrainConfig
from explorer.measure import VariantFailed, evaluate_variant
from explorer.measure._latency import latency_key
from explorer.model import ModelBuilder, build_model, check_model
from explorer.model._usermodel import attention_layout, count_flops

MODELS = Path(__file__).resolve().parents[1] / "usermodels.py"
LAYOUT = ModelConfig(d_model=16, heads=(2, 4))
OTHER = ModelConfig(d_model=16, heads=(1, 1))
FAST = LatencyConfig(device="cpu", batch_size=4, min_run_time=0.02)


def builder(name: str) -> ModelBuilder:
    return ModelBuilder(f"{MODELS}:{name}")


@pytest.fixture(scope="module")
def task():
    return load_task("digits")


def batch(task) -> torch.Tensor:
    return task.train[0][:8]


@pytest.mark.parametrize("name", ["good", "torch_mha", "declared"])
def test_builders_that_honour_the_layout_pass(name: str, task) -> None:
    check_model(builder(name), [LAYOUT, OTHER], task.spec, batch(task))
    heads = attention_layout(builder(name).build(LAYOUT, task.spec))[0]
    assert heads == [2, 4]


def test_grouped_query_layout_reaches_the_users_attention(task) -> None:
    gqa = ModelConfig(d_model=16, heads=(4, 4), kv_heads=(2, 1))
    assert attention_layout(builder("good").build(gqa, task.spec))[1] == [2, 1]
    with pytest.raises(ConfigError, match="key/value heads"):  # nn.MultiheadAttention has no kv heads
        builder("torch_mha").build(gqa, task.spec)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("fixed_heads", "ignores the layout: asked for heads [2, 4]"),
        ("wrong_shape", "logits of shape [8, 11] for a batch of 8; it must return [8, 10]"),
        ("nan_logits", "NaN or infinite logits"),
        ("undeclared", "no attention layer explorer can read"),
        ("raises", "raised ValueError: unsupported width"),
        ("not_a_module", "returned str, not a torch.nn.Module"),
        ("missing", "has no 'missing'"),
    ],
)
def test_bad_builders_are_one_error_naming_the_callable(name: str, words: str, task) -> None:
    with pytest.raises(ConfigError) as info:
        check_model(builder(name), [LAYOUT], task.spec, batch(task))
    message = str(info.value)
    assert words in message and f"usermodels.py:{name}" in message and "\n" not in message


def test_a_model_that_ignores_the_layout_is_caught_when_one_layout_happens_to_fit(task) -> None:
    four = ModelConfig(d_model=16, heads=(4, 4))
    check_model(builder("fixed_heads"), [four], task.spec, batch(task))  # what it always builds was asked
    with pytest.raises(ConfigError, match="ignores the layout"):
        check_model(builder("fixed_heads"), [four, OTHER], task.spec, batch(task))


def test_a_user_model_trains_times_and_counts_like_ours(task) -> None:
    b = builder("good")
    r = evaluate_variant(
        LAYOUT, task, TrainConfig(epochs=4, batch_size=32, lr=3e-3), FAST, builder=b, keep_model=True
    )
    losses = [s.train_loss for s in r.fit.history]
    assert losses[-1] < losses[0] - 0.02 and r.fit.epochs_run == 4  # it trained
    assert r.params == sum(p.numel() for p in r.model.parameters())
    assert r.flops == count_flops(b.build(LAYOUT, task.spec), task.train[0][:1]) > 0
    assert isinstance(r.model, torch.nn.Module) and not hasattr(r.model, "cfg")
    # the same seed rebuilds the same model
    torch.manual_seed(0)
    a = build_model(LAYOUT, task.spec, b).state_dict()
    torch.manual_seed(0)
    again = build_model(LAYOUT, task.spec, b).state_dict()
    assert a.keys() == again.keys() and all(torch.equal(v, again[k]) for k, v in a.items())


def test_a_layout_the_builder_refuses_fails_that_variant_only(task) -> None:
    with pytest.raises(VariantFailed) as info:
        evaluate_variant(LAYOUT, task, TrainConfig(epochs=1), FAST, builder=builder("raises"))
    assert info.value.kind == "model"


def test_latency_of_a_user_model_is_cached_apart_from_ours(task) -> None:
    ours = latency_key(LAYOUT, task.spec, FAST, torch.device("cpu"))
    theirs = latency_key(LAYOUT, task.spec, FAST, torch.device("cpu"), builder("good"))
    assert theirs.startswith(ours) and "build=" in theirs and theirs != ours


def test_probes_reach_explorer_attention_in_a_user_model_and_refuse_other_attention(task) -> None:
    from explorer.measure import attention_maps, head_counts, head_importance, masked_accuracy

    torch.manual_seed(0)
    model = builder("good").build(LAYOUT, task.spec)
    X, y = task.val[0][:40], task.val[1][:40]
    assert head_counts(model) == [2, 4]
    assert [tuple(m.shape) for m in attention_maps(model, X[:3])] == [(3, 2, 16, 16), (3, 4, 16, 16)]
    scores = head_importance(model, X, y, torch.device("cpu"))
    assert [len(s) for s in scores] == [2, 4] and all(np.isfinite(s).all() for s in scores)
    assert all(s.sum() > 0 for s in scores)  # the gradient reached every layer's mask
    full = masked_accuracy(model, X, y, scores, [2, 4], torch.device("cpu"))
    with torch.inference_mode():
        assert full == pytest.approx((model(X).argmax(-1) == y).float().mean().item())  # nothing masked
    assert all(
        m.probe_mask is None and m.probe_maps is None for m in model.modules() if hasattr(m, "probe_mask")
    )
    with pytest.raises(ConfigError, match="cannot mask that model's heads"):
        head_counts(builder("torch_mha").build(LAYOUT, task.spec))


@pytest.mark.parametrize("runtime", ["onnxruntime", "compile"])
def test_a_user_model_is_timed_on_every_runtime(runtime: str, task) -> None:
    if runtime == "onnxruntime":
        pytest.importorskip("onnxruntime")
    from explorer.measure import model_latency

    cfg = LatencyConfig(device="cpu", batch_size=4, min_run_time=0.02, runtime=runtime)
    result = model_latency(LAYOUT, task.spec, cfg, torch.device("cpu"), builder=builder("good"))
    assert result.runtime == runtime and result.median_ms > 0


def test_a_users_model_is_checked_on_one_small_batch_before_anything_is_timed(task) -> None:
    from explorer.model import CHECK_BATCH

    with pytest.raises(VariantFailed) as info:
        evaluate_variant(LAYOUT, task, TrainConfig(epochs=1), FAST, builder=builder("wrong_shape"))
    assert info.value.kind == "model" and f"for a batch of {CHECK_BATCH};" in str(info.value)
    assert f"[{CHECK_BATCH}, {task.spec.n_classes}]" in str(info.value)
