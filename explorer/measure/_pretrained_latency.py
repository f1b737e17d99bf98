"""The latency of a trained transformers model as it is, or as head surgery left it, on this device.

Explorer's other timings build a model from a layout (:func:`explorer.measure.model_latency`,
:func:`explorer.measure.decode_latency`); a checkpoint's candidates are models already made, with their trained
(or cut) weights, so these time the model they are given, the same way: :func:`pretrained_latency` one forward
pass of a batch of random token ids (:func:`explorer.measure.time_forward`), :func:`pretrained_decode_latency`
one decoding step against the model's own key/value cache (:func:`explorer.model.hf_decode_step`, as a
``[model] hf`` study's decoder), through :func:`explorer.measure.time_call`. Neither changes the model's weights;
both move it to ``device`` and ``cfg.dtype`` first, as ``time_forward`` does.
"""

from __future__ import annotations

from typing import Any

import torch

from explorer.errors import ConfigError
from explorer.layout import LatencyConfig
from explorer.limits import SEQ_LEN
from explorer.measure._latency import check_dtype, time_call, time_forward
from explorer.measurements import DecodeResult, LatencyResult
from explorer.model import hf_decode_step
from explorer.pretrained import head_cost


def _vocab(model: Any) -> int:
    return int(model.config.vocab_size)


def pretrained_latency(model: Any, seq_len: int, cfg: LatencyConfig, device: torch.device) -> LatencyResult:
    """One forward pass of ``cfg.batch_size`` random sequences of ``seq_len`` token ids through ``model``."""
    seq_len = int(SEQ_LEN.check(seq_len, "the timed sequence length"))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        example = torch.randint(_vocab(model), (cfg.batch_size, seq_len))
    return time_forward(model, example, device, cfg)


def pretrained_decode_latency(
    model: Any, context: int, cfg: LatencyConfig, device: torch.device
) -> DecodeResult:
    """One decoding step of ``cfg.batch_size`` sequences of the causal LM ``model`` against its own cache of
    ``context`` positions; the result carries the cache's bytes (from the model's key/value heads)."""
    per_token = head_cost(model, dtype=check_dtype(cfg.dtype, device)).kv_bytes_per_token
    if per_token is None:
        raise ConfigError(
            f"{type(model).__name__} is not a causal language model (it keeps no key/value cache); time its "
            "forward pass with pretrained_latency instead."
        )
    context = int(SEQ_LEN.check(context, "the decoding context"))
    dtype = check_dtype(cfg.dtype, device)
    model.to(device=device, dtype=dtype).eval()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        step = hf_decode_step(model, _vocab(model), cfg.batch_size, context, device)
    latency = time_call(step, device, cfg, cfg.batch_size, context)
    return DecodeResult(latency, context, per_token * context * cfg.batch_size, per_token)
