"""The workflows a user runs, composed from the stages: what the command line calls, and a notebook can too.

A study runs in two stages (:func:`run`, from :mod:`explorer.study` with :func:`run_study` and :func:`confirm`):
the search (``n_trials`` architectures, one run each, rungs stopping the clearly beaten), then the finalists
(:mod:`explorer.answer` picks the knee, its neighbours and the reference layouts; each is trained on the same
cross-validation folds with the same seeds, a fixed schedule). Reading a study (:func:`load`) and everything that
works from its records (the answer, the report, export, heads, compare) are here.

    >>> import explorer
    >>> summary = explorer.run_study("studies/quickstart.toml")
    >>> df = explorer.trials("quickstart")          # one row per trial, a pandas DataFrame
    >>> answer = explorer.recommend("quickstart")   # the head-count answer, with its evidence

One variant alone is :func:`train` (what `explorer train` runs).

Importing this module loads no torch, Optuna or pandas: each workflow imports what it uses when it is called,
and the study's workflows (:func:`run_study`, :func:`run`, :func:`confirm`) and :func:`train` are taken from their
packages on first use.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from explorer.errors import ConfigError, ExplorerError, NoCompletedTrialsError

if TYPE_CHECKING:
    import pandas as pd
    import torch

    from explorer.answer import Answer
    from explorer.measure import train_variant as train
    from explorer.output import ExportResult, ReportInput, ReportPaths
    from explorer.storage import Retiming, TrialRecord
    from explorer.study import RunSummary, Study, confirm, run, run_study

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

# Names this module takes from the packages on first use (PEP 562), so importing it stays light: the study's
# workflows, and ``train``: one variant trained and timed, every input checked first, through the plan `explorer
# train` runs too (explorer.measure.plan_train: a spec's training defaults, the device resolved, the runtime and
# sizes checked once). ``train`` is explorer.measure.train_variant, as it needs nothing beyond that package.
_FROM = {
    "run": ("explorer.study", "run"),
    "run_study": ("explorer.study", "run_study"),
    "confirm": ("explorer.study", "confirm"),
    "RunSummary": ("explorer.study", "RunSummary"),
    "train": ("explorer.measure", "train_variant"),
}


def __getattr__(name: str) -> Any:
    if name in _FROM:
        module, attr = _FROM[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'explorer.api' has no attribute {name!r}")


# --------------------------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class StudyData:
    """A study (opened read-only), its records and re-timings, read once, and its answer, computed once from them: every
    command that names the answer (report, recommend, export, heads, confirm, compare) reads it here."""

    study: Study
    records: tuple[TrialRecord, ...]
    retimings: tuple[Retiming, ...] = ()

    @functools.cached_property
    def answer(self) -> Answer:
        from explorer.answer import answer

        return answer(self.records, self.study.spec, self.retimings)

    def report_input(self) -> ReportInput:
        from explorer.output import ReportInput
        from explorer.storage import closed_counts
        from explorer.study import CODE_ATTR, INPUT_ATTR

        attrs = self.study.user_attrs
        return ReportInput(
            spec=self.study.spec,
            records=self.records,
            bench=tuple(attrs.get("bench") or ()),
            storage=None if self.study.is_default_storage else self.study.masked_url,
            spec_path=attrs.get("spec_path"),
            closed=closed_counts(self.study.optuna_study),
            retimings=self.retimings,
            answer=self.answer,
            task_input=attrs.get(INPUT_ATTR),
            code=attrs.get(CODE_ATTR),
        )


def load(name: str, storage: str | None = None) -> StudyData:
    """Open a study by name (default storage: ``studies/NAME.db``) read-only and read its records and
    re-timings: nothing is created or changed, and a study explorer did not create is refused at once."""
    from explorer.study import Study

    study = Study.open(name, storage)
    return StudyData(study, tuple(study.records()), tuple(study.retimings()))


def trials(name: str, storage: str | None = None) -> pd.DataFrame:
    """One row per trial of the study (every state and role), as a DataFrame."""
    from explorer.answer import trials_table

    return trials_table(load(name, storage).records)


def recommend(name: str, storage: str | None = None) -> Answer:
    """The study's head-count answer (:func:`explorer.answer._recommend.answer`)."""
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
    from explorer.output import write_report
    from explorer.spec import tracking_uri
    from explorer.study import artifact_store

    data = load(name, storage)
    # a bad location fails first; a read-only storage keeps no figure (the command says so)
    store = artifact_store(data.study, artifacts) if keep_figures else None
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
        # the answer as a study attribute too, for optuna-dashboard and optuna.load_study readers
        rec = data.answer.recommended
        data.study.note_answer(None if rec is None else tuple(rec.heads), paths.opening)
    if tracking_uri(data.study.spec.tracking) is not None:
        _log_answer(data, paths, storage)
    return paths


def _log_answer(data: StudyData, paths: ReportPaths, storage: str | None) -> None:
    """The answer logged to the study's MLflow experiment: report.md, the figures and the exported run config
    (none when the study has no answer to export)."""
    from explorer.study import log_answer

    files = [p for p in paths.files if p.name == "report.md" or p.suffix == ".png"]
    with tempfile.TemporaryDirectory(prefix="explorer-answer-") as tmp:
        config = Path(tmp) / "answer-config.json"
        with contextlib.suppress(ExplorerError):  # nothing learned: no answer, no config
            export(data.study.name, config, storage=storage)
        extra = [config] if config.is_file() else []
        log_answer(
            data.study.optuna_study,
            data.study.spec,
            data.answer,
            files + extra,
            keep=lambda result: data.study.note_tracking(result),  # an outage over (or begun): recorded
        )


def export(
    name: str,
    out: str | Path,
    which: str = "answer",
    storage: str | None = None,
    format: str = "config",
    artifacts: str | None = None,
) -> ExportResult:
    """Export a trial (knee, most-accurate, fastest or a number) as a run config or a trained model file
    (``format``: config, state, pt2, onnx; see :mod:`explorer.output._export`)."""
    from explorer.output import export_trial
    from explorer.study import artifact_store, check_code

    data = load(name, storage)
    masked = None if data.study.is_default_storage else data.study.masked_url
    weights = format not in ("config", "hf") or (
        format == "hf"
        and (data.study.spec.model.hf is not None or data.study.spec.model.pretrained is not None)
    )
    store = artifact_store(data.study, artifacts) if weights else None
    if store is not None:  # weights are retrained or loaded into the study's own model code: unchanged
        check_code(data.study.user_attrs, data.study.spec)
    result = export_trial(data.records, data.study.spec, which, out, format, store, masked, data.retimings)
    return dataclasses.replace(result, answer=data.answer)


def heads(
    name: str,
    storage: str | None = None,
    which: str = "answer",
    device: str | torch.device = "auto",
    out: str | Path | None = None,
    force: bool = False,
    artifacts: str | None = None,
    on_start: Callable[[TrialRecord], None] | None = None,
):  # -> tuple[HeadsReport, list[Path]]
    """Analyse the heads of one trial; see :func:`explorer.output._heads_report.analyse_trial`. The weights come
    from the study's artifact store (``artifacts`` overrides where), else the trial is retrained exactly. ``device``:
    a torch.device, or auto, cpu, cuda or cuda:N."""
    from explorer.measure import as_device
    from explorer.output import analyse_trial
    from explorer.study import artifact_store, check_code

    data = load(name, storage)
    check_code(data.study.user_attrs, data.study.spec)
    return analyse_trial(
        data.records,
        data.study.spec,
        data.study.url,
        which,
        as_device(device),
        out or Path("reports") / f"{name}-heads",
        force=force,
        store=artifact_store(data.study, artifacts),
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
    :mod:`explorer.answer._compare_fronts`. Returns the table, the files and each study's answer (the one its report
    names). Every study is read before anything is written."""
    from explorer.answer import compare_fronts
    from explorer.output import write_compare
    from explorer.storage import Role

    if len(names) < 2:
        raise ConfigError(f"compare needs at least two studies, got {len(names)}; name two or more.")
    twice = sorted({n for n in names if list(names).count(n) > 1})
    if twice:
        raise ConfigError(f"study {twice[0]!r} is named twice; name each study once.")
    studies, answers = [], {}
    for name in names:
        data = load(name, storage)
        if not any(r.finished and r.role == Role.SEARCH for r in data.records):
            raise NoCompletedTrialsError(
                f"study {name!r} has no completed search trial to compare; run it first."
            )
        studies.append((name, data.records))
        answers[name] = data.answer
    df = compare_fronts(studies)
    return df, write_compare(df, out or Path("reports") / ("compare-" + "-".join(names)), force), answers
