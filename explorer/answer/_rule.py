"""The answer's rule on arrays: the fastest layout the evidence places within the margin of the best, at a
stated risk, and which layouts the next finalist runs should go to.

Given the evidence grid's scores (layouts x units, higher is better, NaN where a layout has no run on a unit) and
the layouts' timings (layouts x re-timing rounds):

1. **The best** is the layout with the highest mean score (of two measured as accurate, the faster).
2. **Each layout's probability of being within the margin of the best**, ``P(mu_l >= max_j mu_j - margin)``,
   is computed *jointly* over the other finalists (:func:`joint_within`): the differences ``mu_j - mu_l`` are
   drawn from a multivariate t posterior (flat prior; each centred on the mean of the per-unit differences on
   the units both ran, scaled by their standard error, correlated as those differences are on the units they
   share, each rival's t on the degrees of freedom of the units it shares, their scales drawn together), so
   two near-top layouts that share
   units and rise and fall together are charged once, not twice. The probability is never stated below the union bound ``1 - sum_j P(mu_j - mu_l >
   margin)`` (Bonferroni, valid whatever the dependence), which the joint statement sharpens.
3. **Verdicts**: *within* the margin when that probability is at least ``1 - risk``; *beyond* it when the best
   beats the layout by more than the margin with probability at least ``1 - risk``; *at the edge* when the best
   beats it by more than ``margin - edge`` with that probability (``edge``: the indifference zone, how close to
   the margin counts as its edge): the layout is not shown within the margin and no feasible number of runs would
   show it, so it stops holding the decision open; else *undecided*.
4. **The answer** is found by a *chain*, a fixed-sequence test in latency order: the layouts faster than the best
   by more than ``tie`` are taken slowest first (the order comes from the timings alone, before any test), each
   placed within the margin at the full ``1 - risk`` only while every slower one in the chain was; the first not
   placed within is the chain's *stop*, and the layouts past it are *untested* (a placement there would be a
   second test at the full risk). The answer is the fastest layout placed within the margin (the best counts when
   its own probability reaches ``1 - risk``): the lowest median time over rounds, layouts whose within-round time
   ratio to it (the geometric mean over the rounds both were timed in, so a drift of the machine between rounds
   cancels) is below ``1 + tie`` counting as equally fast, the more accurate of those taken; two layouts whose
   rounds disagree on which is faster (one round each way beyond the tie: a machine busy in some rounds) count
   as equally fast too, their latency comparison withheld (:func:`coherent`). Picking the fastest of many
   placements made at ``1 - risk`` each would ship a layout beyond the margin more often than ``risk`` when
   several sit just beyond it; along the chain only the first layout truly beyond can be placed wrongly, so the
   answer is beyond the margin no more often than one test at ``risk`` would place a layout wrongly (each look
   of the adaptive rounds is another such chance: benchmarks/decisions.md measures what they add). When no
   layout reaches ``1 - risk`` the
   answer is the best, and it is *not decided*; it is *decided* once the answer reaches ``1 - risk`` and the
   stop (if any) is beyond the margin or at its edge.
5. **Where the next runs go** (:func:`next_layouts`, :func:`next_cells`): to the stop while it is undecided
   to the answer while its own probability is short of ``1 - risk``, and to
   every layout whose comparison with those still carries risk (the best among them). Layouts beyond the margin
   or at its edge, and slower layouts that weigh on no open comparison, get no more runs. A round is sized to
   what decides (:func:`units_to_decide`: half the paired units the nearest open comparison still needs at its
   measured gap and spread, at least ``step`` and half the units the layouts have, so the looks at the data stay
   few whatever it shows, at most doubling what they have). A rival closed on its first units that still holds
   an open placement back (its chance of beating the layout by more than the margin is above a share of the
   risk) gets as many units again first (:func:`_catch_up`), alone when the open comparison itself already has
   the units that decide it. A round never exceeds the
   runs left: a round that does not fit shrinks (fewer units, then only the layouts the nearest decision needs),
   and :func:`smallest_round` says how many runs the next decisive round needs when none fits. Every run of a
   round is on a unit another layout shares (the pairing): one that would be alone gets the best beside it (the
   best, its likeliest rival).

With an edge, every comparison ends: once a paired interval is narrower than the edge, the layout is within the
margin, beyond it or at its edge (:func:`forced_units`), so the number of runs a decision can take is bounded.

The rule's settings are one value, :class:`Rule`. Pure numpy and scipy: :func:`explorer.answer._recommend.answer`,
the finalist stage's allocation (:mod:`explorer.answer._finalists`), the forecast of what deciding costs
(:mod:`explorer.answer._forecast`) and the benchmarks all call :func:`decide`, so they can never disagree on what
the rule is. The rules before this one (the union bound alone, every layout placed at once, rounds that grow by a
share) live with the benchmark that compares them (``benchmarks/_earlier_rules.py``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import cast

import numpy as np
import numpy.typing as npt
from scipy import stats

from explorer.answer._paired import units_needed


class Verdict(str, Enum):
    """A layout's standing against the best (step 3 of the rule, and the chain's untested); the values are the
    words the answer's JSON and report print."""

    BEST = "best"
    WITHIN = "within"
    BEYOND = "beyond"
    EDGE = "edge"
    UNDECIDED = "undecided"
    # faster than the chain's first layout not placed within: its test would spend the risk again
    UNTESTED = "untested"

    def __str__(self) -> str:
        return self.value


CLOSED = (Verdict.BEYOND, Verdict.EDGE)  # verdicts that end a layout's runs: it cannot become the answer
NEGLIGIBLE = 0.2  # a comparison carries risk when its term is above this share of the risk (see next_layouts)
JOINT_DRAWS = 8192  # posterior draws of the joint statement (fixed stream: the same grid, the same number)
JOINT_FLOOR = 1e-7  # a rival whose pairwise term is below this enters the statement by the union bound

# [l, j] of the per-unit differences j - l on the units both ran: (units, mean, sd, both mask) (_paired_stats)
_PairedStats = tuple[
    npt.NDArray[np.int_], npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]
]


@dataclass(frozen=True)
class Rule:
    """The rule's settings, on the quality's own scale (0.01 is one accuracy point)."""

    margin: float  # the answer is the fastest layout placed within this of the best ...
    risk: float  # ... with probability at least 1 - risk
    tie: float  # latency ratios closer to 1 than this count as equally fast
    edge: float = 0.0  # the indifference zone below the margin (0: none)
    start: int = 3  # paired units every layout trains first
    step: int = 2  # paired units a round adds at least to each layout it goes to

    def with_edge(self, edge: float) -> Rule:
        """This rule with another indifference zone (the stage's ``[answer] settle`` once its budget is spent)."""
        return dataclasses.replace(self, edge=edge)


@dataclass(frozen=True)
class Decision:
    """Every layout's standing against the best, and the answer (indices into the grid's rows)."""

    best: int
    answer: int
    # P(within the margin of the best), joint over the rivals, never below the union bound
    p_within: tuple[float, ...]
    p_beyond: tuple[float, ...]  # P(the best beats it by more than the margin); NaN for the best
    verdicts: tuple[Verdict, ...]
    risks: npt.NDArray[np.float64]  # [l, j] = P(mu_j - mu_l > margin) (0 on the diagonal)
    decided: bool  # the answer reaches 1 - risk and the chain's stop (if any) is closed
    risk: float
    p_edge: tuple[float, ...] = ()  # P(the best beats it by more than margin - edge); NaN for the best
    edge: float = 0.0  # the indifference zone below the margin (0: none)
    stop: int | None = None  # the chain's first layout not placed within (None: none faster is left)

    @property
    def members(self) -> list[int]:
        """The layouts placed within the margin (the best among them when its own probability reaches it), none
        past the chain's first layout not placed within."""
        return [
            i
            for i, p in enumerate(self.p_within)
            if p >= 1 - self.risk and self.verdicts[i] is not Verdict.UNTESTED
        ]


def row_means(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Each row's mean over its non-missing cells (NaN for an empty row, which is never the best)."""
    filled = ~np.isnan(x)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cast(npt.NDArray[np.float64], np.where(filled, x, 0.0).sum(axis=1) / filled.sum(axis=1))


def _row_medians(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    if not np.isnan(x).any():
        return np.median(x, axis=1)
    return np.array([np.median(r[~np.isnan(r)]) if (~np.isnan(r)).any() else np.nan for r in x])


def _paired_stats(scores: npt.NDArray[np.float64]) -> _PairedStats:
    """``[l, j]`` of the per-unit differences ``j - l`` on the units both ran: (units, mean, sd, both mask)."""
    filled = ~np.isnan(scores)
    both = filled[:, None, :] & filled[None, :, :]  # [l, j, units]
    n = both.sum(axis=2)
    d = np.where(both, scores[None, :, :] - scores[:, None, :], 0.0)  # j - l on shared units
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = d.sum(axis=2) / n
        sd = np.sqrt(np.where(both, (d - mean[..., None]) ** 2, 0.0).sum(axis=2) / (n - 1))
    return n, mean, sd, both


def pair_risks(scores: npt.NDArray[np.float64], margin: float) -> npt.NDArray[np.float64]:
    """``[l, j]``: the probability that layout ``j`` beats layout ``l`` by more than ``margin`` (paired t on the
    units both ran, flat prior; 1 where they share fewer than two units, since nothing then bounds it; a spread
    of 0 decides by the sign)."""
    filled = ~np.isnan(scores)
    n, mean, sd, _ = _paired_stats(scores)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = sd / np.sqrt(n)
        t = (mean - margin) / np.where(se > 0, se, 1.0)
        p = np.where(se > 0, stats.t.cdf(t, np.maximum(n - 1, 1)), np.where(mean > margin, 1.0, 0.0))
    p = np.where(n >= 2, p, 1.0)
    np.fill_diagonal(p, 0.0)
    empty = ~filled.any(axis=1)
    p[:, empty] = 0.0  # a layout with no run threatens none ...
    p[empty, :] = 1.0  # ... and is within nothing
    p[empty, empty] = 0.0
    return p


@functools.lru_cache(maxsize=64)
def _draws(k: int, dfs: tuple[int, ...]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The same ``JOINT_DRAWS`` standard normals (``x k``, antithetic pairs) and, for each rival, a
    chi-square(``dfs[j]``) over its degrees of freedom, all from one uniform per draw (so the rivals' scales move
    together and each rival's marginal is exactly a t on its own units), on every call: a grid's statement is a
    function of the grid, not of a random stream (cached, read-only)."""
    z, _ = _stream(k)
    w = np.stack([_scale(k, df) for df in dfs], axis=1)  # [draws, k]
    w.flags.writeable = False
    return z, w


@functools.lru_cache(maxsize=16)
def _stream(k: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The normals (antithetic pairs) and the uniforms of :func:`_draws` for ``k`` rivals (cached, read-only)."""
    rng = np.random.default_rng(20261204)
    half = rng.standard_normal((JOINT_DRAWS // 2, k))
    u = rng.uniform(size=JOINT_DRAWS)
    z = np.vstack([half, -half])
    z.flags.writeable = u.flags.writeable = False
    return z, u


@functools.lru_cache(maxsize=1024)
def _scale(k: int, df: int) -> npt.NDArray[np.float64]:
    """A rival's chi-square(``df``) over ``df`` on :func:`_stream`'s uniforms (cached: the inverse CDF is the costly
    part of a statement, and a study meets few degrees of freedom)."""
    return cast(npt.NDArray[np.float64], stats.chi2.ppf(_stream(k)[1], df) / df)


def _corr(scores: npt.NDArray[np.float64], lay: int, rivals: Sequence[int]) -> npt.NDArray[np.float64]:
    """The correlation of the per-unit differences ``j - lay`` between rivals, on the units ``lay`` and both
    rivals ran (0 where fewer than 3 such units or no spread), made positive semi-definite."""
    k = len(rivals)
    d = scores[list(rivals)] - scores[lay]  # [k, units], NaN where either did not run
    ok = ~np.isnan(d)
    r = np.eye(k)
    if ok.all():  # the usual case: every rival on every unit of lay's
        if d.shape[1] >= 3:
            sd = d.std(axis=1)
            live = sd > 0
            if live.sum() >= 2:
                c = np.corrcoef(d[live])
                r[np.ix_(live, live)] = c
                np.fill_diagonal(r, 1.0)
    else:
        for a in range(k):
            for b in range(a + 1, k):
                shared = ok[a] & ok[b]
                if shared.sum() >= 3:
                    da, db = d[a, shared], d[b, shared]
                    if da.std() > 0 and db.std() > 0:
                        r[a, b] = r[b, a] = float(np.corrcoef(da, db)[0, 1])
    w, v = np.linalg.eigh(r)
    r = (v * np.clip(w, 1e-9, None)) @ v.T
    s = np.sqrt(np.diag(r))
    return cast(npt.NDArray[np.float64], r / np.outer(s, s))


def joint_within(
    scores: npt.NDArray[np.float64],
    lay: int,
    margin: float,
    risks: npt.NDArray[np.float64] | None = None,
    paired_stats: _PairedStats | None = None,
    level: float | None = None,
) -> float:
    """``P(mu_lay >= max_j mu_j - margin)``: the joint posterior over every rival ``j`` (see the module docstring),
    never below the union bound ``1 - sum_j risks[lay, j]``. Rivals whose pairwise term is below
    :data:`JOINT_FLOOR` enter by the union bound alone (their share is subtracted). ``risks`` and
    ``paired_stats`` (:func:`_paired_stats`) may be passed when already computed. With ``level``, only which side
    of ``level`` the probability lies on is asked for: a bound that settles it is returned instead (the union bound
    from below, the nearest rival's own probability from above), and the posterior draws are spared."""
    risks = pair_risks(scores, margin) if risks is None else risks
    bonferroni = float(np.clip(1.0 - risks[lay].sum(), 0.0, 1.0))
    rivals = [j for j in range(len(scores)) if j != lay and risks[lay, j] > JOINT_FLOOR]
    if not rivals or np.isnan(scores[lay]).all():
        return bonferroni
    if level is not None:
        above = float(1.0 - risks[lay, rivals].max())  # the joint probability is below each rival's own
        if bonferroni >= level or above < level:
            return bonferroni if bonferroni >= level else above
    rest = float(sum(risks[lay, j] for j in range(len(scores)) if j != lay and j not in rivals))
    n, mean, sd, _ = _paired_stats(scores) if paired_stats is None else paired_stats
    if any(n[lay, j] < 2 or not sd[lay, j] > 0 for j in rivals):  # a rival no spread bounds: no sharpening
        return bonferroni
    idx = np.array(rivals)
    dfs = tuple(int(n[lay, j]) - 1 for j in rivals)  # each rival's t on the units it shares with lay
    z, w = _draws(len(rivals), dfs)
    t = (z @ np.linalg.cholesky(_corr(scores, lay, rivals)).T) / np.sqrt(w)
    diffs = mean[lay, idx] + t * (sd[lay, idx] / np.sqrt(n[lay, idx]))  # posterior draws of mu_j - mu_lay
    joint = float(np.mean((diffs <= margin).all(axis=1))) - rest
    return float(np.clip(max(joint, bonferroni), 0.0, 1.0))


def ratio(times: npt.NDArray[np.float64], a: int, b: int) -> float:
    """Time of layout ``a`` over layout ``b``: the geometric mean of their ratios within the rounds both were
    timed in (NaN when none)."""
    both = ~np.isnan(times[a]) & ~np.isnan(times[b]) & (times[a] > 0) & (times[b] > 0)
    if not both.any():
        return math.nan
    return float(np.exp(np.mean(np.log(times[a, both]) - np.log(times[b, both]))))


def coherent(times: npt.NDArray[np.float64], a: int, b: int, tie: float) -> bool:
    """Whether the re-timing rounds agree on which of ``a`` and ``b`` is faster: no round has ``a`` faster by
    more than the tie while another has ``b`` faster by more than the tie (a machine busy in some rounds)."""
    both = ~np.isnan(times[a]) & ~np.isnan(times[b]) & (times[a] > 0) & (times[b] > 0)
    logs = np.log(times[a, both]) - np.log(times[b, both])
    return not (len(logs) and logs.min() < -math.log1p(tie) and logs.max() > math.log1p(tie))


def fastest(
    members: list[int], times: npt.NDArray[np.float64], scores_mean: npt.NDArray[np.float64], tie: float
) -> int:
    """The fastest of ``members``; those within ``1 + tie`` of it (within-round ratio), or whose rounds disagree
    with it on which is faster (:func:`coherent`: the comparison is withheld), count as equally fast and the one
    with the highest mean score among them is taken."""
    medians = _row_medians(times[members])
    order = [members[i] for i in np.argsort(np.where(np.isnan(medians), np.inf, medians), kind="stable")]
    quickest = order[0]
    tied = [
        m
        for m in order
        if m == quickest or ratio(times, m, quickest) <= 1 + tie or not coherent(times, m, quickest, tie)
    ]
    return cast(int, max(tied, key=lambda m: (scores_mean[m], -order.index(m))))


def _best(means: npt.NDArray[np.float64], times: npt.NDArray[np.float64]) -> int:
    """The highest mean; of layouts measured as accurate (equal means), the fastest."""
    top = np.nanmax(np.where(np.isnan(means), -np.inf, means))
    level = [i for i, m in enumerate(means) if not np.isnan(m) and m >= top - 1e-12]
    if len(level) == 1:
        return level[0]
    medians = _row_medians(times[level])
    return level[int(np.argmin(np.where(np.isnan(medians), np.inf, medians)))]


def decide(
    scores: npt.NDArray[np.float64],
    times: npt.NDArray[np.float64],
    rule: Rule,
    verdicts_only: bool = False,
) -> Decision:
    """The rule (see the module docstring) on a grid of ``scores`` and ``times``. ``verdicts_only``: the same
    verdicts, answer and decision, but a probability within the margin that a bound settles is that bound (the
    forecast's simulations, which read only the verdicts)."""
    placed = place(scores, times, rule, verdicts_only)
    order = _chain_order(placed.best, times, rule.tie)
    verdicts = list(placed.verdicts)
    stop = next((i for i in order if verdicts[i] is not Verdict.WITHIN), None)
    if stop is not None:  # past the stop a placement would be a second test at the full risk: none is made
        past = set(order[order.index(stop) + 1 :])
        verdicts = [
            Verdict.UNTESTED if i in past and v in (Verdict.WITHIN, Verdict.UNDECIDED) else v
            for i, v in enumerate(verdicts)
        ]
    placed = dataclasses.replace(placed, verdicts=tuple(verdicts), stop=stop)
    if not placed.members:  # nothing reaches 1 - risk: the best, not decided
        return placed
    answer = fastest(placed.members, times, row_means(scores), rule.tie)
    decided = stop is None or verdicts[stop] in CLOSED
    return dataclasses.replace(placed, answer=answer, decided=decided)


def place(
    scores: npt.NDArray[np.float64],
    times: npt.NDArray[np.float64],
    rule: Rule,
    verdicts_only: bool = False,
) -> Decision:
    """Steps 1-3 of the rule: the best, every layout's probabilities and its verdict, each layout on its own
    (before the chain); the answer is the best and nothing is decided yet."""
    margin, risk, edge = rule.margin, rule.risk, rule.edge
    means = row_means(scores)
    best = 0 if np.isnan(means).all() else _best(means, times)
    risks = pair_risks(scores, margin)
    stats_ = _paired_stats(scores)
    level = 1 - risk if verdicts_only else None
    p_within = np.array([joint_within(scores, i, margin, risks, stats_, level) for i in range(len(scores))])
    p_beyond = risks[:, best].copy()
    p_beyond[best] = np.nan
    p_edge = pair_risks(scores, margin - edge)[:, best].copy() if edge > 0 else np.full(len(scores), 0.0)
    p_edge[best] = np.nan
    verdicts: list[Verdict] = []
    for i in range(len(scores)):
        if i == best:
            verdicts.append(Verdict.BEST)
        elif p_within[i] >= 1 - risk:
            verdicts.append(Verdict.WITHIN)
        elif p_beyond[i] >= 1 - risk or np.isnan(means[i]):
            verdicts.append(Verdict.BEYOND)
        elif edge > 0 and p_edge[i] >= 1 - risk:
            verdicts.append(Verdict.EDGE)
        else:
            verdicts.append(Verdict.UNDECIDED)
    return Decision(
        best=best,
        answer=best,
        p_within=tuple(map(float, p_within)),
        p_beyond=tuple(map(float, p_beyond)),
        verdicts=tuple(verdicts),
        risks=risks,
        decided=False,
        risk=risk,
        p_edge=tuple(map(float, p_edge)),
        edge=edge,
    )


def _chain_order(best: int, times: npt.NDArray[np.float64], tie: float) -> list[int]:
    """The chain (see the module docstring): the layouts faster than the best by more than the latency tie, in
    order of latency, slowest first. The order comes from the timings alone, so it is fixed before any test."""
    faster = [i for i in range(len(times)) if i != best and ratio(times, i, best) < 1 / (1 + tie)]
    return sorted(faster, key=lambda i: (-ratio(times, i, best), i))


def _open(decision: Decision) -> list[int]:
    """The layout still open against the answer: the chain's stop while it is undecided."""
    s = decision.stop
    if s is None or decision.verdicts[s] is not Verdict.UNDECIDED or decision.decided:
        return []
    return [s]


def next_layouts(decision: Decision) -> list[int]:
    """The layouts the next paired units should go to (see the module docstring); none once decided."""
    if decision.decided:
        return []
    ans, risk = decision.answer, decision.risk
    open_ = _open(decision)
    focus = set(open_)
    if decision.p_within[ans] < 1 - risk or open_:
        focus.add(ans)
    weigh = set(focus)
    for i in focus:  # the layouts whose comparison with a focus layout still carries risk
        weigh |= {j for j in range(len(decision.verdicts)) if decision.risks[i, j] > NEGLIGIBLE * risk}
    weigh.add(decision.best)
    return sorted(i for i in weigh if decision.verdicts[i] not in CLOSED)


def forced_units(sd: float, edge: float, risk: float) -> int | None:
    """Paired units past which a comparison with spread ``sd`` is always decided: its one-sided ``1 - risk``
    bounds are then closer together than ``edge``, so the layout is within the margin, beyond ``margin - edge``
    (at the edge or beyond), or both. None without an edge."""
    if not edge > 0:
        return None
    return units_needed(0.0, sd, edge / 2, risk)


def units_to_decide(gap: float, sd: float, margin: float, risk: float, edge: float = 0.0) -> int | None:
    """Paired units at which a comparison whose measured shortfall from the best is ``gap`` (spread ``sd`` a
    unit) would be decided, if the gap and spread hold: within the margin (its upper bound below the margin), or
    beyond it or at its edge (its lower bound above ``margin - edge``), whichever comes first, and never past
    :func:`forced_units`. None when no feasible number decides it (no edge, a gap at the margin)."""
    ways = [units_needed(gap, sd, margin, risk) if gap < margin else None]
    ways.append(units_needed(gap, sd, margin - edge, risk) if gap > margin - edge else None)
    ways.append(forced_units(sd, edge, risk))
    found = [n for n in ways if n is not None]
    return min(found) if found else None


def open_comparisons(decision: Decision) -> list[int]:
    """The layouts whose comparison with the best still holds the decision open: the chain's undecided stop
    (:func:`_open`) and the answer while its own probability is short of ``1 - risk``."""
    out = _open(decision)
    if decision.p_within[decision.answer] < 1 - decision.risk and decision.answer != decision.best:
        out.append(decision.answer)
    return out


def _open_need(scores: npt.NDArray[np.float64], decision: Decision, margin: float) -> int | None:
    """The paired units the nearest open comparison (:func:`open_comparisons`) would be decided at against the
    best, at its measured gap and spread (None: none can say: fewer than two shared units, or no feasible number
    decides it)."""
    n, mean, sd, _ = _paired_stats(scores)
    b = decision.best
    needs = [
        units_to_decide(float(mean[i, b]), float(sd[i, b]), margin, decision.risk, decision.edge)
        for i in open_comparisons(decision)
        if n[i, b] >= 2
    ]
    found = [k for k in needs if k is not None]
    return min(found) if found else None


def _cells(layouts: Sequence[int], upto: int, filled: npt.NDArray[np.bool_]) -> list[tuple[int, int]]:
    return [(i, u) for i in layouts for u in range(upto) if u >= filled.shape[1] or not filled[i, u]]


def _have(filled: npt.NDArray[np.bool_], layouts: Sequence[int]) -> int:
    """The units the furthest of ``layouts`` reaches (its last run unit, plus one)."""
    return max(int(np.flatnonzero(filled[i]).max()) + 1 if filled[i].any() else 0 for i in layouts)


def _core(decision: Decision, times: npt.NDArray[np.float64], chosen: list[int]) -> list[int]:
    """The layouts the nearest decision needs: the fastest open layout (or the answer) and the best."""
    open_ = _open(decision)
    lead = min(open_, key=lambda i: ratio(times, i, decision.answer)) if open_ else decision.answer
    return sorted({lead, decision.best} & set(chosen) | {decision.best})


def round_plans(
    scores: npt.NDArray[np.float64],
    times: npt.NDArray[np.float64],
    rule: Rule,
    ran: npt.NDArray[np.bool_] | None = None,
    verdicts_only: bool = False,
) -> list[list[tuple[int, int]]]:
    """The next round's candidate (layout, unit) cells, largest first, each smaller one a fallback when the
    larger does not fit the runs left (see :func:`next_cells`); none once the answer is decided. ``ran`` marks the
    cells already run (default: those with a score)."""
    filled = ~np.isnan(scores) if ran is None else ran
    first = _cells(range(len(scores)), rule.start, filled)
    if first:  # every layout's first units, in any number that fits
        return [first[:k] for k in range(len(first), 0, -1)]
    decision = decide(scores, times, rule, verdicts_only)
    chosen = next_layouts(decision)
    if not chosen:
        return []
    # at least half the units they have (looks stay few whatever the data), more if a decision needs it
    need = _open_need(scores, decision, rule.margin)
    h = _have(filled, chosen)
    extra = max(rule.step, h // 2, 0 if need is None else min(h, math.ceil((need - h) / 2)))
    plans = [_cells(chosen, h + e, filled) for e in range(extra, 0, -1)]
    core = _core(decision, times, chosen)  # then only what the nearest decision needs
    if core != chosen:
        plans += [_cells(core, _have(filled, core) + e, filled) for e in range(extra, 0, -1)]
    behind = _catch_up(decision, filled, rule.step, h)
    if behind and need is not None and need <= h:  # the focus layouts have what decides them: only the
        plans = [behind]  # rivals that hold them back need runs
    elif behind:  # else every round first brings those rivals up, then the focus layouts
        plans = [behind + [c for c in p if c not in behind] for p in plans] + [behind]
    paired = [_paired(p, filled, decision) for p in plans if p]
    return list({tuple(p): p for p in paired}.values())  # in their order, each once


def _paired(
    cells: list[tuple[int, int]], filled: npt.NDArray[np.bool_], decision: Decision
) -> list[tuple[int, int]]:
    """``cells`` with a partner on every unit only one layout would have run, counting the round: a run no
    other layout shares informs no paired comparison (the best alone on new units, a round cut to fit the runs
    left). The partner is the best, or for the best the rival most likely to beat it by more than the margin."""
    if len(filled) < 2:
        return cells
    rows, cols = np.array(cells).T
    union = np.zeros((filled.shape[0], max(filled.shape[1], int(cols.max()) + 1)), dtype=bool)
    union[:, : filled.shape[1]] = filled
    union[rows, cols] = True
    alone = np.unique(cols[union[:, cols].sum(axis=0) == 1])
    if not alone.size:
        return cells
    risks = decision.risks[decision.best].copy()
    risks[decision.best] = -1.0
    rival = int(np.argmax(risks))
    lone = np.argmax(union[:, alone], axis=0)  # the one layout on each such unit
    partner = np.where(lone == decision.best, rival, decision.best)
    return cells + list(zip(partner.tolist(), alone.tolist(), strict=True))


def _catch_up(
    decision: Decision, filled: npt.NDArray[np.bool_], step: int, upto: int
) -> list[tuple[int, int]]:
    """Cells for the rivals that hold an open placement back: a layout whose chance of beating a focus layout
    (the stop, or the answer while short) by more than the margin is above a share of the risk, on fewer than
    half the units the focus layouts have (closed early, on its first units), gets as many units again (at least
    ``step``) among those the focus layouts ran. Without them the joint statement of a layout measured on many
    units stays held by a rival measured on few, and no round on the focus layouts alone would move it."""
    focus = set(_open(decision))
    if decision.p_within[decision.answer] < 1 - decision.risk:
        focus.add(decision.answer)
    out: list[tuple[int, int]] = []
    for j in range(len(decision.verdicts)):
        n_j = int(filled[j].sum())
        held = any(decision.risks[i, j] > NEGLIGIBLE * decision.risk for i in focus if i != j)
        if j in focus or not held or 2 * n_j >= upto:
            continue
        missing = [(j, u) for u in range(upto) if u >= filled.shape[1] or not filled[j, u]]
        out += missing[: max(step, n_j)]
    return out


def next_cells(
    scores: npt.NDArray[np.float64],
    times: npt.NDArray[np.float64],
    rule: Rule,
    left: int,
    ran: npt.NDArray[np.bool_] | None = None,
    verdicts_only: bool = False,
) -> list[tuple[int, int]]:
    """The (layout, unit) cells to run next on a grid whose columns are the units in order: first every
    layout's first ``rule.start`` units; then more units for each layout :func:`next_layouts` names, on the same
    units for all of them (the pairing), each also filling any earlier unit it lacks, in a round sized to what
    decides (see the module docstring). At most ``left`` cells (a smaller round when the round does not fit);
    none once the answer is decided or nothing fits (:func:`smallest_round` then says what the next round needs).
    ``ran`` marks the cells already run (default: those with a score), so a run set apart is not run again."""
    plans = round_plans(scores, times, rule, ran, verdicts_only)
    return next((p for p in plans if len(p) <= left), [])


def smallest_round(
    scores: npt.NDArray[np.float64],
    times: npt.NDArray[np.float64],
    rule: Rule,
    ran: npt.NDArray[np.bool_] | None = None,
) -> int:
    """The runs of the smallest round :func:`next_cells` would queue, whatever the runs left (0: none, the
    answer is decided)."""
    return min((len(p) for p in round_plans(scores, times, rule, ran)), default=0)
