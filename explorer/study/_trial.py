"""One trial's whole life, top to bottom: :meth:`Objective.__call__` is what ``study.optimize`` runs for it.

A trial is one configuration trained with one seed, in one of two roles
(:class:`~explorer.storage._trial_kinds.Role`):

* ``search``: the sampler proposes an architecture the study has not taken (:mod:`explorer.study._sampling`);
  the trial claims it (:mod:`explorer.study._claims`: a configuration another trial holds makes this trial a
  duplicate, closed without training and not counted), trains it with the study's seed for its number
  (:func:`explorer.layout._units.search_seed`) for ``[task] epochs``, and may stop at a rung when a faster
  architecture beats it beyond seed and split noise (:func:`explorer.spec._fidelity.dominated_at_rung`).
* ``finalist``: an enqueued run of a chosen architecture on one unit of the evidence grid (a fold of one
  replicate, :func:`explorer.answer._finalists.evidence_units`): that fold of the labelled examples is its
  validation split (:func:`explorer.data._folds.fold_task`), the unit's seed (shared by every layout) its
  training seed, and it trains the fixed schedule of ``[finalists] epochs``.

Its life, in the order :meth:`Objective._run` reads: Optuna asks for it (a queued trial is taken exclusively,
:func:`explorer.study._claims.pop_waiting`); its stage closes it if it has no room (``surplus``); it is
planned (a finalist's queued run, or the sampler's proposal); it is closed if the space is used up
(``exhausted``); it claims its configuration (``duplicate_of`` another trial's otherwise); it writes what it
is; then :func:`explorer.measure._evaluate.evaluate_variant` times it and trains it, with :class:`TrialWatch` as
its callbacks (measurements written as they come, budgets checked before any training: over budget prunes it
untrained; the rungs of early stopping); it records what it measured, keeps its weights and returns its
values, which Optuna tells the study. Every attribute goes through :func:`explorer.storage._record.write`. While
it runs, Optuna's heartbeat marks it alive; a worker that dies leaves it to
:class:`explorer.storage._heartbeat.RetryStaleTrial`, and Ctrl-C queues it again for a resume. A NaN loss or
running out of memory fails this trial with the reason recorded, not the study.

The trial's first value is the task's quality (:attr:`explorer.spec._spec.StudySpec.metric`: validation
accuracy, or bits per byte for a language model, in the study's direction); then the forward latency, the
parameter count and the decoding ms per token where the spec makes them objectives. When the spec has a
``[decode]`` table, every trial's decoding latency is measured (and cached per architecture) before training.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import IntDistribution
from optuna.trial import TrialState

from explorer.answer import curve_plateaued
from explorer.data import Task, chance_level
from explorer.layout import FinalistRun, ModelConfig, TrainConfig, search_seed
from explorer.measure import EpochStats, LatencyCache, VariantFailed, VariantResult, evaluate_variant
from explorer.measurements import DecodeResult, LatencyResult
from explorer.spec import MB, Peer, StudySpec, dominated_at_rung
from explorer.storage import (
    Closure,
    Proposal,
    Role,
    TrialRecord,
    arch_key,
    finalist_run,
    is_bookkeeping,
    number_base,
    proposal_of,
    record_from_trial,
    report_epoch,
    retry_attrs,
    role_of,
    seed_of,
    set_stored_param,
    storage_of,
    write as write_record,
)
from explorer.study._claims import Claims
from explorer.study._context import RunContext
from explorer.study._retrain import run_task
from explorer.study._sampling import suggest_readable

LIVE_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)  # what counts toward a total

log = logging.getLogger(__name__)


class TrialFailed(Exception):
    """A trial failed for a reason recorded in its ``fail_reason`` attribute; the study goes on."""


class ClosedTrial(Exception):
    """A trial closed without running: beyond its stage's total, or its configuration held by another trial."""


def live_trials(study: optuna.Study, role: Role) -> list[optuna.trial.FrozenTrial]:
    """The trials of ``role`` that count toward its total: COMPLETE, PRUNED or RUNNING, bookkeeping left out."""
    return [
        t
        for t in study.get_trials(deepcopy=False, states=LIVE_STATES)
        if not is_bookkeeping(t) and role_of(t) is role
    ]


@dataclass(frozen=True)
class _Plan:
    """What one trial runs: its architecture and learning rate, seed, epochs and split."""

    role: Role
    config: ModelConfig
    lr: float
    seed: int
    epochs: int
    task: Task  # the split it trains and validates on (a finalist's cross-validation fold, or the task's)
    finalist: FinalistRun | None  # a finalist run as queued (None for a search trial)

    @property
    def key(self) -> str:
        return arch_key(self.config, self.lr)

    @property
    def claim_key(self) -> str:
        """What the trial claims: its architecture (a search trial), or its architecture, seed and horizon (a
        finalist: the horizon check trains a grid run's layout and seed for longer)."""
        return self.key if self.finalist is None else f"{self.key}|seed{self.seed}|{self.epochs}ep"


class Objective:
    """The per-trial work of one worker. The task, the space and the device come from the run context; latency is
    cached per architecture.

    Args:
        study, spec: the Optuna study the stage's trials run in (the study, or its finalists' companion:
            ``Study.stage_study``) and the study's spec.
        context: this process's run context (:mod:`explorer.study._context`): the device to time and train on,
            the task, the search space, the user's model builder and where completed trials' weights go
            (``context.store``; None: not kept).
        stage: ``Role.SEARCH`` (sample new architectures up to ``total``) or ``Role.FINALIST`` (run queued finalist
            runs only; anything else is closed).
        total: the search stage's total (default: the spec's ``n_trials``; ignored in the finalist stage).
        on_epoch: called after every epoch of every trial (progress in this process).
    """

    def __init__(
        self,
        study: optuna.Study,
        spec: StudySpec,
        context: RunContext,
        *,
        stage: Role = Role.SEARCH,
        total: int | None = None,
        on_epoch: Callable[[], None] | None = None,
    ):
        self.study, self.spec, self.context, self.stage = study, spec, context, stage
        self.on_epoch = on_epoch
        self.total = spec.n_trials if total is None else total
        self.cache = LatencyCache()
        # per Optuna study, as trial numbers are
        self.claims = Claims(storage_of(study), study.study_name)
        self.base = number_base(study.study_name)  # a companion's trial n is trial base + n to explorer
        self._folds: dict[tuple[int, int, int], Task] = {}

    def _task_for(self, run: FinalistRun) -> Task:
        """The task a finalist run trains on: its cross-validation fold, or the task's fixed split."""
        if run.fold is None:
            return self.context.task
        assert run.fold_seed is not None  # a run on a fold names the seed that cut its folds
        key = (run.fold, run.folds, run.fold_seed)
        if key not in self._folds:
            self._folds[key] = run_task(self.context.task, *key)
        return self._folds[key]

    # ---------------------------------------------------------------------------------------- entry

    def __call__(self, trial: optuna.Trial) -> tuple[float, ...]:
        try:
            return self._run(trial)
        except KeyboardInterrupt:
            # Optuna marks this trial FAIL and re-raises; queue its configuration so a resume retries it.
            write_record(trial, fail_reason="interrupted (Ctrl-C); its configuration is queued for resume")
            if trial.params or role_of(trial) is Role.FINALIST:
                self.study.enqueue_trial(trial.params, user_attrs=retry_attrs(trial))
            raise

    def _run(self, trial: optuna.Trial) -> tuple[float, ...]:
        role = role_of(trial)
        self._check_stage(trial, role)
        plan = self._plan(trial, role)
        self._check_proposal(trial)
        self._claim(trial, plan)
        self._start(trial, plan)
        watch = self._watch(trial, plan)
        result = self._evaluate(trial, plan, watch)
        self._record(trial, result, watch)
        return self._finish(trial, plan, result, watch)

    # ---------------------------------------------------------------------------------------- steps

    def _close(self, trial: optuna.Trial, closure: Closure, detail: Any, why: str) -> ClosedTrial:
        write_record(trial, **{closure.value: detail})
        return ClosedTrial(f"trial {trial.number}: {why}")

    def _check_stage(self, trial: optuna.Trial, role: Role) -> None:
        """Close a trial its stage has no room for: not a finalist run in the finalist stage, or a search trial
        beyond the search total (counted over the live search trials numbered before it)."""
        if self.stage is Role.FINALIST and role is not Role.FINALIST:
            raise self._close(trial, Closure.SURPLUS, True, "the finalist queue is empty")
        if role is Role.SEARCH:
            before = [t for t in live_trials(self.study, Role.SEARCH) if t.number < trial.number]
            if len(before) >= self.total:
                raise self._close(trial, Closure.SURPLUS, True, f"beyond the search total of {self.total}")

    def _plan(self, trial: optuna.Trial, role: Role) -> _Plan:
        """A finalist's queued run (a chosen architecture, possibly outside the search space: a reference), or
        the sampler's proposal, trained with the study's seed for the trial's number."""
        if role is Role.FINALIST:
            run = finalist_run(trial)
            assert run is not None, "a finalist trial is queued with its run"
            epochs = run.epochs or self.spec.finalists.run_epochs(self.spec.task.epochs)
            return _Plan(role, run.config, run.lr, run.seed, epochs, self._task_for(run), run)
        sampled = self.context.space.sample(trial)
        suggest_readable(trial, sampled, self.context.space)  # heads_layer0.. as params Optuna's plots read
        seed = seed_of(trial, search_seed(self.spec.seed, trial.number))
        return _Plan(role, sampled.config, sampled.lr, seed, self.spec.task.epochs, self.context.task, None)

    def _check_proposal(self, trial: optuna.Trial) -> None:
        """Close the trial when the sampler found the space used up; mark an enqueued trial as such."""
        # The sampler notes its proposal in the storage when the first parameter is suggested (Optuna samples
        # relative parameters lazily), after this trial object cached its attributes: read them afresh.
        proposal = proposal_of(self.study, trial)
        if proposal is Proposal.EXHAUSTED:
            raise self._close(trial, Closure.EXHAUSTED, True, "every architecture of the space is taken")
        if proposal is None:
            write_record(trial, proposal=Proposal.ENQUEUED)

    def _claim(self, trial: optuna.Trial, plan: _Plan) -> None:
        """Claim the plan's configuration, or close the trial as a duplicate of the trial that holds it (a failed
        trial's claim may be taken over)."""
        failed = {t.number for t in self.study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
        holder = self.claims.claim(plan.claim_key, trial.number, can_take_over=failed)
        if holder != trial.number:
            raise self._close(
                trial, Closure.DUPLICATE, holder, f"trial {holder} already runs {plan.claim_key}"
            )

    def _start(self, trial: optuna.Trial, plan: _Plan) -> None:
        """Write what the trial is (its architecture attributes) before it is timed or trained."""
        run = plan.finalist
        on_fold = run if run is not None and run.fold is not None else None  # a finalist run on a fold
        started = TrialRecord(
            number=trial.number,
            state=TrialState.RUNNING,
            role=plan.role,
            config=plan.config,
            lr=plan.lr,
            seed=plan.seed,
            epochs_planned=plan.epochs,
            batch_size=self.spec.task.batch_size,
            task_kind=self.context.task.kind,
            fold=None if on_fold is None else on_fold.fold,
            folds=None if on_fold is None else on_fold.folds,
            fold_seed=None if on_fold is None else on_fold.fold_seed,
            chance=chance_level(plan.task),
        )
        write_record(trial, **started.start_fields())
        if plan.role is Role.FINALIST:  # chosen, not sampled: its layout as params for Optuna's plots
            for name, value in layout_params(plan.config).items():
                set_stored_param(trial, name, value, IntDistribution(1, max(value, 1)))
        log.info(
            "trial %d (%s): d_model %d, heads %s, kv heads %s, lr %.3g, seed %d, up to %d epochs",
            trial.number,
            plan.role,
            plan.config.d_model,
            list(plan.config.heads),
            list(plan.config.kv_per_layer),
            plan.lr,
            plan.seed,
            plan.epochs,
        )

    def _watch(self, trial: optuna.Trial, plan: _Plan) -> TrialWatch:
        """The trial's callbacks: measurements written as they come, budgets, and (search trials) the rungs."""
        rungs = set(self.spec.early_stopping.rungs(plan.epochs)) if plan.role is Role.SEARCH else set()
        return TrialWatch(
            trial,
            self.spec,
            plan.config,
            plan.key,
            rungs,
            len(plan.task.val[1]),
            lambda: self._peers(trial.number),
            self.on_epoch,
        )

    def _evaluate(self, trial: optuna.Trial, plan: _Plan, watch: TrialWatch) -> VariantResult:
        """Time, then train the plan's variant: over budget prunes the trial untrained; a NaN loss or running out
        of memory fails it with the reason recorded."""
        # the same schedule for every run of a role: warm-up, then cosine decay over its planned epochs
        train_cfg = TrainConfig(
            epochs=plan.epochs, batch_size=self.spec.task.batch_size, lr=plan.lr, seed=plan.seed
        )
        try:
            return evaluate_variant(
                plan.config,
                plan.task,
                train_cfg,
                self.spec.latency,
                self.context.device,  # where it is timed and trained, whatever device the spec names
                # finalists are timed afresh: independent timings give the latency its real spread
                cache=self.cache if plan.role is Role.SEARCH else None,
                on_measured=watch.on_measured,
                on_epoch=watch.on_epoch,
                keep_model=self.context.store is not None,
                decode=self.spec.decode,
                on_decoded=watch.on_decoded,
                builder=self.context.builder,
            )
        except OverBudget as exc:
            write_record(trial, stop=f"over budget before training ({exc})", history=[])
            raise optuna.TrialPruned(f"over budget: {exc}") from None
        except VariantFailed as exc:
            write_record(trial, fail_reason=str(exc), history=watch.history)
            raise TrialFailed(str(exc)) from None

    def _record(self, trial: optuna.Trial, result: VariantResult, watch: TrialWatch) -> None:
        """Write what the trained variant measured."""
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
        if role_of(trial) is Role.FINALIST:  # whether its curve had flattened, as the report judges it
            history = [s.quality for s in result.fit.history]
            attrs["plateaued"] = curve_plateaued(
                history, result.val_size, self.spec.metric.direction == "maximize"
            )
        attrs = {k: v for k, v in attrs.items() if v is not None}
        if watch.stop is not None:
            attrs["stop"] = watch.stop
        if result.relations is not None:
            attrs["relations"] = [
                [int(r.layer), int(r.head), int(r.relation), round(float(r.attention), 4)]
                for r in result.relations.itertuples()
            ]
        write_record(trial, **attrs)
        log.info(
            "trial %d: %s %.4f after %d epochs, %.3f ms%s",
            trial.number,
            self.spec.metric.label,
            result.quality,
            result.fit.epochs_run,
            result.latency.median_ms,
            f" ({watch.stop})" if watch.stop is not None else "",
        )

    def _finish(
        self, trial: optuna.Trial, plan: _Plan, result: VariantResult, watch: TrialWatch
    ) -> tuple[float, ...]:
        """Prune a search trial stopped at a rung; keep the weights; return the objective values."""
        if plan.role is Role.SEARCH and result.fit.stopped_early:
            raise optuna.TrialPruned(watch.stop if watch.stop is not None else "stopped early")
        if self.context.store is not None and result.model is not None:
            # size-capped; retrained if evicted
            self.context.store.save(self.spec.name, self.base + trial.number, result.model)
        values = [result.quality, result.latency.median_ms]
        if self.spec.objectives.params:
            values.append(float(result.params))
        if self.spec.objectives.decode:
            assert result.decode is not None  # the spec measures decoding whenever it is an objective
            values.append(result.decode.ms_per_token)
        return tuple(values)

    # ---------------------------------------------------------------------------------------- helpers

    def _peers(self, number: int) -> list[Peer]:
        """Other search trials with a latency and a validation history (finished, or running past a rung)."""
        peers = []
        for t in self.study.get_trials(deepcopy=False, states=LIVE_STATES):
            r = record_from_trial(t)
            if t.number == number or r.closed is not None or r.role is not Role.SEARCH:
                continue
            decoded = None if r.decode is None else r.decode.latency
            lat = decoded if self.spec.objectives.decode else r.latency
            if not r.history or lat is None:
                continue
            config = self.context.space.decode(t.params) if t.params else None
            if config is None:
                continue
            peers.append(
                Peer(
                    number=t.number,
                    key=arch_key(config.config, config.lr),
                    latency_ms=lat.median_ms,
                    spread=lat.iqr_ms / lat.median_ms if lat.median_ms > 0 else 0.0,
                    history=r.history,
                )
            )
        return peers


def layout_params(config: ModelConfig) -> dict[str, int]:
    """A finalist run's layout as the integer params optuna-dashboard plots: the width and depth, each layer's
    head count, and each layer's key/value heads where they differ from the heads. Integer distributions, not
    the search's categoricals: a finalist (a reference layout) may lie outside the searched space."""
    out = {"d_model": config.d_model, "n_layers": config.n_layers}
    out |= {f"heads_layer{i}": h for i, h in enumerate(config.heads)}
    if config.kv_heads is not None:
        out |= {f"kv_heads_layer{i}": h for i, h in enumerate(config.kv_heads)}
    return out


# --------------------------------------------------------------------------------------------- the watch


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
    """The callbacks of one trial while :func:`explorer.measure._evaluate.evaluate_variant` runs it: it writes the
    measurements as they come (decoding, then latency and parameters), checks the budgets on them before any
    training (:func:`budget_constraints`; over budget raises :class:`OverBudget`), and after each epoch at a rung
    asks :func:`explorer.spec._fidelity.dominated_at_rung` whether a faster peer has beaten the trial.

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
        peers: Callable[[], list[Peer]],
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
        write_record(self.trial, decode=decoded)

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
        write_record(trial, latency=latency, params=params)
        for name, value in constraints.items():
            trial.set_constraint(name, value)
        over = [name for name, value in constraints.items() if value > 0]
        # also as user attributes: optuna-dashboard 0.21 does not show Optuna 5.0's constraints
        if constraints:
            write_record(trial, constraints=tuple(constraints.items()))
        if over:
            raise OverBudget(over)

    def on_epoch(self, stats: EpochStats) -> bool:
        """Note the epoch's quality; at a rung, True (stop) when a faster peer beats the trial beyond noise."""
        self.history.append(stats.quality)
        report_epoch(self.trial, stats.epoch, stats.quality)  # the learning curve Optuna's tools draw
        write_record(self.trial, epoch=stats.epoch)  # progress, for a parent process polling the storage
        if self.progress is not None:
            self.progress()
        if stats.epoch not in self.rungs:
            return False
        write_record(self.trial, history=list(self.history))  # running peers compare against it
        # decoding is timed before anything else whenever it is an objective, the forward pass always
        timed = self.decoded.latency if self.spec.objectives.decode else self.latency  # type: ignore[union-attr]
        assert timed is not None
        verdict = dominated_at_rung(
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
