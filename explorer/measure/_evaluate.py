"""One variant end to end: build it, time it on the device, train it, evaluate it. The one path every caller uses.

`explorer train` (:func:`train_variant`: every input checked first), a study's trials, finalist runs and
retraining a trial for analysis all call :func:`evaluate_variant`, so they measure the same things the same way. Latency is measured before training (it
depends only on the architecture), so a caller can refuse a variant on it (a latency budget) before spending any
training. A NaN loss or running out of memory, while timing or while training, is a :class:`VariantFailed` with
the reason, never a crash of the caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from torch import nn

from explorer.data import Task, load_task
from explorer.errors import EXIT_NO_RESULT, ConfigError, ExplorerError, TrainingDivergedError
from explorer.layout import DecodeConfig, LatencyConfig, ModelConfig, TrainConfig
from explorer.measure._decode import decode_latency
from explorer.measure._device import device_label, resolve_device
from explorer.measure._latency import model_latency
from explorer.measure._latency_cache import LatencyCache
from explorer.measure._probe import relation_specialization
from explorer.measure._train import EpochStats, TrainResult, fit
from explorer.measure._train_plan import VariantTrainPlan, plan_train
from explorer.measurements import DecodeResult, LatencyResult, QualityMetric, quality_metric
from explorer.model import (
    CHECK_BATCH,
    ModelBuilder,
    build_model,
    check_model,
    check_model_fits,
    model_cost,
)


class VariantFailed(ExplorerError):
    """A variant could not be evaluated: its loss diverged or it ran out of memory (``kind`` says which)."""

    exit_code = EXIT_NO_RESULT

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind  # "diverged" | "out of memory" | "model" (the user's builder refused the layout)


@dataclass(frozen=True)
class VariantResult:
    """Everything measured about one variant (the trained model rides along, out of comparisons and JSON).

    Quality: ``metric`` names the task kind's objective field and direction (``val_accuracy``, maximize, for
    classification; ``val_bpb``, minimize, for a language model) and ``quality`` is its value, so a study can
    optimize ``(result.quality, result.metric.direction)`` without knowing the task kind.
    """

    config: ModelConfig
    train: TrainConfig
    latency: LatencyResult
    fit: TrainResult
    params: int  # trainable parameters
    flops: int  # forward FLOPs per example (2 x multiply-adds of the matmuls)
    device: str  # where it trained, e.g. "cpu (Intel Xeon ..., 2 threads)"
    torch_version: str
    val_size: int  # validation targets (examples, or predicted bytes): accuracy is a proportion of them
    relations: pd.DataFrame | None = field(default=None, compare=False, repr=False)  # relations task only
    model: nn.Module | None = field(default=None, compare=False, repr=False)
    decode: DecodeResult | None = None  # decoding latency, when asked for (language-model tasks)
    # key/value bytes one position takes while decoding, at the latency dtype
    kv_cache_bytes_per_token: int = 0

    # The training figures, read through from ``fit``.
    val_accuracy = property(lambda self: self.fit.val_accuracy)
    test_accuracy = property(lambda self: self.fit.test_accuracy)
    val_loss = property(lambda self: self.fit.val_loss)
    val_bpb = property(lambda self: self.fit.val_bpb)  # None for a classifier
    test_bpb = property(lambda self: self.fit.test_bpb)
    val_bpb_se = property(lambda self: self.fit.val_bpb_se)
    task_kind = property(lambda self: self.fit.task_kind)

    @property
    def metric(self) -> QualityMetric:
        return quality_metric(self.fit.task_kind)

    @property
    def quality(self) -> float:
        """The validation value of :attr:`metric`."""
        return self.fit.quality

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the configs, measurements and training history (not the model)."""
        return {
            "model": self.config.to_dict(),
            "train": dataclasses.asdict(self.train),
            "heads": list(self.config.heads),
            "d_k": list(self.config.d_k),
            "family": self.config.family,
            "kv_heads": list(self.config.kv_per_layer),
            "task_kind": self.task_kind,
            "metric": {"name": self.metric.name, "direction": self.metric.direction, "value": self.quality},
            "val_accuracy": self.val_accuracy,
            "test_accuracy": self.test_accuracy,
            "val_loss": self.val_loss,
            "val_bpb": self.val_bpb,
            "test_bpb": self.test_bpb,
            "val_bpb_se": self.val_bpb_se,
            "val_size": self.val_size,
            "latency_ms": self.latency.median_ms,
            "latency": self.latency.to_dict(),
            "params": self.params,
            "flops": self.flops,
            "train_time_s": self.fit.train_time_s,
            "samples_per_s": self.fit.samples_per_s,
            "epochs_run": self.fit.epochs_run,
            "device": self.device,
            "torch_version": self.torch_version,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "decode": None if self.decode is None else self.decode.to_dict(),
            "fit": self.fit.to_dict(),
        }


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation failure (CUDA or host), which fails one variant, not the caller."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)


def _oom(device: torch.device, doing: str, exc: BaseException) -> VariantFailed:
    """The failure of a variant that ran out of memory while ``doing`` (timing, training)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return VariantFailed(f"out of memory on {device} while {doing}: {str(exc)[:200]}", "out of memory")


def count_cost(cfg: ModelConfig, task: Task, builder: ModelBuilder | None = None) -> tuple[int, int]:
    """Parameters and forward FLOPs per example of ``cfg`` built for ``task`` (the caller's RNG is untouched)."""
    with torch.random.fork_rng(devices=[]):
        model = build_model(cfg, task.spec, builder)
        return model_cost(model, task.train[0][:1])


def evaluate_variant(
    cfg: ModelConfig,
    task: Task,
    train_cfg: TrainConfig,
    latency_cfg: LatencyConfig,
    device: torch.device | None = None,
    *,
    cache: LatencyCache | None = None,
    on_measured: Callable[[LatencyResult, int], None] | None = None,
    on_epoch: Callable[[EpochStats], bool | None] | None = None,
    keep_model: bool = False,
    decode: DecodeConfig | None = None,
    on_decoded: Callable[[DecodeResult], None] | None = None,
    builder: ModelBuilder | None = None,
) -> VariantResult:
    """Build, time, train and evaluate one variant; return a :class:`VariantResult`.

    Args:
        cfg, task, train_cfg: the architecture, the task and how to train it (its seed fixes the run).
        latency_cfg: how to time it; ``device`` (default ``latency_cfg.device``, resolved) is where it is timed
            and trained.
        cache: a latency cache to read and fill (None: always measure).
        on_measured: called with the latency and the parameter count before training; raising there stops
            the evaluation before any training (a budget).
        on_epoch: called after every epoch; returning True stops training after it (early stopping).
        keep_model: keep the trained model on the result (``result.model``).
        decode: also time decoding (one new token against a key/value cache of ``decode.context``, at
            ``decode.batch_size``, timed like ``latency_cfg``); language-model tasks only.
        on_decoded: called with the decoding latency before training (and before ``on_measured``); raising
            there stops the evaluation before any training (a decoding budget).
        builder: the user's model function (None: explorer's own models); a layout it cannot build fails this
            variant.

    Raises:
        VariantFailed: the loss became NaN/inf, the device ran out of memory while timing or training, or the
            user's builder could not build this layout.
    """
    device = resolve_device(latency_cfg.device) if device is None else device
    _check_decoding(task, decode, builder)
    params, flops = _cost(cfg, task, builder)
    latency, decoded = _time(cfg, task, latency_cfg, device, cache, decode, builder)
    if decoded is not None and on_decoded is not None:
        on_decoded(decoded)
    if on_measured is not None:
        on_measured(latency, params)
    model, result = _train(cfg, task, train_cfg, device, on_epoch, builder)
    return VariantResult(
        config=cfg,
        train=train_cfg,
        latency=latency,
        fit=result,
        params=params,
        flops=flops,
        device=device_label(device, torch.get_num_threads() if device.type == "cpu" else None),
        torch_version=torch.__version__,
        val_size=task.val[1].numel(),  # len() for labels [n]; every predicted byte for a language model
        relations=_relations(model, task, builder),
        model=model if keep_model else None,
        decode=decoded,
        kv_cache_bytes_per_token=cfg.kv_cache_bytes_per_token(latency_cfg.dtype),
    )


def _check_decoding(task: Task, decode: DecodeConfig | None, builder: ModelBuilder | None) -> None:
    """Decoding is timed on explorer's own language model only."""
    if decode is not None and not task.spec.causal:
        raise ConfigError(
            f"decoding latency needs a language-model task (such as text); "
            f"{task.name!r} is a classification task."
        )
    if decode is not None and builder is not None and not getattr(builder, "decodes", False):
        raise ConfigError(
            "decoding latency needs a language model with a key/value cache (explorer's own, or [model] hf = "
            '"llama", "mistral", "qwen2" or "gpt2"); drop [model] build.'
        )


def _cost(cfg: ModelConfig, task: Task, builder: ModelBuilder | None) -> tuple[int, int]:
    """Parameters and FLOPs per example; a user's model is first checked on one batch (a layout it cannot build
    fails this variant)."""
    try:
        if builder is not None:  # its layout, output shape and values, on one batch, before anything is timed
            check_model(builder, [cfg], task.spec, task.train[0][:CHECK_BATCH])
        return count_cost(cfg, task, builder)
    except ConfigError as exc:
        if builder is None:
            raise
        raise VariantFailed(str(exc), "model") from None


def _time(
    cfg: ModelConfig,
    task: Task,
    latency_cfg: LatencyConfig,
    device: torch.device,
    cache: LatencyCache | None,
    decode: DecodeConfig | None,
    builder: ModelBuilder | None,
) -> tuple[LatencyResult, DecodeResult | None]:
    """The forward latency, and the decoding latency when ``decode`` asks for it; out of memory fails the
    variant."""
    try:
        latency = model_latency(cfg, task.spec, latency_cfg, device, cache=cache, builder=builder)
        if decode is None:
            return latency, None
        decode_cfg = dataclasses.replace(latency_cfg, batch_size=decode.batch_size)
        vocab = task.spec.vocab_size
        return latency, decode_latency(cfg, decode.context, decode_cfg, device, cache, vocab, builder)
    except (RuntimeError, MemoryError) as exc:
        if not is_out_of_memory(exc):
            raise
        raise _oom(device, "timing", exc) from None


def _train(
    cfg: ModelConfig,
    task: Task,
    train_cfg: TrainConfig,
    device: torch.device,
    on_epoch: Callable[[EpochStats], bool | None] | None,
    builder: ModelBuilder | None,
) -> tuple[nn.Module, TrainResult]:
    """:func:`explorer.measure._train.fit`, with a diverged loss or out of memory failing the variant."""
    try:
        return fit(cfg, task, train_cfg, device, on_epoch=on_epoch, builder=builder)
    except TrainingDivergedError as exc:
        raise VariantFailed(f"diverged: {exc}", "diverged") from None
    except (RuntimeError, MemoryError) as exc:
        if not is_out_of_memory(exc):
            raise
        raise _oom(device, "training", exc) from None


def _relations(model: nn.Module, task: Task, builder: ModelBuilder | None) -> pd.DataFrame | None:
    """Which head attends to which relation (relations task only; None for a user's model without
    explorer.MultiHeadAttention, whose attention maps cannot be read)."""
    if not task.relation_offsets:
        return None
    try:
        return relation_specialization(model, task.val[0], task.relation_offsets)
    except ConfigError:
        if builder is None:
            raise
        return None


# --------------------------------------------------------------------------------------------- one request


@dataclass(frozen=True)
class TrainedVariant:
    """One variant trained and timed by :func:`train_variant`, with the task it trained on."""

    result: VariantResult
    task: Task
    task_options: dict[str, Any]
    build: str | None = None  # the user's model function or hf:TYPE that built it (None: explorer's own)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the task, its options and the model function, then :meth:`VariantResult.to_dict`."""
        doc = {"task": self.task.name, "task_options": self.task_options, "build": self.build}
        doc |= self.result.to_dict()
        if self.task.corpus_hash:
            doc["corpus_sha256"] = self.task.corpus_hash
        return doc


def train_variant(
    cfg: ModelConfig,
    train_cfg: TrainConfig | None = None,
    task: str = "digits",
    task_options: Mapping[str, Any] | None = None,
    *,
    latency: LatencyConfig | None = None,
    decode_context: int | None = None,
    build: str | None = None,
    hf: Mapping[str, Any] | None = None,
    stop_after: int | None = None,
    threads: int | None = None,
    on_start: Callable[[], None] | None = None,
    on_epoch: Callable[[EpochStats], None] | None = None,
) -> TrainedVariant:
    """Train and time one variant of ``task`` (a name, a path or a function reference, as
    :func:`explorer.data._registry.load_task` takes): what `explorer train` does.

    Planned first (:func:`explorer.measure._train_plan.plan_train`: ``train_cfg`` defaults to a spec's, the
    device is resolved, the runtime, epochs, batch size and model's sizes are checked), then run by
    :func:`train_planned` with ``threads`` torch threads (default: as they are).
    """
    plan = plan_train(cfg, train_cfg, latency=latency, decode_context=decode_context, threads=threads)
    return train_planned(
        plan,
        task,
        task_options,
        build=build,
        hf=hf,
        stop_after=stop_after,
        on_start=on_start,
        on_epoch=on_epoch,
    )


def train_planned(
    plan: VariantTrainPlan,
    task: str = "digits",
    task_options: Mapping[str, Any] | None = None,
    *,
    build: str | None = None,
    hf: Mapping[str, Any] | None = None,
    stop_after: int | None = None,
    on_start: Callable[[], None] | None = None,
    on_epoch: Callable[[EpochStats], None] | None = None,
) -> TrainedVariant:
    """Train and time the variant ``plan`` holds on ``task``, nothing the plan checked checked again.

    Checked first, in order: the task, decoding (the plan's decode: a language-model task and explorer's own
    model), the memory the model needs on the plan's device and the user's model (``build``) on one batch. Then
    ``on_start`` is called and :func:`evaluate_variant` runs with the plan's torch threads, up to ``stop_after``
    epochs (a run config's stop), ``on_epoch`` seeing every epoch.
    """
    cfg, train_cfg, latency, device, decode = plan.model, plan.train, plan.latency, plan.device, plan.decode
    options = dict(task_options or {})
    loaded = load_task(task, **options)
    if decode is not None and not loaded.spec.causal:
        raise ConfigError(f"--decode-context needs a language-model task such as --task text, not {task!r}.")
    # before anything is built: a model this machine cannot hold is one line, not a traceback
    check_model_fits(
        cfg,
        loaded.spec,
        train_batch=train_cfg.batch_size,
        infer_batch=latency.batch_size,
        device=device,
        decode_context=None if decode is None else decode.context,
    )
    builder = None if build is None and hf is None else _checked_builder(build, hf, cfg, loaded, decode)

    def each_epoch(stats: EpochStats) -> bool:
        if on_epoch is not None:
            on_epoch(stats)
        return stop_after is not None and stats.epoch >= stop_after

    previous = torch.get_num_threads()
    torch.set_num_threads(plan.threads or previous)
    try:
        if on_start is not None:
            on_start()
        result = evaluate_variant(
            cfg,
            loaded,
            train_cfg,
            latency,
            device,
            cache=LatencyCache(),
            on_epoch=each_epoch,
            decode=decode,
            builder=builder,
        )
    finally:
        torch.set_num_threads(previous)
    return TrainedVariant(result, loaded, options, build if builder is None else builder.ref)


def _checked_builder(
    build: str | None, hf: Mapping[str, Any] | None, cfg: ModelConfig, task: Task, decode: DecodeConfig | None
) -> ModelBuilder:
    """The user's model function ``build`` or the transformers model ``hf`` (a run config's ``{"model_type",
    "config"}``), checked on one batch of ``task`` before any training."""
    if hf is not None:
        from explorer.model import HFBuilder

        builder: ModelBuilder = HFBuilder.of(str(hf["model_type"]), dict(hf.get("config") or {}))
    else:
        assert build is not None
        builder = ModelBuilder(build)
    if decode is not None and not getattr(builder, "decodes", False):
        raise ConfigError("--decode-context times explorer's own language model; drop --build to use it.")
    check_model(builder, [cfg], task.spec, task.train[0][:CHECK_BATCH])
    return builder
