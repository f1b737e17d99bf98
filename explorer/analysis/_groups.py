"""Groups of architectures compared on the search (architectures, seeds averaged, at a common epoch), or on
finalist runs with the run as the unit: the rules of thumb of a study without finalists, the relations claim and
the key/value claims read these (:mod:`explorer.analysis._rules` reads the finalists unit by unit where it can).

Each architecture (seeds averaged) counts once, within strata of equal width and depth (the head count does not
change the parameter count), at the last epoch all compared ones trained
(:func:`explorer.answer._tables.common_epoch`), so trials stopped early neither drop out nor bias the
comparison. The test is a stratified exact permutation test (Monte Carlo when the splits are too many to list),
the interval a stratified bootstrap.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.answer import Architecture, Comparison, architectures, common_epoch, compare
from explorer.layout import ModelConfig
from explorer.measurements import QUALITY_METRICS, QualityMetric
from explorer.storage import Retiming, Role, TrialRecord

NOT_ENOUGH = "not enough data"
NOT_APPLICABLE = "not applicable"  # the study's space cannot hold both sides of the rule
ALPHA = 0.05
MIN_ARCHS = 2  # architectures needed on each side of a comparison


@dataclass(frozen=True)
class GroupComparison:
    comparison: Comparison
    epoch: int | None  # the epoch the accuracies were read at (None: finalist runs, each at its end)
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
    ``retimings`` (explorer.study._retime) replace the runs' own timings where given.
    """
    metric = records_metric(records)
    get = value or (lambda a: a.score)
    keys = {
        r.key
        for r in records
        if r.role == Role.SEARCH
        and r.config is not None
        and r.feasible
        and (in_a(r.config) or in_b(r.config))
    }
    epoch = common_epoch(records, keys)
    if epoch is None:
        return None, 0, 0
    archs = [
        a
        for a in architectures(records, Role.SEARCH, epoch=epoch, retimings=retimings)
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
    """The same comparison over finalist runs, the run as the unit (what relations and key/value claims use
    where the search lacks a side)."""
    groups: dict[tuple[Any, ...], tuple[list[float], list[float]]] = {}
    sign = 1.0 if metric.direction == "maximize" else -1.0  # scores: higher is better
    for r in records:
        if r.role != Role.FINALIST or not r.finished or r.config is None or not r.feasible:
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
        else "of finalist runs (the search had too few architectures)"
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
