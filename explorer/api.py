"""The workflows a user runs, composed from the stages: what the command line calls, and a notebook can too.

A study runs in two stages (:func:`run`): the search (``n_trials`` architectures, one run each, rungs stopping the
clearly beaten), then the finalists (:mod:`explorer.insight.finalists` picks the knee, its neighbours and the
reference layouts; each is trained on the same cross-validation folds with the same seeds, a fixed schedule).
Both stages run as trials
of the same Optuna study, so workers, heartbeats, totals and resumption work the same for both.

    >>> import explorer
    >>> summary = explorer.run_study("studies/quickstart.toml")
    >>> df = explorer.trials("quickstart")          # one row per trial, a pandas DataFrame
    >>> answer = explorer.recommend("quickstart")   # the head-count answer, with its evidence

One variant alone is :func:`train` (what `explorer train` runs).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from explorer.engine.evaluate import train_variant
from explorer.engine.limits import TRIALS
from explorer.errors import ConfigError, NoCompletedTrialsError
from explorer.insight.compare import compare_fronts
from explorer.insight.finalists import Plan, plan_finalists
from explorer.insight.recommend import Answer, answer
from explorer.insight.trials import trials_table
from explorer.output.compare import write_compare
from explorer.output.export import ExportResult, export_trial
from explorer.output.heads_report import analyse_trial
from explorer.output.report import ReportInput, ReportPaths, write_report
from explorer.search.catalog import read_study
from explorer.search.context import RunContext
from explorer.search.counting import count_layouts
from explorer.search.record import Retiming, TrialRecord, closed_counts, load_records
from explorer.search.rerun import finished_search
from explorer.search.retime import finalist_configs, load_retimings, retime, search_configs
from explorer.search.run_options import check_total, check_total_reaches
from explorer.search.spec import StudySpec, load_spec
from explorer.search.study import (
    StudyHandle,
    check_can_run,
    note_artifact_location,
    prepare_study,
    reading_artifact_store,
    record_bench,
    set_total,
)
from explorer.search.usercode import INPUT_ATTR, check_code
from explorer.search.workers import EXHAUSTED, Progress, RunOptions, enqueue_runs, run_stage

__all__ = [
    "RunSummary",
    "compare",
    "confirm",
    "export",
    "heads",
    "load",
    "recommend",
    "report",
    "run",
    "run_study",
    "train",
    "trials",
]


log = logging.getLogger(__name__)

DEFAULT_OPTIONS = RunOptions()  # one worker, one thread, the spec's device, no timeout


@dataclass(frozen=True)
class RunSummary:
    """How a run of a study ended."""

    search: Progress
    finalists: Progress | None  # None when the stage did not run (switched off, or the search did not finish)
    plan: Plan | None
    added: int  # finalist runs queued by this run

    @property
    def complete(self) -> bool:
        return (
            not self.search.note
            and self.search.done >= self.search.total
            and (self.finalists is None or not self.finalists.note)
        )


# One variant trained and timed, every input checked first: what `explorer train` runs. It composes the engine
# alone (the task, the limits, the runtime and memory checks, evaluate_variant), so it is defined there.
train = train_variant


def _deadline(options: RunOptions) -> float | None:
    return None if options.timeout is None else time.monotonic() + options.timeout


def run(
    handle: StudyHandle,
    *,
    n_trials: int | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
    finalists: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
    on_stage: Callable[[str, int], None] | None = None,
    bench: bool = True,
    total_from: str = "--n-trials",
    spec_path: str | None = None,
) -> RunSummary:
    """Run (or resume) a study to its total, then its finalist stage; see the module docstring.

    ``n_trials`` makes a new search total (stored with the study, so resumes and reports agree); it may not fall
    below the search trials already finished (``total_from`` names where it came from in the error); the spec
    file the study came from (``spec_path``) is recorded once the run is accepted. ``bench=False`` skips the
    once-per-study attention bench for this run (the spec's ``bench = false`` skips it for good). ``on_stage(stage, total)`` is called as each stage
    starts. Ctrl-C stops cleanly (finished trials are kept; the running one is queued again) and re-raises.
    """
    options = options.check()
    total = handle.spec.n_trials if n_trials is None else n_trials
    check_total(total, total_from)
    # the device, task, space and artifact store of this run, resolved once and handed to every step below
    context = check_can_run(handle, options.device, options.workers, options.artifacts)
    check_total_reaches(total, finished_search(handle.study), handle.name, total_from)
    set_total(handle, total)  # only now: every input of this command has been accepted
    if spec_path is not None and "spec_path" not in handle.study.user_attrs:
        handle.study.set_user_attr("spec_path", spec_path)
    note_artifact_location(handle, context.store)
    deadline = _deadline(options)
    if bench and finished_search(handle.study) < total:
        record_bench(handle, context)
    if on_stage:  # a bar (and its ETA) for the trials the space can hold, when fewer than the total
        searched_lr = isinstance(handle.spec.space.lr, tuple)  # then every draw is new
        on_stage("search", total if searched_lr else min(total, count_layouts(handle.spec.space)))
    search = run_stage(handle, "search", total, options, deadline, on_progress, context)
    covered = search.note.startswith(EXHAUSTED)  # a small space evaluated whole: the search is done
    if (search.note and not covered) or (search.done < total and not covered):
        return RunSummary(search, None, None, 0)
    if not (finalists and handle.spec.finalists.enabled):
        return RunSummary(search, None, None, 0)
    return _finalist_stage(handle, search, options, context, deadline, on_progress, on_stage)


def _finalist_stage(
    handle: StudyHandle,
    search: Progress,
    options: RunOptions,
    context: RunContext,
    deadline: float | None,
    on_progress: Callable[[Progress], None] | None,
    on_stage: Callable[[str, int], None] | None,
    top: int | None = None,
    seeds: int | None = None,
) -> RunSummary:
    rounds = handle.spec.finalists.timing_rounds
    if handle.spec.decode is not None:  # decoding re-timed with nothing else running before the knee is taken
        configs = search_configs(handle.study)
        if on_stage:
            on_stage("timing", len(configs) * rounds)
        retime(handle, configs, rounds, kinds=("decode",), context=context)
    retimings = load_retimings(handle.study)
    plan = plan_finalists(load_records(handle.study), handle.spec, top=top, seeds=seeds, retimings=retimings)
    added = enqueue_runs(handle, plan.runs)
    total = len(plan.runs)
    if on_stage:
        on_stage("finalist", total)
    finals = run_stage(handle, "finalist", total, options, deadline, on_progress, context)
    if not finals.note and finals.done >= total:
        # Latency measured with nothing else running: interleaved rounds over every finalist architecture.
        configs = finalist_configs(handle.study)
        if on_stage:
            on_stage("timing", len(configs) * rounds)
        retime(handle, configs, rounds, context=context)
    return RunSummary(search, finals, plan, added)


def confirm(
    handle: StudyHandle,
    *,
    top: int | None = None,
    seeds: int | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
    on_progress: Callable[[Progress], None] | None = None,
    on_stage: Callable[[str, int], None] | None = None,
) -> RunSummary:
    """Run the finalist stage now, with more finalists (``top``) or seeds than the spec's; resumable: runs already
    done are kept, only what is new is queued."""
    options = options.check()
    for name, value in (("--top", top), ("--seeds", seeds)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, got {value}.")
        if value is not None:
            TRIALS.check(value, name)
    context = check_can_run(handle, options.device, options.workers, options.artifacts)
    records = load_records(handle.study, roles=("search",))
    if not any(r.finished for r in records):
        raise NoCompletedTrialsError(
            f"study {handle.name!r} has no completed search trial to confirm; run it first."
        )
    one = dataclasses.replace(options, workers=1)
    search = run_stage(handle, "search", handle.spec.n_trials, one, None, context=context)
    return _finalist_stage(
        handle, search, options, context, _deadline(options), on_progress, on_stage, top, seeds
    )


# --------------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class StudyData:
    """A study's handle, records and re-timings, read once, and its answer, computed once from them: every
    command that names the answer (report, recommend, export, heads, confirm, compare) reads it here."""

    handle: StudyHandle
    records: tuple[TrialRecord, ...]
    retimings: tuple[Retiming, ...] = ()

    @functools.cached_property
    def answer(self) -> Answer:
        return answer(self.records, self.handle.spec, self.retimings)

    def report_input(self) -> ReportInput:
        attrs = self.handle.study.user_attrs
        return ReportInput(
            spec=self.handle.spec,
            records=self.records,
            bench=tuple(attrs.get("bench") or ()),
            storage=None if self.handle.is_default_storage else self.handle.masked_url,
            spec_path=attrs.get("spec_path"),
            closed=closed_counts(self.handle.study),
            retimings=self.retimings,
            answer=self.answer,
            task_input=attrs.get(INPUT_ATTR),
        )


def load(name: str, storage: str | None = None) -> StudyData:
    """Open a study by name (default storage: ``studies/NAME.db``) read-only and read its records and
    re-timings: nothing is created or changed, and a study explorer did not create is refused at once."""
    study, spec, url = read_study(name, storage)
    handle = StudyHandle(study, spec, url)
    return StudyData(handle, tuple(load_records(handle.study)), tuple(load_retimings(handle.study)))


def run_study(
    spec: str | Path | StudySpec,
    storage: str | None = None,
    *,
    n_trials: int | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
    finalists: bool = True,
    bench: bool = True,
) -> RunSummary:
    """Create (or resume) the study a spec file or :class:`StudySpec` describes and run it to its total.

    ``storage`` defaults to ``$EXPLORER_STORAGE``, then the spec's, then ``sqlite:///studies/NAME.db``.
    """
    options = options.check()
    spec_obj = spec if isinstance(spec, StudySpec) else load_spec(spec)
    handle = prepare_study(spec_obj, storage, device=options.device, workers=options.workers)
    path = None if isinstance(spec, StudySpec) else str(spec)
    return run(handle, n_trials=n_trials, options=options, finalists=finalists, bench=bench, spec_path=path)


def trials(name: str, storage: str | None = None) -> pd.DataFrame:
    """One row per trial of the study (every state and role), as a DataFrame."""
    return trials_table(load(name, storage).records)


def recommend(name: str, storage: str | None = None) -> Answer:
    """The study's head-count answer (:func:`explorer.insight.recommend.answer`)."""
    return load(name, storage).answer


def report(
    name: str,
    storage: str | None = None,
    out: str | Path | None = None,
    force: bool = False,
    artifacts: str | None = None,
    keep_figures: bool = True,
) -> ReportPaths:
    """Write the study's report into ``out`` (default ``reports/NAME``); with ``keep_figures`` its figures are
    also kept with the study through optuna.artifacts (at ``artifacts``, default the study's location), so
    optuna-dashboard and other machines see them."""
    data = load(name, storage)
    # a bad location fails first; a read-only storage keeps no figure (the command says so)
    store = reading_artifact_store(data.handle, artifacts) if keep_figures else None
    if store is not None and not store.writable:
        store = None
    out = Path(out or Path("reports") / name)
    log.info("writing the report of %s (%d trials) into %s", name, len(data.records), out)
    paths = write_report(data.report_input(), out, force)
    if store is not None:
        figures = [p for p in paths.files if p.suffix == ".png"]
        for path in figures:
            store.save_file(name, path)
        log.info("kept %d figures with the study in %s", len(figures), store.write_location)
    return paths


def export(
    name: str,
    out: str | Path,
    which: str = "answer",
    storage: str | None = None,
    format: str = "config",
    artifacts: str | None = None,
) -> ExportResult:
    """Export a trial (knee, most-accurate, fastest or a number) as a run config or a trained model file
    (``format``: config, state, pt2, onnx; see :mod:`explorer.output.export`)."""
    data = load(name, storage)
    masked = None if data.handle.is_default_storage else data.handle.masked_url
    store = reading_artifact_store(data.handle, artifacts) if format not in ("config", "hf") else None
    if store is not None:  # weights are retrained or loaded into the study's own model code: unchanged
        check_code(data.handle.study.user_attrs, data.handle.spec)
    result = export_trial(data.records, data.handle.spec, which, out, format, store, masked, data.retimings)
    return dataclasses.replace(result, answer=data.answer)


def heads(
    name: str,
    storage: str | None = None,
    which: str = "answer",
    device: str = "auto",
    out: str | Path | None = None,
    force: bool = False,
    artifacts: str | None = None,
    on_start: Callable[[TrialRecord], None] | None = None,
):  # -> tuple[HeadsReport, list[Path]]
    """Analyse the heads of one trial; see :func:`explorer.output.heads_report.analyse_trial`. The weights come
    from the study's artifact store (``artifacts`` overrides where), else the trial is retrained exactly."""
    data = load(name, storage)
    check_code(data.handle.study.user_attrs, data.handle.spec)
    return analyse_trial(
        data.records,
        data.handle.spec,
        data.handle.storage_url,
        which,
        device,
        out or Path("reports") / f"{name}-heads",
        force=force,
        store=reading_artifact_store(data.handle, artifacts),
        on_start=on_start,
        retimings=data.retimings,
    )


def compare(
    names: list[str] | tuple[str, ...],
    storage: str | None = None,
    out: str | Path | None = None,
    force: bool = False,
) -> tuple[pd.DataFrame, list[Path], dict[str, Answer]]:
    """Overlay the fronts of several studies (each in ``storage``, default its own ``studies/NAME.db``): one
    table and one figure written into ``out`` (default ``reports/compare-A-B``); see
    :mod:`explorer.insight.compare`. Returns the table, the files and each study's answer (the one its report
    names). Every study is read before anything is written."""
    if len(names) < 2:
        raise ConfigError(f"compare needs at least two studies, got {len(names)}; name two or more.")
    twice = sorted({n for n in names if list(names).count(n) > 1})
    if twice:
        raise ConfigError(f"study {twice[0]!r} is named twice; name each study once.")
    studies, answers = [], {}
    for name in names:
        data = load(name, storage)
        if not any(r.finished and r.role == "search" for r in data.records):
            raise NoCompletedTrialsError(
                f"study {name!r} has no completed search trial to compare; run it first."
            )
        studies.append((name, data.records))
        answers[name] = data.answer
    df = compare_fronts(studies)
    return df, write_compare(df, out or Path("reports") / ("compare-" + "-".join(names)), force), answers
