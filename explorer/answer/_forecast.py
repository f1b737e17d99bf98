"""What deciding the answer costs from here: the finalist stage's own allocation run forward on studies drawn
from the current posterior of the finalists' scores.

A single figure "runs to decide at the measured gap and spread" is the size of the next round, not the path to a
decision: the gap moves as runs come in, and a comparison near the margin's edge can take many rounds. The
forecast instead simulates the rest of the study :data:`DRAWS` times. Each simulated study draws the layouts' true
mean scores from their posterior (their measured means, moved by the standard errors of the units they ran,
correlated as their runs are, on a t scale), then runs the rule's allocation (:func:`explorer.answer._rule.next_cells`,
the stage's own rounds) on units drawn from the same model: one draw per unit, shared by every layout on it, so the
pairing and its correlation are kept. A simulated study ends when the rule decides, or when the next round would
take it past :data:`CAP_BUDGETS` times the stage's budget (then it is counted as not decided). The forecast is
the median and the 80th percentile of the runs the simulated studies took (not-decided ones counted as taking
more than any budget), and the share that decided at all; the runs turn into minutes at the stage's measured pace.
The simulations keep the rule's ``edge``: the wider ``[answer] settle`` zone a stage takes once its budget is spent
is not assumed, so a budget the forecast names is never short for that reason.

Everything is seeded from the grid itself, its layouts taken in an order of their own figures, so a study read
twice, or by the stage and by the answer, forecasts the same figures.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from explorer.answer._rule import Rule, decide, next_cells

DRAWS = 48  # simulated continuations (each a few calls of the rule: a few seconds in all)
QUANTILE = 0.8  # the forecast's budget: decided within it in this share of the simulated studies
CAP_BUDGETS = 8  # a simulated study stops, not decided, past this many times the stage's budget
SHRINK = 0.1  # the unit covariance is pulled this far toward its diagonal (a few units estimate it)


@dataclass(frozen=True)
class Forecast:
    """The runs (and minutes) more that decide the answer, from simulated continuations of the study."""

    runs: tuple[float, ...]  # each simulated study's runs to a decision, sorted (inf: not decided within cap)
    cap: int  # the runs a simulated study could spend at most
    pace_s: float | None = None  # wall-clock seconds a finalist run takes at the stage's pace (None: unknown)

    @property
    def draws(self) -> int:
        return len(self.runs)

    @property
    def decided_share(self) -> float:
        """The share of simulated studies the rule decided within :attr:`cap` runs."""
        return sum(math.isfinite(r) for r in self.runs) / max(1, len(self.runs))

    def quantile(self, q: float) -> int | None:
        """The runs within which a share ``q`` of the simulated studies decided (None: fewer did, within cap)."""
        if not self.runs:
            return None
        value = self.runs[min(len(self.runs) - 1, max(0, math.ceil(q * len(self.runs)) - 1))]
        return int(value) if math.isfinite(value) else None

    @property
    def median(self) -> int | None:
        return self.quantile(0.5)

    @property
    def likely(self) -> int | None:
        """The runs within which :data:`QUANTILE` of the simulated studies decided: the budget to ask for."""
        return self.quantile(QUANTILE)

    def minutes(self, runs: int | None) -> float | None:
        """``runs`` as minutes at the stage's pace (None: no pace yet, or no runs)."""
        return None if runs is None or self.pace_s is None else runs * self.pace_s / 60


def _psd(c: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    w, v = np.linalg.eigh((c + c.T) / 2)
    out: npt.NDArray[np.float64] = (v * np.clip(w, 0.0, None)) @ v.T
    return out


def unit_covariance(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The covariance of the layouts' scores across units (pairwise, on the units both ran; 0 across pairs
    sharing fewer than three), shrunk toward its diagonal and made positive semi-definite."""
    k = len(scores)
    filled = ~np.isnan(scores)
    c = np.zeros((k, k))
    for a in range(k):
        for b in range(a, k):
            both = filled[a] & filled[b]
            if both.sum() >= (2 if a == b else 3):
                x, y = scores[a, both], scores[b, both]
                c[a, b] = c[b, a] = float(
                    np.mean((x - x.mean()) * (y - y.mean())) * both.sum() / (both.sum() - 1)
                )
    c = (1 - SHRINK) * c + SHRINK * np.diag(np.diag(c))
    return _psd(c)


def _seed(scores: npt.NDArray[np.float64], times: npt.NDArray[np.float64]) -> int:
    digest = hashlib.sha256(np.nan_to_num(scores, nan=-1.0).tobytes() + np.nan_to_num(times).tobytes())
    return int.from_bytes(digest.digest()[:8], "little")


def forecast(
    scores: npt.NDArray[np.float64],
    times: npt.NDArray[np.float64],
    ran: npt.NDArray[np.bool_],
    rule: Rule,
    budget: int,
    pace_s: float | None = None,
    draws: int = DRAWS,
) -> Forecast | None:
    """The forecast (see the module docstring) for the grid ``scores`` (layouts x units in unit order, higher is
    better, NaN where not run; ``ran`` marks the cells run, set-apart ones too) and ``times``, under ``rule``;
    ``budget``: the stage's budget of runs (the cap is :data:`CAP_BUDGETS` of it). None: fewer than two units a
    layout, so no spread to draw from."""
    counts = (~np.isnan(scores)).sum(axis=1)
    if not scores.size or counts.min() < 2:
        return None
    cap = max(1, CAP_BUDGETS * budget)
    if decide(scores, times, rule).decided:
        return Forecast((0.0,), cap, pace_s)
    # the layouts in an order of their own figures: the stage and the answer list them in different orders, and a
    # forecast is a function of the grid, not of its order
    order = sorted(
        range(len(scores)), key=lambda i: (np.nan_to_num(scores[i], nan=-1.0).tobytes(), times[i].tobytes())
    )
    scores, times, ran = scores[order], times[order], ran[order]
    rng = np.random.default_rng(_seed(scores, times))
    k = len(scores)
    means = np.nanmean(scores, axis=1)
    cov = unit_covariance(scores)
    filled = ~np.isnan(scores)
    shared = filled.astype(float) @ filled.T.astype(float)  # units each pair ran together
    cov_means = _psd(cov * shared / np.outer(counts, counts))  # the covariance of the measured means
    df = max(1, int(counts.min()) - 1)
    chol_units = np.linalg.cholesky(cov + 1e-12 * np.eye(k))
    chol_means = np.linalg.cholesky(cov_means + 1e-12 * np.eye(k))
    out: list[float] = []
    for _ in range(draws):
        scale = math.sqrt(df / rng.chisquare(df))  # the spread itself is uncertain: a t scale
        mu = means + scale * (chol_means @ rng.standard_normal(k))
        x, r = scores.copy(), ran.copy()
        spent = 0
        while True:
            cells = next_cells(x, times, rule, cap - spent, r, verdicts_only=True)
            if not cells:
                break
            width = max(u for _, u in cells) + 1
            if width > x.shape[1]:
                grow = width - x.shape[1]
                x = np.hstack([x, np.full((k, grow), np.nan)])
                r = np.hstack([r, np.zeros((k, grow), dtype=bool)])
            draw = {
                u: mu + scale * (chol_units @ rng.standard_normal(k)) for u in sorted({u for _, u in cells})
            }
            for i, u in cells:
                x[i, u] = draw[u][i]
                r[i, u] = True
            spent += len(cells)
        decided = decide(x, times, rule, verdicts_only=True).decided
        out.append(float(spent) if decided else math.inf)
    return Forecast(tuple(sorted(out)), cap, pace_s)
