"""How sure the answer is: a bootstrap over the finalists' seeds (and timings) of whether the recommendation holds.

A pure function over architectures and their runs; the report states the figure and how it was computed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from explorer.insight.pareto import front_mask, knee_index
from explorer.insight.tables import Architecture, quality_margin
from explorer.search.record import TrialRecord

__all__ = ["BOOTSTRAP_ROUNDS", "bootstrap_confidence"]

BOOTSTRAP_ROUNDS = 2000  # resamples of the seeds behind the confidence figure


def bootstrap_confidence(
    rec: Architecture,
    candidates: Sequence[Architecture],
    runs: dict[str, list[TrialRecord]],
    seed: int = 0,
    axis: str = "latency",
) -> float:
    """Bootstrap over seeds: the share of resamples in which ``rec`` is still the knee of the candidates' front,
    or within one point (1% for bits per byte) of the best candidate no slower than it (latency ties count as
    no slower).

    Each resample draws, per candidate, its runs (seeds) and its timings with replacement and recomputes its mean
    accuracy and median latency.
    """
    rng = np.random.default_rng(seed)
    keys = [a.key for a in candidates]
    sign = 1.0 if rec.metric.direction == "maximize" else -1.0  # quality as a score: higher is better
    acc = [sign * np.array([r.quality for r in runs[k]], float) for k in keys]
    lat = [np.array(a.decode_timings if axis == "decode" else a.timings, float) for a in candidates]
    i_rec = keys.index(rec.key)
    costs = [a.cost(axis) for a in candidates]  # every candidate has it (within_budgets keeps only those)
    tie = {k: (c.high / c.estimate) - 1 for k, c in zip(keys, costs, strict=True) if c is not None}
    margin = quality_margin(rec.metric, rec.quality.estimate)
    hits = 0
    for _ in range(BOOTSTRAP_ROUNDS):
        a_mean = np.array([x[rng.integers(0, len(x), len(x))].mean() for x in acc])
        l_med = np.array([np.median(x[rng.integers(0, len(x), len(x))]) for x in lat])
        on_front = np.flatnonzero(front_mask(a_mean, l_med))
        if on_front[knee_index(a_mean[on_front], l_med[on_front], (a_mean, l_med))] == i_rec:
            hits += 1
            continue
        no_slower = l_med <= l_med[i_rec] * (1 + tie[rec.key])
        if a_mean[no_slower].max() - a_mean[i_rec] <= margin:
            hits += 1
    return hits / BOOTSTRAP_ROUNDS
