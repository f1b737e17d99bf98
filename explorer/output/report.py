"""The head-count report: report.md, a self-contained report.html, PNG figures and CSVs in one folder.

The content is built once as neutral blocks (:mod:`explorer.output.render`) from the study's records and what
:mod:`explorer.insight` makes of them, then rendered to Markdown and to HTML. The report reads records only: it
never loads weights or runs a model. Files are written one by one, each atomically (a temporary file, then a
rename), and only files the report owns are ever replaced: a folder that holds anything else is refused unless
``force`` is given, and even then nothing but the report's own files is touched.
"""

from __future__ import annotations

import datetime as dt
import math
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from explorer.errors import NoCompletedTrialsError
from explorer.insight import rules
from explorer.insight.account import study_account
from explorer.insight.finalists import COST_COLUMNS
from explorer.insight.gqa import gqa_rule, searches_kv
from explorer.insight.pareto import HV_REFERENCE, hypervolume_history, pareto_front
from explorer.insight.recommend import answer
from explorer.insight.tables import architecture_table, architectures, csv_ready, decode_only, trials_table
from explorer.output import plots, study_plots
from explorer.output.files import OutputFolder
from explorer.output.fmt import quality_column, quality_value
from explorer.output.render import html_page, markdown
from explorer.output.sections import (
    account_blocks,
    answer_blocks,
    early_stopping_blocks,
    finalist_blocks,
    heads,
    num,
    relations_blocks,
    rules_blocks,
)
from explorer.search.record import Retiming, TrialRecord
from explorer.search.spec import StudySpec

__all__ = ["ReportInput", "ReportPaths", "write_report"]


@dataclass(frozen=True)
class ReportInput:
    """Everything a report reads: the study's spec and records, and what was stored beside them."""

    spec: StudySpec
    records: tuple[TrialRecord, ...]
    bench: tuple[Mapping[str, Any], ...] = ()
    storage: str | None = None  # masked; named in the commands when not the default
    spec_path: str | None = None  # the spec file the study was started from, when known
    closed: Mapping[str, int] = field(default_factory=dict)  # bookkeeping trials by kind
    retimings: tuple[Retiming, ...] = ()  # the finalists' interleaved re-timings


@dataclass(frozen=True)
class ReportPaths:
    """Where the report's files are."""

    out_dir: Path
    markdown: Path
    html: Path
    files: tuple[Path, ...]


# --------------------------------------------------------------------------------------------- writing


def write_report(data: ReportInput, out_dir: str | Path, force: bool = False) -> ReportPaths:
    """Write the report of a study into ``out_dir``; return its paths.

    Raises NoCompletedTrialsError when no search trial has finished, ConfigError for an unusable ``out_dir``
    (a file, a folder holding files explorer did not write unless ``force``, or one that cannot be written).
    """
    if not any(r.finished and r.role == "search" for r in data.records):
        raise NoCompletedTrialsError(
            f"study {data.spec.name!r} has no completed search trial yet; run `explorer study resume "
            f"{data.spec.name}` first."
        )
    folder = OutputFolder(out_dir, force)
    blocks, figures, tables = _content(data)
    # Everything is rendered before the folder is touched: a failure on the way leaves the last report whole.
    files: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="explorer-report-") as tmp:
        for name, make in figures.items():
            files[f"{name}.png"] = plots.save_png(make(), Path(tmp) / f"{name}.png").read_bytes()
        files["report.html"] = html_page(blocks, f"Head-count report: {data.spec.name}", Path(tmp)).encode()
    for name, table in tables.items():
        files[name] = csv_ready(table).to_csv(index=False).encode()
    files["report.md"] = markdown(blocks).encode()
    for name, payload in files.items():
        folder.write(name, payload)
    written = folder.finish()
    return ReportPaths(folder.path, folder.path / "report.md", folder.path / "report.html", tuple(written))


def _content(data: ReportInput) -> tuple[list[tuple], dict[str, Callable[[], Any]], dict[str, pd.DataFrame]]:
    """The report as blocks, the figures to draw (name -> function returning a Figure) and the CSV tables."""
    spec, records = data.spec, data.records
    metric = spec.metric
    ans = answer(records, spec, data.retimings)
    cost = COST_COLUMNS[ans.cost_axis]
    acct = study_account(records, spec, storage=data.storage, closed=data.closed, spec_path=data.spec_path)
    search = architectures(records, "search", retimings=decode_only(data.retimings))
    table = architecture_table(search)
    feasible_table = table[table["feasible"].astype(bool)] if len(table) else table
    if len(feasible_table):
        feasible_table = feasible_table.dropna(subset=[cost])
    front = pareto_front(feasible_table, cost) if len(feasible_table) else feasible_table
    finals = architecture_table(architectures(records, "finalist", retimings=data.retimings))
    rec_row = None
    if ans.recommended is not None:
        rec_row = architecture_table([ans.recommended]).iloc[0]
    hist = (
        hypervolume_history(feasible_table, cost=cost)
        if len(feasible_table)
        else pd.DataFrame(columns=["number", "hypervolume"])
    )
    verdicts = rules.rules_of_thumb(records, data.bench)
    kv_study = searches_kv(records)
    if kv_study:
        verdicts.append(gqa_rule(records, data.retimings))
    floors = sorted({float(m) for m in spec.space.min_dk if m > 1})
    batch = spec.latency.batch_size
    figures: dict[str, Callable[[], Any]] = {
        "pareto": lambda: plots.pareto_figure(table, front, rec_row, finals, batch, metric, cost),
        "heads": lambda: plots.heads_figure(table, metric),
        "dk": lambda: plots.dk_figure(table, floors, metric),
        "family": lambda: plots.family_figure(table, metric),
        "pareto_heads": lambda: plots.heads_heatmap(front, metric, cost),
        "hypervolume": lambda: study_plots.hypervolume_figure(hist),
    }
    if kv_study:
        figures["kv"] = lambda: plots.kv_figure(table, metric)
    if data.bench:
        figures["bench"] = lambda: study_plots.bench_figure(data.bench)

    devices = ", ".join(acct.devices) or "an unrecorded device"
    n_final = len(finals)
    b: list[tuple] = [("h", 1, f"Head-count report: {spec.name}")]
    searched = {r.key for r in records if r.role == "search" and r.state in ("COMPLETE", "PRUNED") and r.key}
    b.append(("p", [f"Task {acct.task} on {devices}: {len(searched)} architectures searched, one run each of up to "
                    f"{spec.task.epochs} epochs ({len(search)} ran them all, {acct.stopped_early} stopped at a rung, "
                    f"{acct.over_budget} over budget); {n_final} retrained as finalists. Generated "
                    f"{dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}."]))  # fmt: skip
    if acct.partial:
        b.append(("p", [("b", "Partial study: "), f"{acct.partial_reason}. Everything below uses the trials "
                        "finished so far; resume with ", ("code", acct.resume), "."]))  # fmt: skip
    b.extend(answer_blocks(ans, spec))
    b.extend(finalist_blocks(ans, records, data.retimings))
    b.append(("h", 2, "Evidence from the search"))
    quality = "Bits per byte" if metric.direction == "minimize" else "Accuracy"
    latency = "decoding time per token" if cost == "decode_ms" else "latency"
    b.append(("fig", "pareto", f"{quality} against {latency} of every searched architecture; the black step line "
                               "is the search's Pareto front; diamonds are the finalists."))  # fmt: skip
    best = "best (lowest bits per byte)" if metric.direction == "minimize" else "most accurate"
    b.append(("p", ["The recommendation is the knee of the candidates' front: the point farthest from the straight "
                    f"line joining the {best} and the fastest, both objectives scaled to [0, 1] (with one or two "
                    "front points, or none off that line, the point nearest the ideal corner). Quality is chosen on "
                    "the validation split; the test split is reported, never used to choose."
                    + (" The latency axis is decoding time per token, the study's objective." if cost == "decode_ms"
                       else "")]))  # fmt: skip
    b.append(("h", 3, f"The search's Pareto front ({len(front)} architectures; all in pareto.csv)"))
    rows = []
    for r in front.head(25).itertuples():
        row = {"trial": int(r.number), "heads per layer": heads(r.heads)}
        if kv_study:
            row["kv heads per layer"] = heads(r.kv_heads)
        row |= {"d_k": heads(r.d_k), "d_model": int(r.d_model), "layers": int(r.n_layers),
                quality_column(metric): quality_value(metric, r.quality).rstrip("%"),
                "latency (ms)": num(r.latency_ms)}  # fmt: skip
        if spec.decode is not None:
            row["decoding (ms/token)"] = num(r.decode_ms)
        rows.append(row)
    b.append(("table", pd.DataFrame(rows)))
    b.append(("h", 3, "Head count"))
    b.append(
        ("fig", "heads", f"{quality} and latency against the largest head count in any layer, per d_model.")
    )
    b.append(("h", 3, "Head width d_k and the floor"))
    b.append(("fig", "dk", f"{quality} and latency against the smallest d_k in the model."))
    b.append(("h", 3, "Schedule family"))
    b.append(("fig", "family", "Uniform, increasing (more heads deep), decreasing and free schedules."))
    b.append(("h", 3, "Heads per layer on the front"))
    b.append(("fig", "pareto_heads", "Per-layer heads of the front's architectures."))
    if kv_study:
        b.append(("h", 3, "Key/value heads"))
        b.append(("fig", "kv", "Quality, latency and decoding time of multi-query (1 key/value head), grouped-query "
                               "and multi-head attention (as many key/value heads as query heads)."))  # fmt: skip
    b.append(("h", 3, "Search progress"))
    final = hist["hypervolume"].iloc[-1] if len(hist) else math.nan
    ref = HV_REFERENCE[0] * HV_REFERENCE[1]
    b.append(
        (
            "fig",
            "hypervolume",
            f"Hypervolume after each finished search trial (final {num(final, '.3f')} of {ref:.2f}).",
        )
    )
    b.extend(early_stopping_blocks(acct, spec, records))
    if data.bench:
        b.append(("h", 3, "Attention benchmark"))
        b.append(
            (
                "fig",
                "bench",
                "Serial loop over heads vs merged and fused computation, from the study's bench.",
            )
        )
    b.extend(rules_blocks(verdicts, metric))
    if spec.task.name == "relations":
        b.extend(relations_blocks(records, int(spec.task.options.get("n_relations", 2)), ans.recommended))
    b.extend(account_blocks(acct))
    tables = {
        "trials.csv": trials_table(records),
        "architectures.csv": pd.concat([table, finals], ignore_index=True) if len(finals) else table,
        "pareto.csv": front,
    }
    return b, figures, tables
