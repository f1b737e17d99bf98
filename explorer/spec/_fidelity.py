"""When a search trial may stop before its planned epochs: at a rung, beaten beyond seed and split noise.

Search trials (:func:`dominated_at_rung`). A trial may stop only at a rung (``min_epochs * reduction**i``
epochs, see :class:`~explorer.spec._spec.EarlyStoppingSpec`), and only when a *different* architecture that is
at least as fast (latency within the two measurements' spread counts as a tie) is better at the same epoch by
more than the noise of seeds and split together. During a search each architecture has one seed, so that noise
is not measured per architecture: it is estimated from the spread of all the study's values at that epoch (the
trial's and every peer's that reached it). Were there no real difference between architectures, that spread
would be exactly the noise of one value; real differences widen it, so the rule errs towards not stopping.
Early in training, seeds spread the values more than the validation split does (36 quickstart architectures
x 3 seeds at epoch 3: 4.6 points between seeds against a binomial standard error of 3.0,
``benchmarks/fidelity.md``), which is why the split's binomial standard error alone stopped trials that were
as good as their peers.

The test, for each peer compared: the lead ``d`` over the standard error of a difference of two values,
``sqrt(2) * s``, where ``s`` is the spread of the epoch's ``n`` values once the two compared are replaced by
their mean (``n - 2`` degrees of freedom; that spread is independent of ``d`` when all values share one normal
distribution, so ``d / (sqrt(2) s)`` then follows Student's t exactly). The standard error is never below the
split's own, the binomial ``sqrt(a(1-a)/n_val + b(1-b)/n_val)``. The trial stops when ``d`` exceeds that
standard error times the one-sided t critical value at level ``alpha / (m * R)``, with ``m`` the peers
compared and ``R`` the trial's rungs (Bonferroni over both): a trial that is truly as good as every faster
peer is stopped at some rung with probability at most ``alpha`` (exactly so for normal noise; replays of
recorded runs with the architectures' labels permuted check it, ``benchmarks/fidelity.md``). Other seeds of
the same architecture are never compared with it (their values do count in the spread). With fewer than
three values at an epoch nothing stops.

A language-model task is scored by validation bits per byte, lower is better: there a peer must be *lower*, by
the same test; the floor of a value's noise is the trial's own standard error of its validation loss at that
epoch (from the spread of the per-window losses, :class:`explorer.measure._train.SplitScore`; both models are
scored on the same windows, so the peer's is taken to be the same). Where that standard error is unknown, 0.5%
of the value stands in.

The spec's ``[early_stopping]`` table is read into :class:`EarlyStoppingSpec`, defined here with the rule it
configures. Finalists never stop early: they train a fixed schedule (:mod:`explorer.spec._evidence_spec`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from explorer.fields import key
from explorer.limits import EPOCHS
from explorer.measurements import binomial_se

RELATIVE_SE = 0.005  # a loss's standard error where none was measured: 0.5% of the value


@dataclass(frozen=True)
class EarlyStoppingSpec:
    """Rung-based early stopping that is honest under seed and split noise (explorer.spec._fidelity)."""

    enabled: bool = key(True, "whether a search trial may stop at a rung")
    min_epochs: int = key(3, "the first rung", cap=EPOCHS)  # no trial stops before this epoch
    reduction: int = key(
        2, "rungs at `min_epochs`, `min_epochs * reduction`, ... below `[task] epochs`", lo=2, cap=EPOCHS
    )
    # a false stop: a trial stopped at a rung, yet as good as its peers
    alpha: float = key(
        0.05,
        "a trial's chance of a false stop over all its rungs (see "
        "[method.md](method.md#5-early-stopping-that-counts-seed-noise))",
        lo=1e-6,
        hi=1.0,
    )

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
    quality: float,
    n_val: int,
    key: str,
    latency_ms: float,
    spread: float,
    peers: Sequence[Peer],
    alpha: float,
    *,
    higher_is_better: bool = True,
    se: float | None = None,
    n_rungs: int = 1,
) -> Verdict:
    """Whether a trial at ``epoch`` (a rung) is beaten beyond seed and split noise by an at-least-as-fast
    other architecture (the test of the module docstring).

    ``quality`` is the trial's value of the task's metric at that epoch; with ``higher_is_better=False``
    (bits per byte) lower wins and ``se`` (its standard error) floors each value's noise, else the binomial
    standard error on ``n_val`` examples does. ``n_rungs`` is the number of rungs the trial has: ``alpha`` is
    spread over them, so it bounds the trial's chance of a false stop over all of them.
    """
    reached = [p for p in peers if len(p.history) >= epoch]
    eligible = [
        p
        for p in reached
        if p.key != key and p.latency_ms <= latency_ms * (1 + tie_tolerance(spread, p.spread))
    ]
    values = [quality] + [p.history[epoch - 1] for p in reached]
    df = len(values) - 2
    if not eligible or df < 1:
        return Verdict(False)
    from scipy import stats  # here, not at import: specs load this module and read-only commands stay light

    level = alpha / (len(eligible) * n_rungs)
    critical = float(stats.t.isf(level, df))
    lead_and_se = _lead_test(values, epoch, quality, n_val, higher_is_better, se)

    def z_score(peer: Peer) -> float:
        lead, diff_se = lead_and_se(peer)
        return lead / diff_se

    best = max(eligible, key=z_score)
    lead, diff_se = lead_and_se(best)
    if lead <= critical * diff_se:
        return Verdict(False)
    return Verdict(
        True,
        f"stopped at epoch {epoch}: trial #{best.number}, at least as fast ({best.latency_ms:.3g} vs "
        f"{latency_ms:.3g} ms), {_lead_text(lead, diff_se, critical, higher_is_better)}; seed and split noise "
        f"from the spread of {len(values)} values at this epoch, t with {df} degrees of freedom at {level:.2g}: "
        f"{len(eligible)} peers compared, {n_rungs} rung{'s' * (n_rungs != 1)}, alpha {alpha:g})",
    )


def _lead_test(
    values: Sequence[float], epoch: int, quality: float, n_val: int, higher_is_better: bool, se: float | None
) -> Callable[[Peer], tuple[float, float]]:
    """For a peer: its lead over the trial at ``epoch`` and the standard error of that difference, from the
    spread of the epoch's ``values`` (the two compared replaced by their mean), never below the split's own."""
    df = len(values) - 2
    mean = sum(values) / len(values)
    squares = sum((v - mean) ** 2 for v in values)
    own = se if se is not None and se > 0 else RELATIVE_SE * abs(quality)

    def floor(value: float) -> float:  # one value's noise from the split alone
        return binomial_se(value, n_val) if higher_is_better else own

    def lead_and_se(p: Peer) -> tuple[float, float]:
        theirs = p.history[epoch - 1]
        lead = theirs - quality if higher_is_better else quality - theirs
        # the spread with the two compared values replaced by their mean: n - 2 degrees of freedom
        noise = math.sqrt(max(squares - lead**2 / 2, 0.0) / df)
        return lead, max(math.sqrt(2) * noise, math.hypot(floor(theirs), floor(quality)))

    return lead_and_se


def _lead_text(lead: float, diff_se: float, critical: float, higher_is_better: bool) -> str:
    """How far ahead the peer is, in the metric's own terms and in standard errors."""
    if higher_is_better:
        margin = critical * diff_se * 100
        return f"led by {lead * 100:.1f} points > {critical:.2f} standard errors ({margin:.1f} points"
    return f"lower by {lead:.3f} bits per byte > {critical:.2f} standard errors ({critical * diff_se:.3f}"
