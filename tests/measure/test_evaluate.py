"""evaluate_variant: the one path that builds, times, trains and evaluates a variant, failures included."""

from __future__ import annotations

import pytest
import torch

import explorer.measure._device as device_module
import explorer.measure._evaluate as ev
import explorer.measure._train_plan as plan_module
from explorer.data import load_task
from explorer.errors import ConfigError
from explorer.layout import LatencyConfig, ModelConfig, TrainConfig
from explorer.measure import VariantFailed, evaluate_variant

LAT = LatencyConfig(device="cpu", batch_size=4, threads=1, min_run_time=0.02)
CFG = ModelConfig(d_model=16, heads=(2, 4), mlp_ratio=1.0)


@pytest.fixture(scope="module")
def digits():
    return load_task("digits")


def test_result_carries_every_measurement(digits, one_thread):
    r = evaluate_variant(CFG, digits, TrainConfig(epochs=1, batch_size=128, lr=3e-3), LAT, keep_model=True)
    assert 0 <= r.val_accuracy <= 1 and r.val_size == len(digits.val[1])
    assert r.latency.median_ms > 0 and len(r.latency.samples_ms) == r.latency.runs and r.latency.measured_at
    assert r.params == sum(p.numel() for p in r.model.parameters()) and r.flops > 0
    assert r.fit.epochs_run == 1 and r.device.startswith("cpu (")
    doc = r.to_dict()
    assert doc["heads"] == [2, 4] and doc["latency"]["median_ms"] == r.latency.median_ms and "model" in doc


def test_a_veto_before_training_trains_nothing(digits, monkeypatch):
    def no_fit(*a, **k):
        raise AssertionError("fit must not run")

    monkeypatch.setattr(ev, "fit", no_fit)

    class Stop(Exception):
        pass

    def veto(latency, params):
        raise Stop

    with pytest.raises(Stop):
        evaluate_variant(CFG, digits, TrainConfig(epochs=1), LAT, on_measured=veto)


@pytest.mark.parametrize("stage", ["timing", "training"])
def test_out_of_memory_anywhere_is_a_variant_failure(digits, monkeypatch, stage):
    def oom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(ev, "model_latency" if stage == "timing" else "fit", oom)
    with pytest.raises(VariantFailed, match=f"out of memory on cpu while {stage}") as info:
        evaluate_variant(CFG, digits, TrainConfig(epochs=1), LAT)
    assert info.value.kind == "out of memory"


def test_a_diverging_loss_is_a_variant_failure(digits, one_thread):
    with pytest.raises(VariantFailed, match="diverged") as info:
        evaluate_variant(CFG, digits, TrainConfig(epochs=1, lr=1e6, grad_clip=0), LAT)
    assert info.value.kind == "diverged"


def test_other_errors_are_not_swallowed(digits, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("a real bug")

    monkeypatch.setattr(ev, "fit", boom)
    with pytest.raises(RuntimeError, match="a real bug"):
        evaluate_variant(CFG, digits, TrainConfig(epochs=1), LAT)


def test_relations_task_records_what_each_head_follows(one_thread):
    task = load_task("relations", n_relations=2, n_samples=200)
    r = evaluate_variant(ModelConfig(d_model=16, heads=(2,)), task, TrainConfig(epochs=1, batch_size=64), LAT)
    assert r.relations is not None
    assert set(r.relations.columns) == {"layer", "head", "relation", "attention"}
    assert len(r.relations) == 1 * 2 * 2 and r.relations["attention"].between(0, 1).all()


# --------------------------------------------------------------------------------------------- train_variant


def test_train_variant_checks_first_then_trains_to_where_it_is_told_to_stop(monkeypatch, one_thread):
    resolved = []
    for module in (ev, device_module, plan_module):  # every name the device could be resolved through
        monkeypatch.setattr(
            module, "resolve_device", lambda name: resolved.append(name) or torch.device("cpu")
        )
    events = []
    trained = ev.train_variant(
        CFG,
        TrainConfig(epochs=3, batch_size=128, lr=3e-3),
        "digits",
        latency=LAT,
        stop_after=2,
        threads=1,
        on_start=lambda: events.append("start"),
        on_epoch=lambda stats: events.append(stats.epoch),
    )
    assert events == ["start", 1, 2] and trained.result.fit.epochs_run == 2  # the run config's stop
    assert resolved == ["cpu"]  # once, for the runtime, the memory check, timing and training
    doc = trained.to_dict()
    assert (doc["task"], doc["task_options"], doc["build"]) == ("digits", {}, None)
    assert "corpus_sha256" not in doc  # a text task's corpus only
    assert doc["heads"] == [2, 4] and doc["train"]["epochs"] == 3


def test_train_variant_refuses_decoding_a_classifier_before_anything_runs(monkeypatch):
    monkeypatch.setattr(ev, "evaluate_variant", lambda *a, **k: pytest.fail("nothing may be built"))
    started = []
    with pytest.raises(ConfigError, match="--decode-context needs a language-model task such as --task text"):
        ev.train_variant(
            CFG,
            TrainConfig(epochs=1),
            "digits",
            latency=LAT,
            decode_context=8,
            on_start=lambda: started.append(True),
        )
    assert started == []


def test_a_variants_result_reads_its_quality_through_its_training(one_thread):
    from explorer.measure import VariantResult
    from tests.heads_models import structured_task

    task = structured_task(60)
    r = evaluate_variant(ModelConfig(d_model=8, heads=(2,)), task, TrainConfig(epochs=1, batch_size=36), LAT)
    assert isinstance(r, VariantResult) and r.model is None  # the model rides along only when asked
    assert r.quality == r.val_accuracy == r.fit.val_accuracy and r.metric.direction == "maximize"
    assert r.val_size == len(task.val[1]) and "model" not in r.to_dict()["train"]
