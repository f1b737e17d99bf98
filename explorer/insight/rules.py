"""The seed's rules of thumb, checked on a study's own architectures.

Each rule compares two groups of architectures (the unit: seeds averaged) within strata of equal width and depth
(the head count does not change the parameter count), using the validation accuracy every compared architecture
reached: the last epoch all of them trained (:func:`explorer.insight.tables.common_epoch`), so trials stopped
early neither drop out nor bias the comparison. The test is a stratified exact permutation test (Monte Carlo when
the splits are too many to list), the interval a stratified bootstrap, and the verdict one of:

* **supported**: the difference goes the claimed way, p <= 0.05;
* **contradicted**: it goes the other way, p <= 0.05 (for "more than 16 heads brings little": the gain of more
  than 16 heads is above one point with 95% confidence);
* **no difference larger than X points**: neither; X is the largest difference the 95% interval still allows,
  stated with the smallest difference this many architectures could have detected (80% power).

When the search lacks a side (a heads-only study at one width and depth holds exactly one architecture with one
head per layer), the rule falls back to the finalist runs: fresh seeds, each trained until its quality stopped
moving, with the run as the unit (the same tests, on converged values). "Not enough data" is left for a study
that lacks a group there too: fewer than two architectures, or two runs, on a side.

Quality is the task's metric: validation accuracy, or bits per byte for a language model (lower is better;
"points" become bits per byte and "one point" 1% of the value, :func:`explorer.insight.tables.quality_margin`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.engine.config import ModelConfig
from explorer.engine.measures import QUALITY_METRICS, QualityMetric
from explorer.insight.stats import Comparison, compare
from explorer.insight.tables import Architecture, architectures, common_epoch, quality_margin
from explorer.search.record import Retiming, TrialRecord

__all__ = [
    "ALPHA",
    "DK_FLOOR",
    "MIN_ARCHS",
    "MIN_SPEEDUP",
    "NOT_ENOUGH",
    "RuleVerdict",
    "evidence",
    "group_comparison",
    "no_difference",
    "records_metric",
    "rules_of_thumb",
]

NOT_ENOUGH = "not enough data"
ALPHA = 0.05
MIN_ARCHS = 2  # architectures needed on each side of a comparison
DK_FLOOR = 16  # the folklore's d_k floor
MIN_SPEEDUP = 1.10  # merged must beat serial by at least 10% (and outside the spread) to count as faster


@dataclass(frozen=True)
class RuleVerdict:
    """One rule of thumb from the seed checked against this study's architectures."""

    rule: str
    verdict: str  # supported | contradicted | no difference larger than X points | NOT_ENOUGH
    evidence: str
    comparison: Comparison | None = None
    epoch: int | None = None  # the epoch the accuracies were read at
    numbers: Mapping[str, float] | None = None


@dataclass(frozen=True)
class GroupComparison:
    comparison: Comparison
    epoch: int | None  # the epoch the accuracies were read at (None: finalist runs, each at its plateau)
    strata: tuple[tuple[Any, ...], ...]  # the strata compared (width, depth, ...)
    values: tuple[tuple[list[float], list[float]], ...]  # per stratum: side a's and side b's values
    metric: QualityMetric = QUALITY_METRICS["classification"]  # the quality the scores come from
    unit: str = "architectures"  # what one value is: an architecture (seeds averaged) or a finalist run


def records_metric(records: Sequence[TrialRecord]) -> QualityMetric:
    """The quality metric of a study's records (its task's; classification when there are none)."""
    return next((r.metric for r in records), QUALITY_METRICS["classification"])


def group_comparison(
    records: Sequence[TrialRecord],
    in_a: Callable[[ModelConfig], bool],
    in_b: Callable[[ModelConfig], bool],
    strata: Callable[[ModelConfig], tuple[Any, ...]] = lambda c: (c.d_model, c.n_layers),
    alternative: str = "greater",
    value: Callable[[Architecture], float | None] | None = None,
    retimings: Sequence[Retiming] = (),
) -> tuple[GroupComparison | None, int, int]:
    """Compare architectures where ``in_a`` holds against those where ``in_b`` holds, stratum by stratum.

    Each architecture contributes ``value(a)`` (default its quality score, higher is better: accuracy, or
    minus bits per byte); one whose value is None is left out. Returns (the comparison or None, architectures
    on side a, on side b). None when a side has fewer than MIN_ARCHS architectures in the strata both share.
    ``retimings`` (explorer.search.retime) replace the runs' own timings where given.
    """
    metric = records_metric(records)
    get = value or (lambda a: a.score)
    keys = {
        r.key
        for r in records
        if r.role == "search" and r.config is not None and r.feasible and (in_a(r.config) or in_b(r.config))
    }
    epoch = common_epoch(records, keys)
    if epoch is None:
        return None, 0, 0
    archs = [
        a
        for a in architectures(records, "search", epoch=epoch, retimings=retimings)
        if a.key in keys and a.feasible
    ]
    groups: dict[tuple[Any, ...], tuple[list[float], list[float]]] = {}
    for a in archs:
        side = 0 if in_a(a.config) else 1 if in_b(a.config) else None
        v = get(a) if side is not None else None
        if side is not None and v is not None:
            groups.setdefault(strata(a.config), ([], []))[side].append(v)
    found = _compared(groups, alternative, epoch, metric, "architectures", value is None)
    if found[0] is None and value is None:
        runs = _finalist_comparison(records, in_a, in_b, strata, alternative, metric)
        if runs[0] is not None:
            return runs
    return found


def _compared(
    groups: dict[tuple[Any, ...], tuple[list[float], list[float]]],
    alternative: str,
    epoch: int | None,
    metric: QualityMetric,
    unit: str,
    scores: bool,
) -> tuple[GroupComparison | None, int, int]:
    kept = {s: g for s, g in groups.items() if g[0] and g[1]}
    n_a = sum(len(g[0]) for g in kept.values())
    n_b = sum(len(g[1]) for g in kept.values())
    if n_a < MIN_ARCHS or n_b < MIN_ARCHS:
        return None, sum(len(g[0]) for g in groups.values()), sum(len(g[1]) for g in groups.values())
    bounds = (0.0, 1.0) if scores and metric.direction == "maximize" else None  # accuracy: a proportion
    c = compare(list(kept.values()), alternative=alternative, bounds=bounds)
    return GroupComparison(c, epoch, tuple(kept), tuple(kept.values()), metric, unit), n_a, n_b


def _finalist_comparison(
    records: Sequence[TrialRecord],
    in_a: Callable[[ModelConfig], bool],
    in_b: Callable[[ModelConfig], bool],
    strata: Callable[[ModelConfig], tuple[Any, ...]],
    alternative: str,
    metric: QualityMetric,
) -> tuple[GroupComparison | None, int, int]:
    """The same comparison over finalist runs (each a fresh seed trained to its plateau), the run as the unit."""
    groups: dict[tuple[Any, ...], tuple[list[float], list[float]]] = {}
    sign = 1.0 if metric.direction == "maximize" else -1.0  # scores: higher is better
    for r in records:
        if r.role != "finalist" or not r.finished or r.config is None or not r.feasible:
            continue
        side = 0 if in_a(r.config) else 1 if in_b(r.config) else None
        if side is not None and r.quality is not None:
            groups.setdefault(strata(r.config), ([], []))[side].append(sign * r.quality)
    return _compared(groups, alternative, None, metric, "finalist runs", True)


def _pts(x: float) -> str:
    return f"{x * 100:+.1f}"


def evidence(g: GroupComparison, a: str, b: str) -> str:
    """The comparison in words: means, difference with its 95% interval, p, and the detectable difference."""
    c = g.comparison
    p = f"p = {c.p_value:.3g}{'' if c.exact else ' (Monte Carlo)'}"
    when = (
        f"after epoch {g.epoch}"
        if g.epoch is not None
        else "of finalist runs (fresh seeds, each trained to its plateau; the search had too few architectures)"
    )
    if g.metric.direction == "maximize":
        mde = "any" if math.isinf(c.mde) else f"{c.mde * 100:.1f} points"
        return (
            f"{a}: {c.mean_a * 100:.1f}% vs {b}: {c.mean_b * 100:.1f}% mean validation accuracy {when} "
            f"({c.n_a} vs {c.n_b} {g.unit} in {c.strata} group(s) of equal width and depth); "
            f"difference {_pts(c.diff)} points, 95% interval [{_pts(c.low)}, {_pts(c.high)}], {p}; smallest "
            f"difference detectable here: {mde}"
        )
    mde = "any" if math.isinf(c.mde) else f"{c.mde:.3f} bits per byte"  # scores are minus bits per byte
    return (
        f"{a}: {-c.mean_a:.3f} vs {b}: {-c.mean_b:.3f} mean validation bits per byte (lower is better) {when} "
        f"({c.n_a} vs {c.n_b} {g.unit} in {c.strata} group(s) of equal width and depth); "
        f"difference {-c.diff:+.3f} bits per byte, 95% interval [{-c.high:+.3f}, {-c.low:+.3f}], {p}; smallest "
        f"difference detectable here: {mde}"
    )


def no_difference(c: Comparison, metric: QualityMetric = QUALITY_METRICS["classification"]) -> str:
    """The verdict when neither direction is shown: the largest difference the interval still allows."""
    if metric.direction == "maximize":
        return f"no difference larger than {c.bound * 100:.1f} points"
    return f"no difference larger than {c.bound:.3f} bits per byte"


def _harm_rule(
    rule: str,
    records: Sequence[TrialRecord],
    good: Callable[[ModelConfig], bool],
    bad: Callable[[ModelConfig], bool],
    names: tuple[str, str],
    strata: Callable[[ModelConfig], tuple[Any, ...]] = lambda c: (c.d_model, c.n_layers),
) -> RuleVerdict:
    """Claim: ``good`` architectures are more accurate than ``bad`` ones of the same width and depth."""
    g, n_a, n_b = group_comparison(records, good, bad, strata, alternative="greater")
    if g is None:
        return RuleVerdict(
            rule,
            NOT_ENOUGH,
            f"needs >= {MIN_ARCHS} architectures (or finalist runs) each of {names[0]} and {names[1]} at a shared "
            f"width and depth; the study has {n_a} and {n_b}",
        )
    c, ev = g.comparison, evidence(g, *names)
    if c.p_value <= ALPHA:
        return RuleVerdict(rule, "supported", ev, c, g.epoch)
    reverse = compare(list(g.values), alternative="less")
    if reverse.p_value <= ALPHA:
        return RuleVerdict(
            rule, "contradicted", ev + f"; the reverse holds (p = {reverse.p_value:.3g})", c, g.epoch
        )
    return RuleVerdict(rule, no_difference(c, g.metric), ev, c, g.epoch)


def _few_heads_rule(records: Sequence[TrialRecord]) -> RuleVerdict:
    """Claim: more than 16 heads (in some layer) brings less than one point (1% for bits per byte) over 8-16."""
    rule = "8-16 heads suffice (more than 16 brings little)"
    g, n_a, n_b = group_comparison(
        records, lambda c: max(c.heads) > 16, lambda c: 8 <= max(c.heads) <= 16, alternative="greater"
    )
    if g is None:
        return RuleVerdict(
            rule,
            NOT_ENOUGH,
            f"needs >= {MIN_ARCHS} architectures each with more than 16 and with 8-16 heads (most in any layer) at "
            f"a shared width and depth; the study has {n_a} and {n_b}",
        )
    c, ev = g.comparison, evidence(g, "> 16 heads", "8-16 heads")
    margin = quality_margin(g.metric, c.mean_b)
    what = "1 point" if g.metric.direction == "maximize" else f"{margin:.3f} bits per byte (1%)"
    if c.high < margin:
        return RuleVerdict(rule, "supported", ev + f": the gain is below {what}", c, g.epoch)
    if c.low > margin:
        return RuleVerdict(rule, "contradicted", ev + f": the gain exceeds {what}", c, g.epoch)
    return RuleVerdict(rule, no_difference(c, g.metric), ev, c, g.epoch)


def _bench_rule(bench: Sequence[Mapping[str, Any]] | None) -> RuleVerdict:
    """Claim: the merged computation of all heads beats the serial loop over heads (from the bench table)."""
    rule = "Merged heads are faster"
    rows = {str(r.get("impl")): r for r in bench or []}
    if not {"serial", "merged"} <= set(rows):
        return RuleVerdict(
            rule, NOT_ENOUGH, "the study recorded no attention benchmark (spec: bench = false)"
        )
    s, m = rows["serial"], rows["merged"]
    s_ms, m_ms = float(s["median_ms"]), float(m["median_ms"])
    s_iqr, m_iqr = float(s.get("iqr_ms") or 0.0), float(m.get("iqr_ms") or 0.0)
    speedup = s_ms / m_ms
    nums = {"serial_ms": s_ms, "merged_ms": m_ms, "speedup": speedup}
    if "fused" in rows:
        nums["fused_speedup"] = s_ms / float(rows["fused"]["median_ms"])
    ev = (
        f"serial loop {s_ms:.3g} ms (IQR {s_iqr:.2g}) vs merged {m_ms:.3g} ms (IQR {m_iqr:.2g}), medians of the "
        f"timer's blocks at d_model {s.get('d_model')}, {s.get('heads')} heads: {speedup:.2f}x"
    )
    apart = m_ms + m_iqr / 2 < s_ms - s_iqr / 2
    if speedup >= MIN_SPEEDUP and apart:
        return RuleVerdict(
            rule, "supported", ev + f", at least {MIN_SPEEDUP:.2f}x and outside the spread", numbers=nums
        )
    if s_ms + s_iqr / 2 < m_ms - m_iqr / 2:
        return RuleVerdict(rule, "contradicted", ev + ": merged is slower, outside the spread", numbers=nums)
    bound = max(abs(speedup - 1), (s_iqr + m_iqr) / 2 / m_ms)
    return RuleVerdict(
        rule, f"no difference larger than {bound * 100:.0f}%", ev + ": within the timing spread", numbers=nums
    )


def rules_of_thumb(
    records: Sequence[TrialRecord], bench: Sequence[Mapping[str, Any]] | None = None
) -> list[RuleVerdict]:
    """Check the seed's rules of thumb on the study's search architectures (and its bench table)."""

    def multi(c: ModelConfig) -> bool:
        return min(c.heads) >= 2

    word = "accuracy" if records_metric(records).direction == "maximize" else "quality (bits per byte)"
    return [
        _harm_rule(
            f"One head loses {word}", records, multi, lambda c: max(c.heads) == 1, ("multi-head", "one head")
        ),
        # Multi-head architectures only, so the one-head penalty does not masquerade as a d_k effect.
        _harm_rule(
            f"d_k below {DK_FLOOR} hurts",
            records,
            lambda c: multi(c) and min(c.d_k) >= DK_FLOOR,
            lambda c: multi(c) and min(c.d_k) < DK_FLOOR,
            (f"multi-head, d_k >= {DK_FLOOR}", f"multi-head, d_k < {DK_FLOOR}"),
        ),
        _few_heads_rule(records),
        # Same width, depth and largest layer: increasing 4->16 against uniform 16 and decreasing 16->4.
        _harm_rule(
            "More heads deep than shallow",
            records,
            lambda c: c.family == "increasing",
            lambda c: c.family in ("uniform", "decreasing"),
            ("increasing", "uniform/decreasing"),
            strata=lambda c: (c.d_model, c.n_layers, max(c.heads)),
        ),
        _bench_rule(bench),
    ]
