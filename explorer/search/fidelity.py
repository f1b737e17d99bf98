"""When a trial may stop before its planned epochs: rungs for search trials, a plateau for finalists.

Search trials (:func:`dominated_at_rung`). A trial may stop only at a rung (``min_epochs * reduction**i``
epochs, see :class:`~explorer.search.spec.EarlyStoppingSpec`), and only when a *different* architecture that is
at least as fast (latency within the two measurements' spread counts as a tie) was more accurate at the same
epoch by more than the validation split can explain: accuracy is a proportion of ``n`` examples, so the
difference of two has standard error ``sqrt(a(1-a)/n + b(1-b)/n)``; with ``m`` such peers compared, the
threshold is ``z = Phi^-1(1 - alpha/m)`` standard errors (Bonferroni), so the chance of stopping a trial that
is truly as good as all of them stays below ``alpha`` however many peers there are. Other seeds of the same
architecture are never peers.

A language-model task is scored by validation bits per byte, lower is better: there a peer must be *lower* by
more than ``z`` standard errors of the difference, each value's standard error being the trial's own standard
error of its validation loss at that epoch (from the spread of the per-window losses,
:class:`explorer.engine.train.SplitScore`; both models are scored on the same windows, so the peer's is taken
to be the same). Where that standard error is unknown, 0.5% of the value stands in.

The spec's ``[early_stopping]`` and ``[finalists]`` tables are read into :class:`EarlyStoppingSpec` and
:class:`FinalistsSpec`, defined here with the rules they configure.

Finalists train with the plateau schedule of :func:`explorer.engine.train.fit` (the lr drops when validation
stops improving beyond its noise; training ends after the last drop and one more plateau, or at its cap).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from explorer.engine.measures import binomial_se

__all__ = [
    "RELATIVE_SE",
    "EarlyStoppingSpec",
    "FinalistsSpec",
    "Peer",
    "Verdict",
    "dominated_at_rung",
    "tie_tolerance",
]

RELATIVE_SE = 0.005  # a loss's standard error where none was measured: 0.5% of the value


@dataclass(frozen=True)
class EarlyStoppingSpec:
    """Rung-based early stopping that is honest under the validation split's noise (explorer.search.fidelity)."""

    enabled: bool = True
    min_epochs: int = 3  # the first rung: no trial stops before this epoch
    reduction: int = 2  # rungs at min_epochs * reduction**i, below the planned epochs
    alpha: float = 0.05  # family-wise error of "a faster architecture is more accurate" at one rung

    def rungs(self, epochs: int) -> tuple[int, ...]:
        """The epochs at which a trial of ``epochs`` planned epochs may stop (none when disabled)."""
        if not self.enabled:
            return ()
        out, r = [], self.min_epochs
        while r < epochs:
            out.append(r)
            r *= self.reduction
        return tuple(out)


@dataclass(frozen=True)
class FinalistsSpec:
    """The finalist stage: the knee, its neighbours and references retrained with fresh seeds to a plateau."""

    enabled: bool = True
    top: int = 2  # front architectures nearest the knee (the knee included)
    references: bool = True  # 1 head, 8 (8-16) heads per layer and the next faster front layout
    # every head count of the space, the same in each layer, at the knee's width and depth
    ladder: bool = True
    seeds: int = 3  # fresh seeds per finalist
    max_epochs: int | None = None  # cap of the plateau rule; None: 3 x [task] epochs
    patience: int = 4  # epochs without a rise of more than one binomial standard error before stopping
    timing_rounds: int = 3  # interleaved re-timing rounds of every finalist, with no training running

    def epochs(self, search_epochs: int) -> int:
        return self.max_epochs or 3 * search_epochs


@dataclass(frozen=True)
class Peer:
    """A trial to compare against at a rung."""

    number: int
    key: str  # configuration identity; the same key (another seed) is never a peer
    latency_ms: float
    spread: float  # relative spread of its latency measurement (IQR / median)
    history: tuple[float, ...]  # the task's validation metric per epoch (accuracy, or bits per byte)


@dataclass(frozen=True)
class Verdict:
    stop: bool
    reason: str = ""


def tie_tolerance(spread_a: float, spread_b: float) -> float:
    """Relative latency difference two measurements cannot tell apart: their spreads combined."""
    return math.hypot(spread_a, spread_b)


def dominated_at_rung(
    epoch: int,
    accuracy: float,
    n_val: int,
    key: str,
    latency_ms: float,
    spread: float,
    peers: Sequence[Peer],
    alpha: float,
    *,
    higher_is_better: bool = True,
    se: float | None = None,
) -> Verdict:
    """Whether a trial at ``epoch`` (a rung) is beaten beyond noise by an at-least-as-fast other architecture.

    ``accuracy`` is the trial's value of the task's metric at that epoch; with ``higher_is_better=False`` (bits
    per byte) lower wins and ``se`` (its standard error) is the noise of each value, else binomial on ``n_val``.
    """
    eligible = [
        p
        for p in peers
        if p.key != key
        and len(p.history) >= epoch
        and p.latency_ms <= latency_ms * (1 + tie_tolerance(spread, p.spread))
    ]
    if not eligible:
        return Verdict(False)
    z = NormalDist().inv_cdf(1 - alpha / len(eligible))

    own = se if se is not None and se > 0 else RELATIVE_SE * abs(accuracy)

    def lead_and_se(p: Peer) -> tuple[float, float]:
        theirs = p.history[epoch - 1]
        if not higher_is_better:
            return accuracy - theirs, math.hypot(own, own)
        return theirs - accuracy, math.hypot(binomial_se(theirs, n_val), binomial_se(accuracy, n_val))

    best = max(eligible, key=lambda p: (lambda d, se: d / se)(*lead_and_se(p)))
    lead, diff_se = lead_and_se(best)
    if lead > z * diff_se:
        if higher_is_better:
            by = f"led by {lead * 100:.1f} points > {z:.2f} standard errors ({z * diff_se * 100:.1f} points"
        else:
            by = f"lower by {lead:.3f} bits per byte > {z:.2f} standard errors ({z * diff_se:.3f}"
        return Verdict(
            True,
            f"stopped at epoch {epoch}: trial #{best.number}, at least as fast ({best.latency_ms:.3g} vs "
            f"{latency_ms:.3g} ms), {by}; {len(eligible)} peers compared, alpha {alpha:g})",
        )
    return Verdict(False)
