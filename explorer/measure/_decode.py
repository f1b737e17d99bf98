"""Decoding latency: milliseconds per generated token with a key/value cache, and the cache's bytes.

A language model pays for its heads mostly while decoding: every new token reads the keys and values of all
earlier positions, ``2 x kv_heads x d_k`` numbers per layer and position, which is what grouped-query and
multi-query attention shrink. :func:`decode_latency` builds the :class:`~explorer.model._model.CausalLM` of an
architecture, fills a cache with ``context`` positions of random keys and values (the time does not depend
on them), and times one step, one new token per sequence, against that cache, resetting the cache's length
before every call so each timed step sees exactly ``context`` positions. Timing goes through
:func:`explorer.measure._latency.time_call` (warm-up, ``torch.utils.benchmark``, fixed threads, median and IQR),
and results are kept in the same :class:`~explorer.measure._latency_cache.LatencyCache` under keys of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from explorer.errors import ConfigError
from explorer.layout import InputSpec, LatencyConfig, ModelConfig
from explorer.measure._device import device_label
from explorer.measure._latency import check_dtype, time_call
from explorer.measure._latency_cache import LatencyCache
from explorer.measurements import DecodeResult
from explorer.model import CausalLM

BYTE_VOCAB = 256  # the text task's vocabulary (bytes)


def decoder_spec(context: int, vocab_size: int = BYTE_VOCAB) -> InputSpec:
    """The language-model input a decoding measurement builds: room for ``context`` cached positions + 1."""
    return InputSpec(
        kind="tokens",
        seq_len=context + 1,
        n_classes=vocab_size,
        vocab_size=vocab_size,
        task_kind="language_model",
    )


def decode_key(
    model_cfg: ModelConfig,
    context: int,
    cfg: LatencyConfig,
    device: torch.device,
    vocab_size: int = BYTE_VOCAB,
    builder: Any = None,
) -> str:
    """What a decoding figure depends on: architecture, vocabulary, context, batch, threads, dtype, hardware,
    torch (and the builder of a transformers model). It starts with ``decode`` so it never collides with a
    forward-latency key in a shared cache."""
    parts = [
        "decode",
        model_cfg.key(),
        f"V{vocab_size}",
        f"ctx{context}",
        f"b{cfg.batch_size}",
        f"t{cfg.threads}",
        cfg.dtype,
        device_label(device),
        f"torch{torch.__version__}",
    ]
    if builder is not None:
        parts.append(f"build={builder.ref}@{builder.fingerprint[:16]}")
    return "|".join(parts)


def decode_latency(
    model_cfg: ModelConfig,
    context: int,
    cfg: LatencyConfig,
    device: torch.device,
    cache: LatencyCache | None = None,
    vocab_size: int = BYTE_VOCAB,
    builder: Any = None,
) -> DecodeResult:
    """Time one decoding step of ``cfg.batch_size`` sequences against a key/value cache of ``context``.

    The model is built under seed 0 inside ``torch.random.fork_rng`` (the caller's RNG state is untouched),
    in eval mode, in ``cfg.dtype`` on ``device``: explorer's :class:`CausalLM`, or the transformers model of
    ``builder`` (:meth:`explorer.model._hfmodel.HFBuilder.decoder`, its own cache). ``cache`` (a latency cache)
    is read first and filled after; None measures every time. The result carries the cache's bytes at that
    context for the whole batch.
    """
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise ConfigError(f"decoding context must be a positive integer, got {context!r}.")
    dtype = check_dtype(cfg.dtype, device)
    per_token = model_cfg.kv_cache_bytes_per_token(cfg.dtype)
    total = model_cfg.kv_cache_bytes(context, cfg.batch_size, cfg.dtype)
    key = decode_key(model_cfg, context, cfg, device, vocab_size, builder)
    if cache is not None and (hit := cache.get(key)) is not None:
        return DecodeResult(hit, context, total, per_token)
    B = cfg.batch_size
    if builder is not None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            user_step = builder.decoder(
                model_cfg, decoder_spec(context, vocab_size), B, context, device, dtype
            )
        return _timed(user_step, device, cfg, B, context, cache, key, total, per_token)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = CausalLM(model_cfg, decoder_spec(context, vocab_size)).to(device=device, dtype=dtype).eval()
        token = torch.randint(vocab_size, (B, 1)).to(device)
        with torch.inference_mode():
            kv = model.new_cache(B, context + 1)
            # Random keys and values stand in for a prefill (the time of a step does not depend on them, and
            # running the prompt through the model would cost more than the measurement at long contexts).
            for buf in (*kv.k, *kv.v):
                buf.normal_()

    def step() -> None:
        kv.length = context  # every timed step decodes position `context` against the same cache
        model.step(token, kv)

    return _timed(step, device, cfg, B, context, cache, key, total, per_token)


def _timed(
    step: Callable[[], object],
    device: torch.device,
    cfg: LatencyConfig,
    batch: int,
    context: int,
    cache: LatencyCache | None,
    key: str,
    total: int,
    per_token: int,
) -> DecodeResult:
    """``step`` timed (:func:`time_call`) and kept in ``cache`` under ``key``."""
    latency = time_call(step, device, cfg, batch, context)
    if cache is not None:
        latency = cache.put(key, latency)  # the stored figure when this one is doubtful and slower
    return DecodeResult(latency, context, total, per_token)
