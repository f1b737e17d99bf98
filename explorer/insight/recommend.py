"""The head-count answer: which layout to use for the base model, how sure, and what the alternatives cost.

The answer rests on the best evidence the study holds. When finalist runs exist (several fresh seeds per
architecture, each trained until its accuracy stopped moving, each timed afresh), the recommendation is the knee
of the finalists' accuracy/latency front, using architecture means over seeds; otherwise it is the search's knee
and says that it rests on one short run per architecture. Around it the answer states what one head per layer,
the folklore's 8-16 heads and the next faster layout cost or gain (differences over seeds, with a bootstrap
interval and an exact permutation test), and how often the recommendation would stay the answer if the seeds
had come out differently (a bootstrap over seeds). Pure functions over records.

Quality is the task's metric (accuracy, or bits per byte for a language model: lower is better); "more
accurate" below means better on it. The knee trades it against forward latency, or against decoding time per
token where the spec makes decoding an objective. A study that searches key/value heads also contrasts the
recommendation with multi-head (kv_heads = heads) and multi-query (kv_heads = 1) attention at its heads:
quality, decoding time and key/value-cache bytes.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from explorer.engine.config import ModelConfig
from explorer.errors import ConfigError, NoCompletedTrialsError
from explorer.insight.confidence import BOOTSTRAP_ROUNDS, bootstrap_confidence
from explorer.insight.finalists import (
    COST_COLUMNS,
    DEFAULT_HEADS,
    KV_REFERENCES,
    cost_axis,
    with_kv,
    within_budgets,
)
from explorer.insight.pareto import knee, pareto_front
from explorer.insight.stats import Comparison, Interval, Spread, mean_difference, pool
from explorer.insight.tables import (
    Architecture,
    architecture_table,
    architectures,
    decode_only,
)
from explorer.search.record import Retiming, TrialRecord
from explorer.search.spec import StudySpec

__all__ = [
    "BOOTSTRAP_ROUNDS",
    "Answer",
    "Contrast",
    "Picks",
    "answer",
    "latency_tie",
    "pick",
    "resolve_trial",
    "select_run",
]


@dataclass(frozen=True)
class Contrast:
    """What another layout at the same width and depth costs or gains against the recommendation."""

    name: str  # "1 head per layer", "8 heads per layer", "next faster layout", "multi-head attention" ...
    other: Architecture | None  # None: not measured in this study
    quality: Comparison | None  # other minus recommended, over seeds (None with one run on a side)
    quality_diff: float  # other minus recommended, mean validation quality (accuracy, or bits per byte)
    latency_ratio: float  # other / recommended, median latency on the answer's cost axis
    latency_tie: bool  # the two latencies are within each other's timing noise
    note: str = ""
    decode_ratio: float = math.nan  # other / recommended, decoding ms per token (NaN: not measured)
    cache_ratio: float = math.nan  # other / recommended, key/value-cache bytes per token

    @property
    def accuracy(self) -> Comparison | None:
        """The quality comparison (the name classification reports always used)."""
        return self.quality

    @property
    def accuracy_diff(self) -> float:
        return self.quality_diff


@dataclass(frozen=True)
class Picks:
    """Search-level picks (for export, head analysis and per-base answers)."""

    knee: Architecture | None
    most_accurate: Architecture | None
    fastest: Architecture | None


@dataclass(frozen=True)
class Answer:
    """The recommendation and everything said about it."""

    recommended: Architecture | None
    evidence: str  # "finalists" | "search" | "none"
    candidates: tuple[Architecture, ...]  # what it was chosen among (feasible, within budgets)
    front: tuple[Architecture, ...]  # their accuracy/latency front, fastest first
    contrasts: tuple[Contrast, ...]
    confidence: float | None  # bootstrap probability that it stays the answer (None: not measurable)
    confidence_method: str
    per_base: tuple[tuple[int, int, Architecture], ...]  # (d_model, n_layers, the knee there), search level
    search: Picks
    notes: tuple[str, ...] = field(default_factory=tuple)
    cost_axis: str = "latency"  # what the knee traded quality against: latency (forward) | decode (per token)
    # candidates the data cannot tell from the recommendation: no quality difference at p < 0.05 over seeds and
    # a latency within the timing noise (a whole new study may name one of them instead)
    alike: tuple[Architecture, ...] = ()

    @property
    def base(self) -> tuple[int, int] | None:
        r = self.recommended
        return None if r is None else (r.config.d_model, r.config.n_layers)


def _tie(a: Interval, b: Interval) -> bool:
    return (b.low <= a.estimate <= b.high) or (a.low <= b.estimate <= a.high)


def latency_tie(a: Architecture, b: Architecture, axis: str = "latency") -> bool:
    """Whether two latencies are within each other's timing noise (each estimate inside the other's interval)."""
    x, y = a.cost(axis), b.cost(axis)
    return x is not None and y is not None and _tie(x, y)


def _knee_of(archs: Sequence[Architecture], axis: str = "latency") -> tuple[Architecture, list[Architecture]]:
    table = architecture_table(archs)
    front = pareto_front(table, COST_COLUMNS[axis])
    k = knee(front, bounds=table, cost=COST_COLUMNS[axis])
    by_key = {a.key: a for a in archs}
    return by_key[k["key"]], [by_key[key] for key in front["key"]]


def _cost(a: Architecture, axis: str) -> float:
    c = a.cost(axis)
    return math.inf if c is None else c.estimate


def _picks(archs: Sequence[Architecture], axis: str = "latency") -> Picks:
    if not archs:
        return Picks(None, None, None)
    k, front = _knee_of(archs, axis)
    best = max(archs, key=lambda a: (a.score, -_cost(a, axis)))
    return Picks(k, best, front[0])


def _ratio(a: Interval | None, b: Interval | None) -> float:
    return math.nan if a is None or b is None else a.estimate / b.estimate


def _contrast(
    name: str,
    rec: Architecture,
    other: Architecture | None,
    missing: str,
    pooled: Spread | None,
    axis: str = "latency",
) -> Contrast:
    if other is None:
        return Contrast(name, None, None, math.nan, math.nan, False, missing)
    if other.key == rec.key:
        return Contrast(name, other, None, 0.0, 1.0, True, "the recommendation itself", 1.0, 1.0)
    comparison = None
    if other.n >= 2 and rec.n >= 2:
        comparison = mean_difference(other.values, rec.values, pooled)
    return Contrast(
        name,
        other,
        comparison,
        other.quality.estimate - rec.quality.estimate,
        _ratio(other.cost(axis), rec.cost(axis)),
        latency_tie(rec, other, axis),
        decode_ratio=_ratio(other.decode, rec.decode),
        cache_ratio=other.config.kv_cache_bytes_per_token() / rec.config.kv_cache_bytes_per_token(),
    )


def _merge_same(contrasts: Sequence[Contrast]) -> list[Contrast]:
    """One row per layout: a layout that is two of the alternatives (the 1-head layout is often also the next
    faster one) is named once with both names."""
    merged: list[Contrast] = []
    for c in contrasts:
        twin = next(
            (i for i, m in enumerate(merged) if c.other and m.other and m.other.key == c.other.key), None
        )
        if twin is None:
            merged.append(c)
        else:
            merged[twin] = dataclasses.replace(merged[twin], name=f"{merged[twin].name}; also the {c.name}")
    return merged


def _find(archs: Sequence[Architecture], want: ModelConfig) -> Architecture | None:
    """The architecture with ``want``'s width, depth, heads, key/value heads and head width (any lr, MLP)."""
    c = want
    for a in archs:
        o = a.config
        if (o.d_model, o.heads, o.kv_per_layer, o.d_k) == (c.d_model, c.heads, c.kv_per_layer, c.d_k):
            return a
    return None


def _uniform_heads(base: ModelConfig, heads: int) -> ModelConfig | None:
    """``base``'s width and depth with ``heads`` classic heads (d_k = d_model / heads) in every layer."""
    if base.d_model % heads:
        return None
    return ModelConfig(d_model=base.d_model, heads=(heads,) * base.n_layers)


def answer(records: Sequence[TrialRecord], spec: StudySpec, retimings: Sequence[Retiming] = ()) -> Answer:
    """The study's head-count answer (see the module docstring); finalists' latencies come from ``retimings``
    when the study has them (explorer.search.retime)."""
    axis = cost_axis(spec)
    search = within_budgets(architectures(records, "search", retimings=decode_only(retimings)), spec)
    finals = architectures(records, "finalist", retimings=retimings)
    candidates = within_budgets(finals, spec)
    per_base = []
    for d_model, n_layers in sorted({(a.config.d_model, a.config.n_layers) for a in search}):
        here = [a for a in search if (a.config.d_model, a.config.n_layers) == (d_model, n_layers)]
        per_base.append((d_model, n_layers, _knee_of(here, axis)[0]))
    picks = _picks(search, axis)
    notes = []
    over = len(finals) - len(candidates)
    if over:
        notes.append(f"{over} finalist layout(s) exceed the budgets or a constraint and are not candidates")
    if candidates:
        evidence = "finalists"
    elif search:
        evidence, candidates = "search", search
        notes.append(
            "every figure rests on one run per architecture at the search budget; the finalist stage "
            "(retraining with fresh seeds to a plateau) has not run: `explorer confirm "
            f"{spec.name}` runs it"
        )
    else:
        return Answer(
            None, "none", (), (), (), None, "", tuple(per_base), picks, ("no feasible trial finished",), axis
        )
    rec, front = _knee_of(candidates, axis)
    measured = finals if evidence == "finalists" else search
    # seed-to-seed spread on the quality's own scale, pooled over every architecture with several runs
    spread = pool([(float(np.std(a.values, ddof=1)), a.n - 1) for a in measured if a.n > 1])
    base = rec.config
    folk = next(
        (
            h
            for h in range(DEFAULT_HEADS[0], DEFAULT_HEADS[1] + 1)
            if h <= base.d_model and base.d_model % h == 0
        ),
        None,
    )
    missing = "not measured at this width and depth"
    one, eight = _uniform_heads(base, 1), _uniform_heads(base, folk) if folk else None
    contrasts = [
        _contrast("1 head per layer", rec, one and _find(measured, one), missing, spread, axis),
        _contrast(
            f"{folk} heads per layer (the folklore's default)" if folk else "8-16 heads per layer",
            rec,
            _find(measured, eight) if eight else None,
            missing if folk else f"no count in 8-16 divides d_model {base.d_model}",
            spread,
            axis,
        ),
    ]
    faster = [
        a
        for a in front
        if _cost(a, axis) < _cost(rec, axis)
        and (a.config.d_model, a.config.n_layers) == (base.d_model, base.n_layers)
    ]
    contrasts.append(
        _contrast(
            "next faster layout",
            rec,
            faster[-1] if faster else None,
            "nothing on the front is faster at this width and depth",
            spread,
            axis,
        )
    )
    if spec.space.kv_heads is not None:  # the ends grouped-query attention sits between, at the same heads
        for label, kv in zip(KV_REFERENCES, (None, 1), strict=True):
            want = with_kv(base, kv)
            name = f"{label} attention (kv_heads = {'heads' if kv is None else kv})"
            contrasts.append(_contrast(name, rec, _find(measured, want), missing, spread, axis))
    contrasts = _merge_same(contrasts)
    versus = [_contrast("", rec, a, "", spread, axis) for a in candidates if a.key != rec.key]
    alike = [
        c.other for c in versus if c.quality is not None and not c.quality.significant() and c.latency_tie
    ]
    confidence, method = None, ""
    runs: dict[str, list[TrialRecord]] = {}
    for r in records:
        if (
            r.role == ("finalist" if evidence == "finalists" else "search")
            and r.finished
            and r.key is not None
        ):
            runs.setdefault(r.key, []).append(r)
    if evidence == "finalists" and min(len(runs[a.key]) for a in candidates) >= 2:
        confidence = bootstrap_confidence(rec, candidates, runs, axis=axis)
        within = "1 point" if rec.metric.direction == "maximize" else "1% (bits per byte)"
        method = (
            f"share of {BOOTSTRAP_ROUNDS} bootstrap resamples of the seeds (each candidate's runs drawn with "
            "replacement, means and median latencies recomputed) in which this layout is still the knee, or within "
            f"{within} of the best candidate that is no slower"
        )
    elif evidence == "finalists":
        method = "not measured: some candidate has a single run (`explorer confirm --seeds 3` adds seeds)"
    else:
        method = "not measured: one run per architecture (no seeds to resample)"
    return Answer(
        recommended=rec,
        evidence=evidence,
        candidates=tuple(candidates),
        front=tuple(front),
        contrasts=tuple(contrasts),
        confidence=confidence,
        confidence_method=method,
        per_base=tuple(per_base),
        search=picks,
        notes=tuple(notes),
        cost_axis=axis,
        alike=tuple(sorted(alike, key=lambda a: _cost(a, axis))),
    )


PICK_NAMES = ("knee", "most-accurate", "fastest")


def pick(ans: Answer, which: str) -> Architecture | None:
    """The architecture ``knee`` (the recommendation), ``most-accurate`` or ``fastest`` of the answer names."""
    if which == "knee":
        return ans.recommended
    candidates = ans.candidates
    if not candidates:
        return None
    if which == "most-accurate":
        return max(candidates, key=lambda a: (a.score, -_cost(a, ans.cost_axis)))
    if which == "fastest":
        return min(candidates, key=lambda a: (_cost(a, ans.cost_axis), -a.score))
    raise ValueError(which)


def select_run(records: Sequence[TrialRecord], arch: Architecture) -> TrialRecord:
    """The run that stands for ``arch``: the one whose validation accuracy is the median of its runs (the lower
    middle one with an even count), so exported weights are typical of the layout, not its luckiest seed."""
    runs = sorted(
        (r for r in records if r.number in set(arch.numbers)), key=lambda r: (r.quality or 0.0, r.number)
    )
    return runs[(len(runs) - 1) // 2]


def resolve_trial(records: Sequence[TrialRecord], spec: StudySpec, which: str) -> TrialRecord:
    """The trial ``which`` names: ``knee`` (the recommendation), ``most-accurate``, ``fastest`` (the run that
    stands for that architecture, :func:`select_run`), or a trial number of a COMPLETE trial."""
    if which in PICK_NAMES:
        arch = pick(answer(records, spec), which)
        if arch is None:
            raise NoCompletedTrialsError(
                f"study {spec.name!r} has no completed feasible trial to pick from yet; run it first."
            )
        return select_run(records, arch)
    if not which.isdigit():
        raise ConfigError(f"--trial {which!r} is not knee, most-accurate, fastest or a trial number.")
    number = int(which)
    by_number = {r.number: r for r in records}
    if number not in by_number:
        raise ConfigError(
            f"study {spec.name!r} has no trial #{number}; `explorer study status {spec.name}` lists them."
        )
    r = by_number[number]
    if not r.finished:
        raise ConfigError(f"trial #{number} is {r.state}, not COMPLETE; pick a completed trial.")
    return r
