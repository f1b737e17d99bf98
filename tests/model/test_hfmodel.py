"""transformers architectures built from their config classes per layout: the class for each task, the heads in
the config, images back into pixel values, the checks a user's model passes, and decoding with the class's
own cache."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from explorer.data._images import patch_images
from explorer.errors import ConfigError
from explorer.layout import InputSpec, LatencyConfig, ModelConfig
from explorer.measure import decode_latency
from explorer.measure._decode import decoder_spec
from explorer.model import check_model
from explorer.model._usermodel import attention_layout

transformers = pytest.importorskip("transformers")
from explorer.model import HFBuilder  # noqa: E402
from explorer.model._hfmodel import pixel_values  # noqa: E402

TOKENS = InputSpec(kind="tokens", seq_len=8, n_classes=3, vocab_size=11)
LM = InputSpec(kind="tokens", seq_len=8, n_classes=11, vocab_size=11, task_kind="language_model")
IMAGES = InputSpec(kind="features", seq_len=4, n_classes=5, n_features=12, image=(4, 4, 3), patch=2)


def test_patch_tokens_go_back_into_the_images_they_were_cut_from() -> None:
    images = np.random.default_rng(0).normal(size=(3, 6, 4, 2)).astype(np.float32)  # [n, H, W, C]
    patches, _ = patch_images(images, 2)
    spec = InputSpec(kind="features", seq_len=6, n_classes=2, n_features=8, image=(6, 4, 2), patch=2)
    back = pixel_values(torch.from_numpy(patches), spec)  # [n, C, H, W]
    assert torch.equal(back, torch.from_numpy(images).permute(0, 3, 1, 2))


@pytest.mark.parametrize(
    ("family", "spec", "cls", "shape"),
    [
        ("bert", TOKENS, "BertForSequenceClassification", (2, 3)),
        ("gpt2", TOKENS, "GPT2ForSequenceClassification", (2, 3)),
        ("llama", TOKENS, "LlamaForSequenceClassification", (2, 3)),
        ("llama", LM, "LlamaForCausalLM", (2, 8, 11)),
        ("gpt2", LM, "GPT2LMHeadModel", (2, 8, 11)),
        ("vit", IMAGES, "ViTForImageClassification", (2, 5)),
        ("mistral", LM, "MistralForCausalLM", (2, 8, 11)),
        ("qwen2", TOKENS, "Qwen2ForSequenceClassification", (2, 3)),
    ],
)
def test_each_family_builds_the_class_for_the_task_with_the_layouts_heads(family, spec, cls, shape) -> None:
    builder = HFBuilder.of(
        family, {"hidden_act": "gelu"} if family != "gpt2" else {"activation_function": "gelu"}
    )
    kv = (1, 1) if family in ("llama", "mistral", "qwen2") else None
    cfg = ModelConfig(d_model=16, heads=(4, 4), kv_heads=kv, mlp_ratio=2.0)
    model = builder.build(cfg, spec)
    config = model.hf.config
    assert type(model.hf).__name__ == cls
    assert (config.num_attention_heads, config.num_hidden_layers, config.hidden_size) == (4, 2, 16)
    assert getattr(config, "num_key_value_heads", 4) == (1 if kv else 4)
    assert attention_layout(model)[:2] == ([4, 4], list(cfg.kv_per_layer))
    x = torch.randn(2, 4, 12) if spec.image else torch.randint(11, (2, 8))
    assert tuple(model(x).shape) == shape
    if not spec.causal and spec.kind == "tokens":  # one extra id, the pad, which the task never uses
        assert (config.vocab_size, config.pad_token_id) == (12, 11)
    check_model(builder, [cfg, ModelConfig(d_model=16, heads=(2, 2))], spec, x)


def test_the_same_seed_builds_the_same_weights_and_the_fingerprint_follows_the_config() -> None:
    cfg = ModelConfig(d_model=16, heads=(2,))
    builder = HFBuilder.of("bert", {})
    torch.manual_seed(3)
    a = builder.build(cfg, TOKENS).state_dict()
    torch.manual_seed(3)
    b = builder.build(cfg, TOKENS).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert builder.fingerprint != HFBuilder.of("bert", {"hidden_act": "relu"}).fingerprint


def test_merged_attention_is_transformers_eager_and_fused_is_sdpa() -> None:
    builder = HFBuilder.of("bert", {})
    fused = builder.build(ModelConfig(d_model=16, heads=(2,)), TOKENS).hf.config._attn_implementation
    merged = builder.build(ModelConfig(d_model=16, heads=(2,), attention="merged"), TOKENS).hf.config
    assert (fused, merged._attn_implementation) == ("sdpa", "eager")


@pytest.mark.parametrize(
    ("family", "config", "spec", "words"),
    [
        ("bert", {}, IMAGES, "reads token ids"),
        ("vit", {}, TOKENS, "reads images"),
        ("bert", {"hiden_act": "gelu"}, TOKENS, "did you mean 'hidden_act'"),
    ],
)
def test_what_the_class_cannot_take_is_one_config_error(family, config, spec, words) -> None:
    with pytest.raises(ConfigError, match=words):
        HFBuilder.of(family, config).build(ModelConfig(d_model=16, heads=(2,)), spec)


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "gpt2"])
def test_decoding_keeps_the_cache_at_its_context_and_counts_the_key_value_bytes(family: str) -> None:
    builder = HFBuilder.of(family, {})
    kv = 4 if family == "gpt2" else 2  # GPT-2 has as many key/value heads as heads
    cfg = ModelConfig(d_model=16, heads=(4, 4), kv_heads=(kv, kv))
    step = builder.decoder(cfg, decoder_spec(12, 11), 2, 12, torch.device("cpu"), torch.float32)
    with torch.inference_mode():
        for _ in range(3):
            step()
    assert step.cache.get_seq_length() == 13  # the context and the one token each step decodes, never more
    timing = LatencyConfig(device="cpu", batch_size=2, min_run_time=0.01)
    result = decode_latency(cfg, 12, timing, torch.device("cpu"), None, 11, builder)
    assert result.ms_per_token > 0
    bytes_ = 2 * 2 * kv * 4 * 12 * 2 * 4  # K and V x layers x kv heads x d_k x context x batch x float32
    assert result.kv_cache_bytes == cfg.kv_cache_bytes(12, 2) == bytes_


def test_a_run_config_carries_the_transformers_model_and_train_rebuilds_it(tmp_path) -> None:
    import json

    from explorer.layout import TrainConfig
    from explorer.measure import RunConfig, load_run_config, train_variant, write_run_config

    hf = {"model_type": "llama", "config": {"rms_norm_eps": 1e-5}}
    cfg = ModelConfig(d_model=16, heads=(4,), kv_heads=(2,))
    path = write_run_config(
        tmp_path / "run.json", RunConfig("relations", {"n_samples": 120}, cfg, TrainConfig(epochs=1), hf=hf)
    )
    run = load_run_config(path)
    assert run.hf == hf and run.build is None
    latency = LatencyConfig(device="cpu", batch_size=4, min_run_time=0.01)
    trained = train_variant(run.model, run.train, run.task, run.task_options, latency=latency, hf=run.hf)
    assert trained.build == "hf:llama" and trained.result.params > 0
    path.write_text(json.dumps(json.loads(path.read_text()) | {"hf": {"config": {}}}))
    with pytest.raises(ConfigError, match="malformed hf entry"):
        load_run_config(path)


def test_an_hf_model_takes_explorers_batch_and_keeps_the_heads_it_was_built_with() -> None:
    from explorer.layout import HF_FAMILIES
    from explorer.model import HFModel

    model = HFBuilder.of("llama", {}).build(ModelConfig(d_model=16, heads=(4, 4), kv_heads=(2, 2)), TOKENS)
    assert isinstance(model, HFModel) and model.family is HF_FAMILIES["llama"]
    assert (model.explorer_heads, model.explorer_kv_heads) == ([4, 4], [2, 2])
    x = torch.randint(11, (3, 8))
    assert torch.equal(model(x), model.hf(input_ids=x, use_cache=False).logits)  # the batch as input ids


def test_require_transformers_is_the_package_or_names_the_hf_extra(monkeypatch) -> None:
    import sys

    from explorer.errors import MissingExtraError
    from explorer.model import require_transformers

    assert require_transformers("building a bert").__name__ == "transformers"
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if it were not installed
    with pytest.raises(MissingExtraError, match=r"building a bert needs transformers.*explorer\[hf\]"):
        require_transformers("building a bert")


def test_quiet_transformers_keeps_its_logs_to_errors_and_restores_them() -> None:
    from transformers.utils import logging as hf_logging

    from explorer.model import quiet_transformers

    hf_logging.set_verbosity_info()
    try:
        with quiet_transformers():
            assert hf_logging.get_verbosity() == hf_logging.ERROR and not hf_logging.is_progress_bar_enabled()
        assert hf_logging.get_verbosity() == hf_logging.INFO and hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.set_verbosity_warning()
