"""What each head of a trained model does: importance, masking, attention entropy and redundancy.

* Importance (Michel et al., 2019): a mask ``xi_h = 1`` multiplies every head's output; a head's importance is
  the expected absolute per-example gradient ``E_x |dL(x)/dxi_h|`` over the validation split (per-example
  gradients with ``torch.func.vmap``, as the paper defines it), then each layer's scores are divided by their L2
  norm, so scores compare within a layer and the global masking order is the paper's.
* Masking: heads are switched off (mask 0, which is exactly removing them) from least to most important, and
  per layer, the number a layer can lose before validation accuracy drops by more than ``tolerance`` gives a
  second head-count recommendation, independent of the search.
* Attention maps: the entropy of each head's attention rows (nats; log T is uniform attention) and the
  Jensen-Shannon similarity ``1 - JS(p, q) / ln 2`` of two heads' rows (1 = identical maps): redundant heads
  look alike.

Pure functions return arrays and DataFrames; the ``*_figure`` functions draw them; :func:`analyse_trial` runs all
of it on one trial of a study and writes figures, ``heads.csv`` and ``heads.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from explorer.engine.device import autocast, resolve_device

if TYPE_CHECKING:
    from explorer.engine.model import Encoder
    from explorer.search.artifacts import ArtifactStore
    from explorer.search.study import StudyHandle

__all__ = [
    "SPECIALIZED",
    "relation_specialization",
    "specialization_from_maps",
    "specialized_heads",
    "describe_specialization",
    "relations_followed",
    "HeadsReport",
    "analyse_trial",
    "attention_pairs",
    "attention_stats",
    "head_importance",
    "heads_needed",
    "layer_masking_curves",
    "masking_curve",
    "redundant_pairs",
    "unpatchify",
]

TOLERANCE = 0.01  # one accuracy point: how much a layer may lose before its heads count as needed
REDUNDANT = 0.9  # JS similarity above which two heads of a layer are called redundant


def _device(device: torch.device | str) -> torch.device:
    return resolve_device(device) if isinstance(device, str) else device


def _heads(model: Encoder) -> list[int]:
    return [b.attn.n_heads for b in model.blocks]


# --------------------------------------------------------------------------------------------- importance


def head_importance(
    model: Encoder, X: torch.Tensor, y: torch.Tensor, device: torch.device | str, batch_size: int = 256
) -> list[np.ndarray]:
    """Per layer, ``[H_i]`` importance scores ``E_x |dL(x)/d mask|``, L2-normalized within the layer.

    The model is moved to ``device`` and evaluated without dropout; its mode and attention impl are restored.
    """
    device = _device(device)
    model.to(device)
    was_training, impls = model.training, [b.attn.impl for b in model.blocks]
    model.eval()
    for b in model.blocks:  # the merged path is the same function as fused, in plain matmuls vmap can batch
        b.attn.impl = "merged"
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def loss(masks: tuple[torch.Tensor, ...], x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        logits = functional_call(model, (params, buffers), (x.unsqueeze(0),), {"head_masks": list(masks)})
        return F.cross_entropy(logits.float(), t.unsqueeze(0))

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    ones = tuple(torch.ones(h, device=device) for h in _heads(model))
    total = [torch.zeros(h, dtype=torch.float64, device=device) for h in _heads(model)]
    try:
        for i in range(0, len(y), batch_size):
            xb, yb = X[i : i + batch_size].to(device), y[i : i + batch_size].to(device)
            for acc, g in zip(total, per_example(ones, xb, yb), strict=True):  # g: [B, H_i]
                acc += g.abs().sum(dim=0).double()
    finally:
        for b, impl in zip(model.blocks, impls, strict=True):
            b.attn.impl = impl
        model.train(was_training)
    out = []
    for acc in total:
        s = (acc / max(len(y), 1)).cpu().numpy()
        norm = np.linalg.norm(s)
        out.append(s / norm if norm > 0 else s)
    return out


# --------------------------------------------------------------------------------------------- masking


def _accuracy(
    model: Encoder, X: torch.Tensor, y: torch.Tensor, device: torch.device, masks: list[torch.Tensor]
) -> float:
    """Validation accuracy with ``masks`` applied (eval mode, no grad)."""
    was_training = model.training
    model.eval()
    correct = 0
    try:
        with torch.inference_mode(), autocast(device):
            for i in range(0, len(y), 512):
                logits = model(X[i : i + 512].to(device), head_masks=masks)
                correct += int((logits.argmax(-1).cpu() == y[i : i + 512]).sum())
    finally:
        model.train(was_training)
    return correct / max(len(y), 1)


def _cumulative(
    model: Encoder,
    X: torch.Tensor,
    y: torch.Tensor,
    device: torch.device | str,
    steps: Sequence[tuple[int, int]],
) -> list[float]:
    """Accuracy with nothing masked, then after masking each ``(layer, head)`` of ``steps`` in turn, cumulatively."""
    device = _device(device)
    model.to(device)
    masks = [torch.ones(h, device=device) for h in _heads(model)]
    out = [_accuracy(model, X, y, device, masks)]
    for layer, h in steps:
        masks[layer][h] = 0.0
        out.append(_accuracy(model, X, y, device, masks))
    return out


def masking_curve(
    model: Encoder,
    X: torch.Tensor,
    y: torch.Tensor,
    importance: Sequence[np.ndarray],
    device: torch.device | str,
) -> pd.DataFrame:
    """Accuracy as heads are masked across all layers, least important first (row 0: nothing masked).

    Columns: ``n_masked``, ``layer``, ``head`` (the head masked at this step, 0-based; NA in row 0),
    ``importance`` (its score) and ``accuracy``.
    """
    order = sorted((float(s), layer, h) for layer, v in enumerate(importance) for h, s in enumerate(v))
    acc = _cumulative(model, X, y, device, [(layer, h) for _, layer, h in order])
    return pd.DataFrame({
        "n_masked": range(len(acc)),
        "layer": pd.array([pd.NA] + [layer for _, layer, _ in order], dtype="Int64"),
        "head": pd.array([pd.NA] + [h for _, _, h in order], dtype="Int64"),
        "importance": [np.nan] + [s for s, _, _ in order],
        "accuracy": acc,
    })  # fmt: skip


def layer_masking_curves(
    model: Encoder,
    X: torch.Tensor,
    y: torch.Tensor,
    importance: Sequence[np.ndarray],
    device: torch.device | str,
) -> pd.DataFrame:
    """Per layer, accuracy as that layer's heads are masked least important first, other layers intact.

    Columns: ``layer``, ``n_masked`` (0 = nothing masked), ``head`` (masked at this step), ``accuracy``.
    """
    frames = []
    for layer, scores in enumerate(importance):
        order = [int(h) for h in np.argsort(scores, kind="stable")]
        acc = _cumulative(model, X, y, device, [(layer, h) for h in order])
        frames.append(pd.DataFrame({"layer": layer, "n_masked": range(len(acc)),
                                    "head": pd.array([pd.NA, *order], dtype="Int64"), "accuracy": acc}))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def _needed(curves: pd.DataFrame, heads: Sequence[int], tolerance: float) -> list[int]:
    """Heads each layer keeps: all but the longest prefix of its curve that stays within ``tolerance``."""
    out = []
    for layer, h in enumerate(heads):
        c = curves[curves["layer"] == layer].sort_values("n_masked")
        base = float(c["accuracy"].iloc[0])
        removable = 0
        for k, acc in zip(c["n_masked"].iloc[1:], c["accuracy"].iloc[1:], strict=True):
            if acc < base - tolerance - 1e-12:
                break
            removable = int(k)
        out.append(h - removable)
    return out


def heads_needed(
    model: Encoder,
    X: torch.Tensor,
    y: torch.Tensor,
    importance: Sequence[np.ndarray],
    device: torch.device | str,
    tolerance: float = TOLERANCE,
    curves: pd.DataFrame | None = None,
) -> list[int]:
    """Per layer, the heads it needs: its head count minus how many it can lose (greedily, least important
    first, other layers intact) before validation accuracy drops by more than ``tolerance`` (0.01 = 1 point).

    Pass ``curves`` from :func:`layer_masking_curves` to reuse them. Each value lies in ``[0, H_i]``.
    """
    if curves is None:
        curves = layer_masking_curves(model, X, y, importance, device)
    return _needed(curves, _heads(model), tolerance)


# --------------------------------------------------------------------------------------------- attention maps


def _map_stats(model: Encoder, X: torch.Tensor, batch_size: int = 256) -> tuple[list, list]:
    """Per layer: mean entropy ``[H]`` (nats) and mean JS similarity ``[H, H]`` of attention rows."""
    device = next(model.parameters()).device
    ent: list[torch.Tensor] = []
    sim: list[torch.Tensor] = []
    rows = 0
    for i in range(0, len(X), batch_size):
        maps = model.attention_maps(X[i : i + batch_size].to(device))
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
        s = (s / rows).numpy()
        np.fill_diagonal(s, 1.0)
        similarity.append(s)
    return entropy, similarity


def _stats_frame(entropy: list[np.ndarray], similarity: list[np.ndarray], seq_len: int) -> pd.DataFrame:
    rows = []
    for layer, (e, s) in enumerate(zip(entropy, similarity, strict=True)):
        for h in range(len(e)):
            others = np.delete(s[h], h)
            rows.append({
                "layer": layer, "head": h, "entropy": float(e[h]), "uniform_entropy": math.log(seq_len),
                "similarity_mean": float(others.mean()) if len(others) else np.nan,
                "similarity_max": float(others.max()) if len(others) else np.nan,
                "most_similar": int(np.delete(np.arange(len(e)), h)[others.argmax()]) if len(others) else -1,
            })  # fmt: skip
    return pd.DataFrame(rows)


def _pairs_frame(similarity: list[np.ndarray]) -> pd.DataFrame:
    rows = [
        {"layer": layer, "head_a": a, "head_b": b, "similarity": float(s[a, b])}
        for layer, s in enumerate(similarity)
        for a in range(len(s))
        for b in range(a + 1, len(s))
    ]
    return pd.DataFrame(rows, columns=["layer", "head_a", "head_b", "similarity"])


def attention_stats(model: Encoder, X: torch.Tensor, batch_size: int = 256) -> pd.DataFrame:
    """Per layer and head: mean attention entropy (nats), log T for reference, and the mean and max JS similarity
    of its maps to the other heads of its layer (``most_similar`` names that head; NaN/-1 in one-head layers)."""
    entropy, similarity = _map_stats(model, X, batch_size)
    return _stats_frame(entropy, similarity, X.shape[1])


def attention_pairs(model: Encoder, X: torch.Tensor, batch_size: int = 256) -> pd.DataFrame:
    """Every pair of heads in a layer with the mean JS similarity of their attention rows (1 = identical)."""
    return _pairs_frame(_map_stats(model, X, batch_size)[1])


def redundant_pairs(pairs: pd.DataFrame, threshold: float = REDUNDANT) -> pd.DataFrame:
    """The pairs from :func:`attention_pairs` at or above ``threshold`` similarity, most similar first."""
    return pairs[pairs["similarity"] >= threshold].sort_values(
        "similarity", ascending=False, ignore_index=True
    )


def unpatchify(X: np.ndarray | torch.Tensor) -> np.ndarray:
    """Inverse of explorer.engine.tasks.digits.patchify: ``[n, g*g, p*p]`` patches -> ``[n, g*p, g*p]`` images."""
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
    maps = [_numpy(m).astype(float) for m in maps]
    rows = np.arange(len(X))
    out = []
    for r, offset in enumerate(offsets):
        marker = (X == r).argmax(axis=1)
        target = marker + offset
        for layer, m in enumerate(maps):
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


def specialized_heads(table: pd.DataFrame, threshold: float = SPECIALIZED) -> pd.DataFrame:
    """Per layer: which heads follow which relations (attention along it >= threshold).

    A head may follow several relations: "one head learns one relation" is what this checks, not assumes.
    Columns: layer, heads, specialized (heads following at least one relation), relations_covered (distinct
    relations followed by some head), k, relations (those relations, e.g. "0,2"), shared (heads following more
    than one), detail (per following head, numbered from 1: "2: 0,1,2; 3: 3").
    """
    k = int(table["relation"].max()) + 1
    out = []
    for layer, g in table.groupby("layer"):
        hits = g[g["attention"] >= threshold]
        per_head = hits.groupby("head")["relation"].apply(lambda r: sorted(int(x) for x in r))
        out.append({
            "layer": int(layer), "heads": int(g["head"].nunique()), "specialized": len(per_head),
            "relations_covered": int(hits["relation"].nunique()), "k": k,
            "relations": ",".join(map(str, sorted(int(x) for x in hits["relation"].unique()))),
            "shared": int(sum(len(rs) > 1 for rs in per_head)),
            "detail": "; ".join(f"{int(h) + 1}: {','.join(map(str, rs))}" for h, rs in per_head.items()),
        })  # fmt: skip
    return pd.DataFrame(out)


def relations_followed(summary: pd.DataFrame) -> set[int]:
    """Relations followed by some head in any layer, from :func:`specialized_heads`."""
    return {int(r) for cell in summary["relations"] for r in cell.split(",") if r}


def describe_specialization(summary: pd.DataFrame) -> str:
    """One clause per layer (numbered from 1) and the network-wide count, from :func:`specialized_heads`."""

    def heads(detail: str) -> str:  # "2: 0,1; 3: 3" -> "head 2: relations 0,1, head 3: relation 3"
        parts = (part.split(": ") for part in detail.split("; "))
        return ", ".join(f"head {h}: relation{'s' * (',' in rs)} {rs}" for h, rs in parts)

    k = int(summary["k"].iloc[0])
    layers = "; ".join(
        f"layer {int(r.layer) + 1}: {int(r.specialized)} of {int(r.heads)} heads follow a relation"
        + (f" ({heads(r.detail)})" if r.detail else "")
        for r in summary.itertuples()
    )
    shared = int(summary["shared"].sum())
    return f"{layers}; in all, heads follow {len(relations_followed(summary))} of the {k} relations" + (
        f", and {shared} head{'s' * (shared > 1)} follow{'s' * (shared == 1)} more than one" if shared else ""
    )


def relation_specialization(
    model: Encoder, X: torch.Tensor, n_relations: int, vocab_size: int
) -> pd.DataFrame:
    """:func:`specialization_from_maps` for a model trained on the relations task (offsets from the task)."""
    from explorer.engine.tasks.relations import relation_rules

    offsets = [offset for offset, _ in relation_rules(n_relations, vocab_size)]
    return specialization_from_maps(model.attention_maps(X), X, offsets)


@dataclass(frozen=True)
class HeadsReport:
    """The head analysis of one trial (validation split) and where its files went."""

    study: str
    trial: int
    d_model: int
    heads: tuple[int, ...]  # per layer, as trained
    heads_needed: tuple[int, ...]  # per layer, from masking (the second recommendation)
    tolerance: float  # accuracy loss allowed per layer when counting needed heads (0.01 = 1 point)
    val_accuracy_stored: float  # what the study recorded for the trial
    val_accuracy: float  # of the model analysed (loaded or retrained); should match the stored figure
    importance: tuple[tuple[float, ...], ...]  # per layer and head, L2-normalized per layer
    table: pd.DataFrame  # per head: importance, masking order, entropy, similarity (= heads.csv)
    curve: pd.DataFrame  # masking_curve
    layer_curves: pd.DataFrame  # layer_masking_curves
    redundant: pd.DataFrame  # redundant_pairs
    files: dict[str, Path] = field(default_factory=dict)
    # relations task only: attention along each relation per (layer, head), and its per-layer summary
    relations: pd.DataFrame | None = None  # specialization_from_maps
    relations_followed: pd.DataFrame | None = None  # specialized_heads

    @property
    def relations_summary(self) -> str | None:
        """One line per layer: how many heads follow a relation and how many relations they cover."""
        if self.relations_followed is None:
            return None
        return describe_specialization(self.relations_followed)

    @property
    def verdict(self) -> str:
        """One sentence comparing the masking recommendation with the trained schedule."""
        trained, needed = ",".join(map(str, self.heads)), ",".join(map(str, self.heads_needed))
        if self.heads_needed == self.heads:
            return f"every layer needs all its heads ({trained}): no layer can lose one within {self.tolerance * 100:g} point."
        return (
            f"masking keeps accuracy within {self.tolerance * 100:g} point with {needed} heads per layer "
            f"(trained with {trained}); the masked heads' capacity is unused on this task."
        )


def _table(importance: Sequence[np.ndarray], curve: pd.DataFrame, stats: pd.DataFrame) -> pd.DataFrame:
    order = curve.dropna(subset=["layer"]).astype({"layer": int, "head": int})
    order = order.rename(columns={"n_masked": "mask_order", "accuracy": "accuracy_after_masking"})
    imp = pd.DataFrame(
        [
            {"layer": layer, "head": h, "importance": float(s)}
            for layer, v in enumerate(importance)
            for h, s in enumerate(v)
        ]
    )
    t = imp.merge(order[["layer", "head", "mask_order", "accuracy_after_masking"]], on=["layer", "head"])
    return t.merge(stats, on=["layer", "head"]).sort_values(["layer", "head"], ignore_index=True)


def _markdown(r: HeadsReport, pairs_shown: int = 10) -> str:
    from explorer.output.report import _md_table

    per_layer = pd.DataFrame({
        "layer": range(1, len(r.heads) + 1), "heads": r.heads, "needed": r.heads_needed,
        "mean entropy (nats)": r.table.groupby("layer")["entropy"].mean().round(3).to_numpy(),
        "max similarity": r.table.groupby("layer")["similarity_max"].max().round(3).to_numpy(),
    })  # fmt: skip
    t = r.table.round(4)
    lines = [
        f"# Heads of trial #{r.trial} in study {r.study}",
        "",
        f"d_model {r.d_model}, heads per layer {','.join(map(str, r.heads))}. Validation accuracy "
        f"{r.val_accuracy * 100:.2f}% (the study recorded {r.val_accuracy_stored * 100:.2f}%).",
        "",
        f"**Second head-count recommendation:** {r.verdict}",
        "",
        "Importance is the expected absolute gradient of the loss with respect to a mask on each head "
        "(Michel et al., 2019), L2-normalized per layer. Entropy is in nats (uniform attention = "
        f"{float(r.table['uniform_entropy'].iloc[0]):.3f}); similarity is 1 - JS divergence / ln 2 between two "
        "heads' attention rows (1 = identical).",
        "",
        _md_table(per_layer),
        "",
        f"## Redundant pairs (similarity >= {REDUNDANT})",
        "",
        _md_table(r.redundant.head(pairs_shown).round(3)),
        "",
        "## Per head",
        "",
        _md_table(t),
        "",
        *_relations_markdown(r),
        *[f"![{k}]({p.name})" for k, p in r.files.items() if p.suffix == ".png"],
    ]
    return "\n".join(lines) + "\n"


def _relations_markdown(r: HeadsReport) -> list[str]:
    if r.relations is None:
        return []
    from explorer.output.report import _md_table

    grid = r.relations.assign(layer=r.relations["layer"] + 1, head=r.relations["head"] + 1)
    grid = grid.pivot_table(index=["layer", "head"], columns="relation", values="attention").round(3)
    grid.columns = [f"relation {c}" for c in grid.columns]
    return [
        "## Relations: one head per relation?",
        "",
        f"{r.relations_summary}. A head follows relation r when it puts at least {SPECIALIZED:.0%} of its "
        "attention between marker r and its target (either direction), averaged over the validation split; "
        "`relations.csv` has every (layer, head, relation).",
        "",
        "Attention along each relation, per head (layers and heads numbered from 1):",
        "",
        _md_table(grid.reset_index()),
        "",
    ]


def analyse_trial(
    handle: StudyHandle,
    which: str | int = "knee",
    device: torch.device | str = "auto",
    out_dir: str | Path = ".",
    *,
    store: ArtifactStore | None = None,
    tolerance: float = TOLERANCE,
    n_examples: int = 3,
) -> HeadsReport:
    """Analyse the heads of one trial (``knee``, ``most-accurate``, ``fastest`` or a number) on its task's
    validation split; write ``importance.png``, ``masking.png``, ``attention_maps.png``, ``attention_stats.png``,
    ``heads.csv`` and ``heads.md`` into ``out_dir``. Weights come from the study's artifacts, else a retrain."""
    from explorer.output.export import select_trial
    from explorer.output.heads_plots import (
        attention_figure,
        attention_stats_figure,
        importance_figure,
        masking_figure,
    )
    from explorer.output.plots import save_png
    from explorer.search.artifacts import trained_model

    device = _device(device)
    number = select_trial(handle, str(which))
    model, task = trained_model(handle, number, device, store)
    X, y = task.val
    importance = head_importance(model, X, y, device)
    curve = masking_curve(model, X, y, importance, device)
    layer_curves = layer_masking_curves(model, X, y, importance, device)
    needed = _needed(layer_curves, _heads(model), tolerance)
    entropy, similarity = _map_stats(model, X)
    stats = _stats_frame(entropy, similarity, X.shape[1])
    first: dict[int, int] = {}
    for i, label in enumerate(y.tolist()):
        first.setdefault(label, i)
    picks = torch.tensor(list(first.values())[:n_examples])  # a few inputs of different classes
    ex_maps = [m.cpu().numpy() for m in model.attention_maps(X[picks].to(device))]
    images = unpatchify(X[picks].numpy()) if task.name == "digits" and task.spec.kind == "features" else None

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = {
        "importance": lambda: importance_figure(importance, needed),
        "masking": lambda: masking_figure(curve, layer_curves, tolerance),
        "attention_maps": lambda: attention_figure(ex_maps, images, [f"label {int(y[i])}" for i in picks]),
        "attention_stats": lambda: attention_stats_figure(stats),
    }
    files = {k: save_png(make(), out / f"{k}.png") for k, make in figures.items()}
    relations = None
    if task.name == "relations":
        k = task.spec.n_classes.bit_length() - 1  # the label is a k-bit pattern
        relations = relation_specialization(model, X.to(device), k, task.spec.vocab_size)
        relations.to_csv(out / "relations.csv", index=False)
        files["relations"] = out / "relations.csv"
    trial = handle.study.get_trials(deepcopy=False)[number]
    report = HeadsReport(
        study=handle.spec.name,
        trial=number,
        d_model=model.cfg.d_model,
        heads=tuple(_heads(model)),
        heads_needed=tuple(needed),
        tolerance=tolerance,
        val_accuracy_stored=float(trial.user_attrs.get("val_accuracy", np.nan)),
        val_accuracy=float(curve["accuracy"].iloc[0]),
        importance=tuple(tuple(float(s) for s in v) for v in importance),
        table=_table(importance, curve, stats),
        curve=curve,
        layer_curves=layer_curves,
        redundant=redundant_pairs(_pairs_frame(similarity)),
        files={**files, "csv": out / "heads.csv", "markdown": out / "heads.md"},
        relations=relations,
        relations_followed=None if relations is None else specialized_heads(relations),
    )
    report.table.to_csv(out / "heads.csv", index=False)
    (out / "heads.md").write_text(_markdown(report), encoding="utf-8")
    return report
