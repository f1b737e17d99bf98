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
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt
from scipy import stats

from explorer.answer._contrasts import Contrast, Costs, contrasts, versus
from explorer.answer._evidence_grid import Collapse, Grid, evidence_grid
from explorer.answer._finalists import (
    COST_COLUMNS,
    budget_spent,
    cost_axis,
    finalist_pace,
    rule_times,
    stage_forecast,
    stage_rule,
    unit_grid,
    within_budgets,
)
from explorer.answer._forecast import Forecast
from explorer.answer._horizon import (
    Horizon,
    HorizonCheck,
    Shift,
    at_horizon,
    choose_horizon,
    horizon_check,
    unplateaued,
)
from explorer.answer._paired import PairedDifference
from explorer.answer._pareto import knee, pareto_front
from explorer.answer._rule import (
    Decision,
    Verdict,
    coherent,
    decide,
    ratio,
    units_to_decide,
)
from explorer.answer._tables import Architecture, architecture_table, architectures, decode_only, score
from explorer.errors import ConfigError, NoAnswerError, NoCompletedTrialsError
from explorer.spec import StudySpec
from explorer.storage import Retiming, Role, TrialRecord, trial_label

ANSWER_NAMES = ("answer", "knee")  # what --trial calls the recommendation ("knee": its name before classes)
PICK_NAMES = (*ANSWER_NAMES, "most-accurate", "fastest")


class Evidence(str, Enum):
    """What an answer rests on (the value is the word its JSON prints)."""

    FINALISTS = "finalists"  # the finalists' evidence grid
    SEARCH = "search"  # the search trials alone: no finalist ran within the budgets
    NONE = "none"  # nothing: no feasible search trial has finished

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Picks:
    """Search-level picks (for the per-base answers and the figures)."""

    knee: Architecture | None
    most_accurate: Architecture | None
    fastest: Architecture | None


@dataclass(frozen=True)
class Candidate:
    """One candidate layout and what the evidence says of it against the best."""

    arch: Architecture
    verdict: Verdict
    versus_best: PairedDifference | None  # this minus the best, paired by unit (interval at 1 - 2 risk)
    units_needed: int | None = None  # paired units that would decide an undecided one (None: none would)
    seeds_needed: int | None = None  # replicates (each ``folds`` units) that many units make
    latency_ratio: float = math.nan  # this / the answer, within re-timing rounds
    p_within: float = math.nan  # P(within the margin of the best), joint over the rivals
    p_beyond: float = math.nan  # P(the best beats it by more than the margin); NaN for the best
    p_edge: float = math.nan  # P(the best beats it by more than margin - edge); NaN for the best


@dataclass(frozen=True)
class Answer:
    """The recommendation and everything said about it."""

    recommended: Architecture | None
    evidence: Evidence
    candidates: tuple[Architecture, ...]  # what it was chosen among (feasible, within budgets)
    front: tuple[Architecture, ...]  # their accuracy/latency front, fastest first
    contrasts: tuple[Contrast, ...]
    confidence: (
        float | None
    )  # probability that the answer is within the margin of the best (None: not measured)
    confidence_method: str
    per_base: tuple[tuple[int, int, Architecture], ...]  # (d_model, n_layers, the knee there), search level
    search: Picks
    notes: tuple[str, ...] = field(default_factory=tuple)
    cost_axis: str = "latency"  # what the rule weighs against quality: latency (forward) | decode (per token)
    best: Architecture | None = None  # the highest mean quality
    verdicts: tuple[Candidate, ...] = ()  # every candidate: the class first, then by verdict and latency
    margin: float = math.nan  # on the quality's own scale (0.01 = one accuracy point)
    risk: float = StudySpec.answer.risk  # the largest probability accepted that the answer is past the margin
    decided: bool = False  # reaches 1 - risk, no faster one undecided, not contradicted at twice the horizon
    chance: float | None = None  # what learning nothing scores (majority class, unigram bits per byte)
    no_answer: str = ""  # why there is no answer ("" when there is one)
    collapsed: tuple[Collapse, ...] = ()  # finalist runs set apart (training failed), never pooled
    grid: Grid | None = None  # the finalists' scores by unit, as the rule read them
    # [grid layouts, re-timing rounds] ms on the cost axis, as the rule read them
    times: npt.NDArray[np.float64] | None = None
    edge: float = 0.0  # the indifference zone below the margin, on the quality's scale
    settled: bool = False  # the stage's budget is spent: the edge is [answer] settle
    tie: float = StudySpec.answer.latency_tie  # latency ratios closer to 1 than this count as equally fast
    # what deciding costs from here: simulated continuations of the stage (None: decided, or not known yet)
    forecast: Forecast | None = None
    pace_s: float | None = None  # wall-clock seconds of the finalist stage per finished run
    budget: int | None = None  # the finalist stage's budget of runs, as the spec states it
    minutes: float | None = None  # ... and in minutes (None: no limit)
    horizon: Horizon | None = None  # the finalists' horizon and how the pilot chose it (finalist evidence)
    check: HorizonCheck | None = None  # the deciding comparisons at twice the horizon (None: check off)
    unplateaued: tuple[tuple[str, int, int], ...] = ()  # (key, runs not plateaued, runs judged) per layout

    @property
    def next_faster(self) -> Candidate | None:
        """The layout just faster than the answer (beyond the latency tie), whatever its verdict: the one the
        report's text, its table of alternatives and ``--json`` name (None: no finalist is faster)."""
        return next_faster(self.verdicts, self.tie)

    @property
    def to_decide(self) -> int | None:
        """The finalist runs more within which the answer is decided in 80% of the simulated continuations of
        the stage (:mod:`explorer.answer._forecast`): the ``--budget`` to ask for (0: decided; None: not known
        yet, or no affordable budget decides it)."""
        if self.decided:
            return 0
        return None if self.forecast is None else self.forecast.likely

    def cost_text(self) -> str:
        """What deciding the answer costs, in words, as the answer line and the report say it ("" once decided)."""
        if self.decided:
            return ""
        f = self.forecast
        if f is None:
            return "what deciding costs is known once every finalist has two paired runs"
        if f.likely is None:
            return (
                f"no affordable budget decides it: {f.decided_share:.0%} of {f.draws} simulated continuations of "
                f"the stage decided within {f.cap:,} more runs, fewer than the 80% a budget is named for"
            )
        took = minutes_text(f.likely, self.pace_s)
        return (
            f"a decision needs about {f.median} more runs (the median of {f.draws} simulated continuations of the "
            f"stage), {f.likely} in 80% of them" + (f", {took} at this study's pace" if took else "")
        )

    @property
    def to_decide_minutes(self) -> float | None:
        """The minutes :attr:`to_decide` more runs take at the stage's measured pace (None: unknown)."""
        if self.to_decide is None or self.pace_s is None:
            return None
        return self.to_decide * self.pace_s / 60

    @property
    def base(self) -> tuple[int, int] | None:
        r = self.recommended
        return None if r is None else (r.config.d_model, r.config.n_layers)

    @property
    def contradicted(self) -> bool:
        """Whether the horizon check's longer runs contradict the verdict the answer rests on."""
        return self.check is not None and not self.check.holds

    @property
    def placed(self) -> bool:
        """Whether the answer itself reaches ``1 - risk``: placed within the margin, not the best by default."""
        return (
            self.recommended is not None and self.confidence is not None and self.confidence >= 1 - self.risk
        )

    @property
    def members(self) -> tuple[Architecture, ...]:
        """The layouts placed within the margin of the best at probability ``1 - risk``, fastest first."""
        return tuple(
            c.arch for c in self.verdicts if c.p_within >= 1 - self.risk and c.verdict is not Verdict.UNTESTED
        )

    def to_dict(self) -> dict[str, Any]:
        """The answer as one JSON-ready document: what every ``--json`` output that names the answer carries."""

        def layout(a: Architecture | None) -> dict[str, Any] | None:
            if a is None:
                return None
            c = a.config
            return {
                "heads": list(c.heads),
                "kv_heads": list(c.kv_per_layer),
                "d_k": list(c.d_k),
                "d_model": c.d_model,
                "n_layers": c.n_layers,
                "key": a.key,
                "quality": a.quality.estimate,
                "quality_low": a.quality.low,
                "quality_high": a.quality.high,
                "runs": a.n,
                "latency_ms": a.latency.estimate,
            }

        def verdict(c: Candidate) -> dict[str, Any]:
            vs = c.versus_best
            return {
                **(layout(c.arch) or {}),
                "verdict": c.verdict.value,
                "versus_best": None
                if vs is None
                else {"diff": vs.diff, "low": vs.low, "high": vs.high, "units": vs.n, "p": vs.p_value},
                "p_within_margin": c.p_within,
                "p_beyond_margin": None if math.isnan(c.p_beyond) else c.p_beyond,
                "p_at_edge": None if math.isnan(c.p_edge) else c.p_edge,
                "units_needed": c.units_needed,
                "seeds_needed": c.seeds_needed,
                "latency_ratio": None if math.isnan(c.latency_ratio) else c.latency_ratio,
            }

        return {
            "answer": layout(self.recommended),
            "evidence": self.evidence.value,
            "metric": self.recommended.metric.name if self.recommended else None,
            "margin": self.margin,
            "risk": self.risk,
            "decided": self.decided,
            "class": [layout(a) for a in self.members],
            "best": layout(self.best),
            "verdicts": [verdict(c) for c in self.verdicts],
            "confidence": self.confidence,
            "confidence_method": self.confidence_method,
            "edge": self.edge,
            "settled": self.settled,
            "runs_to_decide": self.to_decide,
            "minutes_to_decide": self.to_decide_minutes,
            "decision_forecast": None
            if self.forecast is None
            else {
                "median_runs": self.forecast.median,
                "likely_runs": self.forecast.likely,
                "median_minutes": self.forecast.minutes(self.forecast.median),
                "likely_minutes": self.forecast.minutes(self.forecast.likely),
                "decided_share": self.forecast.decided_share,
                "simulated_studies": self.forecast.draws,
                "cap_runs": self.forecast.cap,
            },
            "seconds_per_run": self.pace_s,
            "budget_runs": self.budget,
            "budget_minutes": self.minutes,
            "next_faster": None if self.next_faster is None else self.next_faster.arch.key,
            "chance": self.chance,
            "no_answer": self.no_answer or None,
            "collapsed": [dataclasses.asdict(c) for c in self.collapsed],
            "horizon": None if self.horizon is None else _horizon_dict(self.horizon),
            "horizon_check": None if self.check is None else dataclasses.asdict(self.check),
            "not_plateaued": [{"key": k, "runs": n, "of": m} for k, n, m in self.unplateaued],
            "notes": list(self.notes),
        }

    @property
    def alike(self) -> tuple[Architecture, ...]:
        """The class without the recommendation."""
        rec = self.recommended
        return tuple(a for a in self.members if rec is None or a.key != rec.key)


def _cost(a: Architecture, axis: str) -> float:
    c = a.cost(axis)
    return math.inf if c is None else c.estimate


def _knee_of(archs: Sequence[Architecture], axis: str = "latency") -> tuple[Architecture, list[Architecture]]:
    table = architecture_table(archs)
    front = pareto_front(table, COST_COLUMNS[axis])
    k = knee(front, bounds=table, cost=COST_COLUMNS[axis])
    by_key = {a.key: a for a in archs}
    return by_key[k["key"]], [by_key[key] for key in front["key"]]


def _picks(archs: Sequence[Architecture], axis: str = "latency") -> Picks:
    if not archs:
        return Picks(None, None, None)
    k, front = _knee_of(archs, axis)
    best = max(archs, key=lambda a: (a.score, -_cost(a, axis)))
    return Picks(k, best, front[0])


def _times(
    archs: Sequence[Architecture], retimings: Sequence[Retiming], axis: str
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
    return np.array([[_cost(a, axis)] for a in archs], dtype=float), notes


def _heads(a: Architecture) -> str:
    return ",".join(map(str, a.config.heads))


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


def next_faster(verdicts: Sequence[Candidate], tie: float) -> Candidate | None:
    """Of ``verdicts``, the slowest layout faster than the answer by more than the latency tie."""
    quicker = [c for c in verdicts if c.latency_ratio < 1 / (1 + tie)]
    return max(quicker, key=lambda c: c.latency_ratio) if quicker else None


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
    cost_axis: str
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
    for a, b in sorted({(min(x, y), max(x, y)) for x in watched for y in watched if x != y}):
        if not coherent(times, a, b, spec.answer.latency_tie):
            notes.append(
                f"the re-timing rounds disagree on which of {_heads(order[a])} and {_heads(order[b])} is faster "
                "(a round each way beyond the latency tie): their latency comparison is withheld and they count "
                "as equally fast"
            )
    method = (
        "joint posterior probability, over every other finalist, that none beats the answer by more than the "
        "margin (a multivariate t on the paired units, flat prior; never stated below one minus the sum of the "
        "pairwise probabilities); its record against the pooled truth of recorded and simulated re-runs: "
        "benchmarks/decisions.md"
    )
    kv = spec.space.kv_heads is not None
    measured = [
        a for a in order if (a.config.d_model, a.config.n_layers) == (rec.config.d_model, rec.config.n_layers)
    ]
    base["notes"] = tuple(notes)
    return Answer(
        rec,
        Evidence.FINALISTS,
        contrasts=contrasts(rec, measured, nxt.arch if nxt else None, costs, axis, kv),
        confidence=decision.p_within[decision.answer],
        confidence_method=method,
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


def _horizon_dict(h: Horizon) -> dict[str, Any]:
    return {
        "epochs": h.epochs,
        "chosen": h.chosen,
        "piloted": h.piloted,
        "cap": h.cap,
        "capped": h.capped,
        "doublings": [
            {"short": d.short, "long": d.long, "pairs": len(d.gains), "gain": d.mean, "lower": d.lower}
            for d in h.doublings
        ],
    }


def prob_text(p: float | None) -> str:
    """A probability as the report and the command line write it: "below 1%" and "above 99%" at the ends (a
    rounded 0% or 100% would claim more than was computed), else whole percents rounded down, so a probability
    below the rule's 95% is never written as 95%."""
    if p is None or math.isnan(p):
        return "n/a"
    if p < 0.01:
        return "below 1%"
    if p > 0.99:
        return "above 99%"
    return f"{math.floor(p * 100 + 1e-9):.0f}%"


def minutes_text(runs: int, pace_s: float | None) -> str:
    """``runs`` runs as time at a stage's measured pace ("" when no pace is known yet)."""
    if pace_s is None:
        return ""
    minutes = runs * pace_s / 60
    return f"about {minutes:.0f} minutes" if minutes >= 1.5 else f"about {minutes * 60:.0f} s"


def pick(ans: Answer, which: str) -> Architecture | None:
    """The architecture ``answer`` (alias ``knee``: the recommendation), ``most-accurate`` (the best) or
    ``fastest`` (the fastest candidate) names."""
    if which in ANSWER_NAMES:
        return ans.recommended
    candidates = ans.candidates
    if not candidates:
        return None
    if which == "most-accurate":
        return ans.best or max(candidates, key=lambda a: (a.score, -_cost(a, ans.cost_axis)))
    if which == "fastest":
        return min(candidates, key=lambda a: (_cost(a, ans.cost_axis), -a.score))
    raise ValueError(which)


def select_run(records: Sequence[TrialRecord], arch: Architecture) -> TrialRecord:
    """The run that stands for ``arch``: the one whose validation quality is the median of its runs (the lower
    middle one with an even count), so exported weights are typical of the layout, not its luckiest seed."""
    runs = sorted(
        (r for r in records if r.number in set(arch.numbers)),
        key=lambda r: (score(r.metric, r.quality or 0.0), r.number),
    )
    return runs[(len(runs) - 1) // 2]


def resolve_trial(
    records: Sequence[TrialRecord], spec: StudySpec, which: str, retimings: Sequence[Retiming] = ()
) -> TrialRecord:
    """The trial ``which`` names: ``answer`` (or ``knee``), ``most-accurate``, ``fastest`` (the run that stands
    for that layout, :func:`select_run`, of :func:`answer` with these ``retimings``), or the number of a
    COMPLETE trial."""
    if which in PICK_NAMES:
        ans = answer(records, spec, retimings)
        if ans.no_answer and which in ANSWER_NAMES:
            raise NoAnswerError(f"study {spec.name!r} has no answer to export: {ans.no_answer}.")
        arch = pick(ans, which)
        if arch is None:
            raise NoCompletedTrialsError(
                f"study {spec.name!r} has no completed feasible trial to pick from yet; run it first."
            )
        return select_run(records, arch)
    if not (which.isascii() and which.isdigit()):  # "²".isdigit() is True, int("²") fails
        raise ConfigError(f"--trial {which!r} is not answer, most-accurate, fastest or a trial number.")
    number = int(which)
    by_number = {r.number: r for r in records}
    if number not in by_number:
        raise ConfigError(
            f"study {spec.name!r} has no trial {trial_label(spec.name, number)}; `explorer study status {spec.name}` lists "
            "them."
        )
    r = by_number[number]
    if not r.finished:
        raise ConfigError(
            f"trial {trial_label(spec.name, number)} is {r.state}, not COMPLETE; pick a completed trial."
        )
    return r
