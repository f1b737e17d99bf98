"""Decoding latency (timed and cached), the decoding bench, evaluate_variant's decoding and metric, and the
new command-line options, each with a bad-input case: one line, a non-zero exit, nothing written."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner

import explorer.measure._decode as decode_mod
from explorer.cli import main
from explorer.data import Task, load_task
from explorer.errors import ConfigError
from explorer.layout import DecodeConfig, InputSpec, LatencyConfig, ModelConfig, TrainConfig
from explorer.measure import CachePolicy, LatencyCache, bench_attention, decode_latency, evaluate_variant
from explorer.measure._attention_bench import DECODE_IMPLS, bench_decode
from explorer.measure._decode import decode_key, decoder_spec
from explorer.measure._latency import latency_key
from explorer.measure._latency_cache import MachineState
from explorer.measurements import DecodeResult

CPU = torch.device("cpu")
FAST = LatencyConfig(batch_size=2, threads=1, min_run_time=0.02)
GQA = ModelConfig(d_model=32, heads=(4, 4), kv_heads=(2, 1))
TEXT_OPTS = {"context": 32, "max_bytes": 20_000}


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Tiny models on a shared 2-core machine run fastest on one thread."""


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the real decoding measurements."""
    calls: list[int] = []
    real = decode_mod.time_call

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(decode_mod, "time_call", spy)
    return calls


# ------------------------------------------------------------------------------------ timing


def test_decode_latency_measures_and_counts_the_cache(tmp_path, counted):
    # A cache that trusts young entries whatever the load (the freshness rules: tests/measure/test_latency_cache.py).
    trusting = CachePolicy(max_spread=float("inf"), max_load_per_cpu=float("inf"), quieter_by=float("inf"))
    cache = LatencyCache(tmp_path, policy=trusting, machine=lambda: MachineState(cpus=2, load=0.5))
    first = decode_latency(GQA, 50, FAST, CPU, cache)
    second = decode_latency(GQA, 50, FAST, CPU, cache)
    assert len(counted) == 1 and not first.cached and second.cached
    assert second.ms_per_token == first.ms_per_token > 0 and first.latency.runs >= 1
    per_token = 2 * (2 * 8 + 1 * 8) * 4  # two layers of d_k 8: 2 and 1 key/value heads, fp32
    assert first.kv_cache_bytes_per_token == per_token and first.kv_cache_bytes == per_token * 50 * 2
    assert (first.context, first.latency.batch_size, first.latency.seq_len, first.latency.threads) == (
        50,
        2,
        50,
        1,
    )
    assert DecodeResult.from_dict(json.loads(json.dumps(first.to_dict()))) == first
    decode_latency(GQA, 60, FAST, CPU, cache)  # another context is another figure
    assert len(counted) == 2 and len(list(tmp_path.glob("*.json"))) == 2


def test_decode_keys_differ_by_context_heads_batch_and_from_forward_keys():
    decoding = {
        decode_key(GQA, 50, FAST, CPU),
        decode_key(GQA, 51, FAST, CPU),
        decode_key(ModelConfig(d_model=32, heads=(4, 4)), 50, FAST, CPU),
        decode_key(GQA, 50, LatencyConfig(batch_size=1, threads=1), CPU),
    }
    assert len(decoding) == 4 and all(k.startswith("decode|") for k in decoding)
    assert latency_key(GQA, decoder_spec(50), FAST, CPU) not in decoding
    assert "_lm|" in latency_key(GQA, decoder_spec(50), FAST, CPU)  # a language model's forward key


def test_decode_latency_leaves_the_callers_rng_alone_and_checks_context():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    decode_latency(GQA, 8, FAST, CPU)
    assert torch.equal(torch.rand(3), expected)
    with pytest.raises(ConfigError, match="positive integer"):
        decode_latency(GQA, 0, FAST, CPU)
    with pytest.raises(ConfigError, match="positive integer"):
        DecodeConfig(context=0)


def test_fewer_kv_heads_read_a_smaller_cache_in_the_bench():
    rows = {
        kv: bench_decode(
            d_model=32,
            heads=4,
            kv_heads=kv,
            context=40,
            batch=2,
            device=torch.device("cpu"),
            min_run_time=0.02,
            threads=1,
        )
        for kv in (4, 1)
    }
    for df in rows.values():
        assert list(df.impl) == list(DECODE_IMPLS)
        assert (df.max_abs_diff < 1e-5).all() and (df.median_ms > 0).all()
        assert df.set_index("impl").loc["serial", "speedup_vs_serial"] == 1.0
    assert rows[4].kv_cache_mb.iloc[0] == pytest.approx(2 * 4 * 8 * 40 * 2 * 4 / 2**20)
    assert rows[1].kv_cache_mb.iloc[0] == pytest.approx(rows[4].kv_cache_mb.iloc[0] / 4)
    with pytest.raises(ConfigError, match="choose --kv-heads from 1, 2, 4"):
        bench_decode(d_model=32, heads=4, kv_heads=3, context=8, device=torch.device("cpu"))


def test_forward_bench_with_grouped_heads_drops_torch_mha():
    df = bench_attention(
        d_model=32,
        heads=4,
        kv_heads=2,
        seq_len=6,
        batch=2,
        device=torch.device("cpu"),
        min_run_time=0.02,
        threads=1,
        matmul_size=64,
        memory=False,
    )
    assert list(df.impl) == ["serial", "merged", "fused"] and (df.kv_heads == 2).all()
    assert (df.max_abs_diff < 1e-5).all()


def test_evaluate_variant_times_decoding_and_names_its_metric(tmp_path):
    task = load_task("text", **TEXT_OPTS)
    cfg = ModelConfig(d_model=16, heads=(2,), kv_heads=(1,))
    seen = []
    res = evaluate_variant(
        cfg,
        task,
        TrainConfig(epochs=1, batch_size=32),
        FAST,
        torch.device("cpu"),
        cache=LatencyCache(tmp_path),
        decode=DecodeConfig(context=24, batch_size=1),
        on_decoded=seen.append,
    )
    assert res.decode is not None and seen == [res.decode] and res.decode.latency.batch_size == 1
    assert res.kv_cache_bytes_per_token == cfg.kv_cache_bytes_per_token() == 2 * 1 * 8 * 4
    assert res.metric.name == "val_bpb" and res.metric.direction == "minimize" and res.quality == res.val_bpb
    doc = res.to_dict()
    assert doc["metric"] == {"name": "val_bpb", "direction": "minimize", "value": res.val_bpb}
    assert doc["kv_heads"] == [1] and doc["decode"]["context"] == 24
    spec = InputSpec(kind="tokens", seq_len=4, n_classes=2, vocab_size=5)
    split = (torch.zeros(8, 4, dtype=torch.long), torch.zeros(8, dtype=torch.long))
    classify = Task("toy", spec, split, split, split)
    with pytest.raises(ConfigError, match="needs a language-model task"):
        evaluate_variant(
            cfg, classify, TrainConfig(epochs=1), FAST, torch.device("cpu"), decode=DecodeConfig(context=8)
        )


# ------------------------------------------------------------------------------------ command line


def _bad(args: list[str], message: str, tmp_path, monkeypatch) -> None:
    """One line on stderr naming the problem, a non-zero exit, no traceback, nothing written."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("EXPLORER_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = CliRunner().invoke(main, args)
    assert result.exit_code != 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.stderr
    assert "Traceback" not in result.output and result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not cache.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["space", "--d-model", "64", "--kv", "--head-dim", "4", "--min-dk", "16"], "choose head_dim >= 16"),
        (["space", "--d-model", "64", "--kv", "--min-dk", "128"], "lower --min-dk"),
        (["train", "--heads", "uniform:4", "--kv-heads", "uniform:3"], "choose from 1, 2, 4"),
        (["train", "--heads", "uniform:4", "--kv-heads", "some"], "cannot read kv_heads schedule"),
        (["train", "--head-dim", "wide"], "cannot read head_dim"),
        (["train", "--head-dim", "4", "--min-dk", "8"], "choose head_dim >= 8"),
        (["train", "--task", "text", "--task-opt", "context=1"], "context must be an integer 2..4096"),
        (["train", "--task", "text", "--task-opt", "max_bytes=5"], "max_bytes must be an integer"),
        (["train", "--task", "text", "--decode-context", "0"], "positive integer"),
        (["train", "--task", "digits", "--decode-context", "64"], "needs a language-model task"),
        (["bench", "attention", "--kv-heads", "3"], "choose --kv-heads from 1, 2, 4, 8"),
        (["bench", "attention", "--context", "64"], "add --decode"),
        (["bench", "attention", "--decode", "--seq-len", "9"], "give --context instead"),
        (["bench", "attention", "--decode", "--context", "0"], "need d_model, seq_len and batch >= 1"),
        (["bench", "attention", "--decode", "--kv-heads", "5", "--out", "out"], "choose --kv-heads from"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(args, message, tmp_path, monkeypatch):
    _bad(args, message, tmp_path, monkeypatch)


def test_space_lists_kv_pairs_as_json():
    result = CliRunner().invoke(main, ["space", "--d-model", "64", "--min-dk", "16", "--kv", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    pairs = {(p["heads"], p["kv_heads"]) for p in doc["pairs"]}
    assert pairs == {(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4)}
    assert all(
        p["d_k"] == 64 // p["heads"] and p["kv_bytes_per_token_per_layer"] == 8 * p["kv_heads"] * p["d_k"]
        for p in doc["pairs"]
    )


def test_bench_decode_json(tmp_path):
    args = ["bench", "attention", "--decode", "--context", "32", "--d-model", "32", "--heads", "4"]
    args += ["--kv-heads", "2", "--batch", "1", "--threads", "1", "--min-run-time", "0.02", "--json"]
    args += ["--out", str(tmp_path / "b")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["shape"] == {
        "d_model": 32,
        "heads": 4,
        "kv_heads": 2,
        "batch": 1,
        "mode": "decode",
        "context": 32,
    }
    assert [r["impl"] for r in doc["rows"]] == list(DECODE_IMPLS)
    assert (tmp_path / "b" / "bench.csv").is_file()


def test_train_text_with_kv_heads_json(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    args = ["train", "--task", "text", "--task-opt", "context=32", "--task-opt", "max_bytes=20000"]
    args += ["--d-model", "16", "--layers", "1", "--heads", "uniform:2", "--kv-heads", "uniform:1"]
    args += ["--head-dim", "12", "--epochs", "1", "--latency-batch", "2", "--decode-context", "16", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["model"]["kv_heads"] == [1] and doc["model"]["head_dim"] == [12] and doc["d_k"] == [12]
    assert doc["metric"]["name"] == "val_bpb" and 0 < doc["val_bpb"] < 8.5
    assert len(doc["corpus_sha256"]) == 64 and doc["decode"]["context"] == 16
