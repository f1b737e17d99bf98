"""A model from the user's own code: ``[model] build = "mypkg.models:build"`` (or ``"path/to/models.py:build"``).

The function is called as ``build(layout, spec)``: ``layout`` is the :class:`~explorer.layout._config.ModelConfig`
explorer sampled (``d_model``, ``n_layers``, ``heads`` per layer, ``kv_per_layer``, ``d_k`` per layer,
``mlp_ratio``, ``dropout``, ``attention``), ``spec`` the task's :class:`~explorer.layout._config.InputSpec` (token
ids ``[B, T]`` or features ``[B, T, F]``, ``n_classes``; for images also ``image`` and ``patch``). It returns an
``nn.Module`` whose ``forward(x)`` gives logits ``[B, n_classes]`` (``[B, T, vocab]`` for a language model).
Every model explorer builds from it is trained, timed, retrained and exported exactly as its own models are.

**The layout is checked on every model built.** explorer reads the heads of the module's attention layers, in
the order ``module.modules()`` lists them: :class:`explorer.MultiHeadAttention` (heads, key/value heads, head
width) and ``torch.nn.MultiheadAttention`` (heads, width / heads). They must be one per layer and equal the
layout's. A module built with some other attention declares what it built instead: ``explorer_heads`` (heads
per layer) and optionally ``explorer_kv_heads``. A model that ignores the layout, declares nothing, or has no
attention explorer can read is one :class:`ConfigError` naming the function. :func:`check_model` also runs one
batch before any training: the output must be a tensor of the right shape with finite values.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from explorer.errors import ConfigError, ExplorerError
from explorer.hooks import fingerprint, resolve
from explorer.layout import InputSpec, ModelConfig
from explorer.model._attention import MultiHeadAttention

WHAT = "model builder"
CHECK_BATCH = 8  # examples of the batch a user's model is checked on before any training


def attention_layout(module: nn.Module) -> tuple[list[int], list[int], list[int | None]] | None:
    """Heads, key/value heads and head width of each attention layer explorer can read in ``module``, or the
    module's own declaration (``explorer_heads``, ``explorer_kv_heads``); None when it has neither."""
    declared = getattr(module, "explorer_heads", None)
    if declared is not None:
        heads = [int(h) for h in declared]
        kv = [int(k) for k in getattr(module, "explorer_kv_heads", None) or heads]
        return heads, kv, [None] * len(heads)
    rows = []
    for m in module.modules():
        if isinstance(m, MultiHeadAttention):
            rows.append((m.n_heads, m.n_kv_heads, m.d_k))
        elif isinstance(m, nn.MultiheadAttention):
            rows.append((m.num_heads, m.num_heads, m.head_dim))
    if not rows:
        return None
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def _check_layout(module: nn.Module, cfg: ModelConfig, ref: str) -> None:
    found = attention_layout(module)
    if found is None:
        raise ConfigError(
            f"{WHAT} {ref!r} built a {type(module).__name__} with no attention layer explorer can read "
            "(explorer.MultiHeadAttention or torch.nn.MultiheadAttention) and no explorer_heads; use one of them, "
            "or set module.explorer_heads = list(layout.heads) to declare what it built."
        )
    heads, kv, dk = found
    want = (list(cfg.heads), list(cfg.kv_per_layer), list(cfg.d_k))
    got_dk = [d if d is not None else w for d, w in zip(dk, want[2], strict=False)]
    if (heads, kv, got_dk) != want:
        raise ConfigError(
            f"{WHAT} {ref!r} ignores the layout: asked for heads {want[0]}, key/value heads {want[1]}, d_k "
            f"{want[2]} per layer, its attention layers have heads {heads}, key/value heads {kv}, d_k {got_dk}; "
            "build layer i with layout.heads[i] heads (layout.kv_per_layer[i] key/value heads, layout.d_k[i] wide)."
        )


@dataclasses.dataclass(frozen=True)
class ModelBuilder:
    """The user's model function, named by ``ref`` and imported on first use (in every process that builds)."""

    ref: str

    @functools.cached_property
    def function(self) -> Any:
        return resolve(self.ref, WHAT)

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 of the builder's source (:func:`explorer.hooks.fingerprint`)."""
        return fingerprint(self.ref, WHAT)

    def build(self, cfg: ModelConfig, spec: InputSpec) -> nn.Module:
        """``function(cfg, spec)``, checked to be a module that honours the layout."""
        try:
            module = self.function(cfg, spec)
        except ExplorerError:
            raise
        except Exception as exc:
            raise ConfigError(
                f"{WHAT} {self.ref!r} raised {type(exc).__name__}: {exc} (heads {list(cfg.heads)}); fix it "
                "(explorer -v shows the traceback)."
            ) from exc
        if not isinstance(module, nn.Module):
            raise ConfigError(
                f"{WHAT} {self.ref!r} returned {type(module).__name__}, not a torch.nn.Module; return the model."
            )
        _check_layout(module, cfg, self.ref)
        return module


def expected_output(spec: InputSpec, batch: int) -> tuple[int, ...]:
    """The logits' shape for a batch: ``[B, n_classes]``, or ``[B, T, vocab]`` for a language model."""
    return (batch, spec.seq_len, spec.n_classes) if spec.causal else (batch, spec.n_classes)


def check_model(
    builder: ModelBuilder, configs: Sequence[ModelConfig], spec: InputSpec, x: torch.Tensor
) -> None:
    """Build each layout in ``configs`` and run the batch ``x`` through it (eval mode, no gradients): every one
    must honour its layout and give finite logits of :func:`expected_output`'s shape. Nothing else is touched
    (the caller's RNG included)."""
    for cfg in configs:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            module = builder.build(cfg, spec).eval()
            try:
                with torch.inference_mode():
                    out = module(x)
            except Exception as exc:
                raise ConfigError(
                    f"the model {builder.ref!r} builds failed on a batch of shape {list(x.shape)} "
                    f"({type(exc).__name__}: {exc}); its forward must take the task's inputs."
                ) from exc
        want = expected_output(spec, len(x))
        if not isinstance(out, torch.Tensor):
            raise ConfigError(
                f"the model {builder.ref!r} builds returned {type(out).__name__}; forward must return the logits "
                f"tensor {list(want)}."
            )
        if tuple(out.shape) != want:
            raise ConfigError(
                f"the model {builder.ref!r} builds returned logits of shape {list(out.shape)} for a batch of "
                f"{len(x)}; it must return {list(want)} (batch x {spec.n_classes} classes)."
            )
        if not torch.isfinite(out).all():
            raise ConfigError(
                f"the model {builder.ref!r} builds returned NaN or infinite logits on its first batch (heads "
                f"{list(cfg.heads)}); check its initialisation and forward."
            )


def count_flops(model: nn.Module, x: torch.Tensor) -> int:
    """Forward FLOPs of ``model`` on ``x``, counted by ``torch.utils.flop_counter`` (matmuls, convolutions and
    attention, the multiply-adds x 2 that explorer's own models estimate)."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), FlopCounterMode(display=False) as counter:
            model(x)
    finally:
        model.train(was_training)
    return int(counter.get_total_flops())
