"""One variant's training planned: its configs with a spec's defaults, its device resolved, its runtime and sizes
checked, once, before any data is loaded or any model built.

`explorer train` and :func:`explorer.api.train` both go through :func:`plan_train`, so a variant trained either way
takes the same defaults (a spec's ``[task] epochs`` and ``batch_size``, ``[space] lr`` and the study's ``seed``)
and is refused for the same reasons; :func:`explorer.measure._evaluate.train_planned` runs the plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from explorer.fields import option_default
from explorer.layout import DecodeConfig, LatencyConfig, ModelConfig, SpaceSpec, TrainConfig
from explorer.limits import BATCH, EPOCHS
from explorer.measure._device import resolve_device
from explorer.model import check_config_limits, check_runtime
from explorer.spec import StudySpec, TaskSpec

# How a refused size is named and what to do instead: the library's words (`explorer train` names its flags).
SIZE_NAMES: Mapping[str, tuple[str, str]] = {
    "epochs": ("the epochs", "train for fewer epochs"),
    "batch_size": ("the batch size", "choose a smaller batch"),
}


@dataclass(frozen=True)
class VariantTrainPlan:
    """One variant to train and time, every input resolved and checked once (:func:`plan_train`)."""

    model: ModelConfig
    train: TrainConfig
    latency: LatencyConfig
    device: torch.device  # ``latency.device``, resolved on this machine
    threads: int | None = None  # torch CPU threads while it trains and is timed (None: as they are)
    decode: DecodeConfig | None = None  # also time decoding against a key/value cache (language models)


def spec_train_config() -> TrainConfig:
    """How a study trains by default: ``[task] epochs`` and ``batch_size``, ``[space] lr``, the study's ``seed``."""
    return TrainConfig(
        epochs=option_default(TaskSpec, "epochs"),
        batch_size=option_default(TaskSpec, "batch_size"),
        lr=option_default(SpaceSpec, "lr"),
        seed=option_default(StudySpec, "seed"),
    )


def plan_train(
    model: ModelConfig,
    train: TrainConfig | None = None,
    *,
    latency: LatencyConfig | None = None,
    decode_context: int | None = None,
    threads: int | None = None,
    names: Mapping[str, tuple[str, str]] | None = None,
) -> VariantTrainPlan:
    """The plan of training ``model`` with ``train`` (default: a spec's, :func:`spec_train_config`), timed as
    ``latency`` says (default: :class:`LatencyConfig`'s) and, with ``decode_context``, decoding too.

    Checked here, once, in order: the runtime on ``latency.device`` (resolved once), the epochs and the batch
    size (named as ``names`` says, a label and what to do instead for each; default :data:`SIZE_NAMES`) and
    the model's sizes.
    """
    names = SIZE_NAMES if names is None else names
    train = spec_train_config() if train is None else train
    latency = LatencyConfig() if latency is None else latency
    device = resolve_device(latency.device)
    check_runtime(latency.runtime, device)  # a missing extra fails before any training
    decode = None if decode_context is None else DecodeConfig(context=decode_context)
    EPOCHS.check(train.epochs, *names["epochs"])
    BATCH.check(train.batch_size, *names["batch_size"])
    check_config_limits(model)
    return VariantTrainPlan(model, train, latency, device, threads, decode)
