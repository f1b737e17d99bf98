"""One variant end to end: load the task, train, evaluate, time on the device, and describe the result.

`explorer train` and the study objective both go through here, so a trial and a single training run report
exactly the same figures. A run config (written by `explorer export`) is a small JSON file that pins the task,
the architecture and the training settings, so `explorer train --config FILE.json` rebuilds and retrains it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from explorer.engine.config import LatencyConfig, ModelConfig, TrainConfig
from explorer.errors import ConfigError

__all__ = ["RUN_CONFIG_VERSION", "load_run_config", "run_variant", "write_run_config"]

RUN_CONFIG_VERSION = 1


def run_variant(
    task_name: str,
    task_options: dict[str, Any],
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    lat_cfg: LatencyConfig,
    device_name: str = "auto",
    on_epoch: Callable[[Any], bool] | None = None,
) -> dict[str, Any]:
    """Train and time one variant; return a flat, JSON-ready record of everything measured."""
    from explorer.engine.device import describe_device, resolve_device
    from explorer.engine.latency import LatencyCache, model_latency
    from explorer.engine.tasks import load_task
    from explorer.engine.train import fit

    device = resolve_device(device_name)
    task = load_task(task_name, **task_options)
    model, result = fit(model_cfg, task, train_cfg, device, on_epoch=on_epoch)
    latency = model_latency(model_cfg, task.spec, lat_cfg, device, cache=LatencyCache())
    return {
        "task": task.name,
        "task_options": task_options,
        "device": describe_device(device),
        "torch_version": torch.__version__,
        "attention_impl": model_cfg.attention,
        "d_model": model_cfg.d_model,
        "n_layers": model_cfg.n_layers,
        "heads": list(model_cfg.heads),
        "d_k": list(model_cfg.d_k),
        "family": model_cfg.family,
        "val_accuracy": result.val_accuracy,
        "test_accuracy": result.test_accuracy,
        "latency_ms": latency.median_ms,
        "latency": latency.to_dict(),
        "params": model.num_params(),
        "flops": model.flops(1),
        "train_time_s": result.train_time_s,
        "samples_per_s": result.samples_per_s,
        "epochs_run": result.epochs_run,
        "model": model_cfg.to_dict(),
        "train": _train_dict(train_cfg),
    }


def _train_dict(cfg: TrainConfig) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(cfg)


def write_run_config(
    path: Path,
    task_name: str,
    task_options: dict[str, Any],
    model_cfg: ModelConfig,
    train_cfg: TrainConfig,
    source: dict[str, Any] | None = None,
) -> Path:
    """Write a run config that `explorer train --config` retrains exactly."""
    doc = {
        "explorer_run_config": RUN_CONFIG_VERSION,
        "task": task_name,
        "task_options": task_options,
        "model": model_cfg.to_dict(),
        "train": _train_dict(train_cfg),
        "source": source or {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)
    return path


def load_run_config(path: Path) -> tuple[str, dict[str, Any], ModelConfig, TrainConfig]:
    """Read a run config; any problem is one ConfigError naming the file and what is wrong."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist; write one with `explorer export`.") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config file {path} is not readable JSON ({exc}).") from None
    if not isinstance(doc, dict) or doc.get("explorer_run_config") != RUN_CONFIG_VERSION:
        raise ConfigError(
            f"{path} is not an explorer run config (version {RUN_CONFIG_VERSION}); "
            f"write one with `explorer export`."
        )
    try:
        train_cfg = TrainConfig(**doc["train"])
        model_cfg = ModelConfig.from_dict(doc["model"])
        return str(doc["task"]), dict(doc.get("task_options") or {}), model_cfg, train_cfg
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"config file {path} is missing or has a malformed field ({exc}).") from None
