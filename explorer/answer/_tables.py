"""Trial records -> architectures: one row per architecture, its runs summarized (one row per trial:
:mod:`explorer.answer._trials`).

The statistical unit of every comparison in the report is the *architecture* (width, depth, per-layer heads,
key/value heads and d_k, learning rate): its runs (seeds) are averaged first, so a configuration tried three
times counts once, and the spread between seeds is its uncertainty.

Quality is the task's metric (:func:`explorer.measurements.quality_metric`): validation accuracy, a fraction
in [0, 1] of a split of ``val_size`` examples ("one point" is 0.01; bounded logit-scale intervals), or
validation bits per byte for a language model (lower is better; t intervals on its own scale). Comparisons use a
``score``, the quality signed so that higher is better in both cases. Nothing here draws or prints.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
import pandas as pd

from explorer.answer._intervals import (
    Interval,
    Spread,
    accuracy_mean_ci,
    accuracy_rerun_interval,
    logit_spread,
    mean_ci,
    pool,
    raw_spread,
    rerun_interval,
)
from explorer.answer._latency_stats import block_spread, latency_interval, log_spread
from explorer.layout import ModelConfig
from explorer.measurements import QUALITY_METRICS, LatencyResult, QualityMetric
from explorer.storage import DONE_STATES, Retiming, Role, TimingKind, TrialRecord

ACC_POINT = 0.01  # one accuracy point
BPB_MARGIN = 0.01  # a bits-per-byte difference that matters: 1% of the value (a loss has no natural "point")
CLASSIFICATION = QUALITY_METRICS["classification"]


def score(metric: QualityMetric, value: float) -> float:
    """``value`` of ``metric`` signed so that higher is better (accuracy as is, bits per byte negated)."""
    return value if metric.direction == "maximize" else -value


def quality_margin(metric: QualityMetric, value: float) -> float:
    """The smallest quality difference the report calls material at ``value``: one accuracy point, or 1% of
    the bits per byte."""
    return ACC_POINT if metric.direction == "maximize" else BPB_MARGIN * abs(value)


def decode_only(retimings: Sequence[Retiming]) -> list[Retiming]:
    """The re-timed decoding steps: what the search's architectures take from the re-timings (their forward
    latency stays the one measured by their own runs)."""
    return [t for t in retimings if t.kind is TimingKind.DECODE]


def attention_kind(config: ModelConfig) -> str:
    """multi-head (kv_heads = heads in every layer) | multi-query (kv_heads = 1 with 2+ heads everywhere) |
    grouped-query (1 < kv_heads < heads everywhere) | mixed (layers of different kinds)."""
    pairs = list(zip(config.heads, config.kv_per_layer, strict=True))
    if all(k == h for h, k in pairs):
        return "multi-head"
    if all(k == 1 < h for h, k in pairs):
        return "multi-query"
    if all(1 < k < h for h, k in pairs):
        return "grouped-query"
    return "mixed"


class CostAxis(str, Enum):
    """What the rule weighs against quality: the forward pass (ms per batch), or decoding (ms per token) where
    the spec makes decoding an objective. The value is the word the answer's JSON prints."""

    LATENCY = "latency"
    DECODE = "decode"

    def __str__(self) -> str:
        return self.value

    @property
    def column(self) -> str:
        """The architecture table's column of this cost."""
        return f"{self.value}_ms"

    @property
    def timing(self) -> TimingKind:
        """The re-timing kind that measures this cost."""
        return TimingKind.DECODE if self is CostAxis.DECODE else TimingKind.FORWARD


@dataclass(frozen=True)
class Architecture:
    """One configuration's runs of one role, summarized (the unit every comparison uses)."""

    key: str
    config: ModelConfig
    lr: float
    role: Role
    numbers: tuple[int, ...]  # the trials
    seeds: tuple[int, ...]
    epoch: int | None  # quality read after this epoch (None: after each run's last epoch)
    values: tuple[float, ...]  # validation quality of each run (accuracy, or bits per byte)
    quality: Interval  # mean validation quality over the runs, with its 95% interval
    rerun: Interval  # where the mean of 3 fresh seeds should land (95% prediction interval)
    test_quality: float  # mean test quality (NaN when a run has none)
    latency: Interval  # median latency (ms) and the 95% interval a new timing would fall in
    timings: tuple[float, ...]  # the distinct timings (medians, ms) the latency rests on
    params: int
    epochs: float  # mean epochs trained
    feasible: bool
    label: str | None  # a finalist's part in the plan
    metric: QualityMetric = CLASSIFICATION  # what the quality is and which way is better
    decode: Interval | None = None  # ms per generated token, when measured, like ``latency``
    decode_timings: tuple[float, ...] = ()  # the distinct decoding timings (ms per token) it rests on
    kv_cache_bytes: int | None = None  # key/value cache at the study's decoding context and batch

    @property
    def score(self) -> float:
        """The mean quality signed so that higher is better."""
        return score(self.metric, self.quality.estimate)

    def cost(self, axis: CostAxis = CostAxis.LATENCY) -> Interval | None:
        """The latency the knee trades quality against: ``latency`` (forward) or ``decode`` (per token)."""
        return self.decode if axis == CostAxis.DECODE else self.latency

    @property
    def heads(self) -> tuple[int, ...]:
        return self.config.heads

    @property
    def kv_heads(self) -> tuple[int, ...]:
        return self.config.kv_per_layer

    @property
    def n(self) -> int:
        return len(self.values)


def _timings(runs: Sequence[TrialRecord], decode: bool = False) -> list[LatencyResult]:
    """Distinct measurements only: a cached figure reused by several runs is one measurement (its first copy)."""
    lats = [(r.decode.latency if r.decode is not None else None) if decode else r.latency for r in runs]
    distinct: dict[tuple[str, float], LatencyResult] = {}
    for lat in (x for x in lats if x is not None):
        distinct.setdefault((lat.measured_at, round(lat.median_ms, 9)), lat)
    return list(distinct.values())


def _latency(timings: Sequence[LatencyResult], pooled: Spread | None) -> Interval:
    """A prediction interval for a new timing: from the spread between distinct timings (pooled over the role's
    architectures when some have several), else from one timing's own block times; at least the blocks' spread."""
    medians = [lat.median_ms for lat in timings]
    within = timings[0].samples_ms if len(timings[0].samples_ms) >= 2 else None
    pooled = pooled if pooled is not None and pooled[0] > 0 else None
    if pooled is not None or len(set(medians)) > 1 or within is not None:
        floor = block_spread(medians, [lat.iqr_ms for lat in timings])
        return latency_interval(medians, within=within, pooled=pooled, floor=floor)
    m, iqr = medians[0], timings[0].iqr_ms
    return Interval(m, max(m - iqr, 0.0), m + iqr, 1, "IQR of one measurement (no block times recorded)")


def architectures(
    records: Iterable[TrialRecord],
    role: Role = Role.SEARCH,
    epoch: int | None = None,
    retimings: Sequence[Retiming] = (),
    pooled: bool = True,
) -> list[Architecture]:
    """Every configuration of ``role`` with its runs summarized.

    ``pooled``: quality intervals take the seed-to-seed spread pooled over the role's architectures (a few
    seeds each); ``pooled=False`` gives each architecture its own runs' spread, for finalists, whose runs are many
    and whose spreads may differ between layouts.

    ``epoch=None``: COMPLETE runs, their final accuracy. ``epoch=e``: every run (COMPLETE or stopped early) that
    trained at least ``e`` epochs, its accuracy after epoch ``e``: the comparison that stopped runs do not bias.
    An architecture with ``retimings`` (explorer.study._retime: interleaved rounds with nothing else running)
    takes its latency from them rather than from the timings its runs made while other workers trained.
    """
    groups = _runs_by_architecture(records, role, epoch)
    first_run = next((g[0] for g in groups.values()), None)
    metric = first_run.metric if first_run is not None else CLASSIFICATION
    retimed: dict[str, list[LatencyResult]] = defaultdict(list)
    redecoded: dict[str, list[LatencyResult]] = defaultdict(list)
    for t in retimings:
        (redecoded if t.kind is TimingKind.DECODE else retimed)[t.key].append(t.latency)
    timings = {key: retimed.get(key) or _timings(g) for key, g in groups.items()}
    decodes = {key: redecoded.get(key) or _timings(g, decode=True) for key, g in groups.items()}
    # Seed-to-seed and timing-to-timing spreads pooled over the role's architectures: a few seeds each give
    # t intervals with 1-2 degrees of freedom; pooled over the finalists, with ten or more.
    pools = _Pools(
        quality=_quality_pool(groups, epoch, metric) if pooled else None,
        latency=pool([log_spread([t.median_ms for t in ts]) for ts in timings.values()]),
        decode=pool([log_spread([t.median_ms for t in ts]) for ts in decodes.values() if ts]),
    )
    out = [
        _architecture(
            key, sorted(runs, key=lambda r: r.number), role, epoch, metric, timings[key], decodes[key], pools
        )
        for key, runs in groups.items()
    ]
    return sorted(out, key=lambda a: (a.latency.estimate, -a.score))


@dataclass(frozen=True)
class _Pools:
    """Spreads pooled over a role's architectures (None: each architecture uses its own)."""

    quality: Spread | None  # seed to seed, on the logit scale for accuracy, else on the metric's own
    latency: Spread | None  # timing to timing, log scale
    decode: Spread | None  # decoding timing to decoding timing, log scale


def _runs_by_architecture(
    records: Iterable[TrialRecord], role: Role, epoch: int | None
) -> dict[str, list[TrialRecord]]:
    """The runs of ``role`` that count (finished, or trained at least ``epoch`` epochs), by configuration."""
    groups: dict[str, list[TrialRecord]] = defaultdict(list)
    for r in records:
        if r.role != role or r.config is None or r.latency is None or r.key is None:
            continue
        if epoch is None and not r.finished:
            continue
        if epoch is not None and (r.state not in DONE_STATES or r.epochs_run < epoch):
            continue
        groups[r.key].append(r)
    return groups


def _value(r: TrialRecord, epoch: int | None) -> float:
    """A run's validation quality after ``epoch`` (None: after its last epoch)."""
    return r.history[epoch - 1] if epoch else float(r.quality)  # type: ignore[arg-type]


def _quality_pool(
    groups: dict[str, list[TrialRecord]], epoch: int | None, metric: QualityMetric
) -> Spread | None:
    """The seed-to-seed spread pooled over the architectures: accuracy on the logit scale (a proportion),
    bits per byte on its own (unbounded)."""
    if metric.direction == "maximize":
        return pool(
            [logit_spread([_value(r, epoch) for r in g], g[0].val_size or 1) for g in groups.values()]
        )
    return pool([raw_spread([_value(r, epoch) for r in g]) for g in groups.values()])


def _quality_intervals(
    runs: Sequence[TrialRecord], values: Sequence[float], metric: QualityMetric, pooled: Spread | None
) -> tuple[Interval, Interval]:
    """The mean quality's 95% interval and where the mean of 3 fresh seeds should land."""
    if metric.direction == "maximize":
        n_val = runs[0].val_size or 1
        return (
            accuracy_mean_ci(values, n_val, pooled=pooled),
            accuracy_rerun_interval(values, n_val, 3, pooled=pooled),
        )
    se = float(np.mean([r.val_bpb_se for r in runs])) if all(r.val_bpb_se for r in runs) else None
    return mean_ci(values, pooled=pooled, se=se), rerun_interval(values, 3, pooled=pooled, se=se)


def _architecture(
    key: str,
    runs: Sequence[TrialRecord],
    role: Role,
    epoch: int | None,
    metric: QualityMetric,
    timings: Sequence[LatencyResult],
    decodes: Sequence[LatencyResult],
    pools: _Pools,
) -> Architecture:
    """One configuration's runs (in trial order) summarized."""
    values = [_value(r, epoch) for r in runs]
    quality, rerun = _quality_intervals(runs, values, metric, pools.quality)
    tests = [r.test_quality for r in runs if r.test_quality is not None]
    first = runs[0]
    return Architecture(
        key=key,
        config=first.config,  # type: ignore[arg-type]
        lr=float(first.lr),  # type: ignore[arg-type]
        role=role,
        numbers=tuple(r.number for r in runs),
        seeds=tuple(int(r.seed) for r in runs if r.seed is not None),
        epoch=epoch,
        values=tuple(values),
        quality=quality,
        rerun=rerun,
        test_quality=float(np.mean(tests)) if len(tests) == len(runs) else float("nan"),
        latency=_latency(timings, pools.latency),
        timings=tuple(t.median_ms for t in timings),
        params=int(first.params or 0),
        epochs=float(np.mean([r.epochs_run for r in runs])),
        feasible=all(r.feasible for r in runs),
        label=next((r.label for r in runs if r.label), None),
        metric=metric,
        decode=_latency(decodes, pools.decode) if decodes else None,
        decode_timings=tuple(t.median_ms for t in decodes),
        kv_cache_bytes=next((r.decode.kv_cache_bytes for r in runs if r.decode is not None), None),
    )


def architecture_table(archs: Iterable[Architecture]) -> pd.DataFrame:
    """One row per architecture: what the figures and tables of the report use."""
    rows = []
    for a in archs:
        c = a.config
        q = a.quality
        bounded = a.metric.direction == "maximize"
        dec = a.decode
        rows.append(
            {
                "key": a.key,
                "role": a.role,
                "label": a.label,
                "number": a.numbers[0],
                "runs": a.n,
                "d_model": c.d_model,
                "n_layers": c.n_layers,
                "heads": c.heads,
                "kv_heads": c.kv_per_layer,
                "kv_max": max(c.kv_per_layer),
                "group": max(c.groups),
                "attention_kind": attention_kind(c),
                "d_k": c.d_k,
                "family": c.family,
                "heads_max": max(c.heads),
                "heads_min": min(c.heads),
                "heads_mean": float(np.mean(c.heads)),
                "dk_min": min(c.d_k),
                "min_dk": c.min_dk,
                "lr": a.lr,
                "quality": q.estimate,
                "quality_low": q.low,
                "quality_high": q.high,
                "score": a.score,
                "val_accuracy": q.estimate if bounded else np.nan,
                "val_low": q.low if bounded else np.nan,
                "val_high": q.high if bounded else np.nan,
                "test_accuracy": a.test_quality if bounded else np.nan,
                "test_quality": a.test_quality,
                "latency_ms": a.latency.estimate,
                "latency_low": a.latency.low,
                "latency_high": a.latency.high,
                "decode_ms": dec.estimate if dec else np.nan,
                "decode_low": dec.low if dec else np.nan,
                "decode_high": dec.high if dec else np.nan,
                "kv_cache_bytes": a.kv_cache_bytes if a.kv_cache_bytes is not None else np.nan,
                "params": a.params,
                "epochs": a.epochs,
                "feasible": a.feasible,
            }
        )
    cols = [
        "key",
        "heads",
        "quality",
        "score",
        "val_accuracy",
        "latency_ms",
        "decode_ms",
        "d_model",
        "n_layers",
        "feasible",
        "number",
    ]
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=cols)


def common_epoch(
    records: Iterable[TrialRecord], keys: Collection[str | None] | None = None, role: Role = Role.SEARCH
) -> int | None:
    """The last epoch every (COMPLETE or stopped) run of ``role`` (among ``keys``) trained: qualities compared
    there are free of the bias of stopping some runs early. None when there are no such runs."""
    epochs = [
        r.epochs_run
        for r in records
        if r.role == role and r.state in DONE_STATES and r.epochs_run > 0 and (keys is None or r.key in keys)
    ]
    return min(epochs) if epochs else None
