"""One variant end to end: build it, time it on the device, train it, evaluate it. The one path every caller uses.

`explorer train`, a study's trials, finalist runs and retraining a trial for analysis all call
:func:`evaluate_variant`, so they measure the same things the same way. Latency is measured before training (it
depends only on the architecture), so a caller can refuse a variant on it (a latency budget) before spending any
training. A NaN loss or running out of memory, while timing or while training, is a :class:`VariantFailed` with
the reason, never a crash of the caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from explorer.engine.config import LatencyConfig, ModelConfig, TrainConfig
from explorer.engine.device import as_device, device_label
from explorer.engine.latency import model_latency
from explorer.engine.latency_cache import LatencyCache
from explorer.engine.measures import LatencyResult
from explorer.engine.model import Encoder, build_model
from explorer.engine.probe import relation_specialization
from explorer.engine.tasks.base import Task
from explorer.engine.train import EpochStats, TrainResult, fit
from explorer.errors import EXIT_NO_RESULT, ExplorerError, TrainingDivergedError

__all__ = ["VariantFailed", "VariantResult", "evaluate_variant", "is_out_of_memory"]


class VariantFailed(ExplorerError):
    """A variant could not be evaluated: its loss diverged or it ran out of memory (``kind`` says which)."""

    exit_code = EXIT_NO_RESULT

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind  # "diverged" | "out of memory"


@dataclass(frozen=True)
class VariantResult:
    """Everything measured about one variant (the trained model rides along, out of comparisons and JSON)."""

    config: ModelConfig
    train: TrainConfig
    latency: LatencyResult
    fit: TrainResult
    params: int  # trainable parameters
    flops: int  # forward FLOPs per example (2 x multiply-adds of the matmuls)
    device: str  # where it trained, e.g. "cpu (Intel Xeon ..., 2 threads)"
    torch_version: str
    val_size: int  # validation examples: the accuracy is a proportion of this many
    relations: pd.DataFrame | None = field(default=None, compare=False, repr=False)  # relations task only
    model: Encoder | None = field(default=None, compare=False, repr=False)

    @property
    def val_accuracy(self) -> float:
        return self.fit.val_accuracy

    @property
    def test_accuracy(self) -> float:
        return self.fit.test_accuracy

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the configs, measurements and training history (not the model)."""
        return {
            "model": self.config.to_dict(),
            "train": dataclasses.asdict(self.train),
            "heads": list(self.config.heads),
            "d_k": list(self.config.d_k),
            "family": self.config.family,
            "val_accuracy": self.val_accuracy,
            "test_accuracy": self.test_accuracy,
            "val_size": self.val_size,
            "latency_ms": self.latency.median_ms,
            "latency": self.latency.to_dict(),
            "params": self.params,
            "flops": self.flops,
            "device": self.device,
            "torch_version": self.torch_version,
            "fit": self.fit.to_dict(),
        }


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation failure (CUDA or host), which fails one variant, not the caller."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def _oom(device: torch.device, stage: str, exc: BaseException) -> VariantFailed:
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return VariantFailed(f"out of memory on {device} while {stage}: {str(exc)[:200]}", "out of memory")


def count_cost(cfg: ModelConfig, task: Task) -> tuple[int, int]:
    """Parameters and forward FLOPs per example of ``cfg`` built for ``task`` (the caller's RNG is untouched)."""
    with torch.random.fork_rng(devices=[]):
        model = build_model(cfg, task.spec)
    return model.num_params(), model.flops(1)


def evaluate_variant(
    cfg: ModelConfig,
    task: Task,
    train_cfg: TrainConfig,
    latency_cfg: LatencyConfig,
    device: torch.device | str | None = None,
    *,
    cache: LatencyCache | None = None,
    on_measured: Callable[[LatencyResult, int], None] | None = None,
    on_epoch: Callable[[EpochStats], bool | None] | None = None,
    keep_model: bool = False,
) -> VariantResult:
    """Build, time, train and evaluate one variant; return a :class:`VariantResult`.

    Args:
        cfg, task, train_cfg: the architecture, the task and how to train it (its seed fixes the run).
        latency_cfg: how to time it; ``device`` (default ``latency_cfg.device``) is where it is timed and trained.
        cache: a latency cache to read and fill (None: always measure).
        on_measured: called with the latency and the parameter count before training; raising there stops
            the evaluation before any training (a budget).
        on_epoch: called after every epoch; returning True stops training after it (early stopping).
        keep_model: keep the trained model on the result (``result.model``).

    Raises:
        VariantFailed: the loss became NaN/inf, or the device ran out of memory while timing or training.
    """
    device = as_device(device if device is not None else latency_cfg.device)
    params, flops = count_cost(cfg, task)
    try:
        latency = model_latency(cfg, task.spec, latency_cfg, device, cache=cache)
    except (RuntimeError, MemoryError) as exc:
        if not is_out_of_memory(exc):
            raise
        raise _oom(device, "timing", exc) from None
    if on_measured is not None:
        on_measured(latency, params)
    try:
        model, result = fit(cfg, task, train_cfg, device, on_epoch=on_epoch)
    except TrainingDivergedError as exc:
        raise VariantFailed(f"diverged: {exc}", "diverged") from None
    except (RuntimeError, MemoryError) as exc:
        if not is_out_of_memory(exc):
            raise
        raise _oom(device, "training", exc) from None
    relations = None
    if task.relation_offsets:
        relations = relation_specialization(model, task.val[0], task.relation_offsets)
    return VariantResult(
        config=cfg,
        train=train_cfg,
        latency=latency,
        fit=result,
        params=params,
        flops=flops,
        device=device_label(device, torch.get_num_threads() if device.type == "cpu" else None),
        torch_version=torch.__version__,
        val_size=len(task.val[1]),
        relations=relations,
        model=model if keep_model else None,
    )
