"""Latency where the model will run: runtimes (eager, torch.compile, ONNX Runtime), the deployment shape, the
cache key, spec keys, and one-line errors for a missing extra or an unknown runtime."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from click.testing import CliRunner

import explorer.model._runtime as runtime
from explorer.cli import main
from explorer.errors import EXIT_ENVIRONMENT, ConfigError, MissingExtraError, SpecError
from explorer.layout import InputSpec, LatencyConfig, ModelConfig
from explorer.measure import model_latency
from explorer.measure._latency import latency_key
from explorer.model import build_model
from explorer.spec import spec_from_dict

TOKENS = InputSpec(kind="tokens", seq_len=8, n_classes=3, vocab_size=11)
SMALL = ModelConfig(d_model=16, heads=(2, 4))
FAST = LatencyConfig(device="cpu", batch_size=2, threads=1, min_run_time=0.02)
CPU = torch.device("cpu")
has_onnx = all(importlib.util.find_spec(p) for p in runtime.ONNX_PACKAGES)
needs_onnx = pytest.mark.skipif(not has_onnx, reason="needs the onnx extra (onnx, onnxruntime, onnxscript)")


def base_spec(**latency) -> dict:
    return {
        "name": "rt",
        "n_trials": 2,
        "task": {"name": "digits"},
        "space": {"d_model": [16], "n_layers": [2], "heads": [1, 2]},
        "latency": latency,
    }


@pytest.fixture
def no_onnxruntime(monkeypatch):
    """Pretend onnxruntime is not installed (the other packages still are)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        runtime.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "onnxruntime" else real(name, *a),
    )


def test_latency_config_checks_runtime_and_deployment_shape():
    assert LatencyConfig().runtime == "eager" and LatencyConfig().seq_len is None
    assert LatencyConfig(runtime="onnxruntime", seq_len=32).seq_len == 32
    with pytest.raises(ConfigError, match="runtime must be one of eager, compile, onnxruntime"):
        LatencyConfig(runtime="tensorrt")
    with pytest.raises(ConfigError, match="seq_len must be at least 1"):
        LatencyConfig(seq_len=0)
    with pytest.raises(ConfigError, match="float32"):
        LatencyConfig(device="cuda", dtype="bfloat16", runtime="onnxruntime")


def test_spec_reads_runtime_and_seq_len_strictly():
    spec = spec_from_dict(base_spec(runtime="compile", seq_len=64, batch_size=1))
    assert (spec.latency.runtime, spec.latency.seq_len, spec.latency.batch_size) == ("compile", 64, 1)
    assert spec_from_dict(spec.to_dict()) == spec  # stored with the study and read back the same
    assert spec_from_dict(base_spec()).latency.runtime == "eager"
    bad = [
        (
            {"runtime": "tvm"},
            "'runtime' in \\[latency\\] is 'tvm'; choose one of eager, compile, onnxruntime",
        ),
        ({"seq_len": 0}, "'seq_len' in \\[latency\\] must be an integer >= 1"),
        ({"seq_len": "long"}, "'seq_len' in \\[latency\\] must be an integer >= 1"),
        ({"runtime": "onnxruntime", "device": "cuda", "dtype": "float16"}, "times float32 models"),
    ]
    for latency, message in bad:
        with pytest.raises(SpecError, match=message) as info:
            spec_from_dict(base_spec(**latency))
        assert "\n" not in str(info.value)


def test_latency_key_names_the_runtime_and_the_deployment_shape():
    eager = latency_key(SMALL, TOKENS, FAST, CPU)
    # figures cached before runtimes existed stay valid
    assert "eager" not in eager and "compile" not in eager
    compiled = latency_key(SMALL, TOKENS, LatencyConfig(batch_size=2, runtime="compile"), CPU)
    longer = latency_key(SMALL, TOKENS, LatencyConfig(batch_size=2, seq_len=16), CPU)
    same = latency_key(SMALL, TOKENS, LatencyConfig(batch_size=2, seq_len=8), CPU)  # the task's own length
    assert compiled.endswith("|compile") and "_T16_" in longer and "_T8_" in eager
    assert same == eager and len({eager, compiled, longer}) == 3


def test_model_latency_times_the_deployment_shape_not_the_training_one():
    res = model_latency(SMALL, TOKENS, LatencyConfig(batch_size=3, seq_len=20, min_run_time=0.02), CPU)
    assert (res.batch_size, res.seq_len, res.runtime) == (3, 20, "eager")  # built and fed at 20 positions


def test_missing_onnx_extra_is_one_line_naming_the_extra(no_onnxruntime, tmp_path):
    with pytest.raises(MissingExtraError) as info:
        model_latency(SMALL, TOKENS, LatencyConfig(batch_size=2, runtime="onnxruntime"), CPU)
    assert "pip install 'explorer[onnx]'" in str(info.value) and "onnxruntime" in str(info.value)
    assert info.value.exit_code == EXIT_ENVIRONMENT
    runner = CliRunner()
    for args in (
        [
            "bench",
            "attention",
            "--runtime",
            "onnxruntime",
            "--d-model",
            "16",
            "--heads",
            "2",
            "--out",
            str(tmp_path / "b"),
        ],
        ["train", "--latency-runtime", "onnxruntime", "--epochs", "1"],
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == EXIT_ENVIRONMENT, result.output
        assert result.stderr.strip().count("\n") == 0 and "explorer[onnx]" in result.stderr
        assert result.stdout == ""
    assert not (tmp_path / "b").exists()  # nothing written


def test_unknown_runtime_on_the_command_line_is_a_usage_error():
    result = CliRunner().invoke(main, ["bench", "attention", "--runtime", "tvm"])
    assert result.exit_code == 2 and "tvm" in result.stderr


def _small_model_and_batch(batch: int) -> tuple[torch.nn.Module, torch.Tensor]:
    """The SMALL model in eval mode and a batch of token ids, from seed 0 (the global RNG left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return build_model(SMALL, TOKENS).eval(), torch.randint(11, (batch, 8))


@needs_onnx
@pytest.mark.slow
def test_onnxruntime_runner_matches_eager_and_is_timed_as_such(one_thread):
    model, x = _small_model_and_batch(4)
    with torch.inference_mode():
        expected = model(x)
        runner = runtime.prepare_runner(model, x, CPU, "onnxruntime")
        got = runner.output()
    assert runner.runtime == "onnxruntime" and runner.detail == "CPUExecutionProvider"
    assert (got - expected).abs().max().item() < 1e-5
    res = model_latency(
        SMALL, TOKENS, LatencyConfig(batch_size=4, runtime="onnxruntime", min_run_time=0.02), CPU
    )
    assert res.runtime == "onnxruntime" and res.median_ms > 0 and res.batch_size == 4


@pytest.mark.slow
def test_compile_runner_matches_eager(one_thread):
    model, x = _small_model_and_batch(2)
    with torch.inference_mode():
        expected = model(x)
        runner = runtime.prepare_runner(model, x, CPU, "compile")
        assert torch.allclose(runner.output(), expected, atol=1e-5)
    assert runner.runtime == "compile"


@needs_onnx
@pytest.mark.slow
def test_bench_attention_runtime_option_times_onnxruntime(one_thread, tmp_path):
    args = ["bench", "attention", "--d-model", "16", "--heads", "2", "--seq-len", "4", "--batch", "2"]
    args += ["--threads", "1", "--min-run-time", "0.02", "--runtime", "onnxruntime", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["shape"]["runtime"] == "onnxruntime" and {r["runtime"] for r in doc["rows"]} == {"onnxruntime"}
    assert all(r["max_abs_diff"] < 1e-5 for r in doc["rows"])


def test_require_onnx_names_the_onnx_extra_for_a_missing_package(monkeypatch):
    from explorer.model import require_onnx

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnxscript" else real(name, *a)
    )
    with pytest.raises(MissingExtraError, match=r"exporting needs onnxscript.*explorer\[onnx\]"):
        require_onnx("exporting")


ONNX_SPEC = InputSpec(kind="features", seq_len=4, n_classes=3, n_features=2)


@needs_onnx
def test_onnx_bytes_is_a_model_of_input_x_and_output_logits_for_any_batch():
    import onnx
    import onnxruntime as ort

    from explorer.model import onnx_bytes, runtime_version

    model = build_model(ModelConfig(d_model=8, heads=(2,)), ONNX_SPEC).eval()
    example = torch.randn(1, ONNX_SPEC.seq_len, ONNX_SPEC.n_features)
    proto = onnx.load_from_string(onnx_bytes(model, example))
    assert [i.name for i in proto.graph.input] == ["x"] and [o.name for o in proto.graph.output] == ["logits"]
    session = ort.InferenceSession(proto.SerializeToString())
    x = torch.randn(3, ONNX_SPEC.seq_len, ONNX_SPEC.n_features)
    (out,) = session.run(None, {"x": x.numpy()})
    with torch.no_grad():
        assert torch.allclose(torch.from_numpy(out), model(x), atol=1e-4)  # batch 3 from a batch-1 example
    assert runtime_version("onnxruntime") == f"ort{ort.__version__}" and runtime_version("eager") == ""


def test_quiet_torch_keeps_the_exporters_chatter_off_stdout(capsys):
    import warnings

    from explorer.model import quiet_torch

    with quiet_torch():
        print("exporting...")
        warnings.warn("a warning for developers", UserWarning, stacklevel=1)
    assert capsys.readouterr().out == ""
