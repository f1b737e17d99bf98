"""How much memory a model will take, estimated from its shape before anything is built, and checked against
the machine (explorer.limits.check_memory).

The estimate counts float32 tensors, 4 bytes each:

* **weights**: the parameter count (:func:`param_count`, the same count the built model reports); training adds a gradient and AdamW's two moments per parameter (x4 in all);
* **activations** of one batch: per layer, what backward keeps (the block input, two LayerNorm outputs, the
  Q/K/V projection, the attention output, the MLP's hidden layer twice, its output) plus the attention scores
  and probabilities ``[B, H, T, S]`` (the merged and serial paths materialise them; counted for every path);
  inference keeps one layer's worth at a time.

It is an estimate (allocator slack and the framework's own workspace are not counted), meant to refuse a model
that cannot possibly fit, with the numbers, rather than to end in an allocator's traceback; callers compare it
with the machine through :func:`explorer.limits.check_memory`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from explorer.layout import InputSpec, ModelConfig
from explorer.limits import D_MODEL, HEAD_DIM, HEADS, LAYERS, MLP_WIDTH, check_memory

if TYPE_CHECKING:
    import torch

FLOAT = 4  # bytes per float32 element


@dataclass(frozen=True)
class Shape:
    """What the estimate needs of a model: its width, MLP width and (heads, kv heads, head width) per layer."""

    d_model: int
    hidden: int  # MLP hidden width
    layers: tuple[tuple[int, int, int], ...]  # (heads, kv_heads, d_k) per layer


def shape_of(cfg: ModelConfig) -> Shape:
    """The shape of a config (its MLP width as explorer.model._model builds it)."""
    hidden = max(1, round(cfg.mlp_ratio * cfg.d_model))
    return Shape(cfg.d_model, hidden, tuple(zip(cfg.heads, cfg.kv_per_layer, cfg.d_k, strict=True)))


def param_count(shape: Shape, spec: InputSpec) -> int:
    """Parameters of a model of ``shape`` for ``spec``, counted without building it (equal to the built model's
    ``num_params()``; tests/model/test_footprint.py holds it)."""
    C, hidden = shape.d_model, shape.hidden
    embed = spec.vocab_size * C if spec.kind == "tokens" else spec.n_features * C + C
    n_out = spec.vocab_size if spec.causal else spec.n_classes
    blocks = 0
    for h, kv, dk in shape.layers:
        qkv = (h + 2 * kv) * dk
        blocks += 4 * C + qkv * (C + 1) + h * dk * C + C + C * hidden + hidden + hidden * C + C
    return embed + spec.seq_len * C + blocks + 2 * C + C * n_out + n_out


def _layer_activations(shape: Shape, h: int, kv: int, dk: int, T: int, S: int) -> int:
    """Elements one example keeps for one layer: projections, MLP and the [H, T, S] scores and probabilities."""
    C = shape.d_model
    return T * (4 * C + (h + 2 * kv) * dk + h * dk + 2 * shape.hidden) + 2 * h * T * S


def training_bytes(shape: Shape, spec: InputSpec, batch: int) -> int:
    """Bytes to train a model of ``shape`` on ``spec`` at ``batch``: weights x4 plus every layer's activations."""
    T = spec.seq_len
    per_example = sum(_layer_activations(shape, h, kv, dk, T, T) for h, kv, dk in shape.layers)
    n_out = spec.vocab_size * T if spec.causal else spec.n_classes
    per_example += 2 * T * shape.d_model + 2 * n_out
    return FLOAT * (4 * param_count(shape, spec) + batch * per_example)


def inference_bytes(shape: Shape, spec: InputSpec, batch: int, kv_len: int | None = None) -> int:
    """Bytes to run a model of ``shape`` forward at ``batch`` (one layer's activations live at a time);
    ``kv_len`` positions attended over (a decoding step's cache, whose keys and values are counted too)."""
    T = spec.seq_len if kv_len is None else 1
    S = spec.seq_len if kv_len is None else kv_len
    layer = max(_layer_activations(shape, h, kv, dk, T, S) for h, kv, dk in shape.layers)
    cache = 0 if kv_len is None else sum(2 * kv * dk * kv_len for _, kv, dk in shape.layers)
    n_out = spec.vocab_size * T if spec.causal else spec.n_classes
    return FLOAT * (param_count(shape, spec) + batch * (layer + cache + 2 * T * shape.d_model + n_out))


def attention_bytes(d_model: int, heads: int, kv_heads: int, seq_len: int, batch: int, decode: bool) -> int:
    """Bytes the attention bench holds at once: inputs, Q/K/V and outputs, and the ``[B, H, T, S]`` scores of
    the serial and merged paths (a decoding step: one query against a cache of ``seq_len`` positions)."""
    d_k = d_model // heads
    queries = 1 if decode else seq_len
    cache = 2 * kv_heads * d_k * seq_len
    per_example = queries * 6 * d_model + cache + 3 * heads * queries * seq_len
    return FLOAT * (batch * per_example + 8 * d_model * d_model)


def check_config_limits(cfg: ModelConfig, what: str = "the model") -> None:
    """A config's width, depth, heads and head widths within explorer.limits."""
    D_MODEL.check(cfg.d_model, f"d_model of {what}", "choose a narrower model")
    MLP_WIDTH.check(cfg.mlp_ratio * cfg.d_model, f"the MLP width of {what}", "choose a smaller mlp_ratio")
    LAYERS.check(cfg.n_layers, f"the layers of {what}", "choose fewer layers")
    HEADS.check(max(cfg.heads), f"the heads of a layer of {what}", "choose fewer heads")
    HEAD_DIM.check(max(cfg.d_k), f"the head width (d_k) of {what}", "choose narrower heads")


def check_model_fits(
    cfg: ModelConfig,
    spec: InputSpec,
    *,
    train_batch: int | None,
    infer_batch: int,
    device: torch.device | None = None,
    decode_context: int | None = None,
    what: str = "the model",
) -> int:
    """The bytes the largest of training (at ``train_batch``; None: no training), timing (``infer_batch``) and
    decoding (``decode_context``) ``cfg`` takes on ``spec``, if that fits the memory of ``device`` (None: the
    CPU's)."""
    shape = shape_of(cfg)
    estimate = max(
        0 if train_batch is None else training_bytes(shape, spec, train_batch),
        inference_bytes(shape, spec, infer_batch),
        0 if decode_context is None else inference_bytes(shape, spec, 1, decode_context),
    )
    layers = f"d_model {cfg.d_model}, {cfg.n_layers} layers, heads {max(cfg.heads)}"
    return check_memory(
        estimate, f"{what} ({layers}, {spec.seq_len} positions)", "choose a smaller model or batch", device
    )
