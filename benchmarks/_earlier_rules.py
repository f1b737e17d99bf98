"""The rules before the product's, kept for benchmarks/decisions.py's side-by-side (the product's rule is
:mod:`explorer.answer._rule`, which holds no other):

* ``joint=False``: a layout's probability within the margin is the union bound alone (no joint statement);
* ``chain=False``: every layout is placed at once and the answer is the fastest placed, decided once every
  faster layout is beyond the margin or at its edge (no fixed-sequence test in latency order);
* ``sized=False``: rounds add ``step`` units, or ``grow`` times the units the chosen layouts have if that is more
  (not sized to what decides).

With ``joint``, ``chain`` and ``sized`` all true these are the product's own functions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from explorer.answer._rule import (
    CLOSED,
    NEGLIGIBLE,
    Decision,
    Rule,
    Verdict,
    _cells,
    _have,
    _paired_stats,
    coherent,
    decide,
    fastest,
    next_cells,
    place,
    ratio,
    row_means,
    units_to_decide,
)


@dataclass(frozen=True)
class Variant:
    """Which earlier rule: the statement, the answer's test and the rounds."""

    joint: bool = True
    chain: bool = True
    sized: bool = True
    grow: float = 0.0  # with sized=False: a round adds max(step, grow x the units the chosen layouts have)

    @property
    def product(self) -> bool:
        return self.joint and self.chain and self.sized


def _faster_undecided(
    answer: int, verdicts: Sequence[Verdict], times: npt.NDArray[np.float64], tie: float
) -> list[int]:
    """The undecided layouts faster than ``answer`` by more than the latency tie, in rounds that agree on it."""
    return [
        i
        for i, v in enumerate(verdicts)
        if v is Verdict.UNDECIDED
        and ratio(times, i, answer) < 1 / (1 + tie)
        and coherent(times, i, answer, tie)
    ]


def _union_bound(placed: Decision, scores: npt.NDArray[np.float64], rule: Rule) -> Decision:
    """``placed`` with each probability within the margin the union bound alone, and its verdicts again."""
    p_within = np.clip(1.0 - placed.risks.sum(axis=1), 0.0, 1.0)
    means = row_means(scores)
    verdicts = []
    for i, v in enumerate(placed.verdicts):
        if v is Verdict.BEST:
            verdicts.append(v)
        elif p_within[i] >= 1 - rule.risk:
            verdicts.append(Verdict.WITHIN)
        elif placed.p_beyond[i] >= 1 - rule.risk or np.isnan(means[i]):
            verdicts.append(Verdict.BEYOND)
        elif rule.edge > 0 and placed.p_edge[i] >= 1 - rule.risk:
            verdicts.append(Verdict.EDGE)
        else:
            verdicts.append(Verdict.UNDECIDED)
    return dataclasses.replace(placed, p_within=tuple(map(float, p_within)), verdicts=tuple(verdicts))


def decide_as(
    variant: Variant, scores: npt.NDArray[np.float64], times: npt.NDArray[np.float64], rule: Rule
) -> Decision:
    """The decision of ``variant`` (the product's :func:`explorer.answer._rule.decide` where it is the product's
    statement and chain)."""
    if variant.joint and variant.chain:
        return decide(scores, times, rule)
    if variant.chain:  # the union bound, then the chain: the product's chain on other probabilities
        placed = _union_bound(place(scores, times, rule), scores, rule)
        return _chain(placed, scores, times, rule)
    placed = place(scores, times, rule)
    if not variant.joint:
        placed = _union_bound(placed, scores, rule)
    if not placed.members:
        return placed
    answer = fastest(placed.members, times, row_means(scores), rule.tie)
    decided = not _faster_undecided(answer, placed.verdicts, times, rule.tie)
    return dataclasses.replace(placed, answer=answer, decided=decided)


def _chain(
    placed: Decision, scores: npt.NDArray[np.float64], times: npt.NDArray[np.float64], rule: Rule
) -> Decision:
    faster = [
        i for i in range(len(times)) if i != placed.best and ratio(times, i, placed.best) < 1 / (1 + rule.tie)
    ]
    order = sorted(faster, key=lambda i: (-ratio(times, i, placed.best), i))
    verdicts = list(placed.verdicts)
    stop = next((i for i in order if verdicts[i] is not Verdict.WITHIN), None)
    if stop is not None:
        past = set(order[order.index(stop) + 1 :])
        verdicts = [
            Verdict.UNTESTED if i in past and v in (Verdict.WITHIN, Verdict.UNDECIDED) else v
            for i, v in enumerate(verdicts)
        ]
    placed = dataclasses.replace(placed, verdicts=tuple(verdicts), stop=stop)
    if not placed.members:
        return placed
    answer = fastest(placed.members, times, row_means(scores), rule.tie)
    return dataclasses.replace(placed, answer=answer, decided=stop is None or verdicts[stop] in CLOSED)


def _open(variant: Variant, decision: Decision, times: npt.NDArray[np.float64], tie: float) -> list[int]:
    if variant.chain:
        s = decision.stop
        return [] if s is None or decision.verdicts[s] is not Verdict.UNDECIDED or decision.decided else [s]
    return _faster_undecided(decision.answer, decision.verdicts, times, tie)


def _next_layouts(
    variant: Variant, decision: Decision, times: npt.NDArray[np.float64], tie: float
) -> list[int]:
    if decision.decided:
        return []
    open_ = _open(variant, decision, times, tie)
    focus = set(open_)
    if decision.p_within[decision.answer] < 1 - decision.risk or open_:
        focus.add(decision.answer)
    weigh = set(focus)
    for i in focus:
        weigh |= {
            j for j in range(len(decision.verdicts)) if decision.risks[i, j] > NEGLIGIBLE * decision.risk
        }
    weigh.add(decision.best)
    return sorted(i for i in weigh if decision.verdicts[i] not in CLOSED)


def next_cells_as(
    variant: Variant,
    scores: npt.NDArray[np.float64],
    times: npt.NDArray[np.float64],
    rule: Rule,
    left: int,
) -> list[tuple[int, int]]:
    """The next round of ``variant`` (the product's :func:`explorer.answer._rule.next_cells` where it is the
    product's rule), as the library chose it before it held only the product's rule."""
    if variant.product:
        return next_cells(scores, times, rule, left)
    filled = ~np.isnan(scores)
    first = _cells(range(len(scores)), rule.start, filled)
    if first:
        return first[:left] if len(first) > left else first
    decision = decide_as(variant, scores, times, rule)
    chosen = _next_layouts(variant, decision, times, rule.tie)
    if not chosen:
        return []
    h = _have(filled, chosen)
    if variant.sized:
        need = _open_need(variant, scores, decision, times, rule)
        extra = max(rule.step, h // 2, 0 if need is None else min(h, math.ceil((need - h) / 2)))
    else:
        extra = max(rule.step, int(h * variant.grow))
    plans = [_cells(chosen, h + e, filled) for e in range(extra, 0, -1)]
    if variant.sized:  # then only what the nearest decision needs; rivals closed early caught up first
        open_ = _open(variant, decision, times, rule.tie)
        lead = min(open_, key=lambda i: ratio(times, i, decision.answer)) if open_ else decision.answer
        core = sorted({lead, decision.best} & set(chosen) | {decision.best})
        if core != chosen:
            plans += [_cells(core, _have(filled, core) + e, filled) for e in range(extra, 0, -1)]
        behind = _catch_up(variant, decision, filled, times, rule, h)
        if behind and need is not None and need <= h:
            plans = [behind]
        elif behind:
            plans = [behind + [c for c in p if c not in behind] for p in plans] + [behind]
    return next((p for p in plans if p and len(p) <= left), [])


def _open_need(
    variant: Variant,
    scores: npt.NDArray[np.float64],
    decision: Decision,
    times: npt.NDArray[np.float64],
    rule: Rule,
) -> int | None:
    """The paired units the nearest open comparison of ``variant`` would be decided at (None: none can say)."""
    open_ = _open(variant, decision, times, rule.tie)
    if decision.p_within[decision.answer] < 1 - decision.risk and decision.answer != decision.best:
        open_.append(decision.answer)
    n, mean, sd, _ = _paired_stats(scores)
    b = decision.best
    needs = [
        units_to_decide(float(mean[i, b]), float(sd[i, b]), rule.margin, decision.risk, decision.edge)
        for i in open_
        if n[i, b] >= 2
    ]
    found = [k for k in needs if k is not None]
    return min(found) if found else None


def _catch_up(
    variant: Variant,
    decision: Decision,
    filled: npt.NDArray[np.bool_],
    times: npt.NDArray[np.float64],
    rule: Rule,
    upto: int,
) -> list[tuple[int, int]]:
    focus = set(_open(variant, decision, times, rule.tie))
    if decision.p_within[decision.answer] < 1 - decision.risk:
        focus.add(decision.answer)
    out: list[tuple[int, int]] = []
    for j in range(len(decision.verdicts)):
        n_j = int(filled[j].sum())
        held = any(decision.risks[i, j] > NEGLIGIBLE * decision.risk for i in focus if i != j)
        if j in focus or not held or 2 * n_j >= upto:
            continue
        missing = [(j, u) for u in range(upto) if u >= filled.shape[1] or not filled[j, u]]
        out += missing[: max(rule.step, n_j)]
    return out
