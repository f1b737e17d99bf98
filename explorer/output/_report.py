"""The head-count report: report.md, a self-contained report.html, PNG figures and CSVs in one folder.

The content is built once as neutral blocks (:mod:`explorer.output._render`) from the study's records and what
:mod:`explorer.answer` makes of them, then rendered to Markdown and to HTML. The report reads records only: it
never loads weights or runs a model. Files are written one by one, each atomically (a temporary file, then a
rename), and only files the report owns are ever replaced: a folder that holds anything else is refused unless
``force`` is given, and even then nothing but the report's own files is touched.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from explorer.analysis import gqa_rule, rules_of_thumb, searches_kv
from explorer.answer import (
    HV_REFERENCE,
    Answer,
    CostAxis,
    Evidence,
    StudyAccount,
    answer,
    architecture_table,
    architectures,
    at_horizon,
    csv_ready,
    decode_only,
    hypervolume_history,
    pareto_front,
    study_account,
    trials_table,
)
from explorer.errors import NoCompletedTrialsError
from explorer.layout import ModelConfig
from explorer.output import _plots as plots, _study_plots as study_plots
from explorer.output._answer_sections import answer_blocks, check_blocks, evidence_blocks, reading_blocks
from explorer.output._evidence_plots import curves_figure, evidence_figure
from explorer.output._fmt import heads, num, quality_column, quality_value
from explorer.output._inputs import input_blocks
from explorer.output._pretrained_sections import pretrained_blocks
from explorer.output._render import Block, Bold, Code, Figure, Heading, Para, Table, html_page, markdown
from explorer.output._result_folders import OutputFolder
from explorer.output._sections import account_blocks, early_stopping_blocks, relations_blocks, rules_blocks
from explorer.spec import SearchSpace, StudySpec
from explorer.storage import DONE_STATES, Retiming, Role, TrialRecord, trial_label


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
    answer: Answer | None = (
        None  # the study's answer (explorer.answer._recommend.answer), when computed already
    )
    task_input: Mapping[str, Any] | None = None  # what the task fed the model, stored at creation
    code: Mapping[str, Any] | None = (
        None  # the study's record of its code and checkpoint (sha256), stored at creation
    )


@dataclass(frozen=True)
class ReportPaths:
    """Where the report's files are."""

    out_dir: Path
    markdown: Path
    html: Path
    files: tuple[Path, ...]
    answer: Answer | None = None  # the answer the report names
    opening: str = (
        ""  # the answer's own paragraph, as report.md writes it ("**Use 4,4 heads per layer** ...")
    )


# --------------------------------------------------------------------------------------------- writing


def write_report(data: ReportInput, out_dir: str | Path, force: bool = False) -> ReportPaths:
    """Write the report of a study into ``out_dir``; return its paths.

    Raises NoCompletedTrialsError when no search trial has finished, ConfigError for an unusable ``out_dir``
    (a file, a folder holding files explorer did not write unless ``force``, or one that cannot be written).
    """
    if not any(r.finished and r.role == Role.SEARCH for r in data.records):
        raise NoCompletedTrialsError(
            f"study {data.spec.name!r} has no completed search trial yet; run `explorer study resume "
            f"{data.spec.name}` first."
        )
    folder = OutputFolder(out_dir, force)
    if data.answer is None:
        data = dataclasses.replace(data, answer=answer(data.records, data.spec, data.retimings))
    blocks, figures, tables, lead = _content(data)
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
    paths = (folder.path, folder.path / "report.md", folder.path / "report.html", tuple(written))
    opening = markdown([lead]).strip() if lead is not None else ""
    return ReportPaths(*paths, answer=data.answer, opening=opening)


SPACE_LISTED = (
    5_000  # a larger space is not listed for the rules of thumb (they say "not enough data" instead)
)


def space_layouts(spec: StudySpec) -> list[ModelConfig]:
    """Every layout the spec's space holds, so a rule of thumb it cannot test says so; empty above
    ``SPACE_LISTED`` layouts."""
    space = SearchSpace(spec.space)
    return list(space.enumerate_configs()) if space.size() <= SPACE_LISTED else []


def _content(
    data: ReportInput,
) -> tuple[list[Block], dict[str, Callable[[], Any]], dict[str, pd.DataFrame], Para | None]:
    """The report as blocks, the figures to draw (name -> function returning a Figure), the CSV tables and the
    answer section's first paragraph (its headline, or why there is no answer)."""
    spec, records = data.spec, data.records
    ans = data.answer if data.answer is not None else answer(records, spec, data.retimings)
    search = _SearchTables.of(data, ans)
    acct = study_account(records, spec, storage=data.storage, closed=data.closed, spec_path=data.spec_path)
    # the rules read the finalists' grid runs, not the pilot's other horizons nor the horizon check's
    evidence = records if ans.horizon is None else at_horizon(records, ans.horizon)
    verdicts = rules_of_thumb(evidence, data.bench, ans.grid, ans.candidates, ans.margin, space_layouts(spec))
    if searches_kv(records):
        verdicts.append(gqa_rule(evidence, data.retimings))
    b = _opening(data, acct)
    answer_section = answer_blocks(ans, spec)
    lead = next((blk for blk in answer_section if isinstance(blk, Para)), None)
    b.extend(answer_section)
    b.extend(evidence_blocks(ans, spec, records, data.retimings))
    if ans.evidence is Evidence.FINALISTS:
        b.append(
            Figure(
                "curves",
                "Learning curves: each finalist layout's validation score by epoch over its runs, where the "
                "mean flattens marked: whether the runs the answer rests on had finished learning.",
            )
        )
        b.extend(check_blocks(ans))
    b.extend(reading_blocks(ans))
    b.extend(pretrained_blocks(spec, ans, data.code))
    b.extend(_search_blocks(data, search))
    b.extend(early_stopping_blocks(acct, spec, records))
    if data.bench:
        b.append(Heading(3, "Attention benchmark"))
        b.append(
            Figure(
                "bench",
                "Serial loop over heads vs merged and fused computation, from the study's bench.",
            )
        )
    b.extend(rules_blocks(verdicts, spec.metric))
    if spec.task.name == "relations":
        b.extend(relations_blocks(records, int(spec.task.options.get("n_relations", 2)), ans.recommended))
    b.extend(account_blocks(acct, _study_blocks(data, ans, acct, search)))
    finals = (
        architecture_table(ans.candidates) if ans.evidence is Evidence.FINALISTS else search.table.iloc[:0]
    )
    trials = trials_table(records)
    # beside explorer's number (what --trial takes), the trial as Optuna's tools name it: NAME/finalists#4
    trials.insert(1, "optuna_trial", [trial_label(spec.name, int(n)) for n in trials["number"]])
    tables = {
        "trials.csv": trials,
        "architectures.csv": pd.concat([search.table, finals], ignore_index=True)
        if len(finals)
        else search.table,
        "pareto.csv": search.front,
    }
    return b, _figures(data, ans, search), tables, lead


@dataclass(frozen=True)
class _SearchTables:
    """The search's architectures as tables: all, the feasible ones, their front and hypervolume history."""

    table: pd.DataFrame
    front: pd.DataFrame
    history: pd.DataFrame
    cost: str
    count: int  # architectures that ran their whole budget

    @classmethod
    def of(cls, data: ReportInput, ans: Answer) -> _SearchTables:
        cost = CostAxis(ans.cost_axis).column
        archs = architectures(data.records, Role.SEARCH, retimings=decode_only(data.retimings))
        table = architecture_table(archs)
        feasible = table[table["feasible"].astype(bool)] if len(table) else table
        if len(feasible):
            feasible = feasible.dropna(subset=[cost])
        front = pareto_front(feasible, cost) if len(feasible) else feasible
        history = (
            hypervolume_history(feasible, cost=cost)
            if len(feasible)
            else pd.DataFrame(columns=["number", "hypervolume"])
        )
        return cls(table, front, history, cost, len(archs))


def _figures(data: ReportInput, ans: Answer, search: _SearchTables) -> dict[str, Callable[[], Any]]:
    spec, metric = data.spec, data.spec.metric
    floors = sorted({float(m) for m in spec.space.min_dk if m > 1})
    batch = spec.latency.batch_size
    finals = architecture_table(ans.candidates) if ans.evidence is Evidence.FINALISTS else None
    rec_row = architecture_table([ans.recommended]).iloc[0] if ans.recommended is not None else None
    t, cost = search.table, search.cost
    figures: dict[str, Callable[[], Any]] = {
        "pareto": lambda: plots.pareto_figure(t, search.front, rec_row, finals, batch, metric, cost),
        "heads": lambda: plots.heads_figure(t, metric),
        "dk": lambda: plots.dk_figure(t, floors, metric),
        "family": lambda: plots.family_figure(t, metric),
        "pareto_heads": lambda: plots.heads_heatmap(search.front, metric, cost),
        "hypervolume": lambda: study_plots.hypervolume_figure(search.history),
    }
    if ans.evidence is Evidence.FINALISTS:
        figures["evidence"] = lambda: evidence_figure(ans, batch)
        figures["curves"] = lambda: curves_figure(ans, data.records)
    if searches_kv(data.records):
        figures["kv"] = lambda: plots.kv_figure(t, metric)
    if data.bench:
        figures["bench"] = lambda: study_plots.bench_figure(data.bench)
    return figures


def _opening(data: ReportInput, acct: StudyAccount) -> list[Block]:
    """The title and, for a study still running, that it is partial: the answer follows at once."""
    b: list[Block] = [Heading(1, f"Head-count report: {data.spec.name}")]
    if acct.partial:
        b.append(
            Para(
                [
                    Bold("Partial study: "),
                    f"{acct.partial_reason}. Everything below uses the trials finished so far; resume with ",
                    Code(acct.resume),
                    ".",
                ],
            )
        )
    return b


def _study_blocks(data: ReportInput, ans: Answer, acct: StudyAccount, search: _SearchTables) -> list[Block]:
    """What the study ran: its task and device, the search's architectures, the finalist runs (those the answer
    rests on, and what the others were for), when the report was written, and what the task fed the model."""
    spec, records = data.spec, data.records
    devices = ", ".join(acct.devices) or "an unrecorded device"
    searched = {r.key for r in records if r.role == Role.SEARCH and r.state in DONE_STATES and r.key}
    finals = ans.evidence is Evidence.FINALISTS
    text = (
        f"Task {acct.task} on {devices}: {len(searched)} architectures searched, one run each of up to "
        f"{spec.task.epochs} epochs ({search.count} ran them all, {acct.stopped_early} stopped at a rung, "
        f"{acct.over_budget} over budget); "
        + (_finalist_runs_text(records, ans) if finals else "no finalist layouts trained")
        + f". Generated {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}."
    )
    return [Para([text]), *input_blocks(spec, data.task_input)]


def _finalist_runs_text(records: Sequence[TrialRecord], ans: Answer) -> str:
    """The finalist runs in words: the paired runs the answer rests on (the count its Evidence section gives),
    then what each other finished finalist run was: another horizon's (the pilot's, the horizon check's), a
    collapsed run set apart, or one of a layout outside the budgets."""
    finished = [r for r in records if r.role == Role.FINALIST and r.finished]
    grid = finished if ans.horizon is None else [r for r in at_horizon(finished, ans.horizon)]
    paired = sum(a.n for a in ans.candidates)
    parts = [
        (len(finished) - len(grid), "at another horizon (the horizon pilot and check)"),
        (len(ans.collapsed), "collapsed and reported apart"),
    ]
    parts.append((len(finished) - paired - sum(n for n, _ in parts), "of layouts outside the budgets"))
    others = "; ".join(f"{n} {what}" for n, what in parts if n > 0)
    return (
        f"{len(ans.candidates)} finalist layouts trained in {len(finished)} runs: the {paired} paired runs the "
        "answer rests on" + (f", and {others}" if others else "")
    )


def _search_blocks(data: ReportInput, search: _SearchTables) -> list[Block]:
    """What the search found: its front, and its architectures by head count, d_k and schedule (one run each,
    at the search's budget: the report says so under each figure)."""
    spec, metric, cost = data.spec, data.spec.metric, search.cost
    kv_study = searches_kv(data.records)
    quality = "Bits per byte" if metric.direction == "minimize" else "Accuracy"
    latency = "decoding time per token" if cost == "decode_ms" else "latency"
    one_run = f"one run per architecture of up to {spec.task.epochs} epochs (some stopped at a rung)"
    b: list[Block] = [Heading(2, "Evidence from the search")]
    b.append(
        Figure(
            "pareto",
            f"{quality} against {latency} of every searched architecture ({one_run}); the black "
            "step line is the search's Pareto front; diamonds are the finalists' means.",
        )
    )
    b.append(
        Para(
            [
                "The search chooses which layouts become finalists (its knee, the front layouts nearest it, "
                "reference layouts and the ladder of uniform head counts); the answer itself rests on the "
                "finalists' paired runs above. Quality is chosen on validation data; the test split is reported, "
                "never used to choose."
            ],
        )
    )
    b.append(Heading(3, f"The search's Pareto front ({len(search.front)} architectures; all in pareto.csv)"))
    rows = []
    for r in search.front.head(25).itertuples():
        row = {"trial": int(r.number), "heads per layer": heads(r.heads)}
        if kv_study:
            row["kv heads per layer"] = heads(r.kv_heads)
        row |= {
            "d_k": heads(r.d_k),
            "d_model": int(r.d_model),
            "layers": int(r.n_layers),
            quality_column(metric): quality_value(metric, r.quality).rstrip("%"),
            "latency (ms)": num(r.latency_ms),
        }
        if spec.decode is not None:
            row["decoding (ms/token)"] = num(r.decode_ms)
        rows.append(row)
    b.append(Table(pd.DataFrame(rows)))
    for name, title, caption in (
        ("heads", "Head count", "against the largest head count in any layer, per d_model"),
        ("dk", "Head width d_k and the floor", "against the smallest d_k in the model"),
        ("family", "Schedule family", "by schedule: uniform, increasing (more heads deep), decreasing, free"),
    ):
        b.append(Heading(3, title))
        b.append(Figure(name, f"{quality} and latency of the searched architectures ({one_run}), {caption}."))
    b.append(Heading(3, "Heads per layer on the front"))
    b.append(Figure("pareto_heads", "Per-layer heads of the search front's architectures."))
    if kv_study:
        b.append(Heading(3, "Key/value heads"))
        b.append(
            Figure(
                "kv",
                "Quality, latency and decoding time of multi-query (1 key/value head), grouped-query "
                f"and multi-head attention (as many key/value heads as query heads), {one_run}.",
            )
        )
    final = search.history["hypervolume"].iloc[-1] if len(search.history) else math.nan
    ref = HV_REFERENCE[0] * HV_REFERENCE[1]
    b.append(Heading(3, "Search progress"))
    b.append(
        Figure(
            "hypervolume",
            f"Hypervolume after each finished search trial (final {num(final, '.3f')} of {ref:.2f}).",
        )
    )
    return b
