"""The tutorial's attention table, measured on the user's device.

The tutorial reports a serial loop over 8 heads at 12.4 ms / 256 MB against 3.1 ms / 128 MB for the merged
computation. :func:`bench_attention` measures the same comparison here, for one weight set run four ways:
``serial``, ``merged`` and ``fused`` (:class:`explorer.model._attention.MultiHeadAttention`) and
``torch.nn.MultiheadAttention`` with the same weights copied in. Each row carries the time (median and IQR),
the peak memory of one forward pass, the speed-up over serial, the achieved GFLOP/s and how that compares
with a large square matmul timed the same way (what the device can do at best). With ``kv_heads`` below
``heads`` (grouped-query attention) ``torch.nn.MultiheadAttention`` has no equivalent and its row is left out.

:func:`bench_decode` is the decoding mode: one new token per sequence against a key/value cache of ``context``
positions, the three implementations timed alike, with the cache's size and the rate at which each reads it
(decoding is bound by reading the cache, which is what fewer key/value heads shrink).
Drawing it is :mod:`explorer.output`'s job; this module only measures.
"""

from __future__ import annotations

import copy
import multiprocessing
import os
from typing import Any

import pandas as pd
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from explorer.errors import ConfigError
from explorer.layout import ATTENTION_IMPLS, LatencyConfig, valid_heads, valid_kv_heads
from explorer.limits import BATCH, D_MODEL, SEQ_LEN
from explorer.measure._device import auto_device
from explorer.measure._latency import time_call, time_forward
from explorer.model import KVCache, MultiHeadAttention, attention_flops, check_runtime, set_attention_impl

BENCH_IMPLS = ("serial", "merged", "fused", "torch_mha")
DECODE_IMPLS = ATTENTION_IMPLS[::-1]  # serial, merged, fused: torch.nn.MultiheadAttention keeps no cache
_MATMUL_SIZE = {"cpu": 1024, "cuda": 8192}  # square fp32 matmuls that keep each kind of device fully busy
_MB = 2**20


class _TorchMHA(nn.Module):
    """``torch.nn.MultiheadAttention`` holding the weights of a :class:`MultiHeadAttention`, as self-attention."""

    def __init__(self, src: MultiHeadAttention):
        super().__init__()
        self.mha = nn.MultiheadAttention(
            src.d_model, src.n_heads, bias=src.qkv.bias is not None, batch_first=True
        )
        with torch.no_grad():
            # Both pack [W_Q; W_K; W_V] row-wise, so the weights copy across unchanged.
            self.mha.in_proj_weight.copy_(src.qkv.weight)
            self.mha.out_proj.weight.copy_(src.proj.weight)
            if src.qkv.bias is not None:
                self.mha.in_proj_bias.copy_(src.qkv.bias)
                self.mha.out_proj.bias.copy_(src.proj.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x, need_weights=False)[0]


class _MatMul(nn.Module):
    """``x @ b`` for a fixed square ``b``: the reference workload for the device's peak."""

    b: torch.Tensor  # a buffer

    def __init__(self, b: torch.Tensor):
        super().__init__()
        self.register_buffer("b", b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.b


class _Impl(nn.Module):
    """One fixed implementation of a :class:`MultiHeadAttention` (a copy with the same weights), returning only
    the output. Each has its own copy so that no forward pass changes module state: a compiled or exported
    graph then specialises on its implementation once, instead of replaying an attribute write every call."""

    def __init__(self, attn: MultiHeadAttention, impl: str):
        super().__init__()
        self.attn = set_attention_impl(copy.deepcopy(attn), impl)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attn(x)[0]


def _cuda_peak_mb(model: nn.Module, x: torch.Tensor) -> float:
    with torch.inference_mode():
        torch.cuda.synchronize(x.device)
        torch.cuda.reset_peak_memory_stats(x.device)
        base = torch.cuda.memory_allocated(x.device)
        out = model(x)
        torch.cuda.synchronize(x.device)
        peak = torch.cuda.max_memory_allocated(x.device) - base
        del out
    return peak / _MB


def _cpu_peak_mb(model: nn.Module, x: torch.Tensor) -> float:
    """The profiler's allocation records (``profile_memory``) summed in time order; the running total's peak."""
    with (
        torch.inference_mode(),
        profile(activities=[ProfilerActivity.CPU], profile_memory=True, acc_events=True) as prof,
    ):
        out = model(x)
        del out
    # Each allocation is counted once, by the innermost op it happened in (self usage) or, outside any op,
    # by a "[memory]" event of its own; frees are negative.
    timeline = sorted(
        (e.time_range.start, e.self_cpu_memory_usage) for e in prof.events() if e.self_cpu_memory_usage
    )
    running = peak = 0
    for _, nbytes in timeline:
        running += nbytes
        peak = max(peak, running)
    return peak / _MB


def _cpu_peaks_child(models: dict[str, nn.Module], x: torch.Tensor, out: Any) -> None:
    """In a child process: the profiler's C++ side writes "USDT ... profiler_start" straight to file
    descriptor 2, so the child silences its own stderr (never the caller's) and sends the peaks back, then exits
    without the interpreter's teardown (of torch's modules among others: nothing is left to save)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    torch.set_num_threads(1)
    out.put({name: _cpu_peak_mb(m, x) for name, m in models.items()})
    os._exit(0)


def peak_memory_mb(models: dict[str, nn.Module], x: torch.Tensor) -> dict[str, float]:
    """Peak memory allocated during one ``model(x)`` of each model, above what was allocated before, in MiB.

    CUDA: the caching allocator's peak counter. CPU: the profiler's allocation records, measured in a child
    process (see :func:`_cpu_peaks_child`), so nothing the profiler prints reaches this process's output.
    """
    if x.device.type == "cuda":
        return {name: _cuda_peak_mb(m, x) for name, m in models.items()}
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.SimpleQueue()
    child = ctx.Process(target=_cpu_peaks_child, args=(models, x, queue))
    child.start()
    child.join()
    if child.exitcode != 0 or queue.empty():
        raise RuntimeError(f"the memory probe process failed (exit code {child.exitcode})")
    return queue.get()


def matmul_peak_gflops(
    device: torch.device, threads: int, min_run_time: float, size: int | None = None
) -> float:
    """Achieved GFLOP/s of one large square fp32 matmul, timed like the attention: the device's practical peak."""
    n = size or _MATMUL_SIZE.get(device.type, 1024)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    res = time_forward(
        _MatMul(b), a, device, LatencyConfig(batch_size=n, threads=threads, min_run_time=min_run_time)
    )
    return 2 * n**3 / (res.median_ms * 1e-3) / 1e9


def check_bench_shape(
    d_model: int, heads: int, seq_len: int, batch: int, kv_heads: int | None = None
) -> None:
    """Refuse a benchmark shape before anything runs, naming the valid choices (the CLI calls it first)."""
    if min(d_model, seq_len, batch) < 1:
        raise ConfigError(f"need d_model, seq_len and batch >= 1, got {d_model}, {seq_len}, {batch}.")
    D_MODEL.check(d_model, "--d-model", "give a narrower width")
    SEQ_LEN.check(seq_len, "the positions (--seq-len or --context)", "give fewer positions")
    BATCH.check(batch, "--batch", "give a smaller batch")
    valid = valid_heads(d_model)
    if heads < 1:
        raise ConfigError(
            f"--heads must be at least 1, got {heads}; choose from {', '.join(map(str, valid))}."
        )
    if heads not in valid:
        raise ConfigError(
            f"{heads} heads does not divide d_model={d_model}; choose from {', '.join(map(str, valid))}."
        )
    if kv_heads is not None and kv_heads not in (kv_valid := valid_kv_heads(heads)):
        raise ConfigError(
            f"{kv_heads} key/value heads does not divide {heads} heads; "
            f"choose --kv-heads from {', '.join(map(str, kv_valid))}."
        )


def bench_attention(
    d_model: int = 384,
    heads: int = 8,
    seq_len: int = 197,
    batch: int = 8,
    device: torch.device | None = None,
    min_run_time: float = 0.3,
    threads: int | None = None,
    matmul_size: int | None = None,
    memory: bool = True,
    kv_heads: int | None = None,
    runtime: str = "eager",
) -> pd.DataFrame:
    """Time one self-attention forward four ways on ``device``; one row per implementation (BENCH_IMPLS).

    Args:
        d_model, heads, seq_len, batch: the shape (default: ViT-S, 8 images of 196 patches + [CLS]).
        kv_heads: key/value heads (default ``heads``); below ``heads`` the torch_mha row is left out.
        device: where it is timed (default: CUDA when present, the CPU otherwise).
        min_run_time: seconds of timed calls per implementation (torch.utils.benchmark).
        threads: CPU threads while timing; default the process's current count.
        matmul_size: side of the square matmul that sets the peak; default per device kind.
        memory: also measure each implementation's peak memory (on a CPU in a child process, a few seconds);
            ``peak_mem_mb`` is NaN when False.
        runtime: what runs each implementation while timed: ``eager``, ``compile`` or ``onnxruntime``
            (:mod:`explorer.model._runtime`); memory, ``max_abs_diff`` and the matmul peak stay eager.

    Columns: impl, median_ms, iqr_ms, peak_mem_mb, speedup_vs_serial, gflops, matmul_peak_gflops,
    pct_of_peak, max_abs_diff (largest output difference from serial), device, threads, d_model, heads,
    kv_heads, seq_len, batch, runtime.
    """
    check_bench_shape(d_model, heads, seq_len, batch, kv_heads)
    kv_heads = heads if kv_heads is None else kv_heads
    device = auto_device() if device is None else device
    check_runtime(runtime, device)  # once: each implementation is timed at the fp32 it was checked for
    threads = threads or torch.get_num_threads()
    cfg = LatencyConfig(batch_size=batch, threads=threads, min_run_time=min_run_time, runtime=runtime)
    models, x = _attention_models(d_model, heads, kv_heads, seq_len, batch, device)
    diffs = _max_diffs(models, x)
    flops = attention_flops(batch, seq_len, d_model, heads, kv_heads)
    peak = matmul_peak_gflops(device, threads, min_run_time, matmul_size)
    memory_mb = peak_memory_mb(models, x) if memory else {}
    shape = {
        "threads": threads,
        "d_model": d_model,
        "heads": heads,
        "kv_heads": kv_heads,
        "seq_len": seq_len,
        "batch": batch,
    }
    rows = []
    for impl, model in models.items():
        res = time_forward(model, x, device, cfg, torch.float32)
        gflops = flops / (res.median_ms * 1e-3) / 1e9
        rows.append(
            {
                "impl": impl,
                "median_ms": res.median_ms,
                "iqr_ms": res.iqr_ms,
                "peak_mem_mb": memory_mb.get(impl, float("nan")),
                "gflops": gflops,
                "matmul_peak_gflops": peak,
                "pct_of_peak": 100 * gflops / peak,
                "max_abs_diff": diffs[impl],
                "device": res.device,
                **shape,
                "runtime": res.runtime,
            }
        )
    return _with_speedup(pd.DataFrame(rows), 4)


def _attention_models(
    d_model: int, heads: int, kv_heads: int, seq_len: int, batch: int, device: torch.device
) -> tuple[dict[str, nn.Module], torch.Tensor]:
    """One seeded attention layer as each implementation of BENCH_IMPLS (torch_mha only without grouping), and
    a seeded input ``[B, T, C]``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        attn = MultiHeadAttention(d_model, heads, n_kv_heads=kv_heads).to(device).eval()
        x = torch.randn(batch, seq_len, d_model).to(device)
    models: dict[str, nn.Module] = {impl: _Impl(attn, impl) for impl in BENCH_IMPLS[:3]}
    if kv_heads == heads:
        models["torch_mha"] = _TorchMHA(attn).to(device).eval()
    return models, x


def _max_diffs(models: dict[str, nn.Module], x: torch.Tensor) -> dict[str, float]:
    """Each implementation's largest output difference from the serial one."""
    with torch.inference_mode():
        reference = models["serial"](x)
        return {impl: (m(x) - reference).abs().max().item() for impl, m in models.items()}


def _with_speedup(df: pd.DataFrame, position: int) -> pd.DataFrame:
    """``df`` with the column speedup_vs_serial (serial's median over each row's) inserted at ``position``."""
    df.insert(
        position, "speedup_vs_serial", df.loc[df.impl == "serial", "median_ms"].item() / df["median_ms"]
    )
    return df


def bench_decode(
    d_model: int = 384,
    heads: int = 8,
    kv_heads: int | None = None,
    context: int = 2048,
    batch: int = 1,
    device: torch.device | None = None,
    min_run_time: float = 0.3,
    threads: int | None = None,
) -> pd.DataFrame:
    """Time one decoding step of one attention layer three ways: ``batch`` new tokens, a cache of ``context``.

    The cache is filled with random keys and values (the time does not depend on them) and its length is reset
    before every timed call, so each step attends over exactly ``context + 1`` positions.

    Columns: impl, median_ms, iqr_ms, speedup_vs_serial, kv_cache_mb (the cache at ``context`` for the batch),
    cache_gb_per_s (cache bytes read per second of a step), gflops, max_abs_diff (from serial), device,
    threads, d_model, heads, kv_heads, d_k, context, batch.
    """
    check_bench_shape(d_model, heads, context, batch, kv_heads)
    kv_heads = heads if kv_heads is None else kv_heads
    device = auto_device() if device is None else device
    threads = threads or torch.get_num_threads()
    cfg = LatencyConfig(batch_size=batch, threads=threads, min_run_time=min_run_time)
    attn, x, cache = _decode_setup(d_model, heads, kv_heads, context, batch, device)

    def step() -> torch.Tensor:
        cache.length = context
        return attn(x, kv=cache.layer(0))[0]

    outputs, rows = {}, []
    kv_bytes = cache.nbytes(context)
    flops = attention_flops(batch, 1, d_model, heads, kv_heads, attn.d_k, context + 1)
    shape = {
        "threads": threads,
        "d_model": d_model,
        "heads": heads,
        "kv_heads": kv_heads,
        "d_k": attn.d_k,
        "context": context,
        "batch": batch,
    }
    for impl in DECODE_IMPLS:
        set_attention_impl(attn, impl)
        with torch.inference_mode():
            outputs[impl] = step()
        res = time_call(step, device, cfg, batch, context)
        rows.append(
            {
                "impl": impl,
                "median_ms": res.median_ms,
                "iqr_ms": res.iqr_ms,
                "kv_cache_mb": kv_bytes / _MB,
                "cache_gb_per_s": kv_bytes / (res.median_ms * 1e-3) / 1e9,
                "gflops": flops / (res.median_ms * 1e-3) / 1e9,
                "max_abs_diff": (outputs[impl] - outputs["serial"]).abs().max().item(),
                "device": res.device,
                **shape,
            }
        )
    return _with_speedup(pd.DataFrame(rows), 3)


def _decode_setup(
    d_model: int, heads: int, kv_heads: int, context: int, batch: int, device: torch.device
) -> tuple[MultiHeadAttention, torch.Tensor, KVCache]:
    """One seeded causal attention layer, a seeded new token per sequence ``[B, 1, C]`` and a key/value cache
    of ``context`` random positions (room for one more)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        attn = MultiHeadAttention(d_model, heads, n_kv_heads=kv_heads, causal=True).to(device).eval()
        x = torch.randn(batch, 1, d_model).to(device)  # [B, 1, C]: the new token
        cache = KVCache([(kv_heads, attn.d_k)], batch, context + 1, device=device)
        for buf in (*cache.k, *cache.v):
            buf.copy_(torch.randn(buf.shape))
    cache.length = context
    return attn, x, cache
