"""The tutorial's rules of thumb, checked on a study's own layouts.

Each rule compares two groups of layouts ("one head" against "several heads", "d_k below 16" against "d_k of 16
or more", ...) of equal width and depth. Where the study has finalist runs, a rule is read on them, unit by unit
(:mod:`explorer.answer._unit_groups`): every finalist layout trained on the same folds with the same seeds for the
same fixed schedule, so the difference of the two groups' means on each unit is a paired difference, tested
with a one-sided paired t test of the claimed direction at 5% and the 90% t interval that goes with it (the
values neither one-sided test rejects, so a verdict never contradicts its interval), the same machinery as the
answer.
A rule whose two sides are not both among the finalists is "not enough data", and says which side is missing:
the search's single short runs (one seed, stopped at rungs) are not used to judge it, because at the epochs
they share, architectures are not told apart from seed noise. A rule whose two sides the study's space cannot
both hold at one width and depth (more than 16 heads at d_model 64 with d_k >= 4) is "not applicable", and says
why.

A study without finalist runs (the stage switched off) is read on its search instead: architectures (seeds
averaged) within strata of equal width and depth, at the last epoch every compared one trained
(:func:`explorer.answer._tables.common_epoch`), with a stratified exact permutation test and a stratified
bootstrap interval; the verdict then says so.

Verdicts: **supported** (the claimed direction at p <= 0.05), **contradicted** (the reverse at p <= 0.05; for
"8-16 heads suffice": the gain of more than 16 heads exceeds the answer's margin with 95% confidence), or **no
difference larger than X** (X: the largest difference the interval shown allows). Quality is the task's metric:
accuracy, or bits per byte for a language model (lower is better).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.analysis._groups import (
    ALPHA,
    MIN_ARCHS,
    NOT_APPLICABLE,
    NOT_ENOUGH,
    evidence,
    group_comparison,
    no_difference,
    records_metric,
)
from explorer.answer import (
    Architecture,
    Comparison,
    Grid,
    UnitComparison,
    compare,
    quality_margin,
    unit_comparison,
)
from explorer.layout import SCHEDULE_FAMILIES, ModelConfig
from explorer.measurements import QualityMetric
from explorer.storage import TrialRecord

DK_FLOOR = 16  # the tutorial's d_k floor
MIN_SPEEDUP = 1.10  # merged must beat serial by at least 10% (and outside the spread) to count as faster


@dataclass(frozen=True)
class RuleVerdict:
    """One rule of thumb from the tutorial checked against this study's layouts."""

    rule: str
    verdict: str  # supported | contradicted | no difference larger than X points | NOT_ENOUGH
    evidence: str
    comparison: Comparison | UnitComparison | None = None
    epoch: int | None = None  # the epoch the accuracies were read at
    numbers: Mapping[str, float] | None = None


@dataclass(frozen=True)
class Evidence:
    """What a rule reads: the finalists' grid and layouts (when the study has them) and every record."""

    records: Sequence[TrialRecord]
    grid: Grid | None = None
    archs: Sequence[Architecture] = ()
    margin: float = 0.01  # the answer's margin: what "brings little" means for the 8-16 heads rule
    space: Sequence[ModelConfig] = ()  # every layout the study's space holds (empty: not known)

    @property
    def on_finalists(self) -> bool:
        return self.grid is not None


def _layouts(archs: Sequence[Architecture]) -> str:
    return " ".join(",".join(map(str, a.heads)) for a in archs)


def unit_evidence(u: UnitComparison, a: str, b: str, metric: QualityMetric) -> str:
    """A unit comparison in words: the layouts, the mean difference with its interval, and p."""
    d = u.diff
    p = f"paired t p = {min(u.p_greater, u.p_less):.3g}"
    if metric.direction == "maximize":
        size = f"{d.diff * 100:+.2f} points [{d.low * 100:+.2f}, {d.high * 100:+.2f}]"
    else:
        size = f"{-d.diff:+.3f} bits per byte [{-d.high:+.3f}, {-d.low:+.3f}]"
    return (
        f"{a} ({_layouts(u.a)}) minus {b} ({_layouts(u.b)}), finalist runs paired on {d.n} units: {size} "
        f"({d.level:.0%} t interval; {p}, one-sided)"
    )


def _harm_rule(
    rule: str,
    ev: Evidence,
    good: Callable[[ModelConfig], bool],
    bad: Callable[[ModelConfig], bool],
    names: tuple[str, str],
    strata: Callable[[ModelConfig], tuple[Any, ...]] = lambda c: (c.d_model, c.n_layers),
) -> RuleVerdict:
    """Claim: ``good`` layouts are better than ``bad`` ones of the same width and depth."""
    if ev.on_finalists:
        u = unit_comparison(ev.grid, ev.archs, good, bad, strata, level=1 - 2 * ALPHA)
        if u is None:
            return _not_on_finalists(rule, ev, good, bad, names, strata)
        text = unit_evidence(u, *names, records_metric(ev.records))
        if u.p_greater <= ALPHA:
            return RuleVerdict(rule, "supported", text, u)
        if u.p_less <= ALPHA:
            return RuleVerdict(rule, "contradicted", text + "; the reverse holds", u)
        return RuleVerdict(rule, _no_difference_bound(u.diff.bound, records_metric(ev.records)), text, u)
    why = _outside_space(ev, good, bad, names, strata)
    if why is not None:
        return _not_applicable(rule, why)
    return _harm_rule_on_search(rule, ev.records, good, bad, names, strata)


def _outside_space(
    ev: Evidence,
    good: Callable[[ModelConfig], bool],
    bad: Callable[[ModelConfig], bool],
    names: tuple[str, str],
    strata: Callable[[ModelConfig], tuple[Any, ...]],
) -> str | None:
    """Why the space cannot test the rule (no stratum holds layouts of both sides), or None when it can or the
    space is not known."""
    if not ev.space:
        return None
    sides: dict[tuple[Any, ...], tuple[bool, bool]] = {}
    for c in ev.space:
        a, b = sides.get(strata(c), (False, False))
        sides[strata(c)] = (a or good(c), b or bad(c))
    if any(a and b for a, b in sides.values()):
        return None
    widths = "/".join(map(str, sorted({c.d_model for c in ev.space})))
    most = max(max(c.heads) for c in ev.space)
    floor = min(c.min_dk for c in ev.space)
    limits = f"at most {most} heads a layer at d_model {widths} with d_k >= {floor}"
    # a space short of a schedule family ("free" aside) says which families it holds
    held = {c.family for c in ev.space}
    families = [f for f in SCHEDULE_FAMILIES if f in held]
    if len(families) < len(SCHEDULE_FAMILIES) - 1:
        limits += f", {'/'.join(families)} schedules only"
    has_good, has_bad = any(a for a, _ in sides.values()), any(b for _, b in sides.values())
    if has_good and has_bad:
        return f"the space never holds layouts with {names[0]} and with {names[1]} at one width and depth ({limits})"
    return f"the space holds no layout with {names[1] if has_good else names[0]} ({limits})"


def _not_applicable(rule: str, why: str) -> RuleVerdict:
    return RuleVerdict(rule, NOT_APPLICABLE, why)


def _not_on_finalists(
    rule: str,
    ev: Evidence,
    good: Callable[[ModelConfig], bool],
    bad: Callable[[ModelConfig], bool],
    names: tuple[str, str],
    strata: Callable[[ModelConfig], tuple[Any, ...]] = lambda c: (c.d_model, c.n_layers),
) -> RuleVerdict:
    why = _outside_space(ev, good, bad, names, strata)
    if why is not None:
        return _not_applicable(rule, why)
    n_a = sum(good(a.config) for a in ev.archs)
    n_b = sum(bad(a.config) for a in ev.archs)
    return RuleVerdict(
        rule,
        NOT_ENOUGH,
        f"the finalists hold {n_a} layout(s) with {names[0]} and {n_b} with {names[1]} at a shared "
        "width and depth (both sides are needed); the search's single short runs are not used to "
        "judge it, because at the epochs they share architectures are not told apart from seed noise",
    )


def _no_difference_bound(bound: float, metric: QualityMetric) -> str:
    if metric.direction == "maximize":
        return f"no difference larger than {bound * 100:.1f} points"
    return f"no difference larger than {bound:.3f} bits per byte"


def _harm_rule_on_search(
    rule: str,
    records: Sequence[TrialRecord],
    good: Callable[[ModelConfig], bool],
    bad: Callable[[ModelConfig], bool],
    names: tuple[str, str],
    strata: Callable[[ModelConfig], tuple[Any, ...]],
) -> RuleVerdict:
    g, n_a, n_b = group_comparison(records, good, bad, strata, alternative="greater")
    if g is None:
        return RuleVerdict(
            rule,
            NOT_ENOUGH,
            f"needs >= {MIN_ARCHS} architectures each of {names[0]} and {names[1]} at a shared width and depth; "
            f"the study has {n_a} and {n_b}",
        )
    c, text = g.comparison, evidence(g, *names)
    if c.p_value <= ALPHA:
        return RuleVerdict(rule, "supported", text, c, g.epoch)
    reverse = compare(list(g.values), alternative="less")
    if reverse.p_value <= ALPHA:
        return RuleVerdict(
            rule, "contradicted", text + f"; the reverse holds (p = {reverse.p_value:.3g})", c, g.epoch
        )
    return RuleVerdict(rule, no_difference(c, g.metric), text, c, g.epoch)


def _few_heads_rule(ev: Evidence) -> RuleVerdict:
    """Claim: more than 16 heads (in some layer) brings less than the answer's margin over 8-16 heads."""
    rule = "8-16 heads suffice (more than 16 brings little)"
    more, usual = (lambda c: max(c.heads) > 16), (lambda c: 8 <= max(c.heads) <= 16)
    metric = records_metric(ev.records)
    what = (
        f"{ev.margin * 100:g} point(s)"
        if metric.direction == "maximize"
        else f"{ev.margin:.3g} bits per byte"
    )
    why = _outside_space(
        ev, more, usual, ("more than 16 heads", "8-16 heads"), lambda c: (c.d_model, c.n_layers)
    )
    if why is not None:
        return _not_applicable(rule, why)
    if ev.on_finalists:
        u = unit_comparison(ev.grid, ev.archs, more, usual)
        if u is None:
            return _not_on_finalists(rule, ev, more, usual, ("more than 16 heads", "8-16 heads"))
        text = unit_evidence(u, "> 16 heads", "8-16 heads", metric)
        if u.diff.high < ev.margin:
            return RuleVerdict(rule, "supported", text + f": the gain is below {what}", u)
        if u.diff.low > ev.margin:
            return RuleVerdict(rule, "contradicted", text + f": the gain exceeds {what}", u)
        return RuleVerdict(rule, _no_difference_bound(u.diff.bound, metric), text, u)
    g, n_a, n_b = group_comparison(ev.records, more, usual, alternative="greater")
    if g is None:
        return RuleVerdict(
            rule,
            NOT_ENOUGH,
            f"needs >= {MIN_ARCHS} architectures each with more than 16 and with 8-16 heads (most in any layer) at "
            f"a shared width and depth; the study has {n_a} and {n_b}",
        )
    c, text = g.comparison, evidence(g, "> 16 heads", "8-16 heads")
    margin = quality_margin(g.metric, c.mean_b)
    if c.high < margin:
        return RuleVerdict(rule, "supported", text + f": the gain is below {what}", c, g.epoch)
    if c.low > margin:
        return RuleVerdict(rule, "contradicted", text + f": the gain exceeds {what}", c, g.epoch)
    return RuleVerdict(rule, no_difference(c, g.metric), text, c, g.epoch)


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
    records: Sequence[TrialRecord],
    bench: Sequence[Mapping[str, Any]] | None = None,
    grid: Grid | None = None,
    archs: Sequence[Architecture] = (),
    margin: float = 0.01,
    space: Sequence[ModelConfig] = (),
) -> list[RuleVerdict]:
    """Check the tutorial's rules of thumb on the finalists' ``grid`` of ``archs`` (the answer's evidence), or on
    the search where the study has no finalist runs (see the module docstring), and on its bench table; a rule
    the layouts of ``space`` (every one the study's space holds, when given) cannot test is "not applicable"."""
    ev = Evidence(records, grid, archs, margin, space)

    def multi(c: ModelConfig) -> bool:
        return min(c.heads) >= 2

    word = "accuracy" if records_metric(records).direction == "maximize" else "quality (bits per byte)"
    return [
        _harm_rule(
            f"One head loses {word}", ev, multi, lambda c: max(c.heads) == 1, ("multi-head", "one head")
        ),
        # Multi-head layouts only, so the one-head penalty does not masquerade as a d_k effect.
        _harm_rule(
            f"d_k below {DK_FLOOR} hurts",
            ev,
            lambda c: multi(c) and min(c.d_k) >= DK_FLOOR,
            lambda c: multi(c) and min(c.d_k) < DK_FLOOR,
            (f"multi-head, d_k >= {DK_FLOOR}", f"multi-head, d_k < {DK_FLOOR}"),
        ),
        _few_heads_rule(ev),
        # Same width, depth and largest layer: increasing 4->16 against uniform 16 and decreasing 16->4.
        _harm_rule(
            "More heads deep than shallow",
            ev,
            lambda c: c.family == "increasing",
            lambda c: c.family in ("uniform", "decreasing"),
            ("increasing", "uniform/decreasing"),
            strata=lambda c: (c.d_model, c.n_layers, max(c.heads)),
        ),
        _bench_rule(bench),
    ]
