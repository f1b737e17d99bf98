"""The spec's ``[finalists]`` and ``[answer]`` tables: how the evidence behind the answer is gathered and judged.

After the search, the *finalists* (the search's knee and its neighbours, reference layouts and the ladder of
uniform head counts; :mod:`explorer.answer._finalists` chooses them) are trained on a grid of *units*: ``seeds``
replicates, each cutting the task's labelled examples into ``folds`` stratified folds afresh
(:func:`explorer.data._folds.fold_task`), each fold trained once per layout with one seed that every layout
shares. Every grid run trains the same fixed schedule (warm-up, then cosine decay) of the stage's *horizon*, so
no run is longer or shorter than another for reasons of its own; the horizon is ``epochs``, doubled while a pilot
shows that training twice as long changes the comparison between its layouts (or, with ``horizon_by = "gain"``,
still gains; :mod:`explorer.answer._horizon`), up to ``horizon_cap``. Once the
answer is decided, its deciding comparisons train again at twice the horizon on ``check_units`` units.

The runs are spent where they decide (:func:`explorer.answer._rule.next_cells`): every finalist first trains on
``start`` units; then, a few paired units at a time, only the layouts whose comparisons still decide the answer
get more, until it is decided or the stage's ``budget`` of runs (or ``minutes``) is spent.

``[answer]`` says what counts as "as good" and how sure the claim must be: the answer is the fastest layout
whose probability of being within ``margin`` of the best is at least ``1 - risk``
(:mod:`explorer.answer._rule`), latencies closer than ``latency_tie`` (a ratio) counting as equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from explorer.errors import SpecError
from explorer.fields import key
from explorer.layout import MAX_FOLDS
from explorer.limits import EPOCHS, TRIALS
from explorer.spec._goals import TaskSpec
from explorer.spec._toml import Table, is_number, read_table, table_keys

LEGACY_FINALIST_KEYS = ("max_epochs", "patience")  # plateau training, before the fixed schedule
LEGACY_ANSWER_KEYS = ("alpha",)  # the error of the equivalence tests, before the rule weighed latency


@dataclass(frozen=True)
class FinalistsSpec:
    """The evidence stage: which layouts are retrained after the search, on which grid of folds and seeds."""

    enabled: bool = key(True, "run the stage after the search")
    top: int = key(2, "front architectures nearest the search's knee (the knee included)", lo=0, cap=TRIALS)
    # 1 head, 8 (8-16) heads per layer and the next faster front layout
    references: bool = key(
        True,
        "1 head and the tutorial's 8 (or the nearest valid count in 8-16) heads per layer at the knee's width and "
        "depth, and the next faster front layout; a key/value study adds multi-head and multi-query attention",
    )
    ladder: bool = key(
        True, "every head count of the space, the same in each layer, at the knee's width and depth"
    )
    # replicates' worth of runs: the stage's default budget is seeds x folds runs for every finalist layout
    seeds: int = key(
        2,
        "the stage's default budget, in replicates: `seeds x folds` runs for every finalist layout, spent where "
        "they decide; a replicate cuts the folds afresh, and on a unit (a fold of a replicate) every layout "
        "trains with the same seed",
        cap=TRIALS,
    )
    # cross-validation folds of the labelled examples; 1 keeps the task's fixed split (a language model's default)
    folds: int = key(
        5,
        "cross-validation folds of the task's labelled examples (the test split kept apart); `1` keeps the "
        "task's fixed split",
        shown="`5` (a language model: `1`)",
    )
    # the first horizon of every run; None: 2 x [task] epochs
    epochs: int | None = key(
        None,
        "the first horizon: every finalist run trains a fixed schedule of this many epochs (warm-up, then cosine "
        "decay), doubled while the pilot shows that twice as long changes what the grid measures (`pilot`)",
        shown="`2 x [task] epochs`",
        cap=EPOCHS,
    )
    pilot: bool = key(
        True,
        "before the grid, the most accurate and the fastest finalist layouts train the first units at the horizon "
        "and at twice it, and the horizon doubles (up to `horizon_cap`) while twice as long changes what the "
        "grid measures (`horizon_by`); `false`: every run trains `epochs`",
    )
    horizon_by: str = key(
        "comparison",
        "what a doubling must change for the pilot to take it: `comparison`, the paired difference between the "
        "pilot's layouts (a two-sided 90% paired t interval of its change that excludes zero: longer runs compare "
        "them differently); `gain`, any layout's accuracy (a one-sided 95% paired t bound of the gain above "
        "zero, or a mean gain above [answer] edge)",
        choices=("comparison", "gain"),
    )
    # None: 4 x the first horizon (within the epochs limit)
    horizon_cap: int | None = key(
        None, "the longest horizon the pilot may choose", shown="`4 x epochs`", cap=EPOCHS
    )
    check_units: int = key(
        3,
        "paired units on which the comparisons that decide the answer (against the best, and against the next "
        "faster layout) train again at twice the horizon; the report says whether the verdict holds there, and "
        "a verdict the longer runs contradict is no answer; `0` skips the check",
        lo=0,
        cap=TRIALS,
    )
    # interleaved re-timing rounds of every finalist, with no training running
    timing_rounds: int = key(
        3,
        "interleaved re-timing rounds of every finalist, each in a fresh process, before the finalists train (so "
        "the rounds say which layouts are faster)",
        cap=TRIALS,
    )
    start: int = key(
        3,
        "paired units every finalist trains first; then rounds of paired units (2, or half the units the layouts "
        "have if more) go only to the layouts whose comparisons still decide the answer",
    )
    # None: seeds x folds for every finalist layout
    budget: int | None = key(
        None,
        "finalist runs in all; the stage stops earlier once the answer is decided",
        shown="`seeds x folds` runs a layout",
    )
    minutes: float | None = key(
        None,
        "no new round of finalist runs starts after this many minutes of the stage (`explorer confirm "
        "--until-decided --budget N` spends its N runs whatever this says)",
        lo=0.1,
        hi=10_000.0,
    )

    def run_epochs(self, search_epochs: int) -> int:
        """The first horizon: epochs every evidence run trains unless the pilot doubles it."""
        return self.epochs or 2 * search_epochs

    def cap_epochs(self, search_epochs: int) -> int:
        """The longest horizon the pilot may choose."""
        first = self.run_epochs(search_epochs)
        return max(first, self.horizon_cap or min(4 * first, EPOCHS.value()))

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

    # accuracy points, or bits per byte; None: the metric's default (bounded by the metric: read_answer)
    margin: float | None = key(
        None,
        'how far below the best a layout may be and still be "as good"',
        shown="`1.0` accuracy point (`0.02` bits per byte for a language model)",
    )
    # the largest probability accepted that the answer is more than the margin below the best
    risk: float = key(
        0.05,
        "the answer is the fastest layout whose probability of lying within the margin of the best is at least "
        "`1 - risk` (see [method.md](method.md#3-the-answer-the-fastest-layout-within-the-margin))",
        lo=1e-4,
        hi=0.5,
    )
    latency_tie: float = key(
        0.05,
        "layouts whose time ratio (within a re-timing round) is closer to 1 than this are equally fast; the more "
        "accurate of a tie is taken",
        lo=0.0,
        hi=1.0,
    )
    # on the margin's scale; None: a quarter of the margin (bounded by the margin: read_answer)
    edge: float | None = key(
        None,
        "the indifference zone: a layout the best beats by more than `margin - edge` (with probability `1 - risk`) "
        "is *at the margin's edge* and stops holding the decision open, so every comparison ends within a number "
        "of runs its spread sets; `0` turns it off (see [method.md](method.md#3-the-answer-the-fastest-layout-within"
        "-the-margin))",
        shown="a quarter of the margin",
    )
    # on the margin's scale; None: half the margin, never below the edge (bounded by the margin: read_answer)
    settle: float | None = key(
        None,
        "the indifference zone once the finalist stage's budget is spent (its minutes, from its first run to its "
        "last, or its runs): the decision then takes a layout the best beats by more than `margin - settle` as at "
        "the margin's edge, so a stage that could not sharpen its verdicts to `edge` still decides where its "
        "evidence allows; the answer's own risk is unchanged (see [method.md](method.md#3-the-answer-the-fastest-"
        "layout-within-the-margin))",
        shown="half the margin (`0` when `edge = 0`)",
    )

    def margin_for(self, maximize: bool) -> float:
        """The margin on the quality's own scale: a fraction of examples for accuracy, bits per byte else."""
        if maximize:
            return (1.0 if self.margin is None else self.margin) / 100.0
        return 0.02 if self.margin is None else self.margin

    def edge_for(self, maximize: bool) -> float:
        """The indifference zone on the quality's own scale (a quarter of the margin unless given)."""
        if self.edge is None:
            return self.margin_for(maximize) / 4
        return self.edge / 100.0 if maximize else self.edge

    def settle_for(self, maximize: bool) -> float:
        """The indifference zone once the stage's budget is spent, on the quality's own scale (half the margin
        unless given, none when the edge is turned off; never below :meth:`edge_for`)."""
        if self.settle is None:
            return 0.0 if self.edge == 0 else max(self.margin_for(maximize) / 2, self.edge_for(maximize))
        return max(self.settle / 100.0 if maximize else self.settle, self.edge_for(maximize))


def read_finalists(
    data: Any, task: TaskSpec, stored: bool = False, fixed_split: bool = False
) -> FinalistsSpec:
    """The ``[finalists]`` table. A stored spec of an older study (``stored``) may carry the plateau-training
    keys, which are dropped; such a spec has no ``folds``, and keeps the task's fixed split (``folds = 1``).
    ``fixed_split``: the model was trained before the study (``[model] pretrained``), on the task's training
    split, so folds cut from it would validate on examples it learned: the fixed split is kept."""
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
    if isinstance(data, dict) and "folds" not in data and task.kind == "language_model":
        data = {**data, "folds": 1}  # a language model's contiguous text keeps its fixed split
    if fixed_split and isinstance(data, dict):
        if data.get("folds", 1) != 1 and not stored:
            raise SpecError(
                f"'folds' in [finalists] is {data['folds']!r}, and a [model] pretrained checkpoint has learned the "
                "task's training split, which folds would validate on; remove folds (the fixed split is kept)."
            )
        data = {**data, "folds": 1}
    spec = read_table(FinalistsSpec, data, "[finalists]")
    if not stored:  # every finalist layout trains seeds x folds runs: counted before anything is queued
        TRIALS.check(
            spec.units, "the runs per finalist layout ([finalists] seeds x folds)", "lower seeds or folds"
        )
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
    lm = task.kind == "language_model"
    unit = "bits per byte" if lm else "accuracy points (1 = one point)"
    margin = Table(data, "[answer]", table_keys(AnswerSpec)).get(
        "margin", None, lambda v: is_number(v) and 0 < v < (8 if lm else 100), f"a positive number of {unit}"
    )
    edge = Table(data, "[answer]", table_keys(AnswerSpec)).get(
        "edge", None, lambda v: is_number(v) and v >= 0, f"a number of {unit} >= 0, below the margin"
    )
    settle = Table(data, "[answer]", table_keys(AnswerSpec)).get(
        "settle", None, lambda v: is_number(v) and v >= 0, f"a number of {unit} >= 0, below the margin"
    )
    spec = read_table(
        AnswerSpec,
        data,
        "[answer]",
        margin=None if margin is None else float(margin),
        edge=None if edge is None else float(edge),
        settle=None if settle is None else float(settle),
    )
    margin_value = spec.margin_for(not lm) * (1 if lm else 100)  # on the scale the spec writes
    if spec.edge is not None and spec.edge >= margin_value:
        raise SpecError(
            f"'edge' in [answer] is {spec.edge:g}, not below the margin; the indifference zone lies inside the "
            "margin: write a smaller edge (0 turns it off)."
        )
    if spec.settle is not None and spec.settle >= margin_value:
        raise SpecError(
            f"'settle' in [answer] is {spec.settle:g}, not below the margin; the indifference zone lies inside the "
            "margin: write a smaller settle (at most the edge keeps the edge once the budget is spent)."
        )
    return spec
