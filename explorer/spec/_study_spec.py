"""The study spec's schema: :class:`StudySpec`, whose fields are the spec's top-level keys and tables.

Each key is declared once, as a field made by :func:`explorer.fields.key` here or in its table's dataclass
(:class:`TaskSpec`, :class:`SpaceSpec`, ...); :mod:`explorer.spec._spec` reads a TOML document into it,
:mod:`explorer.spec._keys` lists its keys and :mod:`explorer.spec._docs` writes docs/spec.md's key
tables from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from explorer.fields import key
from explorer.layout import DecodeConfig, LatencyConfig, SpaceSpec
from explorer.limits import TRIALS
from explorer.measurements import QualityMetric, quality_metric
from explorer.spec._evidence_spec import AnswerSpec, FinalistsSpec
from explorer.spec._fidelity import EarlyStoppingSpec
from explorer.spec._goals import BudgetsSpec, ModelSpec, ObjectivesSpec, TaskSpec
from explorer.spec._tracking_spec import TrackingSpec

SAMPLERS = ("tpe", "nsga2", "gp", "random", "qmc")
_STORAGE = "see [Storage](studies.md#storage)"


@dataclass(frozen=True, kw_only=True)
class StudySpec:
    """One study: what to search, on which task, how to measure it and where to store it.

    The fields are in the order the spec's keys are listed (docs/spec.md, ``explorer spec show``): the top-level
    keys, then the tables."""

    name: str = key(
        doc="the study's name: letters, digits, `-`, `_`, `.`, not starting with `.`; also names the default "
        "database"
    )
    # None: sqlite:///studies/<name>.db (search.storage.default_storage_url)
    storage: str | None = key(
        None,
        "any SQLAlchemy URL (PostgreSQL for many workers and machines); never stored with the study; `--storage` "
        "and `$EXPLORER_STORAGE` take precedence",
        shown=_STORAGE,
    )
    # artifact location (weights, figures); None: $EXPLORER_ARTIFACTS or the default
    artifacts: str | None = key(
        None,
        "where trained weights and report figures go: a folder, `file://PATH`, `s3://BUCKET` (s3 extra) or "
        "`gs://BUCKET` (gcs extra); `--artifacts` and `$EXPLORER_ARTIFACTS` take precedence",
        shown=_STORAGE,
    )
    n_trials: int = key(
        doc="search trials: each evaluates one architecture not evaluated before, with one seed; the study's total "
        "across resumes and workers",
        cap=TRIALS,
    )
    timeout: float | None = key(None, "seconds after which a `study run` starts no new trial")
    sampler: str = key(
        "tpe", "`tpe`, `nsga2`, `gp`, `random`, or `qmc` (covers a small space evenly)", choices=SAMPLERS
    )
    seed: int = key(
        0,
        "the study's seed block: every training seed and fold cut (two seeds share none), and the base of the "
        "sampler's seed, to which each worker and each resumed run adds a stream of its own, so two runs of one "
        "spec may search different architectures (`qmc`'s points take the seed alone); a finalist layout trains "
        "on the same seeds and folds in both",
        lo=0,
    )
    # the attention benchmark, once per study (the "merged heads are faster" rule)
    bench: bool = key(
        True, 'time serial, merged and fused attention once per study (the "merged heads are faster" rule)'
    )
    objectives: ObjectivesSpec = key(ObjectivesSpec(), table=True)
    task: TaskSpec = key(table=True)
    model: ModelSpec = key(ModelSpec(), table=True)  # explorer's own model, or the user's [model] build
    space: SpaceSpec = key(table=True)
    latency: LatencyConfig = key(LatencyConfig(), table=True)
    # where decoding latency is measured; None: not measured
    decode: DecodeConfig | None = key(None, table=True)
    budgets: BudgetsSpec = key(BudgetsSpec(), table=True)
    early_stopping: EarlyStoppingSpec = key(EarlyStoppingSpec(), table=True)
    finalists: FinalistsSpec = key(FinalistsSpec(), table=True)
    answer: AnswerSpec = key(AnswerSpec(), table=True)
    # where the study is also logged (MLflow); not its meaning
    tracking: TrackingSpec = key(TrackingSpec(), table=True)
    # (dotted key, "file" | "override") for each key its document set (explorer.spec._overrides); not stored
    # in the spec, not compared: where a value came from is not what it means
    origin: tuple[tuple[str, str], ...] = dataclasses.field(default=(), compare=False, repr=False)

    @property
    def metric(self) -> QualityMetric:
        """How the task is scored: validation accuracy (maximized) or bits per byte (minimized)."""
        return quality_metric(self.task.kind)

    def objective_names(self) -> list[str]:
        """The objectives in the order of a trial's values."""
        quality = "accuracy" if self.metric.name == "val_accuracy" else "bpb"
        extra = (["params"] if self.objectives.params else []) + (
            ["decode"] if self.objectives.decode else []
        )
        return [quality, "latency", *extra]

    def directions(self) -> list[Literal["minimize", "maximize"]]:
        """Optuna directions, one per objective (the quality's from the task kind, every other minimized)."""
        quality: Literal["minimize", "maximize"] = (
            "maximize" if self.metric.direction == "maximize" else "minimize"
        )
        return [quality] + ["minimize"] * (len(self.objective_names()) - 1)

    def to_dict(self) -> dict[str, Any]:
        """A canonical, JSON-ready dict that :func:`explorer.spec._spec.spec_from_dict` reads back into an
        equal spec."""
        d: dict[str, Any] = _plain(dataclasses.asdict(self))
        d.pop("origin", None)
        return d

    def stored(self) -> dict[str, Any]:
        """What is stored with the study: :meth:`to_dict` without ``storage`` (a URL may hold a password, and
        where the study lives is not part of what it means)."""
        d = self.to_dict()
        d.pop("storage", None)
        return d


def _plain(value: Any) -> Any:
    """Tuples to lists and unset (None) keys dropped, recursively, so that the dict survives JSON."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
