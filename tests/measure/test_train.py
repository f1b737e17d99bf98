from __future__ import annotations

import math

import pytest
import torch

from explorer.data import Task
from explorer.errors import ConfigError, TrainingDivergedError
from explorer.layout import InputSpec, ModelConfig, TrainConfig
from explorer.measure import EpochStats, fit
from explorer.measure._train import TrainResult, _lr_lambda, evaluate

CPU = torch.device("cpu")
MODEL = ModelConfig(d_model=16, heads=(2, 4))


def _task(n: int = 600, seq_len: int = 4, n_features: int = 3, seed: int = 0) -> Task:
    """Linearly separable 3-class problem: the class sets the mean of feature 0 at every position."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    X = torch.randn(n, seq_len, n_features, generator=g) * 0.5
    X[:, :, 0] += 2.0 * (y.float() - 1.0)[:, None]
    a, b = int(0.6 * n), int(0.8 * n)
    spec = InputSpec(kind="features", seq_len=seq_len, n_classes=3, n_features=n_features)
    return Task("toy", spec, (X[:a], y[:a]), (X[a:b], y[a:b]), (X[b:], y[b:]))


TASK = _task()
FAST = TrainConfig(epochs=4, batch_size=32, lr=3e-3, warmup_frac=0.1)


def test_fit_learns_a_separable_problem():
    seen: list[EpochStats] = []
    model, res = fit(MODEL, TASK, FAST, CPU, on_epoch=lambda s: seen.append(s) or False)
    assert isinstance(res, TrainResult)
    assert res.val_accuracy > 0.9 and res.test_accuracy > 0.9
    assert res.epochs_run == res.epochs_planned == 4 and not res.stopped_early
    assert [s.epoch for s in seen] == [1, 2, 3, 4] and res.history == tuple(seen)
    assert seen[-1].train_loss < seen[0].train_loss
    assert res.samples_per_s == pytest.approx(4 * len(TASK.train[1]) / res.train_time_s)
    assert res.train_time_s <= sum(s.seconds for s in seen)
    assert evaluate(model, *TASK.val, CPU) == res.val_accuracy
    d = res.to_dict()
    assert d["history"][0]["epoch"] == 1 and d["epochs_run"] == 4


def test_same_seed_same_result_different_seed_different_weights():
    cfg = TrainConfig(epochs=1, batch_size=64, seed=3)
    m1, r1 = fit(MODEL, TASK, cfg, CPU)
    m2, r2 = fit(MODEL, TASK, cfg, torch.device("cpu"))
    m3, _ = fit(MODEL, TASK, TrainConfig(epochs=1, batch_size=64, seed=4), CPU)
    assert r1.val_accuracy == r2.val_accuracy and r1.history[0].train_loss == r2.history[0].train_loss
    assert all(torch.equal(a, b) for a, b in zip(m1.parameters(), m2.parameters(), strict=True))
    assert not torch.equal(m1.head.weight, m3.head.weight)


def test_on_epoch_true_stops_after_that_epoch():
    calls = []
    _, res = fit(
        MODEL,
        TASK,
        TrainConfig(epochs=5, batch_size=64),
        CPU,
        on_epoch=lambda s: calls.append(s) or s.epoch == 2,
    )
    assert len(calls) == 2 and res.epochs_run == 2 and res.epochs_planned == 5 and res.stopped_early
    assert len(res.history) == 2


@pytest.mark.parametrize("poison", ["lr", "inf"])
def test_divergence_raises(poison):
    task, lr = TASK, 1e6
    if poison == "inf":
        X, y = TASK.train
        X = X.clone()
        X[5, 0, 0] = math.inf
        task, lr = Task("bad", TASK.spec, (X, y), TASK.val, TASK.test), 1e-3
    with pytest.raises(TrainingDivergedError, match=r"at epoch 1 step \d+; lower the learning rate"):
        fit(MODEL, task, TrainConfig(epochs=2, batch_size=64, lr=lr), CPU)


def test_evaluate_restores_mode_and_handles_partial_batches():
    torch.manual_seed(0)
    from explorer.model import build_model

    model = build_model(MODEL, TASK.spec).train()
    X, y = TASK.val
    acc = evaluate(model, X, y, CPU, batch_size=7)
    assert model.training
    with torch.no_grad():
        expected = (model.eval()(X).argmax(-1) == y).float().mean().item()
    assert acc == pytest.approx(expected)


def test_lr_schedule_warms_up_then_decays_to_zero():
    f = _lr_lambda(100, 0.1)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert (
        f(10) == pytest.approx(1.0) and f(55) == pytest.approx(0.5, abs=0.03) and f(100) == pytest.approx(0.0)
    )
    assert all(f(i) >= f(i + 1) for i in range(10, 100))
    assert _lr_lambda(10, 0.0)(0) == 1.0


@pytest.mark.cuda  # skipped without a GPU (tests/conftest.py)
def test_fit_on_cuda_under_autocast():
    model, res = fit(MODEL, TASK, FAST, torch.device("cuda"))
    assert next(model.parameters()).device.type == "cuda"
    assert next(model.parameters()).dtype == torch.float32  # autocast keeps fp32 master weights
    assert res.val_accuracy > 0.9


def test_plateau_schedule_trains_until_accuracy_stops_moving_and_reproduces(one_thread):
    from explorer.data import load_task

    task = load_task("digits")
    cfg = ModelConfig(d_model=16, heads=(2,), mlp_ratio=1.0)
    train = TrainConfig(epochs=40, batch_size=128, lr=3e-3, seed=3, schedule="plateau", patience=2, decays=1)
    _, a = fit(cfg, task, train, torch.device("cpu"))
    assert a.stopped_early and a.epochs_run < 40  # stopped on its own, not at the cap
    _, b = fit(cfg, task, train, torch.device("cpu"))
    assert [s.val_accuracy for s in a.history] == [s.val_accuracy for s in b.history]  # exactly again
    with pytest.raises(ConfigError, match="schedule"):
        TrainConfig(schedule="step")
