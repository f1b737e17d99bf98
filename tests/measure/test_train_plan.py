"""plan_train: one variant's training planned once, with a spec's defaults, for explorer.api.train and `explorer train`."""

from __future__ import annotations

import pytest
import torch

from explorer.errors import LimitError
from explorer.layout import LatencyConfig, ModelConfig, TrainConfig
from explorer.measure import plan_train
from explorer.measure._train_plan import VariantTrainPlan

LAT = LatencyConfig(device="cpu", batch_size=4, threads=1, min_run_time=0.02)
CFG = ModelConfig(d_model=16, heads=(2, 4), mlp_ratio=1.0)


def test_a_plan_trains_as_a_spec_and_the_train_command_do_by_default():
    from explorer.cli._cmd_model import train as train_command

    plan = plan_train(CFG, latency=LAT, threads=2)
    assert isinstance(plan, VariantTrainPlan) and plan.device == torch.device("cpu") and plan.threads == 2
    flags = {p.name: p.default for p in train_command.params}
    defaults = (plan.train.epochs, plan.train.batch_size, plan.train.lr, plan.train.seed)
    assert defaults == (flags["epochs"], flags["batch_size"], flags["lr"], flags["seed"]) == (10, 64, 3e-3, 0)
    assert plan_train(CFG, TrainConfig(batch_size=8), latency=LAT).train == TrainConfig(batch_size=8)
    assert TrainConfig() == plan.train  # the library's own default trains as a study does


def test_a_plan_names_a_refused_size_as_its_caller_does():
    huge = TrainConfig(epochs=10**9)
    with pytest.raises(LimitError, match="the epochs is 1,000,000,000, .*; train for fewer epochs"):
        plan_train(CFG, huge, latency=LAT)
    flags = {"epochs": ("--epochs", "lower it"), "batch_size": ("--batch-size", "lower it")}
    with pytest.raises(LimitError, match="--epochs is 1,000,000,000, .*; lower it"):
        plan_train(CFG, huge, latency=LAT, names=flags)


def test_a_planned_run_trains_without_checking_again(monkeypatch, one_thread):
    import explorer.measure._device as device_module
    import explorer.measure._evaluate as evaluate_module
    import explorer.measure._train_plan as plan_module
    from explorer.measure import train_planned

    plan = plan_train(CFG, TrainConfig(epochs=2, batch_size=128), latency=LAT, threads=1)
    for module in (evaluate_module, device_module, plan_module):  # the device was resolved by the plan
        monkeypatch.setattr(module, "resolve_device", lambda name: pytest.fail("resolved again"))
    trained = train_planned(plan, stop_after=1)
    assert trained.result.fit.epochs_run == 1 and trained.to_dict()["train"]["batch_size"] == 128
