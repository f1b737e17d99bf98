"""The spec's ``[finalists]`` and ``[answer]`` tables: how the evidence behind the answer is gathered and judged.

After the search, the *finalists* (the search's knee and its neighbours, reference layouts and the ladder of
uniform head counts; :mod:`explorer.insight.finalists` chooses them) are trained on a grid of *units*: ``seeds``
replicates, each cutting the task's labelled examples into ``folds`` stratified folds afresh
(:func:`explorer.engine.tasks.folds.fold_task`), each fold trained once per layout with one seed that every layout
shares. Every run trains a fixed schedule of ``epochs`` epochs (warm-up, then cosine decay), the same for every
layout, so no run is longer or shorter than another for reasons of its own.

The runs are spent where they decide (:func:`explorer.insight.rule.next_cells`): every finalist first trains on
``start`` units; then, a few paired units at a time, only the layouts whose comparisons still decide the answer
get more, until it is decided or the stage's ``budget`` of runs (or ``minutes``) is spent.

``[answer]`` says what counts as "as good" and how sure the claim must be: the answer is the fastest layout
whose probability of being within ``margin`` of the best is at least ``1 - risk``
(:mod:`explorer.insight.rule`), latencies closer than ``latency_tie`` (a ratio) counting as equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from explorer.engine.config import MAX_FOLDS
from explorer.engine.limits import TRIALS
from explorer.errors import SpecError
from explorer.search.goals import TaskSpec
from explorer.search.spec_keys import SPEC_KEYS
from explorer.search.toml_table import Table

__all__ = ["AnswerSpec", "FinalistsSpec", "read_answer", "read_finalists"]
LEGACY_FINALIST_KEYS = ("max_epochs", "patience")  # plateau training, before the fixed schedule
LEGACY_ANSWER_KEYS = ("alpha",)  # the error of the equivalence tests, before the rule weighed latency


@dataclass(frozen=True)
class FinalistsSpec:
    """The evidence stage: which layouts are retrained after the search, on which grid of folds and seeds."""

    enabled: bool = True
    top: int = 2  # front architectures nearest the search's knee (the knee included)
    references: bool = True  # 1 head, 8 (8-16) heads per layer and the next faster front layout
    # every head count of the space, the same in each layer, at the knee's width and depth
    ladder: bool = True
    # replicates' worth of runs: the stage's default budget is seeds x folds runs for every finalist layout
    seeds: int = 2
    # cross-validation folds of the labelled examples; 1 keeps the task's fixed split (a language model's default)
    folds: int = 5
    epochs: int | None = None  # the fixed schedule of every run; None: 2 x [task] epochs
    timing_rounds: int = 3  # interleaved re-timing rounds of every finalist, with no training running
    start: int = 3  # paired units every finalist trains before any is set aside
    budget: int | None = None  # finalist runs in all; None: seeds x folds for every finalist layout
    minutes: float | None = None  # no new round of finalist runs starts after this many minutes of the stage

    def run_epochs(self, search_epochs: int) -> int:
        """Epochs every evidence run trains."""
        return self.epochs or 2 * search_epochs

    @property
    def units(self) -> int:
        """Runs per layout in the default budget: one per fold of each replicate."""
        return self.seeds * self.folds

    def runs_budget(self, layouts: int) -> int:
        """The stage's budget of runs for ``layouts`` finalist layouts."""
        return self.budget if self.budget is not None else self.units * layouts


@dataclass(frozen=True)
class AnswerSpec:
    """What "as good as the best" means, and how sure the claim must be."""

    margin: float | None = None  # accuracy points, or bits per byte; None: the metric's default
    # the largest probability accepted that the answer is more than the margin below the best
    risk: float = 0.05
    latency_tie: float = 0.05  # latencies whose within-round ratio is closer to 1 than this are equal

    def margin_for(self, maximize: bool) -> float:
        """The margin on the quality's own scale: a fraction of examples for accuracy, bits per byte else."""
        if maximize:
            return (1.0 if self.margin is None else self.margin) / 100.0
        return 0.02 if self.margin is None else self.margin


def read_finalists(data: Any, task: TaskSpec, stored: bool = False) -> FinalistsSpec:
    """The ``[finalists]`` table. A stored spec of an older study (``stored``) may carry the plateau-training
    keys, which are dropped; such a spec has no ``folds``, and keeps the task's fixed split (``folds = 1``)."""
    data = dict(data) if isinstance(data, dict) else data
    if isinstance(data, dict):
        legacy = [k for k in LEGACY_FINALIST_KEYS if k in data]
        if legacy and not stored:
            raise SpecError(
                f"{legacy[0]!r} in [finalists] is gone: evidence runs now train a fixed schedule; write "
                "epochs = N instead (and remove patience)."
            )
        old_cap = data.pop("max_epochs", None)
        data.pop("patience", None)
        if stored and "folds" not in data:
            data["folds"] = 1
            if old_cap is not None and "epochs" not in data:
                data["epochs"] = old_cap
    t = Table(data, "[finalists]", SPEC_KEYS["finalists"])
    spec = FinalistsSpec(
        enabled=t.flag("enabled", True),
        top=t.integer("top", 2, low=0),
        references=t.flag("references", True),
        ladder=t.flag("ladder", True),
        seeds=t.integer("seeds", 2),
        folds=t.integer("folds", 1 if task.kind == "language_model" else 5),
        epochs=t.integer("epochs", None),
        timing_rounds=t.integer("timing_rounds", 3),
        start=t.integer("start", 3),
        budget=t.integer("budget", None),
        minutes=t.number("minutes", None, low=0.1, high=10_000.0),
    )
    if not stored:  # every finalist layout trains seeds x folds runs: counted before anything is queued
        TRIALS.check(spec.units, "the runs per finalist layout ([finalists] seeds x folds)", "lower seeds or folds")
        if spec.budget is not None:
            TRIALS.check(spec.budget, "[finalists] budget", "lower it")
    if spec.folds > MAX_FOLDS:
        raise SpecError(f"'folds' in [finalists] is {spec.folds}; at most {MAX_FOLDS} folds are allowed.")
    if spec.folds > 1 and task.kind == "language_model":
        raise SpecError(
            f"'folds' in [finalists] is {spec.folds}, but {task.name!r} is a language model, whose contiguous "
            "text is not cut into folds; set folds = 1."
        )
    return spec


def read_answer(data: Any, task: TaskSpec, stored: bool = False) -> AnswerSpec:
    """The ``[answer]`` table. A stored spec of an older study (``stored``) may carry ``alpha``, which is
    dropped (its answer is read under today's rule)."""
    if isinstance(data, dict) and "alpha" in data:
        if not stored:
            raise SpecError(
                "'alpha' in [answer] is gone: the answer is now the fastest layout within the margin at a stated "
                "risk; write risk = 0.05 (the largest probability accepted that it lies beyond the margin)."
            )
        data = {k: v for k, v in data.items() if k not in LEGACY_ANSWER_KEYS}
    t = Table(data, "[answer]", SPEC_KEYS["answer"])
    unit = "accuracy points (1 = one point)" if task.kind != "language_model" else "bits per byte"
    margin = t.get("margin", None, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and
                   0 < v < (100 if task.kind != "language_model" else 8), f"a positive number of {unit}")  # fmt: skip
    return AnswerSpec(
        margin=None if margin is None else float(margin),
        risk=t.number("risk", 0.05, low=1e-4, high=0.5),
        latency_tie=t.number("latency_tie", 0.05, low=0.0, high=1.0),
    )
