"""`explorer heads`: write the head analysis of one trained trial as heads.md, heads.csv and figures.

The analysis (weights loaded or the trial retrained, probes run and interpreted) is
:func:`explorer.analysis.analyse_heads`; this module writes it into a folder through
:class:`~explorer.output._result_folders.OutputFolder`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import torch

from explorer.analysis import REDUNDANT, SPECIALIZED, TOLERANCE, HeadsAnalysis, HeadsReport, analyse_heads
from explorer.output._heads_plots import (
    attention_figure,
    attention_stats_figure,
    importance_figure,
    masking_figure,
)
from explorer.output._plots import save_png
from explorer.output._render import markdown_table
from explorer.output._result_folders import OutputFolder
from explorer.spec import StudySpec
from explorer.storage import Retiming, TrialRecord, trial_label
from explorer.study import ArtifactStore


def analyse_trial(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    storage_url: str,
    which: str = "knee",
    device: torch.device | None = None,
    out_dir: str | Path = ".",
    *,
    force: bool = False,
    tolerance: float = TOLERANCE,
    n_examples: int = 3,
    store: ArtifactStore | None = None,
    on_start: Callable[[TrialRecord], None] | None = None,
    retimings: Sequence[Retiming] = (),
) -> tuple[HeadsReport, list[Path]]:
    """Analyse the heads of one trial (:func:`explorer.analysis.analyse_heads`: ``knee``,
    ``most-accurate``, ``fastest`` or a number) and write ``heads.md``, ``heads.csv``, four figures (and
    ``relations.csv`` on a relations study) into ``out_dir``; return the analysis and the files. The folder is
    checked before the (possibly long) analysis."""
    folder = OutputFolder(out_dir, force)
    analysis = analyse_heads(
        records,
        spec,
        storage_url,
        which,
        device,
        tolerance=tolerance,
        n_examples=n_examples,
        store=store,
        on_start=on_start,
        retimings=retimings,
    )
    return analysis.report, write_heads(analysis, folder)


def write_heads(analysis: HeadsAnalysis, folder: OutputFolder) -> list[Path]:
    """Write the figures, ``heads.csv`` (and ``relations.csv``) and ``heads.md`` into ``folder``."""
    a, report = analysis, analysis.report
    figures = {
        "importance": lambda: importance_figure(a.importance, report.layout.heads),
        "masking": lambda: masking_figure(report.curve, report.layer_curves, report.tolerance),
        "attention_maps": lambda: attention_figure(a.example_maps, a.example_images, a.example_labels),
        "attention_stats": lambda: attention_stats_figure(a.stats),
    }
    with tempfile.TemporaryDirectory(prefix="explorer-heads-") as tmp:
        for name, make in figures.items():
            folder.write(f"{name}.png", save_png(make(), Path(tmp) / f"{name}.png").read_bytes())
    folder.write("heads.csv", report.table.to_csv(index=False))
    if report.relations is not None:
        folder.write("relations.csv", report.relations.to_csv(index=False))
    folder.write("heads.md", heads_markdown(report, sorted(folder.written)))
    return folder.finish()


def heads_markdown(r: HeadsReport, files: Sequence[str], pairs_shown: int = 10) -> str:
    per_layer = pd.DataFrame(
        {
            "layer": range(1, len(r.heads) + 1),
            "heads": r.heads,
            "needed alone": r.heads_needed,
            "suggested together": r.layout.heads,
            "mean entropy (nats)": r.table.groupby("layer")["entropy"].mean().round(3).to_numpy(),
            "max similarity": r.table.groupby("layer")["similarity_max"].max().round(3).to_numpy(),
        }
    )
    t = r.table.round(4)
    lines = [
        f"# Heads of trial {trial_label(r.study, r.trial)}",
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
