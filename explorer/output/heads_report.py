"""`explorer heads`: analyse the heads of one trained trial and write heads.md, heads.csv and figures.

Loads the trial's weights from the study's artifact store (or retrains it exactly), runs the probes of
:mod:`explorer.engine.probe` on the validation split, interprets them with :mod:`explorer.insight.heads`, and
writes the files into a folder through :class:`~explorer.output.files.OutputFolder`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from explorer.engine.device import as_device
from explorer.engine.probe import (
    attention_maps,
    attention_statistics,
    head_counts,
    head_importance,
    masked_accuracy,
    masking_curves,
    relation_specialization,
    unpatchify,
)
from explorer.engine.tasks import load_task
from explorer.errors import ConfigError, ExplorerError
from explorer.insight.heads import (
    REDUNDANT,
    SPECIALIZED,
    TOLERANCE,
    HeadsReport,
    head_table,
    heads_needed,
    redundant_pairs,
    specialized_heads,
    suggest_layout,
)
from explorer.insight.recommend import resolve_trial
from explorer.output.files import OutputFolder
from explorer.output.heads_plots import (
    attention_figure,
    attention_stats_figure,
    importance_figure,
    masking_figure,
)
from explorer.output.plots import save_png
from explorer.output.render import markdown_table
from explorer.search.artifacts import ArtifactStore, store_for
from explorer.search.record import Retiming, TrialRecord
from explorer.search.retrain import record_task, trained_model
from explorer.search.spec import StudySpec

__all__ = ["analyse_trial", "heads_markdown"]


def analyse_trial(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    storage_url: str,
    which: str = "knee",
    device: torch.device | str = "auto",
    out_dir: str | Path = ".",
    *,
    force: bool = False,
    tolerance: float = TOLERANCE,
    n_examples: int = 3,
    store: ArtifactStore | None = None,
    on_start: Callable[[TrialRecord], None] | None = None,
    retimings: Sequence[Retiming] = (),
) -> tuple[HeadsReport, list[Path]]:
    """Analyse the heads of one trial (``knee``, ``most-accurate``, ``fastest`` or a number) on its task's
    validation split and write ``heads.md``, ``heads.csv``, four figures (and ``relations.csv`` on a relations
    study) into ``out_dir``; return the analysis and the files. Weights come from ``store`` (default: the
    storage's artifact store), else the trial is retrained exactly. ``on_start`` is called with the trial once
    every input has been accepted, before the long work."""
    folder = OutputFolder(out_dir, force)  # checked before the (possibly long) work
    device = as_device(device)
    record = resolve_trial(records, spec, which, retimings)
    task = load_task(spec.task.name, **spec.task.options)
    store = store or store_for(storage_url, spec_location=spec.artifacts)
    builder = spec.model.builder()
    if builder is not None:  # refused before any training: a model whose heads cannot be masked
        try:
            head_counts(builder.build(record.config, task.spec))
        except ExplorerError as exc:
            raise ConfigError(
                f"study {spec.name!r} trains the model {spec.model.build!r} builds: {exc}"
            ) from None
    if on_start is not None:
        on_start(record)
    model = trained_model(spec.name, record, task, spec.latency, store, device, builder)
    X, y = record_task(task, record).val  # the split it was validated on (its fold, for a finalist run)
    heads = head_counts(model)
    importance = head_importance(model, X, y, device)
    curve, layer_curves = masking_curves(model, X, y, importance, device)
    needed = heads_needed(layer_curves, heads, tolerance)
    base = float(curve["accuracy"].iloc[0])
    layout = suggest_layout(
        needed,
        heads,
        record.config.d_model,
        record.config.min_dk,
        base,
        lambda keep: masked_accuracy(model, X, y, importance, keep, device),
        tolerance,
    )
    stats, pairs = attention_statistics(model, X)
    first: dict[int, int] = {}
    for i, label in enumerate(y.tolist()):
        first.setdefault(label, i)
    picks = torch.tensor(list(first.values())[:n_examples])  # a few inputs of different classes
    ex_maps = [m.cpu().float().numpy() for m in attention_maps(model, X[picks].to(device))]
    images = unpatchify(X[picks].numpy()) if task.name == "digits" and task.spec.kind == "features" else None
    relations = relation_specialization(model, X, task.relation_offsets) if task.relation_offsets else None
    report = HeadsReport(
        study=spec.name,
        trial=record.number,
        d_model=record.config.d_model,
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
    figures = {
        "importance": lambda: importance_figure(importance, layout.heads),
        "masking": lambda: masking_figure(curve, layer_curves, tolerance),
        "attention_maps": lambda: attention_figure(ex_maps, images, [f"label {int(y[i])}" for i in picks]),
        "attention_stats": lambda: attention_stats_figure(stats),
    }
    with tempfile.TemporaryDirectory(prefix="explorer-heads-") as tmp:
        for name, make in figures.items():
            folder.write(f"{name}.png", save_png(make(), Path(tmp) / f"{name}.png").read_bytes())
    folder.write("heads.csv", report.table.to_csv(index=False))
    if relations is not None:
        folder.write("relations.csv", relations.to_csv(index=False))
    folder.write("heads.md", heads_markdown(report, sorted(folder.written)))
    return report, folder.finish()


def heads_markdown(r: HeadsReport, files: Sequence[str], pairs_shown: int = 10) -> str:
    per_layer = pd.DataFrame({
        "layer": range(1, len(r.heads) + 1), "heads": r.heads, "needed alone": r.heads_needed,
        "suggested together": r.layout.heads,
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
        "How it is made: per layer, heads are switched off least important first (other layers intact) while "
        f"validation accuracy stays within {r.tolerance * 100:g} point ('needed alone'); those counts are rounded "
        "up to head counts the tool can build and checked with every layer masked at once, giving layers heads "
        f"back until the whole model stays within the tolerance ('suggested together'). {r.layout.note}",
        "",
        "Importance is the expected absolute gradient of the loss with respect to a mask on each head "
        "(Michel et al., 2019), L2-normalized per layer. Entropy is in nats (uniform attention = "
        f"{float(r.table['uniform_entropy'].iloc[0]):.3f}); similarity is 1 - JS divergence / ln 2 between two "
        "heads' attention rows (1 = identical).",
        "",
        markdown_table(per_layer),
        "",
        f"## Redundant pairs (similarity >= {REDUNDANT})",
        "",
        markdown_table(r.redundant.head(pairs_shown).round(3)),
        "",
        "## Per head",
        "",
        markdown_table(t),
        "",
        *_relations_markdown(r),
        *[f"![{name}]({name})" for name in files if name.endswith(".png")],
    ]
    return "\n".join(lines) + "\n"


def _relations_markdown(r: HeadsReport) -> list[str]:
    if r.relations is None:
        return []
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
        markdown_table(grid.reset_index()),
        "",
    ]
