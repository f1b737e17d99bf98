"""`explorer bench attention` and `explorer bench model`: micro-benchmarks on this device."""

from __future__ import annotations

from pathlib import Path

import click

from explorer.cli._common import (
    check_run_time,
    check_threads,
    choice_option,
    emit_json,
    force_option,
    json_option,
    note,
    out_option,
)
from explorer.errors import ConfigError
from explorer.layout import DEVICE_NAMES, LATENCY_RUNTIMES

# --------------------------------------------------------------------------------------------- bench


@click.group()
def bench() -> None:
    """Micro-benchmarks on this device."""


@bench.command("attention")
@click.option("--d-model", type=int, default=384, show_default=True)
@click.option("--heads", type=int, default=8, show_default=True)
@click.option("--kv-heads", type=int, help="Key/value heads, dividing --heads (default: --heads).")
@click.option("--seq-len", type=int, default=197, show_default=True, help="Positions of the forward pass.")
@click.option("--batch", type=int, default=8, show_default=True)
@click.option("--decode", is_flag=True, help="Time one new token against a key/value cache of --context.")
@click.option("--context", type=int, help="Cached positions in --decode mode (default 512).")
@click.option("--device", default="auto", show_default=True, help=f"{DEVICE_NAMES}.")
@click.option("--threads", type=int, default=None, help="CPU threads (default: all torch uses).")
@click.option("--min-run-time", type=float, default=1.0, show_default=True, help="Seconds timed per impl.")
@choice_option(
    "--runtime",
    LATENCY_RUNTIMES,
    "What runs each implementation while timed (onnxruntime needs the onnx extra).",
)
@json_option
@out_option("Write bench.csv and bench.png here.")
@force_option
def bench_attention_cmd(
    d_model: int,
    heads: int,
    kv_heads: int | None,
    seq_len: int,
    batch: int,
    decode: bool,
    context: int | None,
    device: str,
    threads: int | None,
    min_run_time: float,
    runtime: str,
    as_json: bool,
    out: Path | None,
    force: bool,
) -> None:
    """Serial loop vs merged matmul vs fused kernel vs torch.nn.MultiheadAttention (the tutorial's table).

    With --decode: one new token per sequence against a key/value cache of --context positions (the three
    implementations; fewer --kv-heads shrink the cache each step reads).
    """
    from explorer.measure import plan_bench
    from explorer.output import OutputFolder, write_bench

    if threads is not None:
        check_threads(threads)
    check_run_time(min_run_time)
    if not decode and context is not None:
        raise ConfigError("--context is the cache length of --decode mode; add --decode (or drop --context).")
    ctx = click.get_current_context()
    if decode and ctx.get_parameter_source("seq_len") is not click.core.ParameterSource.DEFAULT:
        raise ConfigError("--seq-len is the forward pass's length; in --decode mode give --context instead.")
    plan = plan_bench(
        d_model,
        heads,
        kv_heads,
        seq_len,
        batch,
        decode=decode,
        context=context,
        device=device,
        threads=threads,
        min_run_time=min_run_time,
        runtime=runtime,
    )
    folder = OutputFolder(out, force) if out is not None else None  # checked before the benchmark runs
    if not as_json:
        note(f"timing {plan.what} ...")
    df = plan.run()
    written = write_bench(df, folder, decode) if folder is not None else []
    if as_json:
        emit_json(
            {"shape": plan.shape, "rows": df.to_dict(orient="records"), "files": [str(p) for p in written]}
        )
        return
    click.echo(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for path in written:
        note(f"wrote {path}")


@bench.command("model")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--batch", type=int, help="Batch size (default: the study's latency batch).")
@click.option("--threads", type=int, help="CPU threads (default: the study's latency threads).")
@click.option("--device", default="cpu", show_default=True, help=f"{DEVICE_NAMES}.")
@click.option("--min-run-time", type=float, default=1.0, show_default=True, help="Seconds timed.")
@json_option
def bench_model_cmd(
    path: Path, batch: int | None, threads: int | None, device: str, min_run_time: float, as_json: bool
) -> None:
    """Time a model `explorer export` wrote (.onnx on ONNX Runtime, .pt2 via torch.export, .pt eagerly) and
    compare it with the study's figure for that trial and its spread."""
    from explorer.measure import bench_model, resolve_device

    result = bench_model(path, batch, threads, resolve_device(device), min_run_time)
    doc = result.to_dict()
    if as_json:
        emit_json(doc)
        return
    lat = result.latency
    click.echo(
        f"{path}: {lat.median_ms:.3f} ms per batch (IQR {lat.iqr_ms:.3f}) on {lat.runtime}, batch "
        f"{lat.batch_size}, seq {lat.seq_len}, {lat.threads} thread(s), {lat.device}"
    )
    st = result.study
    if st:
        verdict = "within" if result.within_spread else "outside"
        setup = "" if result.same_setup else " (measured differently: compare with care)"
        click.echo(
            f"study figure for trial #{st['trial']}: {st['median_ms']:.3f} ms [{st['low']:.3f}, {st['high']:.3f}] "
            f"on {st['runtime']}, batch {st['batch_size']}; this timing is {verdict} that spread, ratio "
            f"{doc['ratio_to_study']:.3f}{setup}"
        )
