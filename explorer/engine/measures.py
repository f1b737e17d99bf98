"""What a measurement produced, as plain frozen records with no torch in sight (read-only commands load them)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["LatencyResult"]


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

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["samples_ms"] = list(self.samples_ms)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LatencyResult:
        kw = {f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d}
        kw["samples_ms"] = tuple(float(x) for x in kw.get("samples_ms") or ())
        return cls(**kw)
