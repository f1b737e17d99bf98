"""The answer as a value: what an answer rests on (:class:`Evidence`), every candidate's standing
(:class:`Candidate`) and the :class:`Answer` every command naming "the answer" reads and prints
(:func:`explorer.answer._recommend.answer` assembles it)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import numpy.typing as npt

from explorer.answer._contrasts import Contrast
from explorer.answer._evidence_grid import Collapse, Grid
from explorer.answer._forecast import Forecast
from explorer.answer._horizon import Horizon, HorizonCheck
from explorer.answer._paired import PairedDifference
from explorer.answer._rule import Verdict
from explorer.answer._tables import Architecture, CostAxis
from explorer.answer._words import minutes_text
from explorer.spec import StudySpec


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
    # probability that the answer is within the margin of the best (None: not measured)
    confidence: float | None
    confidence_method: str
    per_base: tuple[tuple[int, int, Architecture], ...]  # (d_model, n_layers, the knee there), search level
    search: Picks
    notes: tuple[str, ...] = field(default_factory=tuple)
    cost_axis: CostAxis = CostAxis.LATENCY  # what the rule weighs against quality
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
        median = "" if f.median is None else minutes_text(f.median, self.pace_s)
        return (
            f"a decision needs about {f.median} more runs"
            + (f" ({median})" if median else "")
            + f", the median of {f.draws} simulated continuations of the stage; {f.likely} in 80% of them"
            + (f" ({took} at this study's pace)" if took else "")
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


def next_faster(verdicts: Sequence[Candidate], tie: float) -> Candidate | None:
    """Of ``verdicts``, the slowest layout faster than the answer by more than the latency tie."""
    quicker = [c for c in verdicts if c.latency_ratio < 1 / (1 + tie)]
    return max(quicker, key=lambda c: c.latency_ratio) if quicker else None


def _horizon_dict(h: Horizon) -> dict[str, Any]:
    return {
        "epochs": h.epochs,
        "chosen": h.chosen,
        "piloted": h.piloted,
        "cap": h.cap,
        "capped": h.capped,
        "doublings": [
            {
                "short": d.short,
                "long": d.long,
                "by": d.by.value,  # "gain": each run's gain; "comparison": the change of a paired difference
                "pairs": len(d.gains),
                "mean": d.mean,
                "lower": d.lower,
                "upper": d.upper,
                "doubled": d.gained,
            }
            for d in h.doublings
        ],
    }


def cost_estimate(a: Architecture, axis: CostAxis) -> float:
    """``a``'s estimate on the cost axis (inf where it has none)."""
    c = a.cost(axis)
    return math.inf if c is None else c.estimate
