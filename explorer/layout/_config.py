"""Frozen configs: the model, how it is trained, how it is timed, and what a task feeds it.

Every config checks itself on construction with the head rules of :mod:`explorer.layout._schedules` (import
the rules from there), so an invalid variant cannot be built.

Two optional refinements ("modern heads"):

* key/value heads: ``kv_heads`` per layer, with ``heads % kv_heads == 0`` (kv_heads = heads is ordinary
  multi-head attention, 1 is multi-query, in between is grouped-query attention); a compact kv schedule is
  written like the head schedule and expanded by :func:`expand_kv_schedule`;
* head width apart from ``d_model / heads``: ``head_dim`` (one width, or one per layer), projections of width
  ``heads x head_dim``; the d_k floor applies to it. Where it is not given, ``d_model % heads == 0`` holds as
  before.

A config whose kv_heads equal its heads and whose head_dim equals ``d_model // heads`` in every layer *is* the
classic layout, so it is stored as such (both None): equal architectures have one key, and old keys stay
valid.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from explorer.errors import ConfigError
from explorer.fields import key
from explorer.layout._schedules import (
    check_heads,
    check_kv,
    expand_head_dim,
    expand_kv_schedule,
    expand_schedule,
    schedule_family,
    valid_heads,
)
from explorer.limits import BATCH, RUN_TIME_S, SEQ_LEN, THREADS

ATTENTION_IMPLS = ("fused", "merged", "serial")
MAX_FOLDS = 20  # cross-validation folds at most: more leave too few validation examples per fold
TASK_KINDS = ("classification", "language_model")  # what a task's targets are: one label, or the next token
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}  # bytes per element of the dtypes latency uses


@dataclass(frozen=True)
class InputSpec:
    """What a task feeds the model: the model is built to fit it."""

    kind: Literal["tokens", "features"]  # integer token ids [n, seq] or float features [n, seq, n_features]
    seq_len: int  # tokens per example
    n_classes: int  # number of labels (a language model: the vocabulary it predicts)
    vocab_size: int = 0  # token vocabulary size (kind == "tokens")
    n_features: int = 0  # features per position (kind == "features")
    task_kind: str = "classification"  # classification (one label per example) | language_model (next token)
    image: tuple[int, ...] = ()  # (H, W, C) of the images the feature patches were cut from; () otherwise
    patch: int = 0  # pixels per patch side, for image inputs (positions run row-major over the patch grid)

    def __post_init__(self) -> None:
        object.__setattr__(self, "image", tuple(int(v) for v in self.image))
        if self.image and (len(self.image) != 3 or self.patch < 1 or self.kind != "features"):
            raise ConfigError(f"an image input needs (H, W, C), a patch >= 1 and features, got {self.image}.")
        if self.kind not in ("tokens", "features"):
            raise ConfigError(f"input kind must be 'tokens' or 'features', got {self.kind!r}.")
        if self.kind == "tokens" and self.vocab_size < 1:
            raise ConfigError("a token input needs vocab_size >= 1.")
        if self.kind == "features" and self.n_features < 1:
            raise ConfigError("a feature input needs n_features >= 1.")
        if self.seq_len < 1 or self.n_classes < 2:
            raise ConfigError(f"need seq_len >= 1 and n_classes >= 2, got {self.seq_len}, {self.n_classes}.")
        if self.task_kind not in TASK_KINDS:
            raise ConfigError(f"task kind must be one of {', '.join(TASK_KINDS)}, got {self.task_kind!r}.")
        if self.task_kind == "language_model" and (
            self.kind != "tokens" or self.n_classes != self.vocab_size
        ):
            raise ConfigError(
                "a language model reads tokens and predicts one of them: need n_classes == vocab_size."
            )

    @property
    def grid(self) -> tuple[int, int] | None:
        """Patches per column and per row of an image input (None for other inputs)."""
        return (self.image[0] // self.patch, self.image[1] // self.patch) if self.image else None

    @property
    def causal(self) -> bool:
        """Whether the model for this input predicts the next token (causal attention, per-token logits)."""
        return self.task_kind == "language_model"


@dataclass(frozen=True)
class ModelConfig:
    """One variant: an encoder classifier or a causal language model, as the task asks.

    Valid by construction: building one that breaks the head rules raises.
    """

    d_model: int  # residual width, shared by every layer
    heads: tuple[int, ...]  # attention (query) heads per layer; len(heads) is the depth
    min_dk: int = 1  # d_k floor this config was checked against
    mlp_ratio: float = 4.0  # MLP hidden width = mlp_ratio * d_model
    dropout: float = 0.0  # dropout on attention output and MLP
    attention: str = "fused"  # attention implementation: fused | merged | serial
    schedule: str = ""  # the compact schedule the heads came from, if any (for reports)
    kv_heads: tuple[int, ...] | None = None  # key/value heads per layer; None: equal to heads (multi-head)
    head_dim: tuple[int, ...] | None = None  # width of each head per layer; None: d_model // heads
    kv_schedule: str = ""  # the compact schedule the kv_heads came from, if any (for reports)

    def __post_init__(self) -> None:
        object.__setattr__(self, "heads", tuple(int(h) for h in self.heads))
        if not self.heads:
            raise ConfigError("a model needs at least one layer (heads is empty).")
        if self.head_dim is not None:
            dims = expand_head_dim(self.head_dim, len(self.heads), self.min_dk)
            for h in self.heads:
                if h < 1:
                    raise ConfigError(f"the number of heads must be a positive integer, got {h}.")
            classic = all(
                self.d_model % h == 0 and d == self.d_model // h
                for h, d in zip(self.heads, dims, strict=True)
            )
            object.__setattr__(self, "head_dim", None if classic else dims)
        if self.head_dim is None:
            valid = valid_heads(self.d_model, self.min_dk)
            for h in self.heads:
                check_heads(h, self.d_model, self.min_dk, valid)
        if self.kv_heads is not None:
            kv = tuple(int(k) for k in self.kv_heads)
            if len(kv) != len(self.heads):
                raise ConfigError(
                    f"kv_heads lists {len(kv)} counts but the model has {len(self.heads)} layers; "
                    f"give exactly one count per layer."
                )
            for layer, (k, h) in enumerate(zip(kv, self.heads, strict=True)):
                check_kv(k, h, layer)
            object.__setattr__(self, "kv_heads", None if kv == self.heads else kv)
        if self.attention not in ATTENTION_IMPLS:
            raise ConfigError(
                f"attention must be one of {', '.join(ATTENTION_IMPLS)}, got {self.attention!r}."
            )
        if not 0 < self.mlp_ratio < math.inf or not 0 <= self.dropout < 1:
            raise ConfigError(
                f"need mlp_ratio > 0 and 0 <= dropout < 1, got {self.mlp_ratio}, {self.dropout}."
            )

    @classmethod
    def from_schedule(
        cls,
        d_model: int,
        n_layers: int,
        schedule: str,
        min_dk: int = 1,
        *,
        kv_heads: str | None = None,
        head_dim: int | str | tuple[int, ...] | None = None,
        **kw: Any,
    ) -> ModelConfig:
        """Build from compact schedules (see :func:`expand_schedule`, :func:`expand_kv_schedule`).

        With ``head_dim`` the head counts are not bound to divide ``d_model``: any positive count is valid and
        the d_k floor applies to ``head_dim``.
        """
        if head_dim is not None:
            head_dim = expand_head_dim(head_dim, n_layers, min_dk)
        heads = expand_schedule(schedule, n_layers, d_model, min_dk, free_width=head_dim is not None)
        kv = None if kv_heads is None else expand_kv_schedule(kv_heads, heads)
        return cls(
            d_model=d_model,
            heads=heads,
            min_dk=min_dk,
            schedule=schedule,
            kv_heads=kv,
            head_dim=head_dim,
            kv_schedule=kv_heads or "",
            **kw,
        )

    @property
    def n_layers(self) -> int:
        return len(self.heads)

    @property
    def d_k(self) -> tuple[int, ...]:
        """Width of each head, per layer (``head_dim`` where given, else ``d_model // heads``)."""
        if self.head_dim is not None:
            return self.head_dim
        return tuple(self.d_model // h for h in self.heads)

    @property
    def kv_per_layer(self) -> tuple[int, ...]:
        """Key/value heads per layer (equal to ``heads`` for ordinary multi-head attention)."""
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def groups(self) -> tuple[int, ...]:
        """Query heads per key/value head, per layer (1: multi-head; heads: multi-query)."""
        return tuple(h // k for h, k in zip(self.heads, self.kv_per_layer, strict=True))

    @property
    def family(self) -> str:
        return schedule_family(self.heads)

    def kv_cache_bytes_per_token(self, dtype: str = "float32") -> int:
        """Bytes of keys and values one position adds to a decoding cache, summed over layers.

        Per layer ``2 (K and V) x kv_heads x d_k x bytes per element``: the memory read for every new token.
        """
        if dtype not in DTYPE_BYTES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}.")
        return sum(2 * k * d for k, d in zip(self.kv_per_layer, self.d_k, strict=True)) * DTYPE_BYTES[dtype]

    def kv_cache_bytes(self, context: int, batch_size: int = 1, dtype: str = "float32") -> int:
        """Bytes of a full key/value cache holding ``context`` positions for ``batch_size`` sequences."""
        if context < 0 or batch_size < 1:
            raise ConfigError(f"need context >= 0 and batch_size >= 1, got {context}, {batch_size}.")
        return self.kv_cache_bytes_per_token(dtype) * context * batch_size

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; kv_heads, head_dim and kv_schedule appear only when set (old dicts are unchanged)."""
        d = dataclasses.asdict(self)
        d["heads"] = list(self.heads)
        for name in ("kv_heads", "head_dim"):
            if d[name] is None:
                del d[name]
            else:
                d[name] = list(d[name])
        if not d["kv_schedule"]:
            del d["kv_schedule"]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown model config keys {sorted(unknown)}; allowed: {sorted(known)}.")
        d = dict(d)
        for name in ("kv_heads", "head_dim"):
            if isinstance(d.get(name), list):
                d[name] = tuple(d[name])
        return cls(**d)

    def key(self) -> str:
        """A stable string naming the architecture (what latency depends on; not dropout or schedule text).

        Configs without kv_heads and head_dim keep the key they always had (stored caches and studies use it).
        """
        heads = "-".join(map(str, self.heads))
        key = f"d{self.d_model}_h{heads}_mlp{self.mlp_ratio:g}_{self.attention}"
        if self.kv_heads is not None:
            key += "_kv" + "-".join(map(str, self.kv_heads))
        if self.head_dim is not None:
            key += "_hd" + "-".join(map(str, self.head_dim))
        return key


@dataclass(frozen=True)
class TrainConfig:
    """How a variant is trained. The same config and seed reproduce the same run on the same device."""

    epochs: int = 10  # passes over the training split
    batch_size: int = 64  # examples per optimizer step (a study's [task] batch_size)
    lr: float = 3e-3  # peak AdamW learning rate, cosine decay after a short warm-up (a study's [space] lr)
    weight_decay: float = 0.05  # AdamW weight decay
    warmup_frac: float = 0.1  # fraction of steps spent warming up the learning rate
    grad_clip: float = 1.0  # max gradient norm (0 disables)
    seed: int = 0  # seeds init, data order and dropout
    # "cosine": decay to zero over ``epochs``. "plateau": constant after the warm-up; when validation stops
    # improving by more than its own noise for ``patience`` epochs the lr drops 10x, and after ``decays`` drops
    # and one more plateau training stops (``epochs`` is then a cap): trained until accuracy stops moving.
    schedule: str = "cosine"
    patience: int = 4
    decays: int = 2

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.batch_size < 1:
            raise ConfigError(f"need epochs >= 1 and batch_size >= 1, got {self.epochs}, {self.batch_size}.")
        if not 0 < self.lr < math.inf:
            raise ConfigError(f"the learning rate must be a positive finite number, got {self.lr}.")
        if isinstance(self.seed, bool) or not 0 <= self.seed < 2**32:
            raise ConfigError(f"the seed must be a whole number from 0 to 2**32 - 1, got {self.seed}.")
        if self.schedule not in ("cosine", "plateau"):
            raise ConfigError(f"schedule must be cosine or plateau, got {self.schedule!r}.")
        if self.patience < 1 or self.decays < 0:
            raise ConfigError(f"need patience >= 1 and decays >= 0, got {self.patience}, {self.decays}.")


LATENCY_DTYPES = ("float32", "bfloat16", "float16")
LATENCY_RUNTIMES = ("eager", "compile", "onnxruntime")  # how the timed model runs (explorer.model._runtime)
# The devices, declared once: a spec names one of DEVICE_CHOICES; a command (and the library) also takes cuda:N.
DEVICE_CHOICES = ("auto", "cpu", "cuda")
DEVICE_NAMES = "auto, cpu, cuda or cuda:N"  # what a device name may be, as help and errors say it
_DEVICE_NAME = re.compile(rf"^({'|'.join(DEVICE_CHOICES)}|cuda:\d+)$")


@dataclass(frozen=True)
class LatencyConfig:
    """How inference latency is measured: separate from training, in eval mode under inference_mode.

    A study spec's ``[latency]`` table is read straight into this class.
    """

    # auto | cpu | cuda | cuda:N: where latency is measured (and training runs); a spec names auto, cpu or cuda
    device: str = key(
        "auto",
        "`auto`, `cpu` or `cuda`; latency is measured where training runs",
        choices=DEVICE_CHOICES,
    )
    batch_size: int = key(32, "examples per timed forward pass", cap=BATCH)
    threads: int = key(1, "CPU threads while timing (fixed, so figures compare across workers)", cap=THREADS)
    dtype: str = key(
        "float32", "`float32`, `bfloat16`, `float16` (half types need cuda)", choices=LATENCY_DTYPES
    )
    # seconds of timed runs (torch.utils.benchmark.Timer.blocked_autorange)
    min_run_time: float = key(0.3, "seconds of timing per measurement", cap=RUN_TIME_S)
    # onnxruntime: exported to ONNX, run by ONNX Runtime
    runtime: str = key(
        "eager",
        "`eager`, `compile` (torch.compile) or `onnxruntime` (onnx extra): time what you ship",
        choices=LATENCY_RUNTIMES,
    )
    # None: the task's
    seq_len: int | None = key(
        None, "positions per timed example: the deployment shape", shown="the task's", cap=SEQ_LEN
    )

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or not _DEVICE_NAME.match(self.device):
            raise ConfigError(f"latency device must be {DEVICE_NAMES}, got {self.device!r}.")
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


@dataclass(frozen=True)
class DecodeConfig:
    """What decoding latency is measured at: one new token per sequence against a cache of ``context``.

    How it is timed (device, threads, dtype, run time) comes from the :class:`LatencyConfig` it goes with.
    """

    context: int = key(512, "positions in the key/value cache one new token attends to", cap=SEQ_LEN)
    batch_size: int = key(1, "sequences decoded at once", cap=BATCH)

    def __post_init__(self) -> None:
        if isinstance(self.context, bool) or not isinstance(self.context, int) or self.context < 1:
            raise ConfigError(f"decoding context must be a positive integer, got {self.context!r}.")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(f"decoding batch_size must be a positive integer, got {self.batch_size!r}.")
