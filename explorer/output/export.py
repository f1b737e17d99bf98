"""Export one trial of a study as a run config that `explorer train --config` rebuilds and retrains exactly."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from optuna.trial import TrialState

from explorer.engine.config import ModelConfig, TrainConfig
from explorer.engine.evaluate import write_run_config
from explorer.errors import ConfigError, NoCompletedTrialsError

if TYPE_CHECKING:
    from explorer.search.study import StudyHandle

__all__ = ["PICKS", "budgets_of", "export_trial", "select_trial", "trial_configs"]

PICKS = {"knee": "knee", "most-accurate": "most_accurate", "fastest": "fastest"}


def budgets_of(handle: StudyHandle) -> dict[str, float]:
    """The spec's budgets in the form :func:`explorer.insight.analysis.recommend` takes."""
    b = handle.spec.budgets
    out: dict[str, float] = {}
    if b.max_latency_ms is not None:
        out["max_latency_ms"] = float(b.max_latency_ms)
    if b.max_params is not None:
        out["max_params"] = float(b.max_params)
    return out


def select_trial(handle: StudyHandle, which: str) -> int:
    """The number of the trial ``which`` names: knee, most-accurate, fastest, or a trial number."""
    from explorer.insight.analysis import recommend, trials_table

    study = handle.study
    if which in PICKS:
        rec = recommend(trials_table(study), budgets_of(handle))
        pick = getattr(rec, PICKS[which])
        if pick is None:
            raise NoCompletedTrialsError(
                f"study {handle.spec.name!r} has no completed feasible trial to export yet; run it first."
            )
        return pick.number
    if not which.isdigit():
        raise ConfigError(f"--trial {which!r} is not knee, most-accurate, fastest or a trial number.")
    number = int(which)
    trials = study.get_trials(deepcopy=False)
    if number >= len(trials):
        raise ConfigError(f"study {handle.spec.name!r} has no trial #{number} (it has {len(trials)} trials).")
    if trials[number].state != TrialState.COMPLETE:
        raise ConfigError(
            f"trial #{number} is {trials[number].state.name}, not COMPLETE; export a completed trial."
        )
    return number


def trial_configs(handle: StudyHandle, trial_number: int) -> tuple[ModelConfig, TrainConfig]:
    """The architecture and training settings a COMPLETE trial ran with, including its own training seed."""
    trials = handle.study.get_trials(deepcopy=False)
    if not 0 <= trial_number < len(trials):
        raise ConfigError(f"study {handle.spec.name!r} has no trial #{trial_number} (it has {len(trials)}).")
    trial = trials[trial_number]
    if trial.state != TrialState.COMPLETE:
        raise ConfigError(
            f"trial #{trial_number} is {trial.state.name}, not COMPLETE; pick a completed trial."
        )
    a, spec = trial.user_attrs, handle.spec
    model_cfg = ModelConfig(
        d_model=a["d_model"],
        heads=tuple(a["heads"]),
        min_dk=a["min_dk"],
        mlp_ratio=a["mlp_ratio"],
        dropout=spec.space.dropout,
        attention=a.get("attention_impl", spec.space.attention),
    )
    train_cfg = TrainConfig(
        epochs=spec.task.epochs,
        batch_size=spec.task.batch_size,
        lr=a["lr"],
        seed=a.get("seed", spec.seed),  # studies before per-trial seeds trained every trial with spec.seed
    )
    return model_cfg, train_cfg


def export_trial(handle: StudyHandle, which: str, out: Path) -> int:
    """Write the chosen trial's task, architecture and training settings to ``out``; return its number."""
    number = select_trial(handle, which)
    model_cfg, train_cfg = trial_configs(handle, number)
    a, spec = handle.study.get_trials(deepcopy=False)[number].user_attrs, handle.spec
    source: dict[str, Any] = {
        "study": spec.name,
        "storage": handle.masked_url,
        "trial": number,
        "val_accuracy": a.get("val_accuracy"),
        "test_accuracy": a.get("test_accuracy"),
        "latency_ms": a.get("latency_ms"),
        "device": a.get("device"),
    }
    write_run_config(out, spec.task.name, dict(spec.task.options), model_cfg, train_cfg, source)
    return number
