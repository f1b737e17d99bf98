"""What a measurement produced, as plain frozen records with no torch in sight (read-only commands load them)."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from typing import Any

from explorer.errors import ConfigError

__all__ = [
    "QUALITY_METRICS",
    "DecodeResult",
    "LatencyResult",
    "QualityMetric",
    "binomial_se",
    "load_average",
    "plateaued",
    "quality_metric",
]


@dataclass(frozen=True)
class LatencyResult:
    """Forward latency of one batch: median and interquartile range over timed blocks, in milliseconds."""

    median_ms: float  # median time per forward pass of one batch
    iqr_ms: float  # interquartile range of the per-block times (the spread)
    batch_size: int  # examples per forward pass
    seq_len: int  # positions per example
    threads: int  # CPU threads used while timing
    device: str  # device label, e.g. "cpu (Intel(R) Xeon(R) Processor)" or "cuda (NVIDIA H200)"
    dtype: str  # float32 | bfloat16 | float16
    runs: int  # timed blocks the median and IQR come from (each averages several calls)
    cached: bool = False  # True when read from a LatencyCache instead of measured now
    samples_ms: tuple[float, ...] = ()  # the timed blocks' per-call times: the measurement's own spread
    measured_at: str = ""  # when it was measured (UTC, ISO 8601): tells independent measurements apart
    load: float | None = None  # the machine's 1-minute load average at the time (None where unknown)
    runtime: str = "eager"  # what ran the model: eager | compile | onnxruntime | torch.export (a .pt2 file)
    cpus: int | None = None  # the CPUs the timing process could run on (None: not recorded)

    @property
    def busy(self) -> bool:
        """Whether the machine was busy while timing: a load average above its CPUs (unknown: not busy)."""
        return self.load is not None and self.cpus is not None and self.load > self.cpus

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["samples_ms"] = list(self.samples_ms)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LatencyResult:
        kw = {f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d}
        kw["samples_ms"] = tuple(float(x) for x in kw.get("samples_ms") or ())
        return cls(**kw)


@dataclass(frozen=True)
class DecodeResult:
    """Decoding latency: one new token per sequence against a key/value cache of ``context`` positions.

    ``latency`` times one decoding step of ``latency.batch_size`` sequences (its ``seq_len`` is the context),
    so ``ms_per_token`` is the time each sequence waits for its next token.
    """

    latency: LatencyResult  # one step: median and IQR in ms, batch, threads, device, dtype
    context: int  # positions already in the cache when the new token is decoded
    kv_cache_bytes: int  # bytes of keys and values held at that context, for the whole batch
    kv_cache_bytes_per_token: int  # bytes one position adds (all layers, one sequence)

    @property
    def ms_per_token(self) -> float:
        return self.latency.median_ms

    @property
    def cached(self) -> bool:
        return self.latency.cached

    def to_dict(self) -> dict[str, Any]:
        return {
            "ms_per_token": self.ms_per_token,
            "context": self.context,
            "kv_cache_bytes": self.kv_cache_bytes,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "latency": self.latency.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DecodeResult:
        return cls(
            latency=LatencyResult.from_dict(d["latency"]),
            context=int(d["context"]),
            kv_cache_bytes=int(d["kv_cache_bytes"]),
            kv_cache_bytes_per_token=int(d["kv_cache_bytes_per_token"]),
        )


@dataclass(frozen=True)
class QualityMetric:
    """How a task kind's quality is scored: which result field, which way is better, and what to call it.

    ``getattr(result, metric.name)`` reads the value from a ``TrainResult``, ``EpochStats`` or
    ``VariantResult``; ``metric.direction`` is what an Optuna objective passes ("maximize" or "minimize").
    """

    name: str  # the validation field: "val_accuracy" | "val_bpb"
    test_name: str  # the matching test field: "test_accuracy" | "test_bpb"
    direction: str  # "maximize" | "minimize" (Optuna's words)
    label: str  # for reports and the command line


QUALITY_METRICS = {
    "classification": QualityMetric("val_accuracy", "test_accuracy", "maximize", "validation accuracy"),
    # Language-model tasks are byte-level, so bits per token are bits per byte.
    "language_model": QualityMetric("val_bpb", "test_bpb", "minimize", "validation bits per byte"),
}


def quality_metric(task_kind: str) -> QualityMetric:
    """The quality metric of a task kind (``InputSpec.task_kind``)."""
    try:
        return QUALITY_METRICS[task_kind]
    except KeyError:
        raise ConfigError(
            f"unknown task kind {task_kind!r}; choose one of {', '.join(QUALITY_METRICS)}."
        ) from None


def binomial_se(p: float, n: int) -> float:
    """Standard error of an accuracy ``p`` measured on ``n`` examples (p kept off 0 and 1 by half an example)."""
    p = min(max(p, 0.5 / n), 1 - 0.5 / n)
    return math.sqrt(p * (1 - p) / n)


def plateaued(values: list[float], n_val: int, patience: int, higher_is_better: bool = True) -> bool:
    """Whether the best of the last ``patience`` values beats the best before them by no more than the noise:
    one binomial standard error for an accuracy on ``n_val`` examples, 0.2% for a loss."""
    if len(values) <= patience:
        return False
    sign = 1.0 if higher_is_better else -1.0
    before = max(sign * v for v in values[:-patience])
    recent = max(sign * v for v in values[-patience:])
    noise = binomial_se(before, n_val) if higher_is_better else 0.002 * abs(before)
    return recent - before <= noise


def load_average() -> float | None:
    """The machine's 1-minute load average, rounded (None where the platform has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):  # not on every platform
        return None
