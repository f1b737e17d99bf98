"""The objective: what one trial of a study does, and when it stops early.

Per trial: sample a valid :class:`~explorer.engine.config.ModelConfig` from the fixed search space, time it on the device
first (latency depends only on the architecture, and is cached), check the user's budgets as Optuna constraints
(an over-budget trial is pruned before any training), then train epoch by epoch, stopping early when the trial is
clearly dominated (:func:`dominated_at_epoch`). Everything the report needs is stored on the trial. A NaN loss or
running out of memory fails this trial with the reason recorded (:class:`TrialFailed`), not the study.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import optuna
import torch
from optuna.trial import TrialState

from explorer.engine.config import LatencyConfig, TrainConfig
from explorer.errors import TrainingDivergedError

if TYPE_CHECKING:
    from explorer.search.study import StudyHandle

__all__ = ["FINISHED_STATES", "LIVE_STATES", "Objective", "SurplusTrial", "TrialFailed", "dominated_at_epoch"]

LIVE_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
FINISHED_STATES = (TrialState.COMPLETE, TrialState.PRUNED)


class TrialFailed(Exception):
    """A trial failed for a reason recorded in its ``fail_reason`` attribute; the study goes on."""


class SurplusTrial(Exception):
    """A racing worker created a trial beyond the study's total; it is closed without running."""


# --------------------------------------------------------------------------------------------- early stop


def dominated_at_epoch(
    epoch: int, val_accuracy: float, latency_ms: float, peers: list[tuple[float, list[float]]], margin: float
) -> bool:
    """True when a finished trial at least as fast was more than ``margin`` more accurate at this epoch.

    Such a trial can no longer reach the Pareto front unless it out-learns a faster model by more than the
    margin in its remaining epochs; the margin is how much late catching-up we allow for.
    """
    for peer_latency, history in peers:
        if (
            peer_latency <= latency_ms
            and len(history) >= epoch
            and history[epoch - 1] > val_accuracy + margin
        ):
            return True
    return False


# --------------------------------------------------------------------------------------------- objective


def _is_surplus(study: optuna.Study, trial: optuna.Trial, total: int) -> bool:
    """Whether ``trial`` would exceed the total: count live trials created before it (exact under races)."""
    before = [t for t in study.get_trials(deepcopy=False, states=LIVE_STATES) if t.number < trial.number]
    return len(before) >= total


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


class Objective:
    """The per-trial work. Built once per worker; the task is loaded once, latency is cached per architecture."""

    def __init__(self, handle: StudyHandle, total: int, device: torch.device):
        from explorer.engine.latency import LatencyCache
        from explorer.engine.tasks import load_task
        from explorer.search.artifacts import store_for
        from explorer.search.space import SearchSpace

        self.study, self.spec, self.total, self.device = handle.study, handle.spec, total, device
        self.space = SearchSpace.from_spec(self.spec)
        self.task = load_task(self.spec.task.name, **self.spec.task.options)
        self.cache = LatencyCache()
        self.store = store_for(handle)  # trained weights of completed trials, for `explorer heads`
        lat = self.spec.latency
        self.lat_cfg = LatencyConfig(batch_size=lat.batch_size, threads=lat.threads, dtype=lat.dtype)

    def __call__(self, trial: optuna.Trial) -> tuple[float, ...]:
        try:
            return self._run(trial)
        except KeyboardInterrupt:
            # Optuna marks this trial FAIL and re-raises; queue its configuration so a resume retries it.
            trial.set_user_attr("fail_reason", "interrupted (Ctrl-C); its configuration is queued for resume")
            if trial.params:
                self.study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
            raise

    def _run(self, trial: optuna.Trial) -> tuple[float, ...]:
        if _is_surplus(self.study, trial, self.total):
            trial.set_user_attr("surplus", True)
            raise SurplusTrial(f"trial {trial.number} is beyond the study's total of {self.total}")
        from explorer.engine.device import describe_device
        from explorer.engine.latency import model_latency
        from explorer.engine.model import build_model

        sampled = self.space.sample(trial)
        cfg = sampled.config
        epochs = self.spec.task.epochs
        attrs: dict[str, Any] = {
            "d_model": cfg.d_model,
            "n_layers": cfg.n_layers,
            "heads": list(cfg.heads),
            "d_k": list(cfg.d_k),
            "family": cfg.family,
            "min_dk": cfg.min_dk,
            "mlp_ratio": cfg.mlp_ratio,
            "lr": sampled.lr,
            "rejected": sampled.rejected,
            "repaired": sampled.repaired,
            "epochs_planned": epochs,
            "seed": self.spec.seed + trial.number,
            "device": describe_device(self.device),
            "torch_version": torch.__version__,
            "attention_impl": cfg.attention,
        }
        model = build_model(cfg, self.task.spec)
        attrs.update(params=model.num_params(), flops=model.flops(1))
        del model
        t0 = time.perf_counter()
        latency = model_latency(cfg, self.task.spec, self.lat_cfg, self.device, cache=self.cache)
        attrs["latency_time_s"] = time.perf_counter() - t0  # ~0 when the architecture was timed before
        attrs.update(
            latency_ms=latency.median_ms, latency_iqr_ms=latency.iqr_ms, latency_batch_size=latency.batch_size
        )
        constraints = self._constraints(attrs)
        attrs["constraints"] = constraints
        for key, value in constraints.items():
            trial.set_constraint(key, value)
        self._set_attrs(trial, attrs)
        if any(v > 0 for v in constraints.values()):
            self._set_attrs(
                trial,
                {
                    "epochs_run": 0,
                    "epochs_saved": epochs,
                    "early_stopped": True,
                    "stop_reason": "over budget before training",
                },
            )
            raise optuna.TrialPruned("over budget: " + ", ".join(k for k, v in constraints.items() if v > 0))

        peers = self._peers()
        es = self.spec.early_stopping
        history: list[float] = []

        def on_epoch(stats: Any) -> bool:
            history.append(stats.val_accuracy)  # stored once at the end: peers only read finished trials
            return (
                es.enabled
                and stats.epoch >= es.min_epochs
                and stats.epoch < epochs
                and dominated_at_epoch(stats.epoch, stats.val_accuracy, latency.median_ms, peers, es.margin)
            )

        train_cfg = TrainConfig(
            epochs=epochs,
            batch_size=self.spec.task.batch_size,
            lr=sampled.lr,
            seed=self.spec.seed + trial.number,
        )
        from explorer.engine.train import fit

        try:
            t0 = time.perf_counter()
            model, result = fit(cfg, self.task, train_cfg, self.device, on_epoch=on_epoch)
            fit_time = time.perf_counter() - t0  # training and per-epoch evaluation
        except TrainingDivergedError as exc:
            trial.set_user_attr("fail_reason", f"diverged: {exc}")
            raise TrialFailed(str(exc)) from None
        except (RuntimeError, MemoryError) as exc:
            if not (_is_oom(exc) or isinstance(exc, MemoryError)):
                raise
            trial.set_user_attr("fail_reason", f"out of memory on {self.device}: {str(exc)[:200]}")
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            raise TrialFailed("out of memory") from None
        self._set_attrs(
            trial,
            {
                "val_accuracy": result.val_accuracy,
                "test_accuracy": result.test_accuracy,
                "train_time_s": result.train_time_s,
                "epochs_run": result.epochs_run,
                "epochs_saved": epochs - result.epochs_run,
                "early_stopped": result.stopped_early,
                "samples_per_s": result.samples_per_s,
                "fit_time_s": fit_time,
                "val_history": history,
                **(
                    {"stop_reason": f"dominated at epoch {result.epochs_run}"} if result.stopped_early else {}
                ),
            },
        )
        if result.stopped_early:
            raise optuna.TrialPruned(f"dominated at epoch {result.epochs_run}")
        self.store.save(self.spec.name, trial.number, model)  # size-capped; `heads` retrains what was evicted
        values = [result.val_accuracy, latency.median_ms]
        if self.spec.objectives.params:
            values.append(float(attrs["params"]))
        return tuple(values)

    def _constraints(self, attrs: dict[str, Any]) -> dict[str, float]:
        budgets = self.spec.budgets
        out: dict[str, float] = {}
        if budgets.max_latency_ms is not None:
            out["latency_ms"] = attrs["latency_ms"] - budgets.max_latency_ms
        if budgets.max_params is not None:
            out["params"] = float(attrs["params"] - budgets.max_params)
        return out

    def _peers(self) -> list[tuple[float, list[float]]]:
        """Finished trials' latency and per-epoch validation accuracy, fetched once per trial."""
        return [
            (t.user_attrs["latency_ms"], t.user_attrs["val_history"])
            for t in self.study.get_trials(deepcopy=False, states=FINISHED_STATES)
            if "latency_ms" in t.user_attrs and t.user_attrs.get("val_history")
        ]

    @staticmethod
    def _set_attrs(trial: optuna.Trial, attrs: dict[str, Any]) -> None:
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
