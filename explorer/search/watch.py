"""What a trial watches while :func:`explorer.engine.evaluate.evaluate_variant` runs it.

:class:`TrialWatch` holds the callbacks of one trial of :class:`explorer.search.objective.Objective`: it writes the
measurements as they come (decoding, then latency and parameters), checks the budgets on them before any
training (:func:`budget_constraints`: Optuna 5.0 constraints, <= 0 feasible; over budget raises
:class:`OverBudget`), and after each epoch at a rung asks :func:`explorer.search.fidelity.dominated_at_rung`
whether a faster peer has beaten the trial beyond seed and split noise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import optuna

from explorer.engine.config import ModelConfig
from explorer.engine.measures import DecodeResult, LatencyResult
from explorer.engine.train import EpochStats
from explorer.search import fidelity, record
from explorer.search.spec import MB, StudySpec

__all__ = ["OverBudget", "TrialWatch", "budget_constraints"]

log = logging.getLogger(__name__)


class OverBudget(Exception):
    """The trial's measurements break the budgets named in ``keys``; it is pruned before any training."""

    def __init__(self, keys: list[str]):
        super().__init__(", ".join(keys))
        self.keys = keys


def budget_constraints(
    spec: StudySpec, latency_ms: float, params: int, config: ModelConfig, decoded: DecodeResult | None
) -> dict[str, float]:
    """Each budget of the spec as a constraint value (measured minus allowed: <= 0 is within budget)."""
    budgets = spec.budgets
    out: dict[str, float] = {}
    if budgets.max_latency_ms is not None:
        out["latency_ms"] = latency_ms - budgets.max_latency_ms
    if budgets.max_params is not None:
        out["params"] = float(params - budgets.max_params)
    if budgets.max_decode_ms is not None and decoded is not None:
        out["decode_ms"] = decoded.ms_per_token - budgets.max_decode_ms
    if budgets.max_kv_cache_mb is not None and spec.decode is not None:
        d = spec.decode
        cache = config.kv_cache_bytes(d.context, d.batch_size, spec.latency.dtype)
        out["kv_cache_mb"] = cache / MB - budgets.max_kv_cache_mb
    return out


class TrialWatch:
    """The callbacks of one trial (see the module docstring).

    Args:
        trial, spec: the trial and its study's spec.
        config, key: the architecture the trial runs and its key (the same key is never its peer).
        rungs: the epochs at which it may stop (none for a finalist run).
        n_val: the validation examples its accuracy is a proportion of.
        peers: the trials to compare against at a rung, read when a rung is reached.
        on_epoch: called after every epoch (progress in this process).
    """

    def __init__(
        self,
        trial: optuna.Trial,
        spec: StudySpec,
        config: ModelConfig,
        key: str,
        rungs: set[int],
        n_val: int,
        peers: Callable[[], list[fidelity.Peer]],
        on_epoch: Callable[[], None] | None = None,
    ):
        self.trial, self.spec, self.config, self.key = trial, spec, config, key
        self.rungs, self.n_val, self.peers, self.progress = rungs, n_val, peers, on_epoch
        self.decoded: DecodeResult | None = None
        self.latency: LatencyResult | None = None
        self.history: list[float] = []  # the validation quality after each epoch
        self.stop: str | None = None  # why the rung rule stopped the trial

    def on_decoded(self, decoded: DecodeResult) -> None:
        self.decoded = decoded
        record.write(
            self.trial,
            decode=decoded.to_dict(),
            decode_ms=decoded.ms_per_token,
            kv_cache_bytes=decoded.kv_cache_bytes,
        )

    def on_measured(self, latency: LatencyResult, params: int) -> None:
        """Write the latency and parameter count and set the budget constraints; over budget raises
        :class:`OverBudget`, before any training."""
        self.latency = latency
        trial = self.trial
        log.debug(
            "trial %d: %.3f ms per batch of %d (%s%s), %d parameters",
            trial.number,
            latency.median_ms,
            latency.batch_size,
            latency.runtime,
            ", cached" if latency.cached else "",
            params,
        )
        constraints = budget_constraints(self.spec, latency.median_ms, params, self.config, self.decoded)
        record.write(trial, latency=latency.to_dict(), latency_ms=latency.median_ms, params=params)
        for name, value in constraints.items():
            trial.set_constraint(name, value)
        over = [name for name, value in constraints.items() if value > 0]
        # also as user attributes: optuna-dashboard 0.21 does not show Optuna 5.0's constraints
        if constraints:
            record.write(trial, constraints=constraints, feasible=not over)
        if over:
            raise OverBudget(over)

    def on_epoch(self, stats: EpochStats) -> bool:
        """Note the epoch's quality; at a rung, True (stop) when a faster peer beats the trial beyond noise."""
        self.history.append(stats.quality)
        record.write(self.trial, epoch=stats.epoch)  # progress, for a parent process polling the storage
        if self.progress is not None:
            self.progress()
        if stats.epoch not in self.rungs:
            return False
        record.write(self.trial, history=list(self.history))  # running peers compare against it
        # decoding is timed before anything else whenever it is an objective, the forward pass always
        timed = self.decoded.latency if self.spec.objectives.decode else self.latency  # type: ignore[union-attr]
        assert timed is not None
        verdict = fidelity.dominated_at_rung(
            stats.epoch,
            stats.quality,
            self.n_val,
            self.key,
            timed.median_ms,
            timed.iqr_ms / timed.median_ms,
            self.peers(),
            self.spec.early_stopping.alpha,
            higher_is_better=self.spec.metric.direction == "maximize",
            se=stats.val_bpb_se,
            n_rungs=len(self.rungs),
        )
        if verdict.stop:
            self.stop = verdict.reason
        return verdict.stop
