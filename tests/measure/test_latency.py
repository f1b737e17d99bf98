"""Latency timing and its cache: real timings of tiny modules, the cache checked by counting measurements."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import explorer.measure._latency as latency
from explorer.errors import ConfigError
from explorer.layout import InputSpec, LatencyConfig, ModelConfig
from explorer.measure import CachePolicy, LatencyCache, model_latency, time_forward
from explorer.measure._latency import latency_key
from explorer.measure._latency_cache import MachineState
from explorer.measurements import LatencyResult

FAST = LatencyConfig(batch_size=2, threads=1, min_run_time=0.02)
TOKENS = InputSpec(kind="tokens", seq_len=8, n_classes=3, vocab_size=11)
FEATURES = InputSpec(kind="features", seq_len=6, n_classes=2, n_features=5)
SMALL = ModelConfig(d_model=16, heads=(2, 4))
CPU = torch.device("cpu")
# Hit-and-miss mechanics apart from the freshness rules (tests/measure/test_latency_cache.py checks those): a
# policy that trusts any young entry, so a busy test machine does not turn hits into re-measurements.
TRUSTING = CachePolicy(max_spread=float("inf"), max_load_per_cpu=float("inf"), quieter_by=float("inf"))


def trusting_cache(directory) -> LatencyCache:
    return LatencyCache(directory, policy=TRUSTING, machine=lambda: MachineState(cpus=2, load=0.5))


class ThreadSpy(nn.Module):
    """Records the thread count it runs under and whether it is in eval mode."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.seen: set[tuple[int, bool, bool]] = set()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add((torch.get_num_threads(), self.training, torch.is_inference_mode_enabled()))
        return self.lin(x)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the real measurements model_latency makes."""
    calls: list[int] = []
    real = latency.time_forward

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(latency, "time_forward", spy)
    return calls


def test_result_round_trips_through_json() -> None:
    r = LatencyResult(1.5, 0.25, 8, 197, 2, "cpu (x)", "float32", 10, cached=True)
    assert LatencyResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_time_forward_measures_in_eval_inference_mode_and_restores_state() -> None:
    model = ThreadSpy().train()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        res = time_forward(model, torch.randn(3, 5, 4), CPU, FAST)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert model.seen == {(1, False, True)}  # 1 thread, eval mode, inference mode: every call
    assert model.training  # mode restored
    assert res.median_ms > 0 and res.iqr_ms >= 0 and res.runs >= 1
    assert (res.batch_size, res.seq_len, res.threads, res.dtype, res.cached) == (3, 5, 1, "float32", False)
    assert res.device.startswith("cpu")


def test_half_dtype_on_cpu_is_a_config_error() -> None:
    cfg = LatencyConfig(batch_size=2, dtype="bfloat16", min_run_time=0.02)
    with pytest.raises(ConfigError, match="CUDA"):
        time_forward(nn.Linear(4, 4), torch.randn(2, 3, 4), CPU, cfg)
    with pytest.raises(ConfigError, match="float32"):
        model_latency(SMALL, TOKENS, cfg, CPU)


def test_cache_hit_skips_measuring(tmp_path, counted) -> None:
    cache = trusting_cache(tmp_path)
    first = model_latency(SMALL, TOKENS, FAST, CPU, cache=cache)
    second = model_latency(SMALL, TOKENS, FAST, CPU, cache=cache)
    assert len(counted) == 1
    assert not first.cached and second.cached
    assert second.median_ms == first.median_ms and second.batch_size == FAST.batch_size
    assert len(list(tmp_path.glob("*.json"))) == 1 and not list(tmp_path.glob(".tmp-*"))


def test_corrupt_cache_file_is_measured_again(tmp_path, counted) -> None:
    cache = trusting_cache(tmp_path)
    key = latency_key(SMALL, FEATURES, FAST, CPU)
    cache.path(key).write_text('{"key": "trunc')
    res = model_latency(SMALL, FEATURES, FAST, CPU, cache=cache)
    assert len(counted) == 1 and not res.cached
    # overwritten, readable
    assert cache.get(key) == LatencyResult.from_dict({**res.to_dict(), "cached": True})


def test_no_cache_measures_every_time(counted) -> None:
    model_latency(SMALL, TOKENS, FAST, CPU)
    model_latency(SMALL, TOKENS, FAST, CPU)
    assert len(counted) == 2


def test_keys_differ_by_heads_batch_threads_and_input() -> None:
    keys = {
        latency_key(SMALL, TOKENS, FAST, CPU),
        latency_key(ModelConfig(d_model=16, heads=(4, 4)), TOKENS, FAST, CPU),
        latency_key(SMALL, TOKENS, LatencyConfig(batch_size=4, threads=1), CPU),
        latency_key(SMALL, TOKENS, LatencyConfig(batch_size=2, threads=2), CPU),
        latency_key(SMALL, FEATURES, FAST, CPU),
    }
    assert len(keys) == 5
    assert latency_key(SMALL, TOKENS, FAST, CPU) == latency_key(
        ModelConfig(d_model=16, heads=(2, 4)), TOKENS, FAST, CPU
    )
    assert torch.__version__ in latency_key(SMALL, TOKENS, FAST, CPU)


def test_default_cache_dir_comes_from_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EXPLORER_CACHE_DIR", str(tmp_path / "c"))
    assert LatencyCache().directory == tmp_path / "c"
    monkeypatch.delenv("EXPLORER_CACHE_DIR")
    assert LatencyCache().directory.parts[-3:] == (".cache", "explorer", "latency")


def test_model_latency_leaves_the_callers_rng_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    model_latency(SMALL, TOKENS, FAST, CPU)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.cuda  # skipped without a GPU (tests/conftest.py)
def test_bfloat16_on_cuda() -> None:
    res = model_latency(
        SMALL, TOKENS, LatencyConfig(batch_size=2, dtype="bfloat16", min_run_time=0.02), torch.device("cuda")
    )
    assert res.median_ms > 0 and res.dtype == "bfloat16" and res.device.startswith("cuda")


def test_random_input_is_shaped_like_the_tasks_batch():
    from explorer.measure import random_input

    tokens = InputSpec(kind="tokens", seq_len=5, n_classes=2, vocab_size=7)
    x = random_input(tokens, 3, torch.Generator().manual_seed(0))
    assert x.shape == (3, 5) and x.dtype == torch.int64 and 0 <= int(x.min()) and int(x.max()) < 7
    features = InputSpec(kind="features", seq_len=4, n_classes=2, n_features=6)
    assert random_input(features, 2).shape == (2, 4, 6)
    again = random_input(tokens, 3, torch.Generator().manual_seed(0))
    assert torch.equal(x, again)  # the generator fixes it


def test_the_deployment_spec_takes_the_latency_sequence_length():
    from explorer.measure import deployment_spec

    spec = InputSpec(kind="tokens", seq_len=16, n_classes=2, vocab_size=7)
    assert deployment_spec(spec, LatencyConfig()) is spec
    longer = deployment_spec(spec, LatencyConfig(seq_len=64))
    assert longer.seq_len == 64 and longer.vocab_size == spec.vocab_size
