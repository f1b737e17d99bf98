"""`explorer space` and `explorer train`: the head rules, and one variant trained and timed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from explorer.cli._common import check_threads, emit_json, json_option, note, parse_options, threads_option
from explorer.errors import ConfigError
from explorer.fields import option_default
from explorer.layout import ATTENTION_IMPLS, DEVICE_NAMES, LATENCY_RUNTIMES, LatencyConfig, SpaceSpec
from explorer.spec import StudySpec, TaskSpec

# The options of `space` and `train` that are spec keys: (the table's dataclass, the key). Each takes the key's
# default, so `--help`, docs/spec.md and a spec without the key agree.
SPEC_OPTIONS: dict[str, tuple[type, str]] = {
    "--min-dk": (SpaceSpec, "min_dk"),
    "--mlp-ratio": (SpaceSpec, "mlp_ratio"),
    "--attention": (SpaceSpec, "attention"),
    "--lr": (SpaceSpec, "lr"),
    "--epochs": (TaskSpec, "epochs"),
    "--batch-size": (TaskSpec, "batch_size"),
    "--seed": (StudySpec, "seed"),
    "--device": (LatencyConfig, "device"),
    "--latency-batch": (LatencyConfig, "batch_size"),
    "--latency-threads": (LatencyConfig, "threads"),
    "--latency-runtime": (LatencyConfig, "runtime"),
}


def spec_option(flag: str, **kwargs: Any) -> Callable[[Any], Any]:
    """A click option whose default is its spec key's (:data:`SPEC_OPTIONS`)."""
    cls, name = SPEC_OPTIONS[flag]
    return click.option(flag, default=option_default(cls, name), show_default=True, **kwargs)


# --------------------------------------------------------------------------------------------- space


@click.command()
@click.option("--d-model", type=int, required=True, help="Model width.")
@spec_option("--min-dk", type=int, help="Floor on d_k = d_model / heads.")
@click.option("--kv", is_flag=True, help="List valid (heads, kv_heads) pairs: grouped/multi-query attention.")
@click.option(
    "--head-dim", type=int, help="Head width apart from d_model / heads (heads up to d_model // head_dim)."
)
@json_option
def space(d_model: int, min_dk: int, kv: bool, head_dim: int | None, as_json: bool) -> None:
    """List the valid head counts for a width and d_k floor, with their d_k (and kv_heads with --kv)."""
    from explorer.layout import valid_head_pairs, valid_heads
    from explorer.limits import D_MODEL, HEAD_DIM, HEADS

    D_MODEL.check(d_model, "--d-model", "give a narrower width")
    if head_dim is not None:
        HEAD_DIM.check(head_dim, "--head-dim", "give a narrower head")
        if head_dim >= 1 and d_model >= 1:  # the pairs list every count up to d_model // head_dim
            HEADS.check(
                d_model // head_dim, "the head counts --d-model / --head-dim allows", "raise --head-dim"
            )

    if kv or head_dim is not None:
        pairs = valid_head_pairs(d_model, min_dk, head_dim=head_dim)
        if not kv:
            pairs = [p for p in pairs if p.kv_heads == p.heads]
        if not pairs:
            raise ConfigError(
                f"no head count gives d_k >= {min_dk} at d_model={d_model}; lower --min-dk to at most {d_model}."
            )
        rows = [
            {**p._asdict(), "group": p.group, "kv_bytes_per_token_per_layer": 2 * p.kv_heads * p.d_k * 4}
            for p in pairs
        ]
        if as_json:
            emit_json({"d_model": d_model, "min_dk": min_dk, "head_dim": head_dim, "pairs": rows})
            return
        width = f"head_dim={head_dim}" if head_dim is not None else f"d_k = {d_model}/heads"
        click.echo(f"d_model={d_model}, min_dk={min_dk}, {width}: {len(rows)} valid (heads, kv_heads) pairs")
        click.echo(
            f"{'heads':>6}  {'kv_heads':>8}  {'group':>5}  {'d_k':>5}  {'kv bytes/token/layer (fp32)':>28}"
        )
        for r in rows:
            click.echo(
                f"{r['heads']:>6}  {r['kv_heads']:>8}  {r['group']:>5}  {r['d_k']:>5}  "
                f"{r['kv_bytes_per_token_per_layer']:>28,}"
            )
        return
    heads = valid_heads(d_model, min_dk)
    if not heads:
        raise ConfigError(
            f"no head count gives d_k >= {min_dk} at d_model={d_model}; lower --min-dk to at most {d_model}."
        )
    d_k = [d_model // h for h in heads]
    if as_json:
        emit_json({"d_model": d_model, "min_dk": min_dk, "heads": heads, "d_k": d_k})
        return
    click.echo(f"d_model={d_model}, min_dk={min_dk}: {len(heads)} valid head counts")
    click.echo(f"{'heads':>6}  {'d_k':>5}")
    for h, k in zip(heads, d_k, strict=True):
        click.echo(f"{h:>6}  {k:>5}")


# --------------------------------------------------------------------------------------------- train


@click.command()
@click.option(
    "--task",
    default="digits",
    show_default=True,
    help="digits, mnist, relations, text, a PATH.npz file, or your function: module:function or file.py:function.",
)
@click.option(
    "--build",
    metavar="REF",
    help="Your model: a function (module:function or file.py:function) building it from the layout and input spec.",
)
@click.option("--task-opt", "task_opts", multiple=True, metavar="KEY=VALUE", help="Task option (repeatable).")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A config written by `explorer export` (overrides the model and training options).",
)
@click.option("--d-model", type=int, default=64, show_default=True, help="Model width.")
@click.option("--layers", type=int, default=4, show_default=True, help="Number of encoder layers.")
@click.option(
    "--heads",
    default="increasing:2-8",
    show_default=True,
    help="Head schedule: uniform:8, increasing:4-16, decreasing:16-4 or 4,4,8,16.",
)
@spec_option("--min-dk", type=int, help="Floor on d_k = d_model / heads.")
@click.option(
    "--kv-heads",
    help="Key/value heads per layer, written like --heads (uniform:2, decreasing:8-2, 4,4,2,1); default: heads.",
)
@click.option(
    "--head-dim", help="Head width apart from d_model / heads: one width (64) or one per layer (64,64,128)."
)
@spec_option("--mlp-ratio", type=float, help="MLP width / d_model.")
@spec_option("--attention", type=click.Choice(ATTENTION_IMPLS), help="Attention implementation.")
@spec_option("--epochs", type=int)
@spec_option("--batch-size", type=int, help="Training batch size.")
@spec_option("--lr", type=float, help="Peak learning rate.")
@spec_option("--seed", type=int)
@spec_option("--device", help=f"{DEVICE_NAMES}.")
@spec_option("--latency-batch", type=int, help="Batch size for timing.")
@spec_option("--latency-threads", type=int, help="CPU threads while timing.")
@spec_option(
    "--latency-runtime",
    type=click.Choice(LATENCY_RUNTIMES),
    help="What runs the timed model (onnxruntime needs the onnx extra).",
)
@click.option(
    "--decode-context",
    type=int,
    help="Also time decoding: ms per new token against a kv cache of this many positions (--task text).",
)
@threads_option
@json_option
def train(
    task: str,
    build: str | None,
    task_opts: tuple[str, ...],
    config_path: Path | None,
    d_model: int,
    layers: int,
    heads: str,
    min_dk: int,
    kv_heads: str | None,
    head_dim: str | None,
    mlp_ratio: float,
    attention: str,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    device: str,
    latency_batch: int,
    latency_threads: int,
    latency_runtime: str,
    decode_context: int | None,
    threads: int,
    as_json: bool,
) -> None:
    """Train one variant; report accuracy (bits per byte for text), latency, parameters, FLOPs and time."""
    # click hands each of the command's options to it as a parameter: the body checks them, plans the run as
    # explorer.api.train does (explorer.measure.plan_train), runs it and prints.
    check_threads(threads)
    _check_train_sizes(d_model, layers, latency_batch, latency_threads, decode_context)
    from explorer.layout import LatencyConfig, ModelConfig, TrainConfig
    from explorer.measure import load_run_config, plan_train, train_planned

    options = parse_options(task_opts)
    stop_after, hf = None, None
    names = None  # how a refused epochs or batch size is named: a run config's fields, else the flags
    if config_path is not None:
        run = load_run_config(config_path)
        task, options, model_cfg, train_cfg = run.task, run.task_options, run.model, run.train
        stop_after, build, hf = run.stop_after, build or run.build, None if build else run.hf
    else:
        model_cfg = ModelConfig.from_schedule(
            d_model,
            layers,
            heads,
            min_dk=min_dk,
            kv_heads=kv_heads,
            head_dim=head_dim,
            mlp_ratio=mlp_ratio,
            attention=attention,
        )
        train_cfg = TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
        names = {"epochs": ("--epochs", "lower it"), "batch_size": ("--batch-size", "lower it")}
    lat_cfg = LatencyConfig(
        device=device, batch_size=latency_batch, threads=latency_threads, runtime=latency_runtime
    )
    plan = plan_train(
        model_cfg,
        train_cfg,
        latency=lat_cfg,
        decode_context=decode_context,
        threads=threads,
        names=names,
    )
    started = (
        ""
        if as_json
        else (
            f"training {task}: d_model={model_cfg.d_model}, heads per layer {list(model_cfg.heads)}, "
            f"kv_heads {list(model_cfg.kv_per_layer)}, d_k {list(model_cfg.d_k)}"
        )
    )
    progress = _EpochBar(stop_after or train_cfg.epochs, started)
    try:
        trained = train_planned(
            plan,
            task,
            task_options=options,
            build=build,
            hf=hf,
            stop_after=stop_after,
            on_start=progress.start,
            on_epoch=progress.epoch,
        )
    finally:
        progress.close()
    if as_json:
        emit_json(trained.to_dict())
        return
    _print_trained(trained)


class _EpochBar:
    """`train`'s stderr while it trains: a line saying what (``started``; empty: none), then a bar over the
    epochs, shown once every input has been checked."""

    def __init__(self, total: int, started: str):
        self.total, self.started = total, started
        self.bar: Any = None  # a tqdm bar, once started

    def start(self) -> None:
        from tqdm import tqdm

        if self.started:
            note(self.started)
        # disable=None: no bar where stderr is not a terminal (the trained variant's report follows anyway)
        self.bar = tqdm(
            total=self.total, desc="epochs", unit="ep", file=sys.stderr, leave=False, disable=None
        )

    def epoch(self, stats: Any) -> None:
        val = stats.val_accuracy if stats.val_bpb is None else stats.val_bpb
        self.bar.set_postfix(loss=f"{stats.train_loss:.3f}", val=f"{val:.3f}")
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _print_trained(trained: Any) -> None:
    """The human-readable report of one trained variant (an explorer.measure._evaluate.TrainedVariant)."""
    result, loaded, build, model_cfg = trained.result, trained.task, trained.build, trained.result.config
    lat = result.latency
    click.echo(f"task            {loaded.name} ({result.device})")
    if build is not None:
        click.echo(f"model           built by {build}")
    click.echo(f"heads / layer   {list(model_cfg.heads)}   d_k {list(model_cfg.d_k)}")
    if model_cfg.kv_heads is not None:
        click.echo(f"kv heads        {list(model_cfg.kv_per_layer)}")
    if result.val_bpb is not None:
        click.echo(f"val bits/byte   {result.val_bpb:.4f} ({loaded.val[1].numel():,} bytes)")
        click.echo(
            f"test bits/byte  {result.test_bpb:.4f}   next-byte accuracy {result.val_accuracy:.4f} (val)"
        )
        click.echo(f"corpus sha256   {loaded.corpus_hash}")
    else:
        click.echo(f"val accuracy    {result.val_accuracy:.4f} ({result.val_size} examples)")
        click.echo(f"test accuracy   {result.test_accuracy:.4f}")
    click.echo(
        f"latency         {lat.median_ms:.3f} ms/batch (IQR {lat.iqr_ms:.3f}) at batch {lat.batch_size}, "
        f"seq {lat.seq_len}, {lat.threads} thread(s), {lat.runtime}{_cache_note(lat)}"
    )
    if result.decode is not None:
        dec = result.decode
        click.echo(
            f"decoding        {dec.ms_per_token:.3f} ms/token (IQR {dec.latency.iqr_ms:.3f}) against a kv cache of "
            f"{dec.context} at batch {dec.latency.batch_size}{_cache_note(dec.latency)}"
        )
    click.echo(f"kv cache        {result.kv_cache_bytes_per_token:,} bytes/token ({lat.dtype})")
    click.echo(f"params          {result.params:,}")
    click.echo(f"FLOPs/example   {result.flops:,}")
    click.echo(
        f"training        {result.fit.train_time_s:.1f} s, {result.fit.epochs_run} epochs, "
        f"{result.fit.samples_per_s:.0f} samples/s"
    )


def _check_train_sizes(
    d_model: int, layers: int, latency_batch: int, latency_threads: int, decode_context: int | None
) -> None:
    """`train`'s sizes within explorer.limits, before a schedule is expanded or torch imported (``--threads``:
    :func:`check_threads`; the epochs and batch size: the plan, :func:`explorer.measure.plan_train`)."""
    from explorer.limits import BATCH, D_MODEL, LAYERS, SEQ_LEN, THREADS

    for limit, value, flag in (
        (D_MODEL, d_model, "--d-model"),
        (LAYERS, layers, "--layers"),
        (BATCH, latency_batch, "--latency-batch"),
        (THREADS, latency_threads, "--latency-threads"),
        (SEQ_LEN, decode_context or 0, "--decode-context"),
    ):
        limit.check(value, flag)


def _cache_note(lat: Any) -> str:
    """`` [from the cache, measured 3.0 h ago]`` for a cached figure, else nothing."""
    if not lat.cached:
        return ""
    from explorer.measure import describe_age, result_age_s

    return f" [from the cache, measured {describe_age(result_age_s(lat))} ago]"
