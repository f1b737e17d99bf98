"""The attention benchmark at a tiny shape: every implementation, real memory figures, and the written files."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch import nn

from explorer.errors import ConfigError
from explorer.measure import bench_attention
from explorer.measure._attention_bench import BENCH_IMPLS, peak_memory_mb

TINY = dict(d_model=32, heads=4, seq_len=12, batch=2, min_run_time=0.02, threads=1, matmul_size=128)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return bench_attention(device=torch.device("cpu"), **TINY)


def test_one_row_per_implementation(table: pd.DataFrame) -> None:
    assert list(table.impl) == list(BENCH_IMPLS)
    assert {"median_ms", "iqr_ms", "peak_mem_mb", "speedup_vs_serial", "gflops", "matmul_peak_gflops"} <= set(
        table
    )
    assert (table.median_ms > 0).all() and (table.iqr_ms >= 0).all()
    assert table.set_index("impl").loc["serial", "speedup_vs_serial"] == 1.0
    assert table.speedup_vs_serial.tolist() == pytest.approx(
        (table.median_ms.iloc[0] / table.median_ms).tolist()
    )
    assert (table.threads == 1).all() and table.device.str.startswith("cpu").all()


def test_peak_memory_is_measured_on_cpu(table: pd.DataFrame) -> None:
    assert (table.peak_mem_mb > 0).all()
    # Serial holds one head's [B, T, T] scores at a time; merged holds all heads' and returns them.
    peak = table.set_index("impl").peak_mem_mb
    assert peak["merged"] > peak["fused"]


def test_all_implementations_agree(table: pd.DataFrame) -> None:
    assert (table.max_abs_diff < 1e-5).all()


def test_achieved_gflops_are_consistent(table: pd.DataFrame) -> None:
    flops = 2 * 2 * 12 * 32 * 4 * 32 + 2 * 2 * 2 * 12 * 12 * 32
    assert table.gflops.tolist() == pytest.approx((flops / (table.median_ms * 1e-3) / 1e9).tolist())
    assert table.pct_of_peak.tolist() == pytest.approx(
        (100 * table.gflops / table.matmul_peak_gflops).tolist()
    )
    assert table.matmul_peak_gflops.nunique() == 1 and table.matmul_peak_gflops.iloc[0] > 0


class Temp(nn.Module):
    """Allocates 4 MiB and frees it before returning (module level: the probe runs in a child process)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        big = torch.ones(1 << 20)
        return x + big.sum()


def test_cpu_peak_memory_sees_a_temporary_and_prints_nothing_here(capfd) -> None:
    peaks = peak_memory_mb({"temp": Temp()}, torch.zeros(4))
    assert 4.0 <= peaks["temp"] < 4.1
    out, err = capfd.readouterr()  # the profiler's C++ lines go to the child's silenced stderr, not ours
    assert "profiler" not in err and "USDT" not in err and out == ""


def test_memory_can_be_skipped() -> None:
    df = bench_attention(device=torch.device("cpu"), memory=False, **TINY)
    assert df.peak_mem_mb.isna().all() and (df.median_ms > 0).all()


@pytest.mark.parametrize("heads", [5, 0, 64])
def test_invalid_heads_name_the_valid_counts(heads: int) -> None:
    with pytest.raises(ConfigError, match="1, 2, 4, 8, 16, 32"):
        bench_attention(d_model=32, heads=heads, seq_len=4, batch=1, device=torch.device("cpu"))


@pytest.mark.cuda  # skipped without a GPU (tests/conftest.py)
def test_bench_on_cuda() -> None:
    df = bench_attention(device=torch.device("cuda"), **{**TINY, "matmul_size": 1024})
    assert list(df.impl) == list(BENCH_IMPLS)
    assert (df.peak_mem_mb > 0).all() and (df.max_abs_diff < 1e-3).all()


def test_a_plan_is_checked_before_it_runs_and_says_what_it_times() -> None:
    from explorer.measure import plan_bench
    from explorer.measure._bench_plan import DEFAULT_CONTEXT

    forward = plan_bench(32, 4, None, 12, 2, device="cpu")
    assert forward.what == "attention at batch 2, seq 12, d_model 32, 4 heads"
    assert forward.shape == {
        "d_model": 32,
        "heads": 4,
        "kv_heads": 4,
        "batch": 2,
        "mode": "forward",
        "seq_len": 12,
        "runtime": "eager",
    }
    decode = plan_bench(32, 4, 2, 12, 2, decode=True, device="cpu")
    assert decode.context == DEFAULT_CONTEXT and decode.shape["mode"] == "decode"
    assert (
        decode.what
        == f"one decoding step at batch 2 against a cache of {DEFAULT_CONTEXT}, d_model 32, 4 heads, 2 kv heads"
    )
    with pytest.raises(ConfigError, match="does not divide d_model=32"):  # the shape first, then the runtime
        plan_bench(32, 5, None, 12, 2, decode=True, device="cpu", runtime="compile")
    with pytest.raises(ConfigError, match="--decode times the eager model"):
        plan_bench(32, 4, None, 12, 2, decode=True, device="cpu", runtime="compile")
