"""Frozen configs and the head rules.

The two rules every variant obeys (SEED_SUMMARY.md, rule 5):

* ``d_model % heads == 0``: each head gets an integer ``d_k = d_model // heads``;
* ``d_k >= min_dk``: below a floor (about 16 in the folklore) each head's capacity is starved.

:func:`valid_heads` lists the head counts that obey both; :func:`expand_schedule` is the one place a compact
per-layer schedule ("uniform:8", "increasing:4-16", "decreasing:16-4", "4,4,8,16") becomes per-layer head
counts. Nothing is ever rounded silently: a schedule that cannot be met is a :class:`ConfigError` naming the
valid choices.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from explorer.errors import ConfigError

__all__ = [
    "ATTENTION_IMPLS",
    "LATENCY_DTYPES",
    "LATENCY_RUNTIMES",
    "SCHEDULE_FAMILIES",
    "InputSpec",
    "LatencyConfig",
    "ModelConfig",
    "TrainConfig",
    "expand_schedule",
    "schedule_family",
    "valid_heads",
]

ATTENTION_IMPLS = ("fused", "merged", "serial")
SCHEDULE_FAMILIES = ("uniform", "increasing", "decreasing", "free")


def valid_heads(d_model: int, min_dk: int = 1) -> list[int]:
    """Every head count ``h`` with ``d_model % h == 0`` and ``d_model // h >= min_dk``, ascending."""
    if d_model < 1:
        raise ConfigError(f"d_model must be a positive integer, got {d_model}.")
    if min_dk < 1:
        raise ConfigError(f"min_dk must be a positive integer, got {min_dk}.")
    return [h for h in range(1, d_model + 1) if d_model % h == 0 and d_model // h >= min_dk]


def _check_heads(h: int, d_model: int, min_dk: int, valid: list[int]) -> None:
    if h not in valid:
        why = (
            f"{d_model} is not divisible by {h}"
            if h < 1 or d_model % h
            else f"d_k = {d_model}/{h} = {d_model // h} is below the floor {min_dk}"
        )
        raise ConfigError(
            f"{h} heads is not valid for d_model={d_model}, min_dk={min_dk} ({why}); "
            f"choose from {', '.join(map(str, valid)) or 'none (lower min_dk)'}."
        )


_RAMP = re.compile(r"^(increasing|decreasing):(\d+)-(\d+)$")
_UNIFORM = re.compile(r"^(?:uniform:)?(\d+)$")
_LIST = re.compile(r"^\d+(?:,\d+)+$")


def expand_schedule(schedule: str, n_layers: int, d_model: int, min_dk: int = 1) -> tuple[int, ...]:
    """Expand a compact head schedule into one head count per layer.

    Forms:
      * ``uniform:H`` (or just ``H``): H heads in every layer;
      * ``increasing:A-B``: A heads in the first layer rising to B in the last, through the valid head
        counts between A and B, spread evenly over the layers (``increasing:4-16`` over 4 layers at
        d_model 256 gives 4, 8, 8, 16); ``decreasing:B-A`` is the mirror image;
      * ``h1,h2,...``: one explicit count per layer (the "free" family).

    Every count must divide ``d_model`` and leave ``d_k >= min_dk``; otherwise a :class:`ConfigError`
    names the valid counts. Ramps pass only through valid counts by construction, and their endpoints
    must be valid themselves.
    """
    if n_layers < 1:
        raise ConfigError(f"the number of layers must be at least 1, got {n_layers}.")
    valid = valid_heads(d_model, min_dk)
    text = schedule.strip().replace(" ", "")
    if m := _UNIFORM.match(text):
        h = int(m.group(1))
        _check_heads(h, d_model, min_dk, valid)
        return (h,) * n_layers
    if m := _RAMP.match(text):
        family, a, b = m.group(1), int(m.group(2)), int(m.group(3))
        lo, hi = (a, b) if family == "increasing" else (b, a)
        if lo > hi:
            raise ConfigError(
                f"schedule {schedule!r}: {family} needs its first count "
                f"{'<=' if family == 'increasing' else '>='} its second; "
                f"write '{family}:{b}-{a}' or the other family."
            )
        _check_heads(lo, d_model, min_dk, valid)
        _check_heads(hi, d_model, min_dk, valid)
        steps = [h for h in valid if lo <= h <= hi]
        if n_layers == 1:
            ramp = [steps[0]]
        else:
            # Half-way positions round up (not to even, as round() does), so a ramp steps evenly.
            ramp = [steps[math.floor(i * (len(steps) - 1) / (n_layers - 1) + 0.5)] for i in range(n_layers)]
        return tuple(ramp if family == "increasing" else ramp[::-1])
    if _LIST.match(text):
        heads = tuple(int(t) for t in text.split(","))
        if len(heads) != n_layers:
            raise ConfigError(
                f"schedule {schedule!r} lists {len(heads)} head counts but the model has {n_layers} layers; "
                f"give exactly one count per layer."
            )
        for h in heads:
            _check_heads(h, d_model, min_dk, valid)
        return heads
    raise ConfigError(
        f"cannot read head schedule {schedule!r}; write 'uniform:8', 'increasing:4-16', "
        f"'decreasing:16-4' or a per-layer list such as '4,4,8,16'."
    )


def schedule_family(heads: tuple[int, ...] | list[int]) -> str:
    """The family a per-layer head tuple belongs to: uniform, increasing, decreasing or free."""
    pairs = list(itertools.pairwise(heads))
    if all(a == b for a, b in pairs):
        return "uniform"
    if all(a <= b for a, b in pairs):
        return "increasing"
    if all(a >= b for a, b in pairs):
        return "decreasing"
    return "free"


@dataclass(frozen=True)
class InputSpec:
    """What a task feeds the model: the model is built to fit it."""

    kind: Literal["tokens", "features"]  # integer token ids [n, seq] or float features [n, seq, n_features]
    seq_len: int  # tokens per example
    n_classes: int  # number of labels
    vocab_size: int = 0  # token vocabulary size (kind == "tokens")
    n_features: int = 0  # features per position (kind == "features")

    def __post_init__(self) -> None:
        if self.kind not in ("tokens", "features"):
            raise ConfigError(f"input kind must be 'tokens' or 'features', got {self.kind!r}.")
        if self.kind == "tokens" and self.vocab_size < 1:
            raise ConfigError("a token input needs vocab_size >= 1.")
        if self.kind == "features" and self.n_features < 1:
            raise ConfigError("a feature input needs n_features >= 1.")
        if self.seq_len < 1 or self.n_classes < 2:
            raise ConfigError(f"need seq_len >= 1 and n_classes >= 2, got {self.seq_len}, {self.n_classes}.")


@dataclass(frozen=True)
class ModelConfig:
    """One encoder variant. Valid by construction: building one that breaks the head rules raises."""

    d_model: int  # residual width, shared by every layer
    heads: tuple[int, ...]  # attention heads per layer; len(heads) is the depth
    min_dk: int = 1  # d_k floor this config was checked against
    mlp_ratio: float = 4.0  # MLP hidden width = mlp_ratio * d_model
    dropout: float = 0.0  # dropout on attention output and MLP
    attention: str = "fused"  # attention implementation: fused | merged | serial
    schedule: str = ""  # the compact schedule the heads came from, if any (for reports)

    def __post_init__(self) -> None:
        object.__setattr__(self, "heads", tuple(int(h) for h in self.heads))
        if not self.heads:
            raise ConfigError("a model needs at least one layer (heads is empty).")
        valid = valid_heads(self.d_model, self.min_dk)
        for h in self.heads:
            _check_heads(h, self.d_model, self.min_dk, valid)
        if self.attention not in ATTENTION_IMPLS:
            raise ConfigError(
                f"attention must be one of {', '.join(ATTENTION_IMPLS)}, got {self.attention!r}."
            )
        if self.mlp_ratio <= 0 or not 0 <= self.dropout < 1:
            raise ConfigError(
                f"need mlp_ratio > 0 and 0 <= dropout < 1, got {self.mlp_ratio}, {self.dropout}."
            )

    @classmethod
    def from_schedule(
        cls, d_model: int, n_layers: int, schedule: str, min_dk: int = 1, **kw: Any
    ) -> ModelConfig:
        """Build from a compact schedule string (see :func:`expand_schedule`)."""
        heads = expand_schedule(schedule, n_layers, d_model, min_dk)
        return cls(d_model=d_model, heads=heads, min_dk=min_dk, schedule=schedule, **kw)

    @property
    def n_layers(self) -> int:
        return len(self.heads)

    @property
    def d_k(self) -> tuple[int, ...]:
        return tuple(self.d_model // h for h in self.heads)

    @property
    def family(self) -> str:
        return schedule_family(self.heads)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["heads"] = list(self.heads)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown model config keys {sorted(unknown)}; allowed: {sorted(known)}.")
        return cls(**d)

    def key(self) -> str:
        """A stable string naming the architecture (what latency depends on; not dropout or schedule text)."""
        heads = "-".join(map(str, self.heads))
        return f"d{self.d_model}_h{heads}_mlp{self.mlp_ratio:g}_{self.attention}"


@dataclass(frozen=True)
class TrainConfig:
    """How a variant is trained. The same config and seed reproduce the same run on the same device."""

    epochs: int = 10  # passes over the training split
    batch_size: int = 32  # examples per optimizer step (small data sets need the steps)
    lr: float = 2e-3  # peak AdamW learning rate (cosine decay after a short warm-up)
    weight_decay: float = 0.05  # AdamW weight decay
    warmup_frac: float = 0.1  # fraction of steps spent warming up the learning rate
    grad_clip: float = 1.0  # max gradient norm (0 disables)
    seed: int = 0  # seeds init, data order and dropout

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError(f"need epochs >= 1 and batch_size >= 1, got {self.epochs}, {self.batch_size}.")
        if not self.lr > 0:
            raise ConfigError(f"the learning rate must be positive, got {self.lr}.")


LATENCY_DTYPES = ("float32", "bfloat16", "float16")
LATENCY_RUNTIMES = ("eager", "compile", "onnxruntime")  # how the timed model runs (explorer.engine.runtime)
_DEVICE_NAME = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


@dataclass(frozen=True)
class LatencyConfig:
    """How inference latency is measured: separate from training, in eval mode under inference_mode.

    A study spec's ``[latency]`` table is read straight into this class.
    """

    device: str = "auto"  # auto | cpu | cuda | cuda:N: where latency is measured (and training runs)
    batch_size: int = 32  # examples per timed forward pass
    threads: int = 1  # CPU threads while timing (fixed so figures compare across runs and workers)
    dtype: str = "float32"  # float32 | bfloat16 | float16 (half types only on CUDA)
    min_run_time: float = 0.3  # seconds of timed runs (torch.utils.benchmark.Timer.blocked_autorange)
    runtime: str = (
        "eager"  # eager | compile (torch.compile) | onnxruntime (exported to ONNX, run by ONNX Runtime)
    )
    seq_len: int | None = None  # positions per timed example (the deployment shape); None: the task's

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or not _DEVICE_NAME.match(self.device):
            raise ConfigError(f"latency device must be auto, cpu, cuda or cuda:N, got {self.device!r}.")
        if self.batch_size < 1 or self.threads < 1 or self.min_run_time <= 0:
            raise ConfigError("latency needs batch_size >= 1, threads >= 1 and min_run_time > 0.")
        if self.dtype not in LATENCY_DTYPES:
            raise ConfigError(f"latency dtype must be float32, bfloat16 or float16, got {self.dtype!r}.")
        if self.device == "cpu" and self.dtype != "float32":
            raise ConfigError(f"latency dtype {self.dtype} needs a CUDA device; use float32 on the cpu.")
        if self.runtime not in LATENCY_RUNTIMES:
            raise ConfigError(
                f"latency runtime must be one of {', '.join(LATENCY_RUNTIMES)}, got {self.runtime!r}."
            )
        if self.runtime == "onnxruntime" and self.dtype != "float32":
            raise ConfigError(f"the onnxruntime runtime times float32 models; got dtype {self.dtype}.")
        if self.seq_len is not None and (isinstance(self.seq_len, bool) or self.seq_len < 1):
            raise ConfigError(
                f"latency seq_len must be at least 1 (or unset for the task's), got {self.seq_len}."
            )
