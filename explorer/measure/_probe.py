"""Probes of a trained model's heads: importance, masking curves, attention statistics, planted relations.

* Importance (Michel et al., 2019): a mask ``xi_h = 1`` multiplies every head's output; a head's importance is
  the expected absolute per-example gradient ``E_x |dL(x)/dxi_h|`` over the given split (per-example gradients
  with ``torch.func.vmap``, as the paper defines it), then each layer's scores are divided by their L2 norm, so
  scores compare within a layer and the global masking order is the paper's.
* Masking: heads are switched off (mask 0, which is exactly removing them) from least to most important, one
  layer at a time and across all layers (:func:`masking_curves`), or as one whole
  layout (:func:`masked_accuracy`): what :mod:`explorer.analysis._heads` turns into a head-count suggestion.
* Attention maps: the entropy of each head's attention rows (nats; log T is uniform attention) and the
  Jensen-Shannon similarity ``1 - JS(p, q) / ln 2`` of two heads' rows (1 = identical maps).
* Relations (the relations task): how much attention each head puts along each planted relation.

Everything here takes a model and tensors and returns arrays or DataFrames; nothing draws or writes files. A
model is probed through its :class:`~explorer.model._attention.MultiHeadAttention` modules (their ``probe_mask``
and ``probe_maps``), one per layer in the order ``model.modules()`` lists them, so a user's model built from
that module is analysed like explorer's own; a model without one is a :class:`ConfigError`.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from explorer.errors import ConfigError
from explorer.measure._train import evaluate
from explorer.model import MultiHeadAttention, set_attention_impl


def attention_modules(model: nn.Module) -> list[MultiHeadAttention]:
    """The model's attention layers that probes can mask and read, in order; a ConfigError when it has none."""
    found = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    if not found:
        raise ConfigError(
            f"{type(model).__name__} has no explorer.MultiHeadAttention layer, so explorer cannot mask that model's "
            "heads; build its attention from explorer.MultiHeadAttention for per-head analysis."
        )
    return found


def head_counts(model: nn.Module) -> list[int]:
    """Heads per layer of a built model."""
    return [m.n_heads for m in attention_modules(model)]


@contextlib.contextmanager
def _probing(
    model: nn.Module, masks: Sequence[torch.Tensor | None] | None = None, maps: bool = False
) -> Iterator[list[MultiHeadAttention]]:
    """Within the block, layer i's heads are multiplied by ``masks[i]`` and, with ``maps``, every attention
    layer keeps its probabilities; the modules are put back as they were afterwards."""
    modules = attention_modules(model)
    saved = [(m.probe_mask, m.probe_maps) for m in modules]
    try:
        for i, m in enumerate(modules):
            m.probe_mask = None if masks is None else masks[i]
            m.probe_maps = [] if maps else None
        yield modules
    finally:
        for m, (mask, kept) in zip(modules, saved, strict=True):
            m.probe_mask, m.probe_maps = mask, kept


def attention_maps(model: nn.Module, x: torch.Tensor) -> list[torch.Tensor]:
    """Attention probabilities of every layer for the batch ``x``, one ``[B, H_i, T, S]`` each (eval mode, no
    grad; the model's mode is restored)."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), _probing(model, maps=True) as modules:
            model(x)
            return [m.probe_maps[0] for m in modules]  # type: ignore[index]
    finally:
        model.train(was_training)


# --------------------------------------------------------------------------------------------- importance


def head_importance(
    model: nn.Module, X: torch.Tensor, y: torch.Tensor, device: torch.device, batch_size: int = 256
) -> list[np.ndarray]:
    """Per layer, ``[H_i]`` importance scores ``E_x |dL(x)/d mask|``, L2-normalized within the layer.

    The model is moved to ``device`` and evaluated without dropout; its mode and attention impl are restored.
    """
    model.to(device)
    modules = attention_modules(model)
    was_training, impls = model.training, [m.impl for m in modules]
    model.eval()
    set_attention_impl(model, "merged")  # the same function as fused, in plain matmuls vmap can batch
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss(masks: tuple[torch.Tensor, ...], x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        with _probing(model, masks):
            logits = functional_call(model, (params, buffers), (x.unsqueeze(0),))
        return F.cross_entropy(logits.float(), t.unsqueeze(0))

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    ones = tuple(torch.ones(h, device=device) for h in head_counts(model))
    total = [torch.zeros(h, dtype=torch.float64, device=device) for h in head_counts(model)]
    try:
        for i in range(0, len(y), batch_size):
            xb, yb = X[i : i + batch_size].to(device), y[i : i + batch_size].to(device)
            for acc, g in zip(total, per_example(ones, xb, yb), strict=True):  # g: [B, H_i]
                acc += g.abs().sum(dim=0).double()
    finally:
        for m, impl in zip(modules, impls, strict=True):
            m.impl = impl
        model.train(was_training)
    out = []
    for acc in total:
        s = (acc / max(len(y), 1)).cpu().numpy()
        norm = np.linalg.norm(s)
        out.append(s / norm if norm > 0 else s)
    return out


# --------------------------------------------------------------------------------------------- masking


def _cumulative(
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    device: torch.device,
    steps: Sequence[tuple[int, int]],
) -> list[float]:
    """Accuracy with nothing masked, then after masking each ``(layer, head)`` of ``steps`` in turn, cumulatively."""
    model.to(device)
    masks = [torch.ones(h, device=device) for h in head_counts(model)]
    with _probing(model, masks):  # the modules read these tensors, which are zeroed in place below
        out = [evaluate(model, X, y, device)]
        for layer, h in steps:
            masks[layer][h] = 0.0
            out.append(evaluate(model, X, y, device))
    return out


def masking_curves(
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    importance: Sequence[np.ndarray],
    device: torch.device,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Accuracy as heads are masked least important first: across all layers, and one layer at a time.

    The first frame (across layers; row 0: nothing masked) has ``n_masked``, ``layer``, ``head`` (the head
    masked at this step, 0-based; NA in row 0), ``importance`` (its score) and ``accuracy``. The second (per
    layer, other layers intact) has ``layer``, ``n_masked`` (0 = nothing masked), ``head`` and ``accuracy``.
    """
    order = sorted((float(s), layer, h) for layer, v in enumerate(importance) for h, s in enumerate(v))
    acc = _cumulative(model, X, y, device, [(layer, h) for _, layer, h in order])
    across = pd.DataFrame(
        {
            "n_masked": range(len(acc)),
            "layer": pd.array([pd.NA] + [layer for _, layer, _ in order], dtype="Int64"),
            "head": pd.array([pd.NA] + [h for _, _, h in order], dtype="Int64"),
            "importance": [np.nan] + [s for s, _, _ in order],
            "accuracy": acc,
        }
    )
    frames = []
    for layer, scores in enumerate(importance):
        heads = [int(h) for h in np.argsort(scores, kind="stable")]
        acc = _cumulative(model, X, y, device, [(layer, h) for h in heads])
        frames.append(
            pd.DataFrame(
                {
                    "layer": layer,
                    "n_masked": range(len(acc)),
                    "head": pd.array([pd.NA, *heads], dtype="Int64"),
                    "accuracy": acc,
                }
            )
        )
    return across, pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------------------------- attention maps


def _map_stats(model: nn.Module, X: torch.Tensor, batch_size: int = 256) -> tuple[list, list, int]:
    """Per layer: mean entropy ``[H]`` (nats) and mean JS similarity ``[H, H]`` of attention rows; and the
    positions attended over (a user's model may add some, e.g. a class token)."""
    device = next(model.parameters()).device
    ent: list[torch.Tensor] = []
    sim: list[torch.Tensor] = []
    rows = 0
    for i in range(0, len(X), batch_size):
        maps = attention_maps(model, X[i : i + batch_size].to(device))
        for layer, p in enumerate(maps):
            p = p.double()  # [B, H, T, T]
            B, H, T, _ = p.shape
            if layer == len(ent):
                ent.append(torch.zeros(H, dtype=torch.float64))
                sim.append(torch.zeros(H, H, dtype=torch.float64))
            plogp = torch.xlogy(p, p).sum(-1)  # [B, H, T]
            ent[layer] += -plogp.sum((0, 2)).cpu()
            for a in range(H - 1):
                q = p[:, a + 1 :]  # [B, H-a-1, T, T]
                m = 0.5 * (p[:, a : a + 1] + q)
                js = 0.5 * (plogp[:, a : a + 1] - torch.xlogy(p[:, a : a + 1], m).sum(-1))
                js = js + 0.5 * (plogp[:, a + 1 :] - torch.xlogy(q, m).sum(-1))  # [B, H-a-1, T]
                s = (1.0 - js.clamp(min=0.0) / math.log(2)).sum((0, 2)).cpu()
                sim[layer][a, a + 1 :] += s
                sim[layer][a + 1 :, a] += s
        rows += maps[0].shape[0] * maps[0].shape[2]
    entropy = [(e / rows).numpy() for e in ent]
    similarity = []
    for s in sim:
        mean = (s / rows).numpy()
        np.fill_diagonal(mean, 1.0)
        similarity.append(mean)
    return entropy, similarity, int(maps[0].shape[-1])


def _stats_frame(entropy: list[np.ndarray], similarity: list[np.ndarray], seq_len: int) -> pd.DataFrame:
    rows = []
    for layer, (e, s) in enumerate(zip(entropy, similarity, strict=True)):
        for h in range(len(e)):
            others = np.delete(s[h], h)
            rows.append(
                {
                    "layer": layer,
                    "head": h,
                    "entropy": float(e[h]),
                    "uniform_entropy": math.log(seq_len),
                    "similarity_mean": float(others.mean()) if len(others) else np.nan,
                    "similarity_max": float(others.max()) if len(others) else np.nan,
                    "most_similar": int(np.delete(np.arange(len(e)), h)[others.argmax()])
                    if len(others)
                    else -1,
                }
            )
    return pd.DataFrame(rows)


def _pairs_frame(similarity: list[np.ndarray]) -> pd.DataFrame:
    rows = [
        {"layer": layer, "head_a": a, "head_b": b, "similarity": float(s[a, b])}
        for layer, s in enumerate(similarity)
        for a in range(len(s))
        for b in range(a + 1, len(s))
    ]
    return pd.DataFrame(rows, columns=["layer", "head_a", "head_b", "similarity"])


def attention_stats(model: nn.Module, X: torch.Tensor, batch_size: int = 256) -> pd.DataFrame:
    """Per layer and head: mean attention entropy (nats), log T for reference, and the mean and max JS similarity
    of its maps to the other heads of its layer (``most_similar`` names that head; NaN/-1 in one-head layers)."""
    entropy, similarity, positions = _map_stats(model, X, batch_size)
    return _stats_frame(entropy, similarity, positions)


def attention_pairs(model: nn.Module, X: torch.Tensor, batch_size: int = 256) -> pd.DataFrame:
    """Every pair of heads in a layer with the mean JS similarity of their attention rows (1 = identical)."""
    return _pairs_frame(_map_stats(model, X, batch_size)[1])


def unpatchify(X: np.ndarray | torch.Tensor) -> np.ndarray:
    """Inverse of explorer.data._digits.patchify: ``[n, g*g, p*p]`` patches -> ``[n, g*p, g*p]`` images."""
    X = np.asarray(X)
    n, T, P = X.shape
    g, p = math.isqrt(T), math.isqrt(P)
    if g * g != T or p * p != P:
        raise ValueError(f"{T} positions of {P} features are not square patches of a square image.")
    return X.reshape(n, g, g, p, p).transpose(0, 1, 3, 2, 4).reshape(n, g * p, g * p)


# --------------------------------------------------------------------------------------------- relations

SPECIALIZED = 0.3  # attention a head puts on a relation's target (either direction) to count as following it


def specialization_from_maps(
    maps: Sequence[torch.Tensor | np.ndarray], X: torch.Tensor | np.ndarray, offsets: Sequence[int]
) -> pd.DataFrame:
    """How much each head attends along each relation of the ``relations`` task.

    Relation ``r`` links marker token ``r`` to the token ``offsets[r]`` positions away; a head follows it when
    it puts attention between the two (marker -> target or target -> marker, whichever is larger), averaged
    over examples. ``maps`` are per-layer ``[B, H, T, T]`` attention probabilities for inputs ``X [B, T]``.
    Returns one row per (layer, head, relation) with ``attention`` in [0, 1].
    """
    X = _numpy(X)
    arrays = [_numpy(m).astype(float) for m in maps]
    rows = np.arange(len(X))
    out = []
    for r, offset in enumerate(offsets):
        marker = (X == r).argmax(axis=1)
        target = marker + offset
        for layer, m in enumerate(arrays):
            there = m[rows, :, marker, target]  # [B, H]: marker attends to its target
            back = m[rows, :, target, marker]  # [B, H]: target attends to its marker
            both = np.maximum(there.mean(axis=0), back.mean(axis=0))
            out += [
                {"layer": layer, "head": h, "relation": r, "attention": float(a)} for h, a in enumerate(both)
            ]
    return pd.DataFrame(out)


def _numpy(a: torch.Tensor | np.ndarray) -> np.ndarray:
    """A host array of ``a`` (attention maps may be bf16 on a GPU; numpy has no bf16)."""
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu()
        return (a.float() if a.is_floating_point() else a).numpy()
    return np.asarray(a)


def masked_accuracy(
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    importance: Sequence[np.ndarray],
    keep: Sequence[int],
    device: torch.device,
) -> float:
    """Accuracy with only the ``keep[i]`` most important heads of each layer i switched on, all layers at once."""
    model.to(device)
    masks = []
    for scores, k in zip(importance, keep, strict=True):
        m = torch.zeros(len(scores), device=device)
        m[torch.as_tensor(np.argsort(-np.asarray(scores), kind="stable")[:k].copy(), dtype=torch.long)] = 1.0
        masks.append(m)
    with _probing(model, masks):
        return evaluate(model, X, y, device)


def relation_specialization(model: nn.Module, X: torch.Tensor, offsets: Sequence[int]) -> pd.DataFrame:
    """:func:`specialization_from_maps` for a model trained on the relations task (``task.relation_offsets``)."""
    device = next(model.parameters()).device
    return specialization_from_maps(attention_maps(model, X.to(device)), X, offsets)


def attention_statistics(
    model: nn.Module, X: torch.Tensor, batch_size: int = 256
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`attention_stats` and :func:`attention_pairs` from one pass over ``X``."""
    entropy, similarity, positions = _map_stats(model, X, batch_size)
    return _stats_frame(entropy, similarity, positions), _pairs_frame(similarity)
