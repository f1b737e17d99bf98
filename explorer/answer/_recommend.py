"""The head-count answer: one function, :func:`answer`, that every command naming "the answer" calls.

With finalist runs (the evidence grid: every finalist layout trained on the same paired units,
:mod:`explorer.answer._evidence_grid`), the answer is the fastest layout whose probability of being within the spec's
``[answer] margin`` of the best is at least ``1 - risk`` (:mod:`explorer.answer._rule`); its confidence is that
probability. Every other candidate is *within* the margin too (slower), *beyond* it, or *undecided*, with the
paired units that would decide it from its measured spread. A study in which no layout beats the task's chance
level beyond noise has no answer.

Without finalist runs the answer is the search's knee (one short run per architecture), marked provisional: no
class, no confidence. Quality is the task's metric (accuracy, or bits per byte for a language model: lower is
better); the latency is the forward pass, or decoding time per token where the spec makes decoding an objective.
Pure functions over records.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TypedDict

import numpy as np
import numpy.typing as npt
from scipy import stats

from explorer.answer._answer import Answer, Candidate, Evidence, Picks, cost_estimate, next_faster
from explorer.answer._contrasts import Costs, contrasts, versus
from explorer.answer._evidence_grid import Collapse, Grid, evidence_grid
from explorer.answer._finalists import (
    budget_spent,
    cost_axis,
    finalist_pace,
    rule_times,
    stage_forecast,
    stage_rule,
    unit_grid,
    within_budgets,
)
from explorer.answer._horizon import (
    Horizon,
    Shift,
    at_horizon,
    choose_horizon,
    horizon_check,
    unplateaued,
)
from explorer.answer._pareto import knee, pareto_front
from explorer.answer._rule import Decision, Verdict, coherent, decide, ratio, units_to_decide
from explorer.answer._tables import Architecture, CostAxis, architecture_table, architectures, decode_only
from explorer.spec import StudySpec
from explorer.storage import Retiming, Role, TrialRecord


def _knee_of(
    archs: Sequence[Architecture], axis: CostAxis = CostAxis.LATENCY
) -> tuple[Architecture, list[Architecture]]:
    table = architecture_table(archs)
    front = pareto_front(table, CostAxis(axis).column)
    k = knee(front, bounds=table, cost=CostAxis(axis).column)
    by_key = {a.key: a for a in archs}
    return by_key[k["key"]], [by_key[key] for key in front["key"]]


def _picks(archs: Sequence[Architecture], axis: CostAxis = CostAxis.LATENCY) -> Picks:
    if not archs:
        return Picks(None, None, None)
    k, front = _knee_of(archs, axis)
    best = max(archs, key=lambda a: (a.score, -cost_estimate(a, axis)))
    return Picks(k, best, front[0])


def _times(
    archs: Sequence[Architecture], retimings: Sequence[Retiming], axis: CostAxis
) -> tuple[npt.NDArray[np.float64], list[str]]:
    """[layouts, rounds] re-timed ms on the cost axis as the rule reads them (:func:`rule_times`: without the
    rounds taken while the machine was busy, where the others time every layout), with a note saying so; one
    column of each layout's own estimate when any layout was not re-timed (rounds are then not comparable)."""
    times, busy, left_out = rule_times([a.key for a in archs], retimings, axis)
    notes = []
    if left_out:
        notes.append(
            f"{len(busy)} re-timing round(s) ran while the machine was busy (a load average above its CPUs) and "
            "are left out: the latency comparisons rest on the other rounds"
        )
    elif busy:
        notes.append(
            f"{len(busy)} re-timing round(s) ran while the machine was busy (a load average above its CPUs) and no "
            "other rounds time every layout: the latency comparisons rest on them and may be off"
        )
    if times.shape[1] and not np.isnan(times).all(axis=1).any():
        return times, notes
    return np.array([[cost_estimate(a, axis)] for a in archs], dtype=float), notes


def _heads(a: Architecture) -> str:
    """The layout's heads per layer, each with its key/value heads where they are fewer ("4/2,4/2"), so two layouts
    that differ only in their key/value heads are told apart."""
    c = a.config
    if c.kv_heads is None:
        return ",".join(map(str, c.heads))
    return ",".join(f"{h}/{k}" for h, k in zip(c.heads, c.kv_per_layer, strict=True))


def _learned(best: Architecture, chance: float, records: Sequence[TrialRecord]) -> bool:
    """Whether the best layout beats chance beyond noise: for accuracy, its correct predictions over every
    validation example of its runs against the chance rate (exact one-sided binomial test at 5%); for bits per
    byte, its mean's one-sided 95% bound below the unigram model's."""
    if math.isnan(chance):
        return True
    runs = [r for r in records if r.number in set(best.numbers) and r.quality is not None]
    if best.metric.direction == "maximize":
        n = sum(r.val_size or 0 for r in runs)
        k = round(sum((r.quality or 0.0) * (r.val_size or 0) for r in runs))
        return n > 0 and stats.binomtest(k, n, min(max(chance, 1e-9), 1 - 1e-9), "greater").pvalue < 0.05
    values = np.array([float(r.quality) for r in runs])  # type: ignore[arg-type]
    if len(values) > 1 and values.std(ddof=1) > 0:
        se: float = values.std(ddof=1) / math.sqrt(len(values))
    else:
        se = float(np.mean([r.val_bpb_se or 0.0 for r in runs]))
    return float(values.mean()) + 1.645 * se < chance


def _chance(records: Sequence[TrialRecord], role: Role) -> float | None:
    values = [r.chance for r in records if r.role == role and r.finished and r.chance is not None]
    return float(np.mean(values)) if values else None


def _nothing_learned(best: Architecture, chance: float, spec: StudySpec) -> str:
    what = "accuracy" if best.metric.direction == "maximize" else "bits per byte"
    level = f"{chance:.2%}" if best.metric.direction == "maximize" else f"{chance:.3f} bits per byte"
    return (
        f"no layout beats chance ({level}, the {'majority-class rate' if what == 'accuracy' else 'unigram model'}) "
        f"beyond the noise of its runs: nothing was learned. Train longer ([task] epochs, [finalists] epochs), "
        f"give more data, or change the learning rate ([space] lr = {spec.space.lr})"
    )


def _verdicts(
    order: Sequence[Architecture], decision: Decision, spec: StudySpec, costs: Costs, margin: float
) -> tuple[Candidate, ...]:
    """Every candidate's verdict with its comparison to the best: the best and the layouts within the margin
    first, then undecided, then at the edge, then beyond, each fastest first."""
    out = []
    verdict, best, rec, risk = decision.verdicts, decision.best, decision.answer, decision.risk
    for i, a in enumerate(order):
        vs = versus(a, order[best], costs, level=1 - 2 * risk) if i != best else None
        needed = seeds = None
        if verdict[i] is Verdict.UNDECIDED and vs is not None:
            needed = units_to_decide(-vs.diff, vs.sd, margin, risk, decision.edge)
            seeds = None if needed is None else math.ceil(needed / spec.finalists.folds)
        out.append(
            Candidate(
                a,
                verdict[i],
                vs,
                needed,
                seeds,
                ratio(costs.times, i, rec),
                decision.p_within[i],
                decision.p_beyond[i],
                decision.p_edge[i],
            )
        )
    rank = {
        Verdict.BEST: 0,
        Verdict.WITHIN: 0,
        Verdict.UNDECIDED: 1,
        Verdict.EDGE: 2,
        Verdict.UNTESTED: 3,
        Verdict.BEYOND: 4,
    }
    speed = {a.key: ratio(costs.times, i, rec) for i, a in enumerate(order)}
    return tuple(sorted(out, key=lambda c: (rank[c.verdict], speed[c.arch.key])))


class _Common(TypedDict):  # the fields of every answer, whatever its evidence (search picks, rule settings)
    per_base: tuple[tuple[int, int, Architecture], ...]
    search: Picks
    cost_axis: CostAxis
    risk: float
    margin: float


class _FinalistCommon(_Common):  # the fields of every answer from the finalist stage, learned or not
    candidates: tuple[Architecture, ...]
    front: tuple[Architecture, ...]
    best: Architecture
    chance: float | None
    collapsed: tuple[Collapse, ...]
    grid: Grid
    times: npt.NDArray[np.float64]
    notes: tuple[str, ...]


def answer(records: Sequence[TrialRecord], spec: StudySpec, retimings: Sequence[Retiming] = ()) -> Answer:
    """The study's head-count answer (see the module docstring); finalists' latencies come from ``retimings``
    when the study has them (explorer.study._retime)."""
    axis = cost_axis(spec)
    search = within_budgets(architectures(records, Role.SEARCH, retimings=decode_only(retimings)), spec)
    per_base = []
    for d_model, n_layers in sorted({(a.config.d_model, a.config.n_layers) for a in search}):
        here = [a for a in search if (a.config.d_model, a.config.n_layers) == (d_model, n_layers)]
        per_base.append((d_model, n_layers, _knee_of(here, axis)[0]))
    picks = _picks(search, axis)
    common = _Common(
        per_base=tuple(per_base),
        search=picks,
        cost_axis=axis,
        risk=spec.answer.risk,
        margin=spec.answer.margin_for(spec.metric.direction == "maximize"),
    )
    horizon = choose_horizon(records, spec)
    grid_records = at_horizon(records, horizon)  # without the pilot's other horizons and the check's runs
    finals_all = architectures(grid_records, Role.FINALIST, retimings=retimings)
    if within_budgets(finals_all, spec):
        found = _from_finalists(grid_records, spec, retimings, finals_all, search, common, records)
        return _checked(found, records, grid_records, spec, horizon)
    if not search:
        return Answer(
            None,
            Evidence.NONE,
            (),
            (),
            (),
            None,
            "",
            notes=("no feasible trial finished",),
            no_answer="no feasible trial has finished yet",
            **common,
        )
    rec, front = _knee_of(search, axis)
    chance = _chance(records, Role.SEARCH)
    best = max(search, key=lambda a: a.score)
    note = (
        "every figure rests on one run per architecture at the search budget; the finalist stage (every "
        f"finalist on the same folds and seeds) has not run: `explorer confirm {spec.name}` runs it"
    )
    if chance is not None and not _learned(best, chance, records):
        return Answer(
            None,
            Evidence.SEARCH,
            tuple(search),
            tuple(front),
            (),
            None,
            "",
            notes=(note,),
            best=best,
            chance=chance,
            no_answer=_nothing_learned(best, chance, spec),
            **common,
        )
    return Answer(
        rec,
        Evidence.SEARCH,
        tuple(search),
        tuple(front),
        (),
        None,
        "not measured: one run per architecture, nothing to resample",
        notes=(note,),
        best=best,
        chance=chance,
        **common,
    )


def _checked(
    found: Answer,
    records: Sequence[TrialRecord],
    grid: Sequence[TrialRecord],
    spec: StudySpec,
    horizon: Horizon,
) -> Answer:
    """``found`` with its horizon, its grid runs' plateaus and its horizon check (a verdict the longer runs
    contradict is no decision)."""
    if found.recommended is None or found.best is None:
        return dataclasses.replace(found, horizon=horizon)
    nxt = found.next_faster
    check = horizon_check(
        records,
        spec,
        horizon,
        found.recommended.key,
        found.best.key,
        None if nxt is None else nxt.arch.key,
    )
    keys = [a.key for a in found.candidates]
    stalled = tuple((k, n, m) for k, (n, m) in unplateaued(grid, keys).items())
    notes = list(found.notes)
    if stalled:
        names = ", ".join(f"{_heads(_by_key(found, k))} ({n} of {m})" for k, n, m in stalled)
        notes.append(
            f"runs of {names} were still improving over the last quarter of their {horizon.epochs} epochs "
            "(beyond one binomial standard error): those layouts had not finished learning"
        )
    decided = found.decided
    if check is not None and not check.holds:
        decided = False
        notes.append(
            f"the verdict does not hold at {check.long} epochs: "
            + "; ".join(_contradiction(s, found, spec) for s in check.shifts if not s.holds)
            + f"; the answer rests on {horizon.epochs}-epoch runs and is not decided (a study with [finalists] "
            f"epochs = {check.long} trains its grid that long)"
        )
    return dataclasses.replace(
        found, horizon=horizon, check=check, unplateaued=stalled, decided=decided, notes=tuple(notes)
    )


def _by_key(found: Answer, key: str) -> Architecture:
    return next(a for a in found.candidates if a.key == key)


def _contradiction(shift: Shift, found: Answer, spec: StudySpec) -> str:
    who = _heads(_by_key(found, shift.layout))
    scale = 100 if spec.metric.direction == "maximize" else 1
    mean, lo, hi = (v * scale for v in shift.long)
    unit = "points" if scale == 100 else "bits per byte"
    where = f"{abs(mean):.2f} {unit} {'below' if mean >= 0 else 'above'} the best (best minus it [{lo:.2f}, {hi:.2f}])"
    if shift.role == "answer":
        return f"{who} lies {where}, beyond the margin"
    return f"the faster {who} lies {where}, within the margin"


CONFIDENCE_METHOD = (
    "joint posterior probability, over every other finalist, that none beats the answer by more than the "
    "margin (a multivariate t on the paired units, flat prior; never stated below one minus the sum of the "
    "pairwise probabilities); its record against the pooled truth of recorded and simulated re-runs: "
    "benchmarks/decisions.md"
)


def _withheld(
    order: Sequence[Architecture], watched: set[int], times: npt.NDArray[np.float64], tie: float
) -> list[str]:
    """A note for each pair of ``watched`` layouts whose re-timing rounds disagree on which is faster."""
    return [
        f"the re-timing rounds disagree on which of {_heads(order[a])} and {_heads(order[b])} is faster "
        "(a round each way beyond the latency tie): their latency comparison is withheld and they count "
        "as equally fast"
        for a, b in sorted({(min(x, y), max(x, y)) for x in watched for y in watched if x != y})
        if not coherent(times, a, b, tie)
    ]


def _from_finalists(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    retimings: Sequence[Retiming],
    finals_all: Sequence[Architecture],
    search: Sequence[Architecture],
    common: _Common,
    stage_records: Sequence[TrialRecord] = (),
) -> Answer:
    axis, margin = common["cost_axis"], common["margin"]
    keys = [a.key for a in within_budgets(finals_all, spec)]
    grid = evidence_grid(records, keys, spec.metric)
    apart = {c.number for c in grid.collapsed}  # collapsed runs: in no mean, interval or test
    kept = [r for r in records if r.number not in apart]
    by_key = {a.key: a for a in architectures(kept, Role.FINALIST, retimings=retimings, pooled=False)}
    order = [by_key[k] for k in keys if k in by_key]
    keys = [a.key for a in order]
    grid = grid.subset(keys)
    times, notes = _times(order, retimings, axis)
    costs = Costs(grid, tuple(keys), times, spec.answer.latency_tie)
    over = len(finals_all) - len(keys)
    if over:
        notes.append(f"{over} finalist layout(s) exceed the budgets or a constraint and are not candidates")
    budget = spec.finalists.runs_budget(len(order))
    units, ran = unit_grid(records, keys, spec)
    settled = budget_spent(stage_records or records, spec, units, times, ran, budget)
    rule = stage_rule(spec, settled)
    decision = decide(grid.scores, times, rule)
    best, chance = order[decision.best], _chance(records, Role.FINALIST)
    pace = finalist_pace(kept)
    front = _knee_of(order, axis)[1]
    base = _FinalistCommon(
        candidates=tuple(order),
        front=tuple(front),
        best=best,
        chance=chance,
        collapsed=grid.collapsed,
        grid=grid,
        times=times,
        notes=tuple(notes),
        **common,
    )
    if chance is not None and not _learned(best, chance, kept):
        return Answer(
            None,
            Evidence.FINALISTS,
            contrasts=(),
            confidence=None,
            confidence_method="",
            no_answer=_nothing_learned(best, chance, spec),
            **base,
        )
    rec = order[decision.answer]
    verdicts = _verdicts(order, decision, spec, costs, margin)
    nxt = next_faster(verdicts, spec.answer.latency_tie)
    watched = {decision.answer, decision.best} | ({keys.index(nxt.arch.key)} if nxt else set())
    notes += _withheld(order, watched, times, spec.answer.latency_tie)
    # the ends grouped-query attention sits between, named where the finalists include them: a trained
    # checkpoint's study does not add them (its cuts cannot have more key/value heads than the checkpoint)
    kv = spec.space.kv_heads is not None and spec.model.pretrained is None
    measured = [
        a for a in order if (a.config.d_model, a.config.n_layers) == (rec.config.d_model, rec.config.n_layers)
    ]
    base["notes"] = tuple(notes)
    return Answer(
        rec,
        Evidence.FINALISTS,
        contrasts=contrasts(rec, measured, nxt.arch if nxt else None, costs, axis, kv),
        confidence=decision.p_within[decision.answer],
        confidence_method=CONFIDENCE_METHOD,
        verdicts=verdicts,
        decided=decision.decided,
        edge=rule.edge,
        settled=settled,
        tie=spec.answer.latency_tie,
        forecast=None if decision.decided else stage_forecast(units, ran, times, spec, settled, budget, pace),
        pace_s=pace,
        budget=budget,
        minutes=spec.finalists.minutes,
        **base,
    )
