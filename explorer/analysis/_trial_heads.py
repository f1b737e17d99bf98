"""The heads of one trained trial, analysed: what `explorer heads` writes (:mod:`explorer.output._heads_report`).

Loads the trial's weights from the study's artifact store (or retrains it exactly), runs the probes of
:mod:`explorer.measure._probe` on the validation split and interprets them with :mod:`explorer.analysis._heads`.
Nothing here draws or writes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from explorer.analysis._heads import (
    TOLERANCE,
    HeadsReport,
    head_table,
    heads_needed,
    redundant_pairs,
    specialized_heads,
    suggest_layout,
)
from explorer.answer import resolve_trial
from explorer.data import Task, load_task
from explorer.errors import ConfigError, ExplorerError
from explorer.layout import ModelConfig
from explorer.measure import (
    attention_maps,
    attention_statistics,
    auto_device,
    head_counts,
    head_importance,
    masked_accuracy,
    masking_curves,
    relation_specialization,
    unpatchify,
)
from explorer.model import ModelBuilder
from explorer.spec import StudySpec
from explorer.storage import Retiming, TrialRecord
from explorer.study import ArtifactStore, model_builder, record_task, store_for, trained_model


@dataclass(frozen=True)
class HeadsAnalysis:
    """The head analysis of one trial and what its figures draw besides the report."""

    report: HeadsReport
    importance: list[np.ndarray]  # per layer, [H_i] importance scores (the importance figure)
    stats: pd.DataFrame  # per head: attention entropy and similarity (the attention statistics figure)
    example_maps: list[np.ndarray]  # per layer, [n, H, T, T] attention maps of a few validation inputs
    example_images: np.ndarray | None  # those inputs as images (the digits task), else None
    example_labels: list[str]  # their labels, "label 3"


def analyse_heads(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    storage_url: str,
    which: str = "knee",
    device: torch.device | None = None,
    *,
    tolerance: float = TOLERANCE,
    n_examples: int = 3,
    store: ArtifactStore | None = None,
    on_start: Callable[[TrialRecord], None] | None = None,
    retimings: Sequence[Retiming] = (),
) -> HeadsAnalysis:
    """Analyse the heads of one trial (``knee``, ``most-accurate``, ``fastest`` or a number) on its task's
    validation split, on ``device`` (default: CUDA when present, the CPU otherwise). Weights come from ``store``
    (default: the storage's artifact store), else the trial is retrained exactly. ``on_start`` is called with the
    trial once every input has been accepted, before the long work."""
    device = auto_device() if device is None else device
    record = resolve_trial(records, spec, which, retimings)
    config = record.config
    assert config is not None  # resolve_trial names only trials that built a model
    task = load_task(spec.task.name, **spec.task.options)
    store = store or store_for(storage_url, spec_location=spec.artifacts)
    builder = model_builder(spec)
    if builder is not None:  # refused before any training: a model whose heads cannot be masked
        _check_maskable(spec, builder, config, task)
    if on_start is not None:
        on_start(record)
    model = trained_model(spec.name, record, task, spec.latency, store, device, builder)
    X, y = record_task(task, record).val  # the split it was validated on (its fold, for a finalist run)
    return _probe(spec.name, record, config, task, model, X, y, device, tolerance, n_examples)


def _check_maskable(spec: StudySpec, builder: ModelBuilder, config: ModelConfig, task: Task) -> None:
    """A user's model must expose heads the probes can mask; say so before any training."""
    try:
        head_counts(builder.build(config, task.spec))
    except ExplorerError as exc:
        raise ConfigError(f"study {spec.name!r} trains the model {builder.ref!r} builds: {exc}") from None


def _probe(
    study: str,
    record: TrialRecord,
    config: ModelConfig,
    task: Task,
    model: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    device: torch.device,
    tolerance: float,
    n_examples: int,
) -> HeadsAnalysis:
    """Probe the trained model's heads on ``(X, y)``: masking, attention statistics, examples and relations."""
    heads = head_counts(model)
    importance = head_importance(model, X, y, device)
    curve, layer_curves = masking_curves(model, X, y, importance, device)
    needed = heads_needed(layer_curves, heads, tolerance)
    base = float(curve["accuracy"].iloc[0])
    layout = suggest_layout(
        needed,
        heads,
        config.d_model,
        config.min_dk,
        base,
        lambda keep: masked_accuracy(model, X, y, importance, keep, device),
        tolerance,
    )
    stats, pairs = attention_statistics(model, X)
    maps, images, labels = _examples(model, X, y, device, task, n_examples)
    relations = relation_specialization(model, X, task.relation_offsets) if task.relation_offsets else None
    report = HeadsReport(
        study=study,
        trial=record.number,
        d_model=config.d_model,
        heads=tuple(heads),
        heads_needed=tuple(needed),
        layout=layout,
        tolerance=tolerance,
        val_accuracy_stored=float(record.val_accuracy if record.val_accuracy is not None else np.nan),
        val_accuracy=base,
        importance=tuple(tuple(float(s) for s in v) for v in importance),
        table=head_table(importance, curve, stats),
        curve=curve,
        layer_curves=layer_curves,
        redundant=redundant_pairs(pairs),
        relations=relations,
        relations_followed=None if relations is None else specialized_heads(relations),
    )
    return HeadsAnalysis(report, importance, stats, maps, images, labels)


def _examples(
    model: nn.Module, X: torch.Tensor, y: torch.Tensor, device: torch.device, task: Task, n_examples: int
) -> tuple[list[np.ndarray], np.ndarray | None, list[str]]:
    """Attention maps of a few validation inputs of different classes, those inputs as images where they are
    digits, and their labels."""
    first: dict[int, int] = {}
    for i, label in enumerate(y.tolist()):
        first.setdefault(label, i)
    picks = torch.tensor(list(first.values())[:n_examples])  # a few inputs of different classes
    maps = [m.cpu().float().numpy() for m in attention_maps(model, X[picks].to(device))]
    images = unpatchify(X[picks].numpy()) if task.name == "digits" and task.spec.kind == "features" else None
    return maps, images, [f"label {int(y[i])}" for i in picks]
