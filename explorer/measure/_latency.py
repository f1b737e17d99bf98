"""On-device inference latency: timed with torch.utils.benchmark, summarized by median and IQR, cached.

Latency is measured apart from training, in eval mode under ``torch.inference_mode``, with a fixed CPU thread
count (so figures compare across runs and across workers sharing a machine). ``Timer.blocked_autorange``
picks the number of calls per timed block and synchronizes CUDA, so no hand-written timing loop is needed.

What is timed is the model under the configured runtime (eager, ``torch.compile`` or ONNX Runtime, see
:mod:`explorer.model._runtime`) at the deployment shape (``LatencyConfig.batch_size`` and ``seq_len``).

Measuring costs seconds per architecture, so :func:`model_latency` keeps results in a
:class:`~explorer.measure._latency_cache.LatencyCache`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.utils import benchmark

from explorer.errors import ConfigError
from explorer.layout import InputSpec, LatencyConfig, ModelConfig
from explorer.limits import usable_cpus
from explorer.measure._device import device_label
from explorer.measure._latency_cache import LatencyCache
from explorer.measurements import LatencyResult, load_average
from explorer.model import ModelBuilder, build_model, check_runtime, prepare_runner, runtime_version

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
_WARMUP_CALLS = 3  # untimed calls first: one-off allocations, kernel selection, lazy initialisation


def check_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """The torch dtype named ``dtype``; half types only on CUDA (a :class:`ConfigError` elsewhere)."""
    if dtype != "float32" and device.type != "cuda":
        raise ConfigError(f"latency dtype {dtype} needs a CUDA device; use dtype float32 on {device.type}.")
    return _DTYPES[dtype]


def time_call(
    fn: Callable[[], object],
    device: torch.device,
    cfg: LatencyConfig,
    batch_size: int,
    seq_len: int,
    runtime: str = "eager",
) -> LatencyResult:
    """Time ``fn()`` under ``torch.inference_mode`` with ``cfg.threads`` CPU threads: warm-up, then
    ``Timer.blocked_autorange(cfg.min_run_time)``. ``batch_size`` and ``seq_len`` label the result.

    The process's CPU thread count is restored afterwards. :func:`time_forward` and decoding latency
    (:mod:`explorer.measure._decode`) both time through here, so they measure the same way.
    """
    old_threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with torch.inference_mode():
            # Warm up by count and by time: caches, the allocator and the clock settle before timing starts
            # (a fixed few calls left the first measurement of a fresh process up to 15% slow).
            calls, deadline = 0, time.perf_counter() + cfg.min_run_time / 3
            while calls < _WARMUP_CALLS or time.perf_counter() < deadline:
                fn()
                calls += 1
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=cfg.threads)
            m = timer.blocked_autorange(min_run_time=cfg.min_run_time)
    finally:
        torch.set_num_threads(old_threads)
    return LatencyResult(
        median_ms=m.median * 1e3,
        iqr_ms=m.iqr * 1e3,
        batch_size=batch_size,
        seq_len=seq_len,
        threads=cfg.threads,
        device=device_label(device),
        dtype=cfg.dtype,
        runs=len(m.times),
        samples_ms=tuple(t * 1e3 for t in m.times),
        measured_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        load=load_average(),
        runtime=runtime,
        cpus=usable_cpus(),
    )


def time_forward(
    model: nn.Module,
    example: torch.Tensor,
    device: torch.device,
    cfg: LatencyConfig,
    dtype: torch.dtype | None = None,
) -> LatencyResult:
    """Time ``model(example)`` on ``device`` under ``cfg.runtime``: warm-up, then ``blocked_autorange``.

    The model is moved to ``device`` (and cast to ``cfg.dtype`` on CUDA) in place, like ``nn.Module.to``; its
    train/eval mode and the process's CPU thread count are restored afterwards. ``example`` is one batch,
    ``[B, T]`` token ids or ``[B, T, F]`` features. Half dtypes on CPU raise :class:`ConfigError`; a runtime
    that cannot run here (a missing ``onnx`` extra...) raises before anything is timed. ``dtype``: the torch
    dtype of ``cfg.dtype`` from a caller that checked ``cfg`` on ``device`` already (:func:`check_dtype` and the
    runtime), so nothing is checked again; None: checked here.
    """
    if dtype is None:
        dtype = check_dtype(cfg.dtype, device)
        check_runtime(cfg.runtime, device)
    model.to(device=device, dtype=dtype)
    x = example.to(device)
    if x.is_floating_point():
        x = x.to(dtype)
    was_training = model.training
    model.eval()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        with torch.inference_mode():
            runner = prepare_runner(model, x, device, cfg.runtime, cfg.threads)
        seq = int(x.shape[1]) if x.dim() > 1 else 1
        return time_call(runner, device, cfg, int(x.shape[0]), seq, runtime=runner.runtime)
    finally:
        torch.set_num_threads(old_threads)
        model.train(was_training)


def deployment_spec(spec: InputSpec, cfg: LatencyConfig) -> InputSpec:
    """The task's input shape at the deployment sequence length (``cfg.seq_len``; None keeps the task's)."""
    return spec if cfg.seq_len in (None, spec.seq_len) else dataclasses.replace(spec, seq_len=cfg.seq_len)


def latency_key(
    model_cfg: ModelConfig,
    spec: InputSpec,
    cfg: LatencyConfig,
    device: torch.device,
    builder: ModelBuilder | None = None,
) -> str:
    """What a latency figure depends on: architecture, deployment input shape, batch, threads, dtype, hardware,
    torch, and the runtime with its version (left out for eager, so figures cached before runtimes existed
    stay valid); for a user's model also its builder and the sha256 of its source."""
    spec = deployment_spec(spec, cfg)
    shape = f"{spec.kind}_T{spec.seq_len}_V{spec.vocab_size}_F{spec.n_features}_C{spec.n_classes}"
    if spec.causal:
        shape += "_lm"  # a language model (per-token head, causal attention); classifier keys are unchanged
    parts = [
        model_cfg.key(),
        shape,
        f"b{cfg.batch_size}",
        f"t{cfg.threads}",
        cfg.dtype,
        device_label(device),
        f"torch{torch.__version__}",
    ]
    if cfg.runtime != "eager":
        parts.append(f"{cfg.runtime}{runtime_version(cfg.runtime)}")
    if builder is not None:
        parts.append(f"build={builder.ref}@{builder.fingerprint[:16]}")
    return "|".join(parts)


def random_input(spec: InputSpec, batch_size: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """A random batch shaped like the task's: token ids ``[B, T]`` (int64) or features ``[B, T, F]``."""
    if spec.kind == "tokens":
        return torch.randint(spec.vocab_size, (batch_size, spec.seq_len), generator=generator)
    return torch.randn(batch_size, spec.seq_len, spec.n_features, generator=generator)


def model_latency(
    model_cfg: ModelConfig,
    spec: InputSpec,
    cfg: LatencyConfig,
    device: torch.device,
    *,
    cache: LatencyCache | None = None,
    builder: ModelBuilder | None = None,
) -> LatencyResult:
    """Latency of the model ``model_cfg`` builds for ``spec`` (``builder``'s, or explorer's own), from ``cache``
    when it holds the key.

    The model is built under seed 0 (inside ``torch.random.fork_rng``, so the caller's RNG state is untouched)
    at the deployment shape (``cfg.seq_len`` positions, default the task's) and fed one random batch of
    ``cfg.batch_size``, run by ``cfg.runtime``. ``cache=None`` measures every time and stores nothing.
    A cached figure is used only while the cache trusts it (age, spread, load: see
    :mod:`explorer.measure._latency_cache`); ``result.cached`` says when it came from there.
    """
    dtype = check_dtype(cfg.dtype, device)
    check_runtime(cfg.runtime, device)  # once for this model: timing it checks nothing again
    spec = deployment_spec(spec, cfg)
    key = latency_key(model_cfg, spec, cfg, device, builder)
    if cache is not None and (hit := cache.get(key)) is not None:
        return hit
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = build_model(model_cfg, spec, builder)
        example = random_input(spec, cfg.batch_size)
    result = time_forward(model, example, device, cfg, dtype)
    if cache is not None:
        result = cache.put(key, result)  # the stored figure when this one is doubtful and slower
    return result
