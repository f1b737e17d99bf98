"""Training and evaluation loop. Knows nothing model-specific beyond ``build_model`` and logits out.

AdamW with a linear warm-up then cosine decay (stepped per optimizer step), gradient clipping and
cross-entropy; bf16 autocast on CUDA. The task's kind decides what a target is: one label per example
(classification, logits ``[B, n_classes]``, scored by accuracy) or the next byte at every position (a
language model, logits ``[B, T, 256]``, scored by bits per byte = mean cross-entropy in nats / ln 2). The
loss is the mean cross-entropy over targets either way, so the classification path is what it always was.
Everything random (init, data order, dropout) is seeded from ``TrainConfig.seed``, so the same config and seed
reproduce the same run on the same device. Progress reaches
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
from torch import nn

from explorer.data import Task
from explorer.errors import TrainingDivergedError
from explorer.layout import ModelConfig, TrainConfig
from explorer.measure._device import autocast
from explorer.measurements import QualityMetric, plateaued, quality_metric
from explorer.model import ModelBuilder, build_model

_LN2 = math.log(2.0)


@dataclass(frozen=True)
class SplitScore:
    """How a model does on one split: accuracy and mean cross-entropy over its targets."""

    accuracy: float  # correct targets / targets (a language model: next-byte top-1 accuracy)
    loss: float  # mean cross-entropy per target, in nats
    targets: int  # examples (classification) or predicted positions (a language model)
    # Standard error of ``loss`` from the spread of the per-example mean losses (an example is a window for a
    # language model, so the correlated bytes of one window count once): the noise of a loss on this split.
    loss_se: float = math.nan

    @property
    def bits(self) -> float:
        """Mean cross-entropy in bits per target: bits per byte for a byte-level language model."""
        return self.loss / _LN2

    @property
    def bits_se(self) -> float:
        """Standard error of :attr:`bits` (see ``loss_se``)."""
        return self.loss_se / _LN2


@dataclass(frozen=True)
class EpochStats:
    """What one epoch produced; handed to ``on_epoch``."""

    epoch: int  # 1-based
    train_loss: float  # mean training cross-entropy over the epoch's batches
    val_accuracy: float  # accuracy on the validation split after the epoch (per target)
    seconds: float  # wall time of the epoch, training plus validation
    val_loss: float = math.nan  # mean validation cross-entropy per target (nats)
    val_bpb: float | None = None  # validation bits per byte (language-model tasks only)
    val_bpb_se: float | None = None  # its standard error over validation windows (language-model tasks only)

    @property
    def quality(self) -> float:
        """The epoch's value of the task's metric: ``val_bpb`` for a language model, else ``val_accuracy``."""
        return self.val_accuracy if self.val_bpb is None else self.val_bpb


@dataclass(frozen=True)
class TrainResult:
    """The outcome of :func:`fit`.

    ``quality`` is the value of the task kind's metric (``metric``): ``val_accuracy`` for a classification
    task, ``val_bpb`` (minimized) for a language model; both kinds also report accuracy and loss.
    """

    val_accuracy: float  # after the last epoch run
    test_accuracy: float  # of the final model
    epochs_run: int
    epochs_planned: int
    train_time_s: float  # seconds spent in training steps (evaluation excluded)
    samples_per_s: float  # training examples processed per training second
    stopped_early: bool  # ended before its planned epochs: on_epoch returned True, or a plateau
    history: tuple[EpochStats, ...]
    task_kind: str = "classification"  # classification | language_model: which metric is the quality
    val_loss: float = math.nan  # mean validation cross-entropy per target (nats), after the last epoch
    test_loss: float = math.nan  # mean test cross-entropy per target (nats)
    val_bpb: float | None = None  # validation bits per byte (language-model tasks only)
    test_bpb: float | None = None  # test bits per byte (language-model tasks only)
    val_bpb_se: float | None = None  # standard error of val_bpb over validation windows (language models)

    @property
    def metric(self) -> QualityMetric:
        return quality_metric(self.task_kind)

    @property
    def quality(self) -> float:
        """The validation value of :attr:`metric` (accuracy, or bits per byte)."""
        return getattr(self, self.metric.name)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["history"] = [dataclasses.asdict(s) for s in self.history]
        return d


def _lr_lambda(
    total_steps: int, warmup_frac: float, schedule: str = "cosine", scale: list[float] | None = None
) -> Callable[[int], float]:
    """Multiplier on the peak lr: linear warm-up over ``warmup_frac`` of the steps, then cosine to zero
    (``cosine``) or constant times ``scale[0]``, which :func:`fit` lowers on a plateau (``plateau``)."""
    warmup = min(total_steps, math.ceil(warmup_frac * total_steps)) if warmup_frac > 0 else 0

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if schedule == "plateau":
            return scale[0] if scale else 1.0
        progress = (step - warmup) / max(1, total_steps - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def _cross_entropy(logits: torch.Tensor, y: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy over every target: ``[B, C]`` vs ``[B]``, or ``[B, T, V]`` vs ``[B, T]``.

    For a classifier the reshape is the identity, so its loss is exactly ``F.cross_entropy(logits, y)``.
    """
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction=reduction)


def evaluate_split(
    model: torch.nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    device: torch.device,
    batch_size: int = 512,
    head_masks: list[torch.Tensor | None] | None = None,
) -> SplitScore:
    """Accuracy and mean cross-entropy of ``model`` on ``(X, y)``, in eval mode under inference_mode.

    ``y`` is ``[n]`` labels or ``[n, T]`` next tokens; every target counts once. ``head_masks`` (one ``[H_i]``
    multiplier per layer, 0 removes a head) is passed to the model. The model's train/eval mode is restored.
    """
    targets = y.numel()
    if targets == 0:
        return SplitScore(0.0, math.nan, 0)
    was_training = model.training
    model.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    nats = torch.zeros((), dtype=torch.float64, device=device)
    squares = torch.zeros((), dtype=torch.float64, device=device)  # sum of squared per-example mean losses
    try:
        with torch.inference_mode(), autocast(device):
            for i in range(0, len(y), batch_size):
                xb = X[i : i + batch_size].to(device, non_blocking=True)
                yb = y[i : i + batch_size].to(device, non_blocking=True)
                logits = model(xb) if head_masks is None else model(xb, head_masks=head_masks)
                correct += (logits.argmax(dim=-1) == yb).sum()
                per_target = _cross_entropy(logits.float(), yb, reduction="none").double()
                nats += per_target.sum()
                squares += (per_target.reshape(len(yb), -1).mean(dim=1) ** 2).sum()
    finally:
        model.train(was_training)
    n, mean = len(y), nats.item() / targets
    # Every example has the same number of targets, so the mean loss is the mean of the per-example means.
    var = (squares.item() - n * mean**2) / (n - 1) if n > 1 else math.nan
    return SplitScore(correct.item() / targets, mean, targets, math.sqrt(max(var, 0.0) / n))


def evaluate(
    model: torch.nn.Module, X: torch.Tensor, y: torch.Tensor, device: torch.device, **options: Any
) -> float:
    """Accuracy of ``model`` on ``(X, y)`` in [0, 1]; 0 for an empty split. ``options``: ``batch_size`` and
    ``head_masks`` of :func:`evaluate_split`."""
    return evaluate_split(model, X, y, device, **options).accuracy


def fit(
    model_cfg: ModelConfig,
    task: Task,
    train_cfg: TrainConfig,
    device: torch.device,
    on_epoch: Callable[[EpochStats], bool | None] | None = None,
    builder: ModelBuilder | None = None,
) -> tuple[nn.Module, TrainResult]:
    """Build the model for ``task`` and train it; returns the trained model and a :class:`TrainResult`.

    The loss is the mean cross-entropy over the task's targets (labels, or next bytes for a language model).

    ``on_epoch(stats)`` is called after every epoch; returning True stops training after that epoch.
    A NaN or infinite training loss raises :class:`TrainingDivergedError`. ``builder``: the user's model
    function (None: explorer's own model).
    """
    torch.manual_seed(train_cfg.seed)  # init and dropout
    shuffle = torch.Generator().manual_seed(train_cfg.seed)  # data order, independent of the model's draws
    model = build_model(model_cfg, task.spec, builder).to(device)
    steps = _Steps(model, train_cfg, math.ceil(len(task.train[1]) / train_cfg.batch_size), device)
    plateau = _Plateau(train_cfg, steps.scale, len(task.val[1]), higher_is_better=not task.spec.causal)
    history: list[EpochStats] = []
    stopped_early = False
    for epoch in range(1, train_cfg.epochs + 1):
        t0 = time.perf_counter()
        train_loss = steps.epoch(task.train, shuffle, epoch)
        val = evaluate_split(model, *task.val, device)
        stats = _epoch_stats(epoch, train_loss, val, time.perf_counter() - t0, task.spec.causal)
        history.append(stats)
        if on_epoch is not None and on_epoch(stats):
            stopped_early = True
            break
        if plateau.done(stats.quality, epoch):
            stopped_early = epoch < train_cfg.epochs
            break
    test = evaluate_split(model, *task.test, device)
    return model, _result(task, train_cfg, history, test, steps, stopped_early)


class _Steps:
    """The optimizer side of :func:`fit`: AdamW with decoupled weight decay, the lr schedule, gradient
    clipping, and the count of training time and examples."""

    def __init__(self, model: nn.Module, cfg: TrainConfig, steps_per_epoch: int, device: torch.device):
        self.model, self.cfg, self.device = model, cfg, device
        # Weight decay on matrices only (nanoGPT): not on biases, LayerNorm gains or the positional embedding.
        pos = getattr(model, "pos", None)  # a user's model keeps its own names: only its vectors go undecayed
        params = [p for p in model.parameters() if p.requires_grad]
        decay = [p for p in params if p.dim() >= 2 and p is not pos]
        no_decay = [p for p in params if not (p.dim() >= 2 and p is not pos)]
        self.opt = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": cfg.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=cfg.lr,
            fused=device.type == "cuda",
        )
        self.scale = [1.0]  # the plateau schedule's current lr multiplier
        total_steps = steps_per_epoch * cfg.epochs
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, _lr_lambda(total_steps, cfg.warmup_frac, cfg.schedule, self.scale)
        )
        self.train_time = 0.0
        self.samples = 0

    def epoch(self, data: tuple[torch.Tensor, torch.Tensor], shuffle: torch.Generator, epoch: int) -> float:
        """One pass over ``data`` in a fresh shuffled order; the mean training loss. A NaN or infinite loss
        raises :class:`TrainingDivergedError` naming the epoch and step."""
        t0 = time.perf_counter()
        X, y = data
        n, batch_size = len(y), self.cfg.batch_size
        self.model.train()
        order = torch.randperm(n, generator=shuffle)
        losses = []  # kept on the device; checked once per epoch so CUDA is not synchronized every step
        for i in range(0, n, batch_size):
            idx = order[i : i + batch_size]
            losses.append(self._step(X[idx], y[idx]))
            self.samples += len(idx)
        epoch_losses = torch.stack(losses).cpu()  # synchronizes, so the timing below is honest on CUDA
        self.train_time += time.perf_counter() - t0
        bad = (~torch.isfinite(epoch_losses)).nonzero()
        if len(bad):
            step = int(bad[0]) + 1
            raise TrainingDivergedError(
                f"training loss became {epoch_losses[step - 1].item()} at epoch {epoch} step {step}; "
                f"lower the learning rate (lr={self.cfg.lr:g}) or check the data for NaN/inf values."
            )
        return epoch_losses.mean().item()

    def _step(self, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """One optimizer step on a batch; its loss, detached and left on the device."""
        xb = xb.to(self.device, non_blocking=True)
        yb = yb.to(self.device, non_blocking=True)
        with autocast(self.device):
            logits = self.model(xb)
            loss = _cross_entropy(logits, yb)
            # a model recovered from a trained one (explorer.pretrained) adds its distillation term
            recovery = getattr(self.model, "recovery_loss", None)
            if recovery is not None:
                loss = recovery(xb, logits, loss)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
        self.opt.step()
        self.sched.step()
        return loss.detach().float()


class _Plateau:
    """The plateau schedule (``TrainConfig.schedule == "plateau"``): after ``patience`` epochs without a gain
    beyond the noise the lr drops tenfold, and after ``decays`` drops training ends."""

    def __init__(self, cfg: TrainConfig, scale: list[float], n_val: int, higher_is_better: bool):
        self.cfg, self.scale, self.n_val, self.higher_is_better = cfg, scale, n_val, higher_is_better
        self.since_decay: list[float] = []  # validation values since the last lr drop
        self.decays_done = 0

    def done(self, value: float, epoch: int) -> bool:
        """Note this epoch's validation value; True when training should end here."""
        if self.cfg.schedule != "plateau":
            return False
        self.since_decay.append(value)
        if not plateaued(self.since_decay, self.n_val, self.cfg.patience, self.higher_is_better):
            return False
        if self.decays_done == self.cfg.decays:
            return True
        self.decays_done += 1
        self.scale[0] *= 0.1
        self.since_decay = self.since_decay[-1:]
        return False


def _epoch_stats(epoch: int, train_loss: float, val: SplitScore, seconds: float, lm: bool) -> EpochStats:
    return EpochStats(
        epoch,
        train_loss,
        val.accuracy,
        seconds,
        val_loss=val.loss,
        val_bpb=val.bits if lm else None,
        val_bpb_se=val.bits_se if lm else None,
    )


def _result(
    task: Task,
    cfg: TrainConfig,
    history: list[EpochStats],
    test: SplitScore,
    steps: _Steps,
    stopped_early: bool,
) -> TrainResult:
    lm = task.spec.causal
    return TrainResult(
        val_accuracy=history[-1].val_accuracy,
        test_accuracy=test.accuracy,
        epochs_run=len(history),
        epochs_planned=cfg.epochs,
        train_time_s=steps.train_time,
        samples_per_s=steps.samples / steps.train_time if steps.train_time > 0 else 0.0,
        stopped_early=stopped_early,
        history=tuple(history),
        task_kind=task.spec.task_kind,
        val_loss=history[-1].val_loss,
        test_loss=test.loss,
        val_bpb=history[-1].val_bpb,
        test_bpb=test.bits if lm else None,
        val_bpb_se=history[-1].val_bpb_se,
    )
