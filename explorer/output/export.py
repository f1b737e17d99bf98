"""Export one trial of a study as a run config that `explorer train --config` rebuilds and retrains exactly."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from explorer.engine.runconfig import RunConfig, write_run_config
from explorer.insight.recommend import resolve_trial
from explorer.search.record import TrialRecord
from explorer.search.spec import StudySpec

__all__ = ["export_config", "run_config_of"]


def run_config_of(record: TrialRecord, spec: StudySpec, storage: str | None = None) -> RunConfig:
    """The run config that retrains ``record`` exactly: its architecture, learning rate, seed and schedule, and
    the epoch it stopped at (a finalist's plateau, a search trial's budget)."""
    assert record.config is not None
    return RunConfig(
        task=spec.task.name,
        task_options=dict(spec.task.options),
        model=record.config,
        train=record.train_config(),
        stop_after=record.epochs_run if record.epochs_run < (record.epochs_planned or 0) else None,
        source={
            "study": spec.name,
            "storage": storage,
            "trial": record.number,
            "role": record.role,
            "val_accuracy": record.val_accuracy,
            "test_accuracy": record.test_accuracy,
            "latency_ms": record.latency_ms,
            "device": record.device,
        },
    )


def export_config(
    records: Sequence[TrialRecord], spec: StudySpec, which: str, out: str | Path, storage: str | None = None
) -> TrialRecord:
    """Write the run config of the trial ``which`` names (knee, most-accurate, fastest or a number) to ``out``."""
    record = resolve_trial(records, spec, which)
    write_run_config(out, run_config_of(record, spec, storage))
    return record
