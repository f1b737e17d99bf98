"""The head-count answer: which layout to use for the base model, how sure, and what the alternatives cost.

The answer rests on the best evidence the study holds. When finalist runs exist (several fresh seeds per
architecture, each trained until its accuracy stopped moving, each timed afresh), the recommendation is the knee
of the finalists' accuracy/latency front, using architecture means over seeds; otherwise it is the search's knee
and says that it rests on one short run per architecture. Around it the answer states what one head per layer,
the folklore's 8-16 heads and the next faster layout cost or gain (differences over seeds, with a bootstrap
interval and an exact permutation test), and how often the recommendation would stay the answer if the seeds
had come out differently (a bootstrap over seeds). Pure functions over records.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from explorer.errors import ConfigError, NoCompletedTrialsError
from explorer.insight.finalists import DEFAULT_HEADS, within_budgets
from explorer.insight.pareto import front_mask, knee, knee_index, pareto_front
from explorer.insight.stats import Comparison, Spread, mean_difference, pool
from explorer.insight.tables import ACC_POINT, Architecture, architecture_table, architectures
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

BOOTSTRAP_ROUNDS = 2000  # resamples of the seeds behind the confidence figure


@dataclass(frozen=True)
class Contrast:
    """What another layout at the same width and depth costs or gains against the recommendation."""

    name: str  # "1 head per layer", "8 heads per layer", "next faster layout"
    other: Architecture | None  # None: not measured in this study
    accuracy: Comparison | None  # other minus recommended, over seeds (None with one run on a side)
    accuracy_diff: float  # other minus recommended, mean validation accuracy
    latency_ratio: float  # other / recommended, median latency
    latency_tie: bool  # the two latencies are within each other's timing noise
    note: str = ""


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

    @property
    def base(self) -> tuple[int, int] | None:
        r = self.recommended
        return None if r is None else (r.config.d_model, r.config.n_layers)


def latency_tie(a: Architecture, b: Architecture) -> bool:
    """Whether two latencies are within each other's timing noise (each estimate inside the other's interval)."""
    return (b.latency.low <= a.latency.estimate <= b.latency.high) or (
        a.latency.low <= b.latency.estimate <= a.latency.high
    )


def _knee_of(archs: Sequence[Architecture]) -> tuple[Architecture, list[Architecture]]:
    table = architecture_table(archs)
    front = pareto_front(table)
    k = knee(front, bounds=table)
    by_key = {a.key: a for a in archs}
    return by_key[k["key"]], [by_key[key] for key in front["key"]]


def _picks(archs: Sequence[Architecture]) -> Picks:
    if not archs:
        return Picks(None, None, None)
    k, front = _knee_of(archs)
    best = max(archs, key=lambda a: (a.accuracy.estimate, -a.latency.estimate))
    return Picks(k, best, front[0])


def _contrast(
    name: str, rec: Architecture, other: Architecture | None, missing: str, pooled: Spread | None
) -> Contrast:
    if other is None:
        return Contrast(name, None, None, math.nan, math.nan, False, missing)
    if other.key == rec.key:
        return Contrast(name, other, None, 0.0, 1.0, True, "the recommendation itself")
    comparison = None
    if other.n >= 2 and rec.n >= 2:
        comparison = mean_difference(other.values, rec.values, pooled)
    return Contrast(
        name,
        other,
        comparison,
        other.accuracy.estimate - rec.accuracy.estimate,
        other.latency.estimate / rec.latency.estimate,
        latency_tie(rec, other),
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


def _find(
    archs: Sequence[Architecture], d_model: int, n_layers: int, heads: tuple[int, ...]
) -> Architecture | None:
    for a in archs:
        if a.config.d_model == d_model and a.config.n_layers == n_layers and a.config.heads == heads:
            return a
    return None


def _confidence(
    rec: Architecture, candidates: Sequence[Architecture], runs: dict[str, list[TrialRecord]], seed: int = 0
) -> float:
    """Bootstrap over seeds: the share of resamples in which ``rec`` is still the knee of the candidates' front,
    or within one point of the most accurate candidate no slower than it (latency ties count as no slower).

    Each resample draws, per candidate, its runs (seeds) and its timings with replacement and recomputes its mean
    accuracy and median latency.
    """
    rng = np.random.default_rng(seed)
    keys = [a.key for a in candidates]
    acc = [np.array([r.val_accuracy for r in runs[k]], float) for k in keys]
    lat = [np.array(a.timings, float) for a in candidates]
    i_rec = keys.index(rec.key)
    tie = {k: (a.latency.high / a.latency.estimate) - 1 for k, a in zip(keys, candidates, strict=True)}
    hits = 0
    for _ in range(BOOTSTRAP_ROUNDS):
        a_mean = np.array([x[rng.integers(0, len(x), len(x))].mean() for x in acc])
        l_med = np.array([np.median(x[rng.integers(0, len(x), len(x))]) for x in lat])
        on_front = np.flatnonzero(front_mask(a_mean, l_med))
        if on_front[knee_index(a_mean[on_front], l_med[on_front], (a_mean, l_med))] == i_rec:
            hits += 1
            continue
        no_slower = l_med <= l_med[i_rec] * (1 + tie[rec.key])
        if a_mean[no_slower].max() - a_mean[i_rec] <= ACC_POINT:
            hits += 1
    return hits / BOOTSTRAP_ROUNDS


def answer(records: Sequence[TrialRecord], spec: StudySpec, retimings: Sequence[Retiming] = ()) -> Answer:
    """The study's head-count answer (see the module docstring); finalists' latencies come from ``retimings``
    when the study has them (explorer.search.retime)."""
    search = within_budgets(architectures(records, "search"), spec)
    finals = architectures(records, "finalist", retimings=retimings)
    candidates = within_budgets(finals, spec)
    per_base = []
    for d_model, n_layers in sorted({(a.config.d_model, a.config.n_layers) for a in search}):
        here = [a for a in search if (a.config.d_model, a.config.n_layers) == (d_model, n_layers)]
        per_base.append((d_model, n_layers, _knee_of(here)[0]))
    picks = _picks(search)
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
            None, "none", (), (), (), None, "", tuple(per_base), picks, ("no feasible trial finished",)
        )
    rec, front = _knee_of(candidates)
    measured = finals if evidence == "finalists" else search
    # seed-to-seed spread on the accuracy scale, pooled over every architecture with several runs
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
    contrasts = [
        _contrast(
            "1 head per layer",
            rec,
            _find(measured, base.d_model, base.n_layers, (1,) * base.n_layers),
            "not measured at this width and depth",
            spread,
        ),
        _contrast(
            f"{folk} heads per layer (the folklore's default)" if folk else "8-16 heads per layer",
            rec,
            _find(measured, base.d_model, base.n_layers, (folk,) * base.n_layers) if folk else None,
            "not measured at this width and depth"
            if folk
            else f"no count in 8-16 divides d_model {base.d_model}",
            spread,
        ),
    ]
    faster = [
        a
        for a in front
        if a.latency.estimate < rec.latency.estimate
        and (a.config.d_model, a.config.n_layers) == (base.d_model, base.n_layers)
    ]
    contrasts.append(
        _contrast(
            "next faster layout",
            rec,
            faster[-1] if faster else None,
            "nothing on the front is faster at this width and depth",
            spread,
        )
    )
    contrasts = _merge_same(contrasts)
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
        confidence = _confidence(rec, candidates, runs)
        method = (
            f"share of {BOOTSTRAP_ROUNDS} bootstrap resamples of the seeds (each candidate's runs drawn with "
            "replacement, means and median latencies recomputed) in which this layout is still the knee, or within "
            f"{ACC_POINT * 100:.0f} point of the most accurate candidate that is no slower"
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
        return max(candidates, key=lambda a: (a.accuracy.estimate, -a.latency.estimate))
    if which == "fastest":
        return min(candidates, key=lambda a: (a.latency.estimate, -a.accuracy.estimate))
    raise ValueError(which)


def select_run(records: Sequence[TrialRecord], arch: Architecture) -> TrialRecord:
    """The run that stands for ``arch``: the one whose validation accuracy is the median of its runs (the lower
    middle one with an even count), so exported weights are typical of the layout, not its luckiest seed."""
    runs = sorted(
        (r for r in records if r.number in set(arch.numbers)), key=lambda r: (r.val_accuracy or 0.0, r.number)
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
