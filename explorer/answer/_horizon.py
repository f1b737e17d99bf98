"""How long the finalists train, whether each run had finished learning, and whether the answer holds when the
runs train longer.

**The horizon.** Every grid run trains the same fixed schedule (warm-up, then cosine decay to zero) of the stage's
*horizon*, so paired runs differ only in their layout. The horizon starts at ``[finalists] epochs``; a *pilot*
trains the most accurate and the fastest finalist layouts (by the search and the re-timing) on the grid's first
units at the horizon and at twice it. The grid measures paired comparisons, not accuracy itself, so by default
(``[finalists] horizon_by = "comparison"``) the horizon doubles while twice as long changes the comparison: per
unit, the change of the paired difference between the pilot's layouts, whose two-sided 90% t interval (each bound
a one-sided 95% test) excludes zero. A doubling that lifts every layout alike changes no comparison, and the
horizon check below still tests the deciding verdicts at twice the horizon. With ``horizon_by = "gain"`` the
horizon doubles while twice as long gains (beyond the noise: the one-sided 95% lower bound of the mean paired
gain, a t bound over the pilot's layout-unit pairs, lies above zero; or by more than the answer's edge on average,
a gain that could move a verdict). Either way up to ``[finalists] horizon_cap``; the first horizon whose doubling
does neither is the grid's. With one pilot layout (the most accurate is the fastest) there is no comparison, and
``comparison`` keeps the first horizon.
A pilot run at that horizon is a grid run as well, and its runs at twice it serve the horizon check.

**Each run.** A run *plateaued* when the best validation value of the last quarter of its schedule beats the best
before it by no more than one binomial standard error (:func:`explorer.measurements.plateaued`): its curve had
flattened within its own noise. The report names the layouts with runs that had not.

**The horizon check.** Once the stage stops, the comparisons that decide the answer (the answer against the best,
and the next faster layout against the best) train again at twice the horizon on the first
``[finalists] check_units`` units. The verdict holds unless the longer runs contradict it at the study's risk: the
best shown to beat the answer by more than the margin, or the next faster layout shown within the margin of the
best (then a faster layout would have been the answer). A contradicted verdict is no decision, and the answer says so.

Everything here is a pure function of the study's records, so the stage, a resumed stage and the report agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt
from optuna.trial import TrialState
from scipy import stats

from explorer.layout import Purpose, unit_seed
from explorer.measurements import binomial_se, plateaued
from explorer.spec import StudySpec
from explorer.storage import Role, TrialRecord

PILOT_LEVEL = 0.95  # one-sided: a gain beyond the noise when the lower bound of the mean gain is above zero


def _oriented(r: TrialRecord) -> float | None:
    """A run's validation quality, higher is better (bits per byte negated)."""
    q = r.quality
    if q is None or not math.isfinite(q):
        return None
    return q if r.metric.direction == "maximize" else -q


def _t_bounds(x: npt.NDArray[np.float64], level: float, sided: int = 2) -> tuple[float, float]:
    """The t interval of the mean of ``x`` (two-sided at ``level``, or each bound one-sided at ``level``)."""
    if len(x) < 2:
        return -math.inf, math.inf
    mean, se = float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x)))
    q = stats.t.ppf(level if sided == 1 else (1 + level) / 2, len(x) - 1)
    return float(mean - q * se), float(mean + q * se)


class HorizonBy(str, Enum):
    """What a doubling of the horizon must change for the pilot to take it."""

    COMPARISON = "comparison"  # the paired difference between the pilot's layouts
    GAIN = "gain"  # any pilot layout's accuracy


@dataclass(frozen=True)
class Doubling:
    """One step of the pilot: what training ``long`` epochs instead of ``short`` changed, one value per pair.

    By ``COMPARISON`` the values are, per unit, the change of each pilot layout's paired difference from the
    first (by key); by ``GAIN``, each (layout, unit) pair's gain. Long minus short, higher is better."""

    short: int
    long: int
    gains: tuple[float, ...]
    edge: float = 0.0  # by GAIN: a mean gain above this is worth training for, whatever its noise (the edge)
    by: HorizonBy = HorizonBy.GAIN

    @property
    def mean(self) -> float:
        return float(np.mean(self.gains)) if self.gains else math.nan

    @property
    def lower(self) -> float:
        """The one-sided 95% lower bound of the mean (-inf with fewer than two pairs)."""
        return _t_bounds(np.array(self.gains), PILOT_LEVEL, sided=1)[0]

    @property
    def upper(self) -> float:
        """The one-sided 95% upper bound of the mean (inf with fewer than two pairs)."""
        return _t_bounds(np.array(self.gains), PILOT_LEVEL, sided=1)[1]

    @property
    def gained(self) -> bool:
        """Twice as long changed what the grid measures, so the pilot doubles: by ``COMPARISON``, the change of
        the comparison beyond the noise either way; by ``GAIN``, a gain beyond the noise, or above the edge on
        average (a gain the size of the indifference zone can move a verdict, shown or not)."""
        if self.by is HorizonBy.COMPARISON:
            return self.lower > 0 or self.upper < 0
        return self.lower > 0 or self.mean > self.edge


@dataclass(frozen=True)
class Horizon:
    """The finalist stage's horizon: chosen by the pilot, or the one it is testing while it runs."""

    epochs: int  # the grid's horizon (while the pilot runs: the horizon under test)
    chosen: bool  # False while the pilot still needs runs
    doublings: tuple[Doubling, ...] = ()
    cap: int = 0  # the longest horizon the pilot may choose
    piloted: bool = False  # False: the horizon was given (pilot off, or a study from before pilots)

    @property
    def capped(self) -> bool:
        """Chosen at the cap while twice as long still gained."""
        return self.chosen and bool(self.doublings) and self.doublings[-1].gained

    @property
    def check_epochs(self) -> int:
        """The longer horizon the deciding comparisons are checked at."""
        return 2 * self.epochs


def choose_horizon(records: Sequence[TrialRecord], spec: StudySpec) -> Horizon:
    """The stage's horizon from its pilot runs (see the module docstring)."""
    fs = spec.finalists
    first, cap = fs.run_epochs(spec.task.epochs), fs.cap_epochs(spec.task.epochs)
    maximize = spec.metric.direction == "maximize"
    edge = spec.answer.edge_for(maximize) or spec.answer.margin_for(maximize) / 4  # a quarter margin when off
    pilots = [r for r in records if r.role == Role.FINALIST and r.purpose == Purpose.PILOT]
    if not pilots:  # no pilot yet; none at all when it is off or the cap leaves nothing to double
        return Horizon(first, not fs.pilot or 2 * first > cap, (), cap, False)
    cells = sorted({(r.key, r.seed) for r in pilots})  # the pilot's layouts on its units
    keys = sorted({str(k) for k, _ in cells})
    by = HorizonBy(fs.horizon_by)
    # every run of a cell but the check's (a grid run at a horizon the pilot tries counts, as in a study whose
    # grid ran before pilots); a failed run ends its cell with no score: the doubling is judged on the pairs both
    # horizons finished
    done = {
        (r.key, r.seed, r.epochs_planned): _oriented(r) if r.finished else None
        for r in records
        if r.role == Role.FINALIST
        and r.purpose != Purpose.CHECK
        and (r.key, r.seed) in set(cells)
        and (r.finished or r.state is TrialState.FAIL)
    }
    doublings: list[Doubling] = []
    h = first
    while 2 * h <= cap:
        if any((k, s, e) not in done for k, s in cells for e in (h, 2 * h)):
            return Horizon(h, False, tuple(doublings), cap, True)
        gains = []
        for k, s in cells:
            short, long = done[k, s, h], done[k, s, 2 * h]
            if short is None or long is None:
                continue
            if by is HorizonBy.GAIN:
                gains.append(long - short)
            elif k != keys[0] and (ref := _pair(done, keys[0], s, h)) is not None:
                gains.append((long - ref[1]) - (short - ref[0]))  # the comparison with the first layout
        doublings.append(Doubling(h, 2 * h, tuple(gains), edge, by))
        if not doublings[-1].gained:
            break
        h *= 2
    return Horizon(h, True, tuple(doublings), cap, True)


def _pair(
    done: Mapping[tuple[str | None, int | None, int | None], float | None], key: str, seed: int | None, h: int
) -> tuple[float, float] | None:
    """``key``'s scores on unit ``seed`` at ``h`` and at ``2 h`` (None: either is missing or failed)."""
    short, long = done.get((key, seed, h)), done.get((key, seed, 2 * h))
    return None if short is None or long is None else (short, long)


def at_horizon(records: Sequence[TrialRecord], horizon: Horizon) -> list[TrialRecord]:
    """``records`` with the finalist runs that are not the evidence grid's left out: after a pilot, the runs of
    other horizons than the chosen one; without one, the horizon check's runs."""

    def grid(r: TrialRecord) -> bool:
        if r.role != Role.FINALIST:
            return True
        return r.epochs_planned == horizon.epochs if horizon.piloted else r.purpose != Purpose.CHECK

    return [r for r in records if grid(r)]


def curve_plateaued(history: Sequence[float], val_size: int | None, maximize: bool = True) -> bool | None:
    """Whether a curve had flattened over the last quarter of its epochs: its best there beats its best before by
    no more than one binomial standard error (0.2% for bits per byte). None: too short a curve, or no
    validation size to judge the noise by."""
    if len(history) < 4 or not val_size:
        return None
    return plateaued(list(history), val_size, max(2, len(history) // 4), maximize)


def run_plateaued(r: TrialRecord) -> bool | None:
    """Whether a finished run had plateaued: as it recorded, or judged on its curve (:func:`curve_plateaued`)."""
    if r.plateaued is not None:
        return r.plateaued
    return curve_plateaued(r.history, r.val_size, r.metric.direction == "maximize")


def unplateaued(records: Sequence[TrialRecord], keys: Sequence[str]) -> dict[str, tuple[int, int]]:
    """For each of ``keys`` with a run that had not plateaued: (runs not plateaued, runs judged)."""
    out: dict[str, tuple[int, int]] = {}
    for key in keys:
        flags = [run_plateaued(r) for r in records if r.role == Role.FINALIST and r.finished and r.key == key]
        judged = [f for f in flags if f is not None]
        if not all(judged):
            out[key] = (sum(not f for f in judged), len(judged))
    return out


@dataclass(frozen=True)
class Shift:
    """One deciding comparison, a layout against the best, at the grid's horizon and at twice it, paired on the
    units all three runs of each pair trained.

    ``diff`` is the best minus the layout (how far below the best it lies, higher is further); intervals are
    two-sided at ``1 - 2 risk`` (each bound a one-sided test at the study's risk)."""

    role: str  # "answer" (placed within the margin) | "next faster" (not placed within it)
    layout: str  # its key
    best: str  # the best's key
    units: int  # paired units at both horizons
    short: tuple[float, float, float]  # (mean, low, high) at the horizon, on those units
    long: tuple[float, float, float]  # at twice the horizon
    holds: bool  # the longer runs do not contradict the verdict at the study's risk
    crossed: bool  # the longer runs' mean lies on the other side of the margin (not shown at the risk)


@dataclass(frozen=True)
class HorizonCheck:
    """The horizon check of an answer: its deciding comparisons at the horizon and at twice it."""

    epochs: int  # the grid's horizon
    long: int  # the check's
    shifts: tuple[Shift, ...]
    pending: bool = False  # runs the check needs have not finished (or were never run)

    @property
    def holds(self) -> bool:
        return all(s.holds for s in self.shifts)

    def longer_study(self, name: str) -> str:
        """The command that runs study ``name``'s spec again as a study whose grid trains at the check's
        horizon: what decides an answer the check contradicts (more runs at this horizon cannot)."""
        return f"explorer study run SPEC --set name={name}-{self.long} --set finalists.epochs={self.long}"


def _scores(records: Sequence[TrialRecord], key: str, epochs: int) -> dict[int, float]:
    out = {}
    for r in records:
        if r.role == Role.FINALIST and r.finished and r.key == key and r.epochs_planned == epochs:
            q = _oriented(r)
            if q is not None and r.seed is not None:
                out[r.seed] = q
    return out


def check_horizon(
    records: Sequence[TrialRecord],
    horizon: Horizon,
    best: str,
    layouts: Sequence[tuple[str, str]],
    units: Sequence[int],
    margin: float,
    risk: float,
) -> HorizonCheck:
    """The check of each ``(role, key)`` of ``layouts`` against ``best`` on the unit seeds ``units``; ``margin``
    and ``risk`` on the quality's scale (see the module docstring)."""
    long = horizon.check_epochs
    top = {e: _scores(records, best, e) for e in (horizon.epochs, long)}
    shifts = []
    pending = False
    for role, key in layouts:
        mine = {e: _scores(records, key, e) for e in (horizon.epochs, long)}
        # the units both ran at the grid's horizon (a layout the rounds left on fewer units than the check's
        # has no pair there to check); pending while one of those lacks its longer runs
        short = [u for u in units if u in mine[horizon.epochs] and u in top[horizon.epochs]]
        both = [u for u in short if u in mine[long] and u in top[long]]
        pending |= len(both) < len(short) or not short
        if len(both) < 2:
            continue
        rows = []
        for e in (horizon.epochs, long):
            d = np.array([top[e][u] - mine[e][u] for u in both])
            lo, hi = _t_bounds(d, 1 - 2 * risk)
            rows.append((float(d.mean()), lo, hi))
        mean, lo, hi = rows[1]
        # placed within the margin at the grid's horizon (the answer; a next faster layout the re-timing could not
        # tell faster, within as well): contradicted if shown beyond it; else contradicted if shown within it
        if role == "answer" or rows[0][2] <= margin:
            holds, crossed = lo <= margin, mean > margin
        else:
            holds, crossed = hi >= margin, mean < margin
        shifts.append(Shift(role, key, best, len(both), rows[0], rows[1], holds, crossed))
    return HorizonCheck(horizon.epochs, long, tuple(shifts), pending)


def check_layouts(answer: str, best: str, faster: str | None) -> list[tuple[str, str]]:
    """The layouts the horizon check trains against the best: the answer (unless it is the best) and the next
    faster layout."""
    return ([("answer", answer)] if answer != best else []) + ([("next faster", faster)] if faster else [])


def horizon_check(
    records: Sequence[TrialRecord],
    spec: StudySpec,
    horizon: Horizon,
    answer: str,
    best: str,
    faster: str | None,
) -> HorizonCheck | None:
    """:func:`check_horizon` on the spec's first ``check_units`` units (None: the check is off)."""
    n = spec.finalists.check_units
    if n == 0:
        return None
    maximize = spec.metric.direction == "maximize"
    units = [unit_seed(spec.seed, u) for u in range(n)]  # the grid's first units (their shared seeds)
    layouts = check_layouts(answer, best, faster)
    return check_horizon(
        records, horizon, best, layouts, units, spec.answer.margin_for(maximize), spec.answer.risk
    )


@dataclass(frozen=True)
class Curve:
    """A layout's validation curve over its runs at one horizon (higher is better for accuracy; bits per byte
    as they are)."""

    key: str
    epochs: int
    runs: int
    mean: tuple[float, ...]  # by epoch
    low: tuple[float, ...]  # the lowest run's value by epoch
    high: tuple[float, ...]  # the highest run's
    plateau: int  # the first epoch (1-based) whose mean lies within the noise of the curve's best

    @classmethod
    def of(cls, key: str, runs: Sequence[TrialRecord]) -> Curve | None:
        """The curve of ``runs`` (those of the most common length: one horizon's)."""
        lengths = [len(r.history) for r in runs if r.history]
        if not lengths:
            return None
        epochs = max(set(lengths), key=lengths.count)
        curves = [r.history for r in runs if len(r.history) == epochs]
        x = np.array(curves, dtype=float)
        mean = x.mean(axis=0)
        maximize = runs[0].metric.direction == "maximize"
        top = float(mean.max() if maximize else mean.min())
        n_val = min((r.val_size for r in runs if r.val_size), default=0)
        # one binomial standard error of the mean over the runs (0.2% for bits per byte)
        noise = binomial_se(top, n_val) / math.sqrt(len(curves)) if maximize and n_val else 0.002 * abs(top)
        near = np.abs(mean - top) <= noise
        return cls(
            key,
            epochs,
            len(curves),
            tuple(map(float, mean)),
            tuple(map(float, x.min(axis=0))),
            tuple(map(float, x.max(axis=0))),
            int(np.argmax(near)) + 1,
        )


def learning_curves(
    records: Sequence[TrialRecord], keys: Sequence[str], epochs: int | None = None
) -> list[Curve]:
    """Each of ``keys``' curve over its finished finalist runs in ``records`` (of ``epochs`` epochs, when given);
    layouts without one are left out."""
    out = []
    for key in keys:
        runs = [
            r
            for r in records
            if r.role == Role.FINALIST
            and r.finished
            and r.key == key
            and (epochs is None or r.epochs_planned == epochs)
        ]
        curve = Curve.of(key, runs) if runs else None
        if curve is not None:
            out.append(curve)
    return out
