"""A trial's trained model: its stored weights, or the trial retrained exactly and stored for next time."""

from __future__ import annotations

import logging

import torch

from explorer.engine.config import LatencyConfig
from explorer.engine.device import as_device
from explorer.engine.evaluate import evaluate_variant
from explorer.engine.model import Encoder, build_model
from explorer.engine.tasks.base import Task
from explorer.engine.train import EpochStats
from explorer.errors import DataError
from explorer.search.artifacts import ArtifactStore
from explorer.search.record import TrialRecord

__all__ = ["trained_model"]

log = logging.getLogger(__name__)


def trained_model(
    study_name: str,
    record: TrialRecord,
    task: Task,
    latency: LatencyConfig,
    store: ArtifactStore,
    device: torch.device | str = "cpu",
) -> Encoder:
    """The trained model of a trial (eval mode, on ``device``).

    Stored weights are loaded when present; otherwise the trial is retrained exactly (same architecture,
    learning rate, seed and epochs, through :func:`explorer.engine.evaluate.evaluate_variant`) and its weights
    are stored for next time. A finalist retrains for the epochs it ran (its plateau), not its cap.
    """
    if record.config is None or record.lr is None or record.seed is None or not record.history:
        raise DataError(f"trial #{record.number} of {study_name!r} has no trained configuration to load.")
    device = as_device(device)
    if store.has(study_name, record.number):
        with torch.random.fork_rng(devices=[]):
            model = build_model(record.config, task.spec)
        try:
            model.load_state_dict(store.load_state(study_name, record.number))
        except RuntimeError:
            raise DataError(
                f"the stored weights of trial #{record.number} of {study_name!r} do not fit its architecture; "
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
    result = evaluate_variant(record.config, task, train, eager, device, on_epoch=on_epoch, keep_model=True)
    assert result.model is not None
    store.save(study_name, record.number, result.model)
    return result.model.eval()
