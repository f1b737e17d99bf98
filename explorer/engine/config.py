"""Frozen configs and the head rules.

The two rules every variant obeys (SEED_SUMMARY.md, rule 5):

* ``d_model % heads == 0``: each head gets an integer ``d_k = d_model // heads``;
* ``d_k >= min_dk``: below a floor (about 16 in the folklore) each head's capacity is starved.

:func:`valid_heads` lists the head counts that obey both; :func:`expand_schedule` is the one place a compact
per-layer schedule ("uniform:8", "increasing:4-16", "decreasing:16-4", "4,4,8,16") becomes per-layer head
counts. Nothing is ever rounded silently: a schedule that cannot be met is a :class:`ConfigError` naming the
valid choices.

Two optional refinements (issue 13, "modern heads"):

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
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from explorer.errors import ConfigError

__all__ = [
    "ATTENTION_IMPLS",
    "DTYPE_BYTES",
    "LATENCY_DTYPES",
    "SCHEDULE_FAMILIES",
    "TASK_KINDS",
    "DecodeConfig",
    "HeadPair",
    "InputSpec",
    "LatencyConfig",
    "ModelConfig",
    "TrainConfig",
    "expand_head_dim",
    "expand_kv_schedule",
    "expand_schedule",
    "schedule_family",
    "valid_head_pairs",
    "valid_heads",
    "valid_kv_heads",
]

ATTENTION_IMPLS = ("fused", "merged", "serial")
SCHEDULE_FAMILIES = ("uniform", "increasing", "decreasing", "free")
TASK_KINDS = ("classification", "language_model")  # what a task's targets are: one label, or the next token
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}  # bytes per element of the dtypes latency uses


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


def expand_schedule(
    schedule: str, n_layers: int, d_model: int, min_dk: int = 1, *, free_width: bool = False
) -> tuple[int, ...]:
    """Expand a compact head schedule into one head count per layer.

    Forms:
      * ``uniform:H`` (or just ``H``): H heads in every layer;
      * ``increasing:A-B``: A heads in the first layer rising to B in the last, through the valid head
        counts between A and B, spread evenly over the layers (``increasing:4-16`` over 4 layers at
        d_model 256 gives 4, 8, 8, 16); ``decreasing:B-A`` is the mirror image;
      * ``h1,h2,...``: one explicit count per layer (the "free" family).

    Every count must divide ``d_model`` and leave ``d_k >= min_dk``; otherwise a :class:`ConfigError`
    names the valid counts. Ramps pass only through valid counts by construction, and their endpoints
    must be valid themselves. With ``free_width`` (the head width is set apart by ``head_dim``, which carries
    the d_k floor) every positive count is valid and a ramp passes through every count between its ends.
    """
    if n_layers < 1:
        raise ConfigError(f"the number of layers must be at least 1, got {n_layers}.")
    valid = None if free_width else valid_heads(d_model, min_dk)

    def check(h: int) -> None:
        if valid is not None:
            _check_heads(h, d_model, min_dk, valid)
        elif h < 1:
            raise ConfigError(f"the number of heads must be a positive integer, got {h}.")

    text = schedule.strip().replace(" ", "")
    if m := _UNIFORM.match(text):
        h = int(m.group(1))
        check(h)
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
        check(lo)
        check(hi)
        steps = [h for h in valid if lo <= h <= hi] if valid is not None else list(range(lo, hi + 1))
        return _ramp(steps, n_layers, family)
    if _LIST.match(text):
        heads = tuple(int(t) for t in text.split(","))
        if len(heads) != n_layers:
            raise ConfigError(
                f"schedule {schedule!r} lists {len(heads)} head counts but the model has {n_layers} layers; "
                f"give exactly one count per layer."
            )
        for h in heads:
            check(h)
        return heads
    raise ConfigError(
        f"cannot read head schedule {schedule!r}; write 'uniform:8', 'increasing:4-16', "
        f"'decreasing:16-4' or a per-layer list such as '4,4,8,16'."
    )


def _ramp(steps: list[int], n_layers: int, family: str) -> tuple[int, ...]:
    """``n_layers`` counts rising through ``steps`` from its first to its last (mirrored for "decreasing")."""
    if n_layers == 1:
        ramp = [steps[0]]
    else:
        # Half-way positions round up (not to even, as round() does), so a ramp steps evenly.
        ramp = [steps[math.floor(i * (len(steps) - 1) / (n_layers - 1) + 0.5)] for i in range(n_layers)]
    return tuple(ramp if family == "increasing" else ramp[::-1])


def valid_kv_heads(heads: int) -> list[int]:
    """Every key/value head count that ``heads`` query heads can share evenly (the divisors), ascending."""
    if heads < 1:
        raise ConfigError(f"the number of heads must be a positive integer, got {heads}.")
    return [k for k in range(1, heads + 1) if heads % k == 0]


def _check_kv(kv: int, heads: int, layer: int) -> None:
    if kv < 1 or heads % kv:
        raise ConfigError(
            f"{kv} key/value heads is not valid for {heads} query heads in layer {layer} "
            f"(heads % kv_heads must be 0); choose from {', '.join(map(str, valid_kv_heads(heads)))}."
        )


def expand_kv_schedule(schedule: str, heads: tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """Expand a compact key/value-head schedule into one kv count per layer, for per-layer query ``heads``.

    Forms, as for :func:`expand_schedule`:
      * ``uniform:K`` (or just ``K``): K key/value heads in every layer (1 is multi-query attention);
      * ``increasing:A-B`` / ``decreasing:B-A``: a ramp through the counts between A and B that divide the
        head count of at least one layer, spread evenly over the layers (``decreasing:8-2`` over 4 layers of
        8 heads gives 8, 4, 4, 2);
      * ``k1,k2,...``: one count per layer.

    Every layer must then satisfy ``heads % kv_heads == 0``; otherwise a :class:`ConfigError` names the layer
    and its valid counts.
    """
    heads = tuple(int(h) for h in heads)
    if not heads:
        raise ConfigError("a kv_heads schedule needs at least one layer of heads.")
    n_layers = len(heads)
    text = schedule.strip().replace(" ", "")
    if m := _UNIFORM.match(text):
        kv = (int(m.group(1)),) * n_layers
    elif m := _RAMP.match(text):
        family, a, b = m.group(1), int(m.group(2)), int(m.group(3))
        lo, hi = (a, b) if family == "increasing" else (b, a)
        if lo > hi:
            raise ConfigError(
                f"kv_heads schedule {schedule!r}: {family} needs its first count "
                f"{'<=' if family == 'increasing' else '>='} its second; "
                f"write '{family}:{b}-{a}' or the other family."
            )
        possible = sorted({k for h in heads for k in valid_kv_heads(h)})
        for end in (lo, hi):
            if end not in possible:
                raise ConfigError(
                    f"kv_heads schedule {schedule!r}: {end} key/value heads divides no layer's head count "
                    f"{list(heads)}; choose ends from {', '.join(map(str, possible))}."
                )
        steps = [k for k in possible if lo <= k <= hi]
        kv = _ramp(steps, n_layers, family)
    elif _LIST.match(text):
        kv = tuple(int(t) for t in text.split(","))
        if len(kv) != n_layers:
            raise ConfigError(
                f"kv_heads schedule {schedule!r} lists {len(kv)} counts but the model has {n_layers} layers; "
                f"give exactly one count per layer."
            )
    else:
        raise ConfigError(
            f"cannot read kv_heads schedule {schedule!r}; write 'uniform:2', 'increasing:1-4', "
            f"'decreasing:8-2' or a per-layer list such as '4,4,2,1'."
        )
    for layer, (k, h) in enumerate(zip(kv, heads, strict=True)):
        _check_kv(k, h, layer)
    return kv


def expand_head_dim(
    value: int | str | tuple[int, ...] | list[int], n_layers: int, min_dk: int = 1
) -> tuple[int, ...]:
    """One head width per layer from ``value``: an int or ``"64"``/``"uniform:64"`` (every layer), or a
    per-layer list (``"64,64,128"`` or a sequence). Each width must be at least ``min_dk`` (the d_k floor)."""
    if isinstance(value, str):
        text = value.strip().replace(" ", "")
        if m := _UNIFORM.match(text):
            dims: tuple[int, ...] = (int(m.group(1)),) * n_layers
        elif _LIST.match(text):
            dims = tuple(int(t) for t in text.split(","))
        else:
            raise ConfigError(
                f"cannot read head_dim {value!r}; write one width such as '64' "
                f"or one per layer such as '64,64,128'."
            )
    elif isinstance(value, bool):
        raise ConfigError(f"head_dim must be an integer or one integer per layer, got {value!r}.")
    elif isinstance(value, int):
        dims = (value,) * n_layers
    else:
        dims = tuple(int(d) for d in value)
    if len(dims) != n_layers:
        raise ConfigError(
            f"head_dim lists {len(dims)} widths but the model has {n_layers} layers; "
            f"give one width or one per layer."
        )
    for d in dims:
        if d < max(1, min_dk):
            raise ConfigError(
                f"head_dim {d} is below the d_k floor min_dk={min_dk}; choose head_dim >= {max(1, min_dk)} "
                f"(or lower min_dk)."
            )
    return dims


class HeadPair(NamedTuple):
    """One valid (query heads, key/value heads) pair and the width of each head."""

    heads: int
    kv_heads: int
    d_k: int

    @property
    def group(self) -> int:
        """Query heads sharing one key/value head."""
        return self.heads // self.kv_heads


def valid_head_pairs(
    d_model: int, min_dk: int = 1, head_dim: int | None = None, max_heads: int | None = None
) -> list[HeadPair]:
    """Every valid (heads, kv_heads) pair with its d_k, ordered by heads then kv_heads.

    Without ``head_dim`` the heads are :func:`valid_heads` (d_k = d_model / heads). With it, every head has
    that width (it must be >= ``min_dk``) and any count from 1 to ``max_heads`` is valid (default
    ``d_model // head_dim``: projections no wider than the residual stream). kv_heads divides heads.
    """
    if head_dim is None:
        heads = valid_heads(d_model, min_dk)
        return [HeadPair(h, k, d_model // h) for h in heads for k in valid_kv_heads(h)]
    if d_model < 1:
        raise ConfigError(f"d_model must be a positive integer, got {d_model}.")
    (dk,) = expand_head_dim(head_dim, 1, min_dk)
    top = max(1, d_model // dk) if max_heads is None else max_heads
    if top < 1:
        raise ConfigError(f"max_heads must be at least 1, got {top}.")
    return [HeadPair(h, k, dk) for h in range(1, top + 1) for k in valid_kv_heads(h)]


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
    n_classes: int  # number of labels (a language model: the vocabulary it predicts)
    vocab_size: int = 0  # token vocabulary size (kind == "tokens")
    n_features: int = 0  # features per position (kind == "features")
    task_kind: str = "classification"  # classification (one label per example) | language_model (next token)

    def __post_init__(self) -> None:
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
                _check_heads(h, self.d_model, self.min_dk, valid)
        if self.kv_heads is not None:
            kv = tuple(int(k) for k in self.kv_heads)
            if len(kv) != len(self.heads):
                raise ConfigError(
                    f"kv_heads lists {len(kv)} counts but the model has {len(self.heads)} layers; "
                    f"give exactly one count per layer."
                )
            for layer, (k, h) in enumerate(zip(kv, self.heads, strict=True)):
                _check_kv(k, h, layer)
            object.__setattr__(self, "kv_heads", None if kv == self.heads else kv)
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

    def __post_init__(self) -> None:
        if not isinstance(self.device, str) or not _DEVICE_NAME.match(self.device):
            raise ConfigError(f"latency device must be auto, cpu, cuda or cuda:N, got {self.device!r}.")
        if self.batch_size < 1 or self.threads < 1 or self.min_run_time <= 0:
            raise ConfigError("latency needs batch_size >= 1, threads >= 1 and min_run_time > 0.")
        if self.dtype not in LATENCY_DTYPES:
            raise ConfigError(f"latency dtype must be float32, bfloat16 or float16, got {self.dtype!r}.")
        if self.device == "cpu" and self.dtype != "float32":
            raise ConfigError(f"latency dtype {self.dtype} needs a CUDA device; use float32 on the cpu.")


@dataclass(frozen=True)
class DecodeConfig:
    """What decoding latency is measured at: one new token per sequence against a cache of ``context``.

    How it is timed (device, threads, dtype, run time) comes from the :class:`LatencyConfig` it goes with.
    """

    context: int = 512  # positions already in the key/value cache
    batch_size: int = 1  # sequences decoded together

    def __post_init__(self) -> None:
        if isinstance(self.context, bool) or not isinstance(self.context, int) or self.context < 1:
            raise ConfigError(f"decoding context must be a positive integer, got {self.context!r}.")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(f"decoding batch_size must be a positive integer, got {self.batch_size!r}.")
