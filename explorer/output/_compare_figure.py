"""`explorer compare`: the fronts of several studies overlaid in one seaborn figure, and one table (CSV and
markdown), each study labelled with its device and runtime. The rows come from
:func:`explorer.answer._compare_fronts.compare_fronts`; this module only draws and writes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from explorer.answer import csv_ready
from explorer.output._plots import save_png
from explorer.output._render import markdown_table
from explorer.output._result_folders import OutputFolder


def compare_figure(df: pd.DataFrame) -> Figure:
    """Validation accuracy (%) against latency (ms per batch, log scale): one step line per study's front,
    its knee starred; the legend names each study's device, runtime and batch size."""
    with sns.axes_style("whitegrid"):
        fig = Figure(figsize=(10, 6), dpi=110, layout="constrained")
        ax = fig.add_subplot()
    if df.empty:
        ax.text(
            0.5, 0.5, "no study has a finished search trial", ha="center", va="center", transform=ax.transAxes
        )
        return fig
    d = df.assign(acc=df["val_accuracy"] * 100)
    labels = list(dict.fromkeys(d["label"]))
    palette = dict(zip(labels, sns.color_palette("colorblind", len(labels)), strict=True))
    sns.lineplot(
        data=d,
        x="latency_ms",
        y="acc",
        hue="label",
        hue_order=labels,
        palette=palette,
        drawstyle="steps-post",
        estimator=None,
        sort=True,
        marker="o",
        ax=ax,
    )
    knees = d[d["knee"].astype(bool)]
    ax.scatter(
        knees["latency_ms"],
        knees["acc"],
        marker="*",
        s=260,
        c=[palette[x] for x in knees["label"]],
        edgecolor="black",
        zorder=5,
        label="knee",
    )
    for _, row in knees.iterrows():
        ax.annotate(
            ",".join(map(str, row["heads"])),
            (row["latency_ms"], row["acc"]),
            textcoords="offset points",
            xytext=(6, -12),
            fontsize=8,
        )
    ax.set_xscale("log")
    ax.set_xlabel("latency (ms per batch, log scale)")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title(
        "Accuracy/latency search fronts (stars: each front's knee, labelled with its heads per layer)"
    )
    ax.legend(title="study (device, runtime, batch)", loc="lower right", fontsize=8)
    return fig


def compare_markdown(df: pd.DataFrame) -> str:
    """The table as markdown: one block per study, its setup in the heading."""
    lines = ["# Studies compared", ""]
    for label, rows in df.groupby("label", sort=False):
        t = csv_ready(rows)[
            ["number", "heads", "d_model", "n_layers", "val_accuracy", "latency_ms", "params", "knee"]
        ]
        lines += [f"## {label}", "", markdown_table(t.round(4)), ""]
    lines += ["![fronts](compare.png)", ""]
    return "\n".join(lines)


def write_compare(df: pd.DataFrame, out_dir: str | Path, force: bool = False) -> list[Path]:
    """Write compare.csv, compare.md and compare.png into ``out_dir`` (checked first; see OutputFolder)."""
    folder = OutputFolder(out_dir, force)
    with tempfile.TemporaryDirectory(prefix="explorer-compare-") as tmp:
        folder.write("compare.png", save_png(compare_figure(df), Path(tmp) / "c.png").read_bytes())
    folder.write("compare.csv", csv_ready(df).to_csv(index=False))
    folder.write("compare.md", compare_markdown(df))
    return folder.finish()
