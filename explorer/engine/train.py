"""Training and evaluation loop. Knows nothing model-specific beyond ``build_model`` and logits out.

AdamW with a linear warm-up then cosine decay (stepped per optimizer step), gradient clipping and
cross-entropy; bf16 autocast on CUDA. Everything random (init, data order, dropout) is seeded from
``TrainConfig.seed``, so the same config and seed reproduce the same run on the same device. Progress reaches
callers only through the per-epoch ``on_epoch`` callback, which can also stop training early (for pruning).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from explorer.engine.config import ModelConfig, TrainConfig
from explorer.engine.device import as_device, autocast
from explorer.engine.model import Encoder, build_model
from explorer.engine.tasks.base import Task
from explorer.errors import TrainingDivergedError

__all__ = ["EpochStats", "TrainResult", "evaluate", "fit"]


@dataclass(frozen=True)
class EpochStats:
    """What one epoch produced; handed to ``on_epoch``."""

    epoch: int  # 1-based
    train_loss: float  # mean training cross-entropy over the epoch's batches
    val_accuracy: float  # accuracy on the validation split after the epoch
    seconds: float  # wall time of the epoch, training plus validation


@dataclass(frozen=True)
class TrainResult:
    """The outcome of :func:`fit`."""

    val_accuracy: float  # after the last epoch run
    test_accuracy: float  # of the final model
    epochs_run: int
    epochs_planned: int
    train_time_s: float  # seconds spent in training steps (evaluation excluded)
    samples_per_s: float  # training examples processed per training second
    stopped_early: bool  # on_epoch returned True (training ended after that epoch)
    history: tuple[EpochStats, ...]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["history"] = [dataclasses.asdict(s) for s in self.history]
        return d


def _lr_lambda(total_steps: int, warmup_frac: float) -> Callable[[int], float]:
    """Multiplier on the peak lr: linear warm-up over ``warmup_frac`` of the steps, then cosine to zero."""
    warmup = min(total_steps, math.ceil(warmup_frac * total_steps)) if warmup_frac > 0 else 0

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total_steps - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def evaluate(
    model: torch.nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    device: torch.device | str,
    batch_size: int = 512,
    head_masks: list[torch.Tensor | None] | None = None,
) -> float:
    """Accuracy of ``model`` on ``(X, y)`` in [0, 1], in eval mode under inference_mode, batch by batch.

    ``head_masks`` (one ``[H_i]`` multiplier per layer, 0 removes a head) is passed to the model. The model's
    train/eval mode is restored afterwards.
    """
    device = as_device(device)
    if len(y) == 0:
        return 0.0
    was_training = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    try:
        with torch.inference_mode(), autocast(device):
            for i in range(0, len(y), batch_size):
                xb = X[i : i + batch_size].to(device, non_blocking=True)
                yb = y[i : i + batch_size].to(device, non_blocking=True)
                logits = model(xb) if head_masks is None else model(xb, head_masks=head_masks)
                correct += (logits.argmax(dim=-1) == yb).sum()
    finally:
        model.train(was_training)
    return correct.item() / len(y)


def fit(
    model_cfg: ModelConfig,
    task: Task,
    train_cfg: TrainConfig,
    device: torch.device | str,
    on_epoch: Callable[[EpochStats], bool | None] | None = None,
) -> tuple[Encoder, TrainResult]:
    """Build the model for ``task`` and train it; returns the trained model and a :class:`TrainResult`.

    ``on_epoch(stats)`` is called after every epoch; returning True stops training after that epoch.
    A NaN or infinite training loss raises :class:`TrainingDivergedError`.
    """
    device = as_device(device)
    torch.manual_seed(train_cfg.seed)  # init and dropout
    shuffle = torch.Generator().manual_seed(train_cfg.seed)  # data order, independent of the model's draws
    model = build_model(model_cfg, task.spec).to(device)

    X, y = task.train
    n = len(y)
    steps_per_epoch = math.ceil(n / train_cfg.batch_size)
    total_steps = steps_per_epoch * train_cfg.epochs
    # Weight decay on matrices only (nanoGPT): not on biases, LayerNorm gains or the positional embedding.
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2 and p is not model.pos]
    no_decay = [p for p in params if not (p.dim() >= 2 and p is not model.pos)]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": train_cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=train_cfg.lr,
        fused=device.type == "cuda",
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(total_steps, train_cfg.warmup_frac))

    history: list[EpochStats] = []
    train_time = 0.0
    samples = 0
    stopped_early = False
    val_acc = 0.0
    for epoch in range(1, train_cfg.epochs + 1):
        t0 = time.perf_counter()
        model.train()
        order = torch.randperm(n, generator=shuffle)
        losses = []  # kept on the device; checked once per epoch so CUDA is not synchronized every step
        for i in range(0, n, train_cfg.batch_size):
            idx = order[i : i + train_cfg.batch_size]
            xb = X[idx].to(device, non_blocking=True)
            yb = y[idx].to(device, non_blocking=True)
            with autocast(device):
                loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if train_cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.grad_clip)
            opt.step()
            sched.step()
            losses.append(loss.detach().float())
            samples += len(idx)
        epoch_losses = torch.stack(losses).cpu()  # synchronizes, so the timing below is honest on CUDA
        train_time += time.perf_counter() - t0
        bad = (~torch.isfinite(epoch_losses)).nonzero()
        if len(bad):
            step = int(bad[0]) + 1
            raise TrainingDivergedError(
                f"training loss became {epoch_losses[step - 1].item()} at epoch {epoch} step {step}; "
                f"lower the learning rate (lr={train_cfg.lr:g}) or check the data for NaN/inf values."
            )
        val_acc = evaluate(model, *task.val, device)
        stats = EpochStats(epoch, epoch_losses.mean().item(), val_acc, time.perf_counter() - t0)
        history.append(stats)
        if on_epoch is not None and on_epoch(stats):
            stopped_early = True
            break

    result = TrainResult(
        val_accuracy=val_acc,
        test_accuracy=evaluate(model, *task.test, device),
        epochs_run=len(history),
        epochs_planned=train_cfg.epochs,
        train_time_s=train_time,
        samples_per_s=samples / train_time if train_time > 0 else 0.0,
        stopped_early=stopped_early,
        history=tuple(history),
    )
    return model, result
