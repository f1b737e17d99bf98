"""A trial's trained model: its stored weights, or the trial retrained exactly and stored for next time."""

from __future__ import annotations

import logging

import torch
from torch import nn

from explorer.data import Task, fold_task
from explorer.errors import DataError
from explorer.layout import LatencyConfig
from explorer.measure import EpochStats, evaluate_variant
from explorer.model import ModelBuilder, build_model
from explorer.storage import TrialRecord, trial_label
from explorer.study._artifacts import ArtifactStore

log = logging.getLogger(__name__)


def run_task(task: Task, fold: int | None, folds: int | None, fold_seed: int | None) -> Task:
    """The split a run trained and validated on: its cross-validation fold of ``task``, or ``task`` itself."""
    if fold is None or folds is None or fold_seed is None or folds < 2:
        return task
    return fold_task(task, fold, folds, fold_seed)


def record_task(task: Task, record: TrialRecord) -> Task:
    """The split ``record``'s run trained and validated on (:func:`run_task`)."""
    return run_task(task, record.fold, record.folds, record.fold_seed)


def trained_model(
    study_name: str,
    record: TrialRecord,
    task: Task,
    latency: LatencyConfig,
    store: ArtifactStore,
    device: torch.device | None = None,
    builder: ModelBuilder | None = None,
) -> nn.Module:
    """The trained model of a trial (eval mode, on ``device``, default the CPU), built by ``builder`` (the study's [model] build)
    or explorer's own model.

    Stored weights are loaded when present; otherwise the trial is retrained exactly (same architecture,
    learning rate, seed, epochs and cross-validation fold of ``task``, through
    :func:`explorer.measure._evaluate.evaluate_variant`) and its weights are stored for next time. A run that
    stopped early retrains to where it stopped.
    """
    if record.config is None or record.lr is None or record.seed is None or not record.history:
        raise DataError(
            f"trial {trial_label(study_name, record.number)} has no trained configuration to load."
        )
    device = torch.device("cpu") if device is None else device
    if store.has(study_name, record.number):
        with torch.random.fork_rng(devices=[]):
            model = build_model(record.config, task.spec, builder)
        try:
            model.load_state_dict(store.load_state(study_name, record.number))
        except RuntimeError:
            raise DataError(
                f"the stored weights of trial {trial_label(study_name, record.number)} do not fit its architecture; "
                "delete them so the trial is retrained."
            ) from None
        log.info("loaded the weights of trial #%d of %s from the artifact store", record.number, study_name)
        return model.to(device).eval()
    log.info("retraining trial #%d of %s exactly (no stored weights)", record.number, study_name)
    train = record.train_config()
    stop_at = record.epochs_run

    def on_epoch(stats: EpochStats) -> bool:
        return stats.epoch >= stop_at  # the same schedule, stopped where the trial stopped

    # Retraining needs no latency figure on the deployment runtime: time it eagerly (cheap, and no extra needed).
    eager = LatencyConfig(
        device=latency.device,
        batch_size=latency.batch_size,
        threads=latency.threads,
        dtype=latency.dtype,
        min_run_time=0.05,
    )
    split = record_task(task, record)
    result = evaluate_variant(
        record.config, split, train, eager, device, on_epoch=on_epoch, keep_model=True, builder=builder
    )
    assert result.model is not None
    store.save(study_name, record.number, result.model)
    return result.model.eval()
