"""The objective: what one trial of a study does.

A trial is one configuration trained with one seed, in one of two roles:

* ``search``: the sampler proposes an architecture the study has not taken (:mod:`explorer.search.sampling`);
  the trial claims it (:mod:`explorer.search.claims`: a configuration another trial holds makes this trial a
  duplicate, closed without training and not counted), trains it with the study's seed for its number
  (:func:`explorer.search.units.search_seed`) for ``[task] epochs``, and may stop at a rung when a faster
  architecture beats it beyond seed and split noise (:func:`explorer.search.fidelity.dominated_at_rung`).
* ``finalist``: an enqueued run of a chosen architecture on one unit of the evidence grid (a fold of one
  replicate, :func:`explorer.insight.finalists.evidence_units`): that fold of the labelled examples is its
  validation split (:func:`explorer.engine.tasks.folds.fold_task`), the unit's seed (shared by every layout) its
  training seed, and it trains the fixed schedule of ``[finalists] epochs``.

Both go through :func:`explorer.engine.evaluate.evaluate_variant` (time first, then train) and write one
:class:`~explorer.search.record.TrialRecord` as user attributes. A budget is checked on the latency, the
parameter count, the decoding latency and the key/value cache before any training (an over-budget trial is
pruned untrained). A NaN loss or running out of memory fails this trial with the reason recorded, not the study.

The trial's first value is the task's quality (:attr:`explorer.search.spec.StudySpec.metric`: validation
accuracy, or bits per byte for a language model, in the study's direction); then the forward latency, the
parameter count and the decoding ms per token where the spec makes them objectives. When the spec has a
``[decode]`` table, every trial's decoding latency is measured (and cached per architecture) before training.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import TrialState

from explorer.engine.config import ModelConfig, TrainConfig
from explorer.engine.evaluate import VariantFailed, evaluate_variant
from explorer.engine.latency_cache import LatencyCache
from explorer.engine.measures import DecodeResult, LatencyResult
from explorer.engine.tasks import Task, load_task
from explorer.engine.tasks.folds import chance_level
from explorer.engine.train import EpochStats
from explorer.search import fidelity
from explorer.search.artifacts import ArtifactStore
from explorer.search.claims import Claims
from explorer.search.record import RETRY_ATTRS, TrialRecord, arch_key, is_bookkeeping
from explorer.search.retrain import run_task
from explorer.search.space import SearchSpace
from explorer.search.spec import MB, StudySpec
from explorer.search.units import search_seed

__all__ = [
    "LIVE_STATES",
    "ClosedTrial",
    "Objective",
    "TrialFailed",
    "live_trials",
]

LIVE_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)  # what counts toward a total

log = logging.getLogger(__name__)


class TrialFailed(Exception):
    """A trial failed for a reason recorded in its ``fail_reason`` attribute; the study goes on."""


class ClosedTrial(Exception):
    """A trial closed without running: beyond its stage's total, or its configuration held by another trial."""


def live_trials(study: optuna.Study, role: str) -> list[optuna.trial.FrozenTrial]:
    """The trials of ``role`` that count toward its total: COMPLETE, PRUNED or RUNNING, bookkeeping left out."""
    return [
        t
        for t in study.get_trials(deepcopy=False, states=LIVE_STATES)
        if not is_bookkeeping(t) and t.user_attrs.get("role", "search") == role
    ]


class _OverBudget(Exception):
    def __init__(self, keys: list[str]):
        super().__init__(", ".join(keys))
        self.keys = keys


class Objective:
    """The per-trial work of one worker. The task is loaded once; latency is cached per architecture.

    Args:
        study, spec, storage_url: the study, its spec, and where it lives (for the artifact store).
        stage: ``search`` (sample new architectures up to ``total``) or ``finalists`` (run queued finalist
            runs only; anything else is closed).
        total: the search stage's total (ignored in the finalist stage).
        device: where to time and train (default: the spec's latency device).
        store: where completed trials' weights go (None: not kept).
        on_epoch: called after every epoch of every trial (progress in this process).
    """

    def __init__(
        self,
        study: optuna.Study,
        spec: StudySpec,
        *,
        stage: str = "search",
        total: int | None = None,
        device: str | None = None,
        store: ArtifactStore | None = None,
        on_epoch: Callable[[], None] | None = None,
    ):
        self.study, self.spec, self.stage = study, spec, stage
        self.on_epoch = on_epoch
        self.total = spec.n_trials if total is None else total
        self.space = SearchSpace(spec.space)
        self.task = load_task(spec.task.name, **spec.task.options)
        self.builder = spec.model.builder()  # the user's model function, or None: explorer's own
        self.cache = LatencyCache()
        self.latency_cfg = dataclasses.replace(spec.latency, device=device or spec.latency.device)
        self.claims = Claims(study._storage, spec.name)
        self.store = store
        self._folds: dict[tuple[int, int, int], Task] = {}

    def _task_for(self, run: dict[str, Any]) -> Task:
        """The task a finalist run trains on: its cross-validation fold, or the task's fixed split."""
        if run.get("fold") is None:
            return self.task
        key = (int(run["fold"]), int(run["folds"]), int(run["fold_seed"]))
        if key not in self._folds:
            self._folds[key] = run_task(self.task, *key)
        return self._folds[key]

    # ---------------------------------------------------------------------------------------- entry

    def __call__(self, trial: optuna.Trial) -> tuple[float, ...]:
        try:
            return self._run(trial)
        except KeyboardInterrupt:
            # Optuna marks this trial FAIL and re-raises; queue its configuration so a resume retries it.
            trial.set_user_attr("fail_reason", "interrupted (Ctrl-C); its configuration is queued for resume")
            if trial.params or trial.user_attrs.get("role") == "finalist":
                keep = {k: trial.user_attrs[k] for k in RETRY_ATTRS if k in trial.user_attrs}
                self.study.enqueue_trial(trial.params, user_attrs={**keep, "retry_of": trial.number})
            raise

    def _close(self, trial: optuna.Trial, attr: str, value: Any, why: str) -> ClosedTrial:
        trial.set_user_attr(attr, value)
        return ClosedTrial(f"trial {trial.number}: {why}")

    def _run(self, trial: optuna.Trial) -> tuple[float, ...]:
        role = trial.user_attrs.get("role", "search")
        if self.stage == "finalists" and role != "finalist":
            raise self._close(trial, "surplus", True, "the finalist queue is empty")
        if role == "search":
            before = [t for t in live_trials(self.study, "search") if t.number < trial.number]
            if len(before) >= self.total:
                raise self._close(trial, "surplus", True, f"beyond the search total of {self.total}")
        task = self.task
        if role == "finalist":  # a chosen architecture, possibly outside the search space (a reference)
            run = trial.user_attrs["finalist"]
            config, lr = ModelConfig.from_dict(run["model"]), float(run["lr"])
            task = self._task_for(run)
        else:
            sampled = self.space.sample(trial)
            config, lr = sampled.config, sampled.lr
        # The sampler notes its proposal in the storage when the first parameter is suggested (Optuna samples
        # relative parameters lazily), after this trial object cached its attributes: read them afresh.
        proposal = self.study._storage.get_trial_user_attrs(trial._trial_id).get("proposal")
        if proposal == "exhausted":
            raise self._close(trial, "exhausted", True, "every architecture of the space is taken")
        if proposal is None:
            trial.set_user_attr("proposal", "enqueued")
        key = arch_key(config, lr)
        if role == "finalist":
            seed = int(trial.user_attrs["seed"])
            claim_key, epochs = f"{key}|seed{seed}", self.spec.finalists.run_epochs(self.spec.task.epochs)
        else:
            seed = int(trial.user_attrs.get("seed", search_seed(self.spec.seed, trial.number)))
            claim_key, epochs = key, self.spec.task.epochs
        failed = {t.number for t in self.study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
        holder = self.claims.claim(claim_key, trial.number, can_take_over=failed)
        if holder != trial.number:
            raise self._close(trial, "duplicate_of", holder, f"trial {holder} already runs {claim_key}")

        record = TrialRecord(
            number=trial.number,
            state="RUNNING",
            role=role,
            config=config,
            lr=lr,
            seed=seed,
            epochs_planned=epochs,
            batch_size=self.spec.task.batch_size,
            task_kind=self.task.kind,
            fold=trial.user_attrs["finalist"].get("fold") if role == "finalist" else None,
            folds=trial.user_attrs["finalist"].get("folds") if role == "finalist" else None,
            fold_seed=trial.user_attrs["finalist"].get("fold_seed") if role == "finalist" else None,
            chance=chance_level(task),
        )
        _set_attrs(trial, record.arch_attrs())
        log.info(
            "trial %d (%s): d_model %d, heads %s, kv heads %s, lr %.3g, seed %d, up to %d epochs",
            trial.number,
            role,
            config.d_model,
            list(config.heads),
            list(config.kv_per_layer),
            lr,
            seed,
            epochs,
        )
        # the same schedule for every run of a role: warm-up, then cosine decay over its planned epochs
        train_cfg = TrainConfig(epochs=epochs, batch_size=self.spec.task.batch_size, lr=lr, seed=seed)
        measured: dict[str, Any] = {}
        history: list[float] = []
        metric = self.spec.metric

        def on_decoded(decoded: DecodeResult) -> None:
            measured["decode"] = decoded
            _set_attrs(trial, {"decode": decoded.to_dict(), "decode_ms": decoded.ms_per_token,
                               "kv_cache_bytes": decoded.kv_cache_bytes})  # fmt: skip

        def on_measured(latency: LatencyResult, params: int) -> None:
            measured["latency"] = latency
            log.debug(
                "trial %d: %.3f ms per batch of %d (%s%s), %d parameters",
                trial.number,
                latency.median_ms,
                latency.batch_size,
                latency.runtime,
                ", cached" if latency.cached else "",
                params,
            )
            constraints = self._constraints(latency.median_ms, params, config, measured.get("decode"))
            _set_attrs(
                trial, {"latency": latency.to_dict(), "latency_ms": latency.median_ms, "params": params}
            )
            for name, value in constraints.items():
                trial.set_constraint(name, value)
            over = [name for name, value in constraints.items() if value > 0]
            # also as user attributes: optuna-dashboard 0.21 does not show Optuna 5.0's constraints
            if constraints:
                _set_attrs(trial, {"constraints": constraints, "feasible": not over})
            if over:
                raise _OverBudget(over)

        rungs = set(self.spec.early_stopping.rungs(epochs)) if role == "search" else set()
        n_val = len(task.val[1])  # accuracies are proportions of this many examples

        def on_epoch(stats: EpochStats) -> bool:
            history.append(stats.quality)
            trial.set_user_attr("epoch", stats.epoch)  # progress, for a parent process polling the storage
            if self.on_epoch is not None:
                self.on_epoch()
            if stats.epoch not in rungs:
                return False
            trial.set_user_attr("history", list(history))  # running peers compare against it
            lat = measured["decode"].latency if self.spec.objectives.decode else measured["latency"]
            verdict = fidelity.dominated_at_rung(
                stats.epoch,
                stats.quality,
                n_val,
                key,
                lat.median_ms,
                lat.iqr_ms / lat.median_ms,
                self._peers(trial.number),
                self.spec.early_stopping.alpha,
                higher_is_better=metric.direction == "maximize",
                se=stats.val_bpb_se,
                n_rungs=len(rungs),
            )
            if verdict.stop:
                measured["stop"] = verdict.reason
            return verdict.stop

        try:
            result = evaluate_variant(
                config,
                task,
                train_cfg,
                self.latency_cfg,
                # finalists are timed afresh: independent timings give the latency its real spread
                cache=self.cache if role == "search" else None,
                on_measured=on_measured,
                on_epoch=on_epoch,
                keep_model=self.store is not None,
                decode=self.spec.decode,
                on_decoded=on_decoded,
                builder=self.builder,
            )
        except _OverBudget as exc:
            _set_attrs(trial, {"stop": f"over budget before training ({exc})", "history": []})
            raise optuna.TrialPruned(f"over budget: {exc}") from None
        except VariantFailed as exc:
            _set_attrs(trial, {"fail_reason": str(exc), "history": history})
            raise TrialFailed(str(exc)) from None

        attrs: dict[str, Any] = {
            "history": [s.quality for s in result.fit.history],
            "val_accuracy": result.val_accuracy,
            "test_accuracy": result.test_accuracy,
            "val_size": result.val_size,
            "flops": result.flops,
            "device": result.device,
            "torch_version": result.torch_version,
            "train_time_s": result.fit.train_time_s,
            "samples_per_s": result.fit.samples_per_s,
            "val_bpb": result.val_bpb,
            "test_bpb": result.test_bpb,
            "val_bpb_se": result.val_bpb_se,
        }
        attrs = {k: v for k, v in attrs.items() if v is not None}
        if "stop" in measured:
            attrs["stop"] = measured["stop"]
        if result.relations is not None:
            attrs["relations"] = [
                [int(r.layer), int(r.head), int(r.relation), round(float(r.attention), 4)]
                for r in result.relations.itertuples()
            ]
        _set_attrs(trial, attrs)
        log.info(
            "trial %d: %s %.4f after %d epochs, %.3f ms%s",
            trial.number,
            metric.label,
            result.quality,
            result.fit.epochs_run,
            result.latency.median_ms,
            f" ({measured['stop']})" if "stop" in measured else "",
        )
        if role == "search" and result.fit.stopped_early:
            raise optuna.TrialPruned(measured.get("stop", "stopped early"))
        if self.store is not None and result.model is not None:
            self.store.save(self.spec.name, trial.number, result.model)  # size-capped; retrained if evicted
        values = [result.quality, result.latency.median_ms]
        if self.spec.objectives.params:
            values.append(float(result.params))
        if self.spec.objectives.decode:
            assert result.decode is not None  # the spec measures decoding whenever it is an objective
            values.append(result.decode.ms_per_token)
        return tuple(values)

    # ---------------------------------------------------------------------------------------- helpers

    def _constraints(
        self, latency_ms: float, params: int, config: ModelConfig, decoded: DecodeResult | None
    ) -> dict[str, float]:
        budgets = self.spec.budgets
        out: dict[str, float] = {}
        if budgets.max_latency_ms is not None:
            out["latency_ms"] = latency_ms - budgets.max_latency_ms
        if budgets.max_params is not None:
            out["params"] = float(params - budgets.max_params)
        if budgets.max_decode_ms is not None and decoded is not None:
            out["decode_ms"] = decoded.ms_per_token - budgets.max_decode_ms
        if budgets.max_kv_cache_mb is not None and self.spec.decode is not None:
            d = self.spec.decode
            cache = config.kv_cache_bytes(d.context, d.batch_size, self.spec.latency.dtype)
            out["kv_cache_mb"] = cache / MB - budgets.max_kv_cache_mb
        return out

    def _peers(self, number: int) -> list[fidelity.Peer]:
        """Other search trials with a latency and a validation history (finished, or running past a rung)."""
        peers = []
        for t in self.study.get_trials(deepcopy=False, states=LIVE_STATES):
            a = t.user_attrs
            if t.number == number or is_bookkeeping(t) or a.get("role", "search") != "search":
                continue
            timing = (
                (a.get("decode") or {}).get("latency") if self.spec.objectives.decode else a.get("latency")
            )
            if not a.get("history") or not isinstance(timing, dict):
                continue
            lat = LatencyResult.from_dict(timing)
            config = self.space.decode(t.params) if t.params else None
            if config is None:
                continue
            peers.append(
                fidelity.Peer(
                    number=t.number,
                    key=arch_key(config.config, config.lr),
                    latency_ms=lat.median_ms,
                    spread=lat.iqr_ms / lat.median_ms if lat.median_ms > 0 else 0.0,
                    history=tuple(float(x) for x in a["history"]),
                )
            )
        return peers


def _set_attrs(trial: optuna.Trial, attrs: dict[str, Any]) -> None:
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
