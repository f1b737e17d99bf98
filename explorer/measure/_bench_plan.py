"""What `explorer bench attention` will time, checked before anything runs or is written.

:func:`plan_bench` checks the shape, the device, the runtime and the memory the benchmark needs, in that order,
and returns a :class:`BenchPlan`; its :meth:`~BenchPlan.run` times the forward pass
(:func:`explorer.measure._attention_bench.bench_attention`) or, in decoding mode, one decoding step
(:func:`explorer.measure._attention_bench.bench_decode`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from explorer.errors import ConfigError
from explorer.limits import check_memory
from explorer.measure._attention_bench import bench_attention, bench_decode, check_bench_shape
from explorer.measure._device import resolve_device
from explorer.model import attention_bytes, check_runtime

DEFAULT_CONTEXT = 512  # cached positions in decoding mode when none are given


@dataclass(frozen=True)
class BenchPlan:
    """One accepted attention benchmark: its shape, where and how it is timed."""

    d_model: int
    heads: int
    kv_heads: int | None  # as given (None: as many as heads)
    seq_len: int  # positions of the forward pass
    batch: int
    decode: bool  # time one decoding step against a key/value cache instead of the forward pass
    context: int | None  # cached positions in decoding mode
    device: torch.device
    threads: int | None  # CPU threads (None: all torch uses)
    min_run_time: float  # seconds timed per implementation
    runtime: str  # what runs each implementation of the forward pass

    @property
    def what(self) -> str:
        """What is timed, in words: "attention at batch 8, seq 197, d_model 384, 8 heads"."""
        if self.decode:
            what = f"one decoding step at batch {self.batch} against a cache of {self.context}"
        else:
            what = f"attention at batch {self.batch}, seq {self.seq_len}"
        kv_text = f", {self.kv_heads} kv heads" if self.kv_heads is not None else ""
        return f"{what}, d_model {self.d_model}, {self.heads} heads{kv_text}"

    @property
    def shape(self) -> dict[str, Any]:
        """The shape and mode as the command's JSON document names them."""
        shape: dict[str, Any] = {
            "d_model": self.d_model,
            "heads": self.heads,
            "kv_heads": self.kv_heads or self.heads,
            "batch": self.batch,
        }
        if self.decode:
            return shape | {"mode": "decode", "context": self.context}
        return shape | {"mode": "forward", "seq_len": self.seq_len, "runtime": self.runtime}

    def run(self) -> pd.DataFrame:
        """Time it: one row per implementation (see :func:`~explorer.measure._attention_bench.bench_attention` and
        :func:`~explorer.measure._attention_bench.bench_decode` for the columns)."""
        common: dict[str, Any] = dict(
            d_model=self.d_model,
            heads=self.heads,
            kv_heads=self.kv_heads,
            batch=self.batch,
            device=self.device,
            threads=self.threads,
            min_run_time=self.min_run_time,
        )
        if self.decode:
            assert self.context is not None, "plan_bench sets the context in decoding mode"
            return bench_decode(context=self.context, **common)
        return bench_attention(seq_len=self.seq_len, runtime=self.runtime, **common)


def plan_bench(
    d_model: int,
    heads: int,
    kv_heads: int | None,
    seq_len: int,
    batch: int,
    *,
    decode: bool = False,
    context: int | None = None,
    device: str = "auto",
    threads: int | None = None,
    min_run_time: float = 1.0,
    runtime: str = "eager",
) -> BenchPlan:
    """Check an attention benchmark before it runs (shape, device, runtime, then the memory it needs) and
    return it; ``context`` defaults to :data:`DEFAULT_CONTEXT` in decoding mode."""
    if decode and context is None:
        context = DEFAULT_CONTEXT
    positions = context if decode and context is not None else seq_len
    check_bench_shape(d_model, heads, positions, batch, kv_heads)
    dev = resolve_device(device)
    if decode and runtime != "eager":
        raise ConfigError("--runtime applies to the forward pass; --decode times the eager model.")
    check_runtime(runtime, dev)  # a missing extra fails before anything is timed or written
    check_memory(
        attention_bytes(d_model, heads, kv_heads or heads, positions, batch, decode),
        f"the attention bench at batch {batch} and {positions} positions",
        "lower --batch or --seq-len (--context)",
        dev,
    )
    return BenchPlan(
        d_model, heads, kv_heads, seq_len, batch, decode, context, dev, threads, min_run_time, runtime
    )
