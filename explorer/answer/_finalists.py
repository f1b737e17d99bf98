"""Which architectures the finalist stage retrains, and with which seeds.

After the search, the answer rests on single short runs. The finalist plan picks the search's knee (the
accuracy/latency front's knee among feasible architectures within the budgets), the front architectures nearest
it, and three references at the knee's width and depth: one head per layer (the tutorial's "one head is not
enough"), the tutorial's default of 8 heads per layer (or the nearest valid count in 8-16), and the next faster
layout on the front (what a little less latency would cost). The ladder adds every head count of the space, the
same in each layer, at the knee's width and depth: whatever one run's search happened to find, every run of the
study at that base compares the same uniform layouts. A study that searches key/value heads adds two more at
the knee's heads, width and depth: multi-head attention (kv_heads = heads) and multi-query attention
(kv_heads = 1), the two ends grouped-query attention sits between. Each first trains on the grid's first
``[finalists] start`` units (:func:`unit_at`: folds of replicates, one seed per unit shared by every layout);
:func:`next_runs` then spends the stage's budget where the answer is still open, in rounds of paired units sized
to what decides (:func:`explorer.answer._rule.next_cells`); :func:`next_round_size` says what the next round
needs when the budget left cannot hold it. The plan and every round are pure functions of the study's records,
so planning again after a resume queues only what is new.

The knee is taken on quality against forward latency, or against decoding time per token where the spec makes
decoding an objective (:func:`cost_axis`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from explorer.answer._evidence_grid import evidence_grid
from explorer.answer._forecast import Forecast, forecast
from explorer.answer._horizon import Horizon, at_horizon, check_layouts
from explorer.answer._pareto import knee, normalize, pareto_front
from explorer.answer._rule import Rule, decide, next_cells, open_comparisons, ratio, smallest_round
from explorer.answer._tables import Architecture, CostAxis, architecture_table, architectures, decode_only
from explorer.layout import (
    UNIT_OFFSET,
    FinalistRun,
    ModelConfig,
    Purpose,
    fold_seed,
    head_counts,
    unit_seed,
    valid_heads,
)
from explorer.spec import MB, StudySpec
from explorer.storage import Retiming, Role, TrialRecord, arch_key

KV_REFERENCES = ("multi-head", "multi-query")  # the labels of a kv study's two extra references

DEFAULT_HEADS = (8, 16)  # the tutorial's "8-16 heads usually suffice; start at 8"


ROUND_UNITS = 2  # paired units a round of the finalist stage adds at least to each layout it goes to


@dataclass(frozen=True)
class FinalistPlan:
    runs: tuple[FinalistRun, ...]  # the first runs: every layout on its first units
    knee: Architecture | None  # the search's knee
    notes: tuple[str, ...] = field(default_factory=tuple)  # references that could not be built, and why
    layouts: tuple[FinalistRun, ...] = ()  # one run per finalist layout, on unit 0: what every round copies
    budget: int = 0  # the stage's runs in all
    start: int = (
        0  # the units every layout trains first: [finalists] start, or fewer when the budget is smaller
    )
    horizon: Horizon | None = None  # the grid's horizon (None: not chosen yet; the runs carry none)

    @property
    def keys(self) -> list[str]:
        return [arch_key(r.config, r.lr) for r in self.layouts]

    def at(self, horizon: Horizon) -> FinalistPlan:
        """This plan with its runs at ``horizon``'s epochs."""
        runs = tuple(dataclasses.replace(r, epochs=horizon.epochs) for r in self.runs)
        return dataclasses.replace(self, runs=runs, horizon=horizon)

    @property
    def epochs(self) -> int | None:
        return None if self.horizon is None else self.horizon.epochs

    def grid(self, records: Sequence[TrialRecord]) -> list[TrialRecord]:
        """``records`` without the finalist runs that are not the grid's (:func:`at_horizon`)."""
        return list(records) if self.horizon is None else at_horizon(records, self.horizon)


def cost_axis(spec: StudySpec) -> CostAxis:
    """What the knee trades quality against: ``decode`` (ms per token) when decoding is an objective, else
    ``latency`` (the forward pass)."""
    return CostAxis.DECODE if spec.objectives.decode else CostAxis.LATENCY


def within_budgets(archs: Sequence[Architecture], spec: StudySpec) -> list[Architecture]:
    """The feasible architectures that meet the spec's budgets (and have the cost the knee is taken on)."""
    b = spec.budgets

    def ok(a: Architecture) -> bool:
        if a.cost(cost_axis(spec)) is None:
            return False
        if b.max_decode_ms is not None and (a.decode is None or a.decode.estimate > b.max_decode_ms):
            return False
        cache = a.kv_cache_bytes
        if b.max_kv_cache_mb is not None and cache is not None and cache / MB > b.max_kv_cache_mb:
            return False
        return (b.max_latency_ms is None or a.latency.estimate <= b.max_latency_ms) and (
            b.max_params is None or a.params <= b.max_params
        )

    return [a for a in archs if a.feasible and ok(a)]


@dataclass(frozen=True)
class Unit:
    """One cell of the evidence grid: a fold of a replicate, trained with one seed by every layout."""

    seed: int  # the training seed (init, data order), shared by every layout: the pairing
    fold: int | None  # the validation fold (None: the task's fixed split)
    folds: int
    fold_seed: int | None  # the seed that cut this replicate's folds


def unit_at(spec: StudySpec, u: int) -> Unit:
    """Unit ``u`` of the study's grid: fold ``u % folds`` of replicate ``u // folds``. Seeds come from the
    study's own block (:func:`explorer.layout._units.unit_seed`): unit ``u`` is the same whatever the number of
    units, so adding units later changes none."""
    k = spec.finalists.folds
    r, f = divmod(u, k)
    return Unit(
        unit_seed(spec.seed, u), None if k == 1 else f, k, None if k == 1 else fold_seed(spec.seed, r)
    )


def evidence_units(spec: StudySpec, seeds: int | None = None) -> list[Unit]:
    """The grid's first ``seeds`` replicates (the spec's by default) x the spec's folds."""
    seeds = spec.finalists.seeds if seeds is None else seeds
    return [unit_at(spec, u) for u in range(seeds * spec.finalists.folds)]


def _uniform(base: ModelConfig, heads: int) -> tuple[ModelConfig | None, str]:
    """``base`` with ``heads`` heads in every layer, under base's d_k floor if it allows, else none at all."""
    if heads not in valid_heads(base.d_model):
        return None, f"{heads} heads do not divide d_model {base.d_model}"
    floor = base.min_dk if heads in valid_heads(base.d_model, base.min_dk) else 1
    config = ModelConfig(
        d_model=base.d_model,
        heads=(heads,) * base.n_layers,
        min_dk=floor,
        mlp_ratio=base.mlp_ratio,
        dropout=base.dropout,
        attention=base.attention,
    )
    return config, ""


def with_kv(base: ModelConfig, kv: int | None) -> ModelConfig:
    """``base`` with ``kv`` key/value heads in every layer (None: kv_heads = heads, multi-head attention)."""
    return ModelConfig(
        d_model=base.d_model,
        heads=base.heads,
        min_dk=base.min_dk,
        mlp_ratio=base.mlp_ratio,
        dropout=base.dropout,
        attention=base.attention,
        kv_heads=None if kv is None else (kv,) * base.n_layers,
        head_dim=base.head_dim,
    )


def plan_finalists(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    top: int | None = None,
    seeds: int | None = None,
    retimings: Sequence[Retiming] = (),
) -> FinalistPlan:
    """The finalist layouts for the study's search so far, each on its first ``[finalists] start`` units, or on
    every unit of ``seeds`` replicates when ``seeds`` is given (a fixed grid: ``explorer confirm --seeds``);
    ``top`` overrides the spec's. The search's decoding times come from ``retimings`` where re-timed
    (explorer.study._retime)."""
    fs = spec.finalists
    top = fs.top if top is None else top
    pool = within_budgets(architectures(records, Role.SEARCH, retimings=decode_only(retimings)), spec)
    if not pool:
        return FinalistPlan((), None, ("no feasible search trial within the budgets has finished yet",))
    cost = cost_axis(spec).column
    table = architecture_table(pool)
    front = pareto_front(table, cost)
    by_key = {a.key: a for a in pool}
    knee_arch = by_key[knee(front, bounds=table, cost=cost)["key"]]
    picks: list[_Pick] = [(knee_arch, "knee")]
    picks += [(by_key[key], "front") for key in _nearest(front, table, cost, knee_arch.key)][
        : max(0, top - 1)
    ]
    notes: list[str] = []
    if spec.model.pretrained is not None:  # the original model always (so named), and cuts surgery can make
        original, *cuts = _pretrained_picks(knee_arch, front, by_key, spec, cost)
        picks = [original, *picks, *cuts]
    else:
        if fs.references:
            picks += _references(knee_arch, front, by_key, spec, cost, notes)
        if fs.ladder:  # the same uniform layouts in every run of the study, whatever its search found
            picks += _ladder(knee_arch.config, spec)
    layouts = _layouts(picks, knee_arch)
    budget = fs.runs_budget(len(layouts))
    # the first units, as many as the budget holds for every layout (a budget of fewer units a layout than
    # [finalists] start is spent on the first units alone)
    first = max(1, min(fs.start, budget // max(1, len(layouts))))
    units = range(first if seeds is None else seeds * fs.folds)
    runs = tuple(_on(layout, unit_at(spec, u)) for layout in layouts for u in units)
    return FinalistPlan(runs, knee_arch, tuple(notes), layouts, budget, first)


_Pick = tuple[Architecture | ModelConfig, str]  # a searched architecture or a built layout, and its label


def _nearest(front: pd.DataFrame, table: pd.DataFrame, cost: str, knee_key: str) -> list[str]:
    """The front's other architectures, nearest the knee first (normalized quality and cost)."""
    y = normalize(front, table, cost)
    at = y[(front["key"] == knee_key).to_numpy()][0]
    order = front.assign(_d=np.hypot(*(y - at).T)).sort_values(["_d", "number"])["key"].tolist()
    return [key for key in order if key != knee_key]


def _references(
    knee_arch: Architecture,
    front: pd.DataFrame,
    by_key: dict[str, Architecture],
    spec: StudySpec,
    cost: str,
    notes: list[str],
) -> list[_Pick]:
    """At the knee's width and depth: one head per layer, the tutorial's default, the next faster layout on
    the front and, where key/value heads are searched, multi-head and multi-query attention. A reference that
    cannot be built is noted in ``notes``."""
    base = knee_arch.config
    picks: list[_Pick] = []
    one, _ = _uniform(base, 1)
    if one is not None:
        picks.append((one, "1 head"))
    folk = next(
        (h for h in range(DEFAULT_HEADS[0], DEFAULT_HEADS[1] + 1) if h in valid_heads(base.d_model)), None
    )
    if folk is None:
        notes.append(f"no head count in 8-16 divides d_model {base.d_model}: no tutorial reference")
    else:
        config, _ = _uniform(base, folk)
        if config is not None:
            picks.append((config, f"{folk} heads"))
    faster = front[front[cost] < knee_arch.cost(cost_axis(spec)).estimate]  # type: ignore[union-attr]
    same_base = faster[(faster["d_model"] == base.d_model) & (faster["n_layers"] == base.n_layers)]
    if len(same_base):  # the fastest-first front: the last row is the one just faster than the knee
        picks.append((by_key[same_base["key"].iloc[-1]], "faster on the front"))
    if spec.space.kv_heads is not None:  # the two ends grouped-query attention sits between
        picks.append((with_kv(base, None), KV_REFERENCES[0]))
        picks.append((with_kv(base, 1), KV_REFERENCES[1]))
    return picks


def _cut(base: ModelConfig, spec: StudySpec, heads: int) -> ModelConfig:
    """A trained checkpoint cut to ``heads`` heads in every layer, each of ``base``'s width, served by the most
    key/value heads the space allows that divide them (all of them where the model groups none)."""
    kv = spec.space.kv_heads
    served = None if kv is None else max(k for k in kv if heads % k == 0)
    return ModelConfig(
        d_model=base.d_model,
        heads=(heads,) * base.n_layers,
        min_dk=base.min_dk,
        mlp_ratio=base.mlp_ratio,
        dropout=base.dropout,
        attention=base.attention,
        kv_heads=None if served is None else (served,) * base.n_layers,
        head_dim=base.d_k,
    )


def _pretrained_picks(
    knee_arch: Architecture, front: pd.DataFrame, by_key: dict[str, Architecture], spec: StudySpec, cost: str
) -> list[_Pick]:
    """For a trained checkpoint (``[model] pretrained``): the original model first (the space's most heads and
    key/value heads, which the spec requires to be the checkpoint's own) always; with ``references``, the next
    faster layout on the front; with ``ladder``, every head count of the space cut uniformly
    (:func:`_cut`)."""
    base, fs = knee_arch.config, spec.finalists
    picks: list[_Pick] = [(_cut(base, spec, max(spec.space.heads)), "original")]
    if fs.references:
        faster = front[front[cost] < knee_arch.cost(cost_axis(spec)).estimate]  # type: ignore[union-attr]
        if len(faster):
            picks.append((by_key[faster["key"].iloc[-1]], "faster on the front"))
    if fs.ladder:
        picks += [
            (_cut(base, spec, h), "1 head" if h == 1 else f"{h} heads") for h in sorted(spec.space.heads)
        ]
    return picks


def _ladder(base: ModelConfig, spec: StudySpec) -> list[_Pick]:
    """Every head count of the space, the same in each layer, at ``base``'s width and depth."""
    picks: list[_Pick] = []
    for h in head_counts(spec.space, base.d_model, base.min_dk, None):
        config, _ = _uniform(base, h)
        if config is not None:
            picks.append((config, "1 head" if h == 1 else f"{h} heads"))
    return picks


def _layouts(picks: Sequence[_Pick], knee_arch: Architecture) -> tuple[FinalistRun, ...]:
    """Each distinct pick (the first label of a configuration wins) as a run on unit 0; a built layout takes
    the knee's learning rate."""
    out: list[FinalistRun] = []
    seen: set[str] = set()
    for pick, label in picks:
        config, lr, source = (
            (pick.config, pick.lr, pick.numbers[0])
            if isinstance(pick, Architecture)
            else (pick, knee_arch.lr, None)
        )
        key = arch_key(config, lr)
        if key not in seen:
            seen.add(key)
            out.append(FinalistRun(config, lr, 0, label, source))
    return tuple(out)


def _on(
    layout: FinalistRun, unit: Unit, epochs: int | None = None, purpose: Purpose = Purpose.GRID
) -> FinalistRun:
    return FinalistRun(
        layout.config,
        layout.lr,
        unit.seed,
        layout.label,
        layout.source,
        unit.fold,
        unit.folds,
        unit.fold_seed,
        epochs,
        purpose,
    )


def pilot_layouts(
    plan: FinalistPlan, records: Sequence[TrialRecord], times: npt.NDArray[np.float64]
) -> list[int]:
    """The pilot's layouts (indices into the plan's): the most accurate by the search's runs of the finalist
    layouts (the knee where none was searched) and the fastest by the re-timing rounds."""
    scores: dict[str, list[float]] = {}
    for r in records:
        if r.role == Role.SEARCH and r.finished and r.quality is not None and r.key is not None:
            scores.setdefault(r.key, []).append(r.quality if r.metric.direction == "maximize" else -r.quality)
    searched = [(float(np.mean(scores[k])), -i) for i, k in enumerate(plan.keys) if k in scores]
    accurate = -max(searched)[1] if searched else 0
    medians = np.array([np.nanmedian(row) if np.isfinite(row).any() else np.inf for row in times])
    fastest = int(np.argmin(medians)) if len(medians) else accurate
    return sorted({accurate, fastest})


def pilot_runs(
    plan: FinalistPlan, layouts: Sequence[int], horizon: Horizon, spec: StudySpec
) -> tuple[FinalistRun, ...]:
    """The pilot's runs for the horizon under test: each pilot layout on the plan's first units, at the horizon
    and at twice it."""
    return tuple(
        _on(plan.layouts[i], unit_at(spec, u), epochs, Purpose.PILOT)
        for epochs in (horizon.epochs, 2 * horizon.epochs)
        for i in layouts
        for u in range(plan.start)
    )


def _next_faster(times: npt.NDArray[np.float64], answer: int, tie: float) -> int | None:
    """The slowest layout faster than ``answer`` by more than the latency tie (None: none is)."""
    quicker = [(r, i) for i in range(len(times)) if (r := ratio(times, i, answer)) < 1 / (1 + tie)]
    return max(quicker)[1] if quicker else None


def check_runs(
    plan: FinalistPlan,
    records: Sequence[TrialRecord],
    spec: StudySpec,
    times: npt.NDArray[np.float64],
    horizon: Horizon,
) -> tuple[FinalistRun, ...]:
    """The horizon check's runs (:mod:`explorer.answer._horizon`) once the grid has decided: the best, the answer
    and the next faster layout on the first ``[finalists] check_units`` units at twice the grid's horizon. None
    while the answer is open: the check tests a verdict, and the runs that decide it come first (the confirm that
    decides the answer runs its check)."""
    n = spec.finalists.check_units
    scores, _, settled = _stage_grid(plan, records, spec, times)
    if n == 0 or not scores.size:
        return ()
    rule = stage_rule(spec, settled)
    decision = decide(scores, times, rule)
    # nothing to check yet: an open comparison has no verdict that could fail to hold
    if not decision.decided:
        return ()
    faster = _next_faster(times, decision.answer, rule.tie)
    keys = plan.keys
    roles = check_layouts(
        keys[decision.answer], keys[decision.best], None if faster is None else keys[faster]
    )
    if not roles:
        return ()
    layouts = sorted({decision.best} | {keys.index(k) for _, k in roles})
    return tuple(
        _on(plan.layouts[i], unit_at(spec, u), horizon.check_epochs, Purpose.CHECK)
        for i in layouts
        for u in range(n)
    )


def finalist_times(
    keys: Sequence[str], retimings: Sequence[Retiming], axis: CostAxis = CostAxis.LATENCY
) -> npt.NDArray[np.float64]:
    """``[layouts, rounds]``: each layout's re-timed ms by round on the cost axis (NaN where not timed)."""
    by: dict[str, dict[int, float]] = {}
    for t in retimings:
        if t.kind is CostAxis(axis).timing:
            by.setdefault(t.key, {})[t.round] = t.latency.median_ms
    rounds = sorted({r for key in keys for r in by.get(key, {})})
    return np.array([[by.get(k, {}).get(r, np.nan) for r in rounds] for k in keys], dtype=float).reshape(
        len(keys), len(rounds)
    )


def busy_rounds(retimings: Sequence[Retiming], axis: CostAxis = CostAxis.LATENCY) -> set[int]:
    """The re-timing rounds on the cost axis taken while the machine was busy (a load average above its CPUs,
    in any of the round's timings)."""
    return {t.round for t in retimings if t.kind is CostAxis(axis).timing and t.latency.busy}


def rule_times(
    keys: Sequence[str], retimings: Sequence[Retiming], axis: CostAxis = CostAxis.LATENCY
) -> tuple[npt.NDArray[np.float64], set[int], bool]:
    """What the rule reads as the layouts' times: :func:`finalist_times` without the busy rounds
    (:func:`busy_rounds`) where the other rounds time every layout; with the busy rounds and whether they were
    left out."""
    busy = busy_rounds(retimings, axis)
    clean = [t for t in retimings if t.round not in busy]
    if busy:
        times = finalist_times(keys, clean, axis)
        if times.shape[1] and not np.isnan(times).all(axis=1).any():
            return times, busy, True
    return finalist_times(keys, retimings, axis), busy, False


def unit_grid(
    records: Sequence[TrialRecord], keys: Sequence[str], spec: StudySpec
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """The finished finalist runs of ``keys`` as (scores, ran): ``[layouts, units]`` by unit index (scores
    higher is better, NaN where a layout has no usable run; ``ran`` also marks the runs set apart as
    collapsed, which are never run again)."""
    grid = evidence_grid(records, keys, spec.metric)
    base = unit_seed(spec.seed, 0)
    index = [s - base for s in grid.seeds]
    width = max([u + 1 for u in index if 0 <= u < UNIT_OFFSET], default=0)
    scores = np.full((len(keys), width), np.nan)
    ran = np.zeros((len(keys), width), dtype=bool)
    for j, u in enumerate(index):
        if 0 <= u < width:
            scores[:, u] = grid.scores[:, j]
            ran[:, u] = grid.numbers[:, j] >= 0
    return scores, ran


def stage_rule(spec: StudySpec, settled: bool = False, start: int | None = None) -> Rule:
    """The rule as the spec states it, on the quality's scale; its edge is ``[answer] settle`` once the stage's
    budget is spent (``settled``: :func:`budget_spent`); ``start``: the units every layout trains first (the
    spec's ``[finalists] start``, or a plan's fewer)."""
    a, maximize = spec.answer, spec.metric.direction == "maximize"
    return Rule(
        margin=a.margin_for(maximize),
        risk=a.risk,
        tie=a.latency_tie,
        edge=a.settle_for(maximize) if settled else a.edge_for(maximize),
        start=spec.finalists.start if start is None else start,
        step=ROUND_UNITS,
    )


def budget_spent(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    scores: npt.NDArray[np.float64],
    times: npt.NDArray[np.float64],
    ran: npt.NDArray[np.bool_],
    budget: int,
) -> bool:
    """Whether the finalist stage's budget is spent, so its decision settles at ``[answer] settle``: its
    ``[finalists] minutes``, counted from its first run's start to its last run's end (the horizon check's runs
    aside), or its ``budget`` of runs, once the grid's runs (``ran``) leave less than the next round that decides
    at ``[answer] edge`` needs. A pure function of the records, so the stage and every later reading agree."""
    f = spec.finalists
    runs = [
        r
        for r in records
        if r.role == Role.FINALIST and r.purpose != Purpose.CHECK and r.started and r.completed
    ]
    if f.minutes is not None and runs:
        span = max(r.completed for r in runs if r.completed) - min(r.started for r in runs if r.started)
        if span.total_seconds() >= 60 * f.minutes:
            return True
    if not scores.size:
        return False
    need = smallest_round(scores, times, stage_rule(spec), ran)
    return need > 0 and int(ran.sum()) + need > budget


def _stage_grid(
    plan: FinalistPlan, records: Sequence[TrialRecord], spec: StudySpec, times: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], bool]:
    """The stage's grid as the rule reads it, (scores, ran) of :func:`unit_grid`, and whether its budget is spent
    (:func:`budget_spent`)."""
    scores, ran = unit_grid(plan.grid(records), plan.keys, spec)
    return scores, ran, budget_spent(records, spec, scores, times, ran, plan.budget)


def next_runs(
    plan: FinalistPlan,
    records: Sequence[TrialRecord],
    spec: StudySpec,
    times: npt.NDArray[np.float64],
    left: int,
) -> tuple[FinalistRun, ...]:
    """The next round of the finalist stage (see the module docstring): where the answer is still open, on the
    evidence the study's finished runs hold, at most ``left`` runs; none once the answer is decided or nothing
    fits. ``times``: ``[layouts, rounds]`` in the plan's order."""
    scores, ran, settled = _stage_grid(plan, records, spec, times)
    cells = next_cells(scores, times, stage_rule(spec, settled, plan.start), left, ran)
    return tuple(_on(plan.layouts[i], unit_at(spec, u), plan.epochs) for i, u in cells)


def next_round_size(
    plan: FinalistPlan, records: Sequence[TrialRecord], spec: StudySpec, times: npt.NDArray[np.float64]
) -> int:
    """The runs of the smallest round :func:`next_runs` would queue, whatever the budget left (0: the answer is
    decided)."""
    scores, ran, settled = _stage_grid(plan, records, spec, times)
    return smallest_round(scores, times, stage_rule(spec, settled, plan.start), ran)


def finalist_pace(records: Sequence[TrialRecord]) -> float | None:
    """Seconds of wall clock per finished finalist run: the time some finalist run was training (the union of
    their intervals, so the gaps between commands do not count) over the runs (None before two runs)."""
    spans = sorted(
        (r.started, r.completed)
        for r in records
        if r.role == Role.FINALIST and r.finished and r.started is not None and r.completed is not None
    )
    if len(spans) < 2:
        return None
    busy, (start, end) = 0.0, spans[0]
    for s, e in spans[1:]:
        if s > end:
            busy += (end - start).total_seconds()
            start, end = s, e
        else:
            end = max(end, e)
    busy += (end - start).total_seconds()
    return busy / len(spans)


def stage_forecast(
    scores: npt.NDArray[np.float64],
    ran: npt.NDArray[np.bool_],
    times: npt.NDArray[np.float64],
    spec: StudySpec,
    settled: bool,
    budget: int,
    pace_s: float | None,
) -> Forecast | None:
    """What deciding costs from the unit grid ``scores`` (:func:`unit_grid`) under the stage's rule
    (:func:`explorer.answer._forecast.forecast`; None: fewer than two units a layout)."""
    return forecast(scores, times, ran, stage_rule(spec, settled), budget, pace_s)


@dataclass(frozen=True)
class Outlook:
    """Where the stage stands after a round: the comparisons still open, and what deciding costs from here."""

    open: int  # comparisons the rule still has open (0: decided)
    forecast: Forecast | None  # None: decided, or fewer than two units a layout

    @property
    def runs(self) -> int | None:
        """The runs to ask for (the forecast's 80th percentile; 0: decided; None: unknown or unaffordable)."""
        if self.open == 0:
            return 0
        return None if self.forecast is None else self.forecast.likely


def stage_outlook(
    plan: FinalistPlan, records: Sequence[TrialRecord], spec: StudySpec, times: npt.NDArray[np.float64]
) -> Outlook:
    """The stage's :class:`Outlook` on its grid (the rule's settings as :func:`next_runs` reads them)."""
    scores, ran, settled = _stage_grid(plan, records, spec, times)
    if not scores.size:
        return Outlook(0, None)
    decision = decide(scores, times, stage_rule(spec, settled))
    if decision.decided:
        return Outlook(0, None)
    found = stage_forecast(scores, ran, times, spec, settled, plan.budget, finalist_pace(records))
    return Outlook(max(1, len(open_comparisons(decision))), found)
