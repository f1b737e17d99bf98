"""The ``explorer`` command line: a thin click group over :mod:`explorer.api` and the stage packages.

Each command parses its options, calls one library function and prints. Heavy imports (torch, optuna, seaborn)
happen inside the commands so ``explorer --help`` and read-only commands start fast. Every
:class:`~explorer.errors.ExplorerError` becomes one line on stderr and its exit code, never a traceback (``-v``
shows one). ``--json`` prints exactly one JSON document on stdout; progress and notes go to stderr.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from explorer.errors import ConfigError, ExplorerError


class ExplorerGroup(click.Group):
    """A click group that turns library errors into one clear line and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ExplorerError as exc:
            if ctx.obj and ctx.obj.get("verbose"):
                raise
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)


def _emit_json(doc: Any) -> None:
    def plain(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        return v

    click.echo(json.dumps(plain(doc), indent=2, default=str))


def _note(message: str) -> None:
    click.echo(message, err=True)


def _parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """Turn repeated ``key=value`` into a dict, reading numbers and booleans as such."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"task option {pair!r} is not key=value; write e.g. --task-opt n_relations=4.")
        try:
            options[key] = json.loads(raw)
        except json.JSONDecodeError:
            options[key] = raw
    return options


def _quiet_optuna() -> None:
    """Optuna's per-trial log lines would break the progress bar; `-v` turns them back on."""
    import optuna

    root = click.get_current_context().find_root()
    if not (root.obj or {}).get("verbose"):
        optuna.logging.set_verbosity(optuna.logging.ERROR)


def _heads_text(heads: Any) -> str:
    return ",".join(map(str, heads))


@click.group(cls=ExplorerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(package_name="explorer")
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """How many attention heads, per layer, should your Transformer have? Measure it.

    Build encoder variants under the head rules, train them on a real task, time them on your device,
    search the trade-off with Optuna, and write a recommendation report.
    """
    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose
    if verbose:
        import logging

        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)


# Options several commands share, declared once.
_storage_option = click.option("--storage", help="Storage URL (default: sqlite:///studies/NAME.db).")
_trial_option = click.option(
    "--trial",
    "which",
    default="knee",
    show_default=True,
    help="knee, most-accurate, fastest or a trial number.",
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
_threads_option = click.option(
    "--threads", type=int, default=1, show_default=True, help="CPU threads for training (per worker)."
)
_force_option = click.option(
    "--force", is_flag=True, help="Write into a folder holding other files (they are left alone)."
)


def _check_threads(threads: int) -> None:
    if threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {threads}.")


# --------------------------------------------------------------------------------------------- space


@main.command()
@click.option("--d-model", type=int, required=True, help="Model width.")
@click.option("--min-dk", type=int, default=16, show_default=True, help="Floor on d_k = d_model / heads.")
@click.option("--kv", is_flag=True, help="List valid (heads, kv_heads) pairs: grouped/multi-query attention.")
@click.option(
    "--head-dim", type=int, help="Head width apart from d_model / heads (heads up to d_model // head_dim)."
)
@_json_option
def space(d_model: int, min_dk: int, kv: bool, head_dim: int | None, as_json: bool) -> None:
    """List the valid head counts for a width and d_k floor, with their d_k (and kv_heads with --kv)."""
    from explorer.engine.config import valid_head_pairs, valid_heads

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
            _emit_json({"d_model": d_model, "min_dk": min_dk, "head_dim": head_dim, "pairs": rows})
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
        _emit_json({"d_model": d_model, "min_dk": min_dk, "heads": heads, "d_k": d_k})
        return
    click.echo(f"d_model={d_model}, min_dk={min_dk}: {len(heads)} valid head counts")
    click.echo(f"{'heads':>6}  {'d_k':>5}")
    for h, k in zip(heads, d_k, strict=True):
        click.echo(f"{h:>6}  {k:>5}")


# --------------------------------------------------------------------------------------------- train


@main.command()
@click.option(
    "--task", default="digits", show_default=True, help="digits, relations, text, or a PATH.npz file."
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
@click.option("--min-dk", type=int, default=8, show_default=True, help="Floor on d_k = d_model / heads.")
@click.option(
    "--kv-heads",
    help="Key/value heads per layer, written like --heads (uniform:2, decreasing:8-2, 4,4,2,1); default: heads.",
)
@click.option(
    "--head-dim", help="Head width apart from d_model / heads: one width (64) or one per layer (64,64,128)."
)
@click.option("--mlp-ratio", type=float, default=4.0, show_default=True, help="MLP width / d_model.")
@click.option(
    "--attention",
    type=click.Choice(["fused", "merged", "serial"]),
    default="fused",
    show_default=True,
    help="Attention implementation.",
)
@click.option("--epochs", type=int, default=15, show_default=True)
@click.option("--batch-size", type=int, default=32, show_default=True, help="Training batch size.")
@click.option("--lr", type=float, default=2e-3, show_default=True, help="Peak learning rate.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--latency-batch", type=int, default=32, show_default=True, help="Batch size for timing.")
@click.option("--latency-threads", type=int, default=1, show_default=True, help="CPU threads while timing.")
@click.option(
    "--decode-context",
    type=int,
    help="Also time decoding: ms per new token against a kv cache of this many positions (--task text).",
)
@_threads_option
@_json_option
def train(
    task: str,
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
    decode_context: int | None,
    threads: int,
    as_json: bool,
) -> None:
    """Train one variant; report accuracy (bits per byte for text), latency, parameters, FLOPs and time."""
    _check_threads(threads)
    import torch
    from tqdm import tqdm

    from explorer.engine.config import DecodeConfig, LatencyConfig, ModelConfig, TrainConfig
    from explorer.engine.evaluate import evaluate_variant
    from explorer.engine.latency_cache import LatencyCache
    from explorer.engine.runconfig import load_run_config
    from explorer.engine.tasks import load_task

    options = _parse_options(task_opts)
    stop_after = None
    if config_path is not None:
        run = load_run_config(config_path)
        task, options, model_cfg, train_cfg, stop_after = (
            run.task,
            run.task_options,
            run.model,
            run.train,
            run.stop_after,
        )
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
    lat_cfg = LatencyConfig(device=device, batch_size=latency_batch, threads=latency_threads)
    decode = None if decode_context is None else DecodeConfig(context=decode_context)
    loaded = load_task(task, **options)
    if decode is not None and not loaded.spec.causal:
        raise ConfigError(f"--decode-context needs a language-model task such as --task text, not {task!r}.")
    torch.set_num_threads(threads)
    if not as_json:
        _note(
            f"training {task}: d_model={model_cfg.d_model}, heads per layer {list(model_cfg.heads)}, "
            f"kv_heads {list(model_cfg.kv_per_layer)}, d_k {list(model_cfg.d_k)}"
        )
    with tqdm(
        total=stop_after or train_cfg.epochs, desc="epochs", unit="ep", file=sys.stderr, leave=False
    ) as bar:

        def on_epoch(stats: Any) -> bool:
            val = stats.val_accuracy if stats.val_bpb is None else stats.val_bpb
            bar.set_postfix(loss=f"{stats.train_loss:.3f}", val=f"{val:.3f}")
            bar.update(1)
            return stop_after is not None and stats.epoch >= stop_after

        result = evaluate_variant(
            model_cfg, loaded, train_cfg, lat_cfg, cache=LatencyCache(), on_epoch=on_epoch, decode=decode
        )
    doc = {"task": loaded.name, "task_options": options, **result.to_dict()}
    if loaded.corpus_hash:
        doc["corpus_sha256"] = loaded.corpus_hash
    if as_json:
        _emit_json(doc)
        return
    lat = result.latency
    click.echo(f"task            {loaded.name} ({result.device})")
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
        f"seq {lat.seq_len}, {lat.threads} thread(s){_cache_note(lat)}"
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


def _cache_note(lat: Any) -> str:
    """`` [from the cache, measured 3.0 h ago]`` for a cached figure, else nothing."""
    if not lat.cached:
        return ""
    from explorer.engine.latency_cache import describe_age, result_age_s

    return f" [from the cache, measured {describe_age(result_age_s(lat))} ago]"


# --------------------------------------------------------------------------------------------- bench


@main.group()
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
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--threads", type=int, default=None, help="CPU threads (default: all torch uses).")
@click.option("--min-run-time", type=float, default=1.0, show_default=True, help="Seconds timed per impl.")
@_json_option
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), help="Write bench.csv and bench.png here."
)
@_force_option
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
    as_json: bool,
    out: Path | None,
    force: bool,
) -> None:
    """Serial loop vs merged matmul vs fused kernel vs torch.nn.MultiheadAttention (the seed's table).

    With --decode: one new token per sequence against a key/value cache of --context positions (the three
    implementations; fewer --kv-heads shrink the cache each step reads).
    """
    from explorer.output.files import OutputFolder

    if threads is not None:
        _check_threads(threads)
    if not min_run_time > 0:
        raise ConfigError(f"--min-run-time must be positive, got {min_run_time:g}.")
    if not decode and context is not None:
        raise ConfigError("--context is the cache length of --decode mode; add --decode (or drop --context).")
    ctx = click.get_current_context()
    if decode and ctx.get_parameter_source("seq_len") is not click.core.ParameterSource.DEFAULT:
        raise ConfigError("--seq-len is the forward pass's length; in --decode mode give --context instead.")
    context = 512 if decode and context is None else context
    from explorer.engine.bench import bench_attention, bench_decode, check_bench_shape

    check_bench_shape(d_model, heads, context if decode else seq_len, batch, kv_heads)
    folder = OutputFolder(out, force) if out is not None else None  # checked before the benchmark runs
    from explorer.engine.device import resolve_device

    kv_text = f", {kv_heads} kv heads" if kv_heads is not None else ""
    if decode:
        if not as_json:
            _note(
                f"timing one decoding step at batch {batch} against a cache of {context}, d_model {d_model}, "
                f"{heads} heads{kv_text} ..."
            )
        df = bench_decode(
            d_model=d_model,
            heads=heads,
            kv_heads=kv_heads,
            context=context,
            batch=batch,
            device=resolve_device(device),
            min_run_time=min_run_time,
            threads=threads,
        )
    else:
        if not as_json:
            _note(
                f"timing attention at batch {batch}, seq {seq_len}, d_model {d_model}, {heads} heads{kv_text} ..."
            )
        df = bench_attention(
            d_model=d_model,
            heads=heads,
            kv_heads=kv_heads,
            seq_len=seq_len,
            batch=batch,
            device=resolve_device(device),
            min_run_time=min_run_time,
            threads=threads,
        )
    written: list[Path] = []
    if folder is not None and decode:
        folder.write("bench.csv", df.to_csv(index=False))  # no figure for the decoding table yet
        written = folder.finish()
    elif folder is not None:
        import tempfile

        from explorer.output.plots import bench_figure, save_png

        folder.write("bench.csv", df.to_csv(index=False))
        with tempfile.TemporaryDirectory() as tmp:
            folder.write(
                "bench.png", save_png(bench_figure(df.to_dict("records")), Path(tmp) / "b.png").read_bytes()
            )
        written = folder.finish()
    if as_json:
        shape = {"d_model": d_model, "heads": heads, "kv_heads": kv_heads or heads, "batch": batch}
        shape |= {"mode": "decode", "context": context} if decode else {"mode": "forward", "seq_len": seq_len}
        _emit_json(
            {
                "shape": shape,
                "rows": df.to_dict(orient="records"),
                "files": [str(p) for p in written],
            }
        )
        return
    click.echo(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for path in written:
        _note(f"wrote {path}")


# --------------------------------------------------------------------------------------------- cache


@main.group()
def cache() -> None:
    """The latency cache ($EXPLORER_CACHE_DIR, default ~/.cache/explorer/latency): list or clear it."""


@cache.command("list")
@_json_option
def cache_list(as_json: bool) -> None:
    """Every cached latency with its age, spread, load when measured, and whether it would be reused."""
    from explorer.engine.latency_cache import LatencyCache, describe_age

    store = LatencyCache()
    now = store.machine()
    rows = []
    for e in store.entries():
        r, age = e.result, e.age_s()
        rows.append(
            {
                "key": e.key,
                "median_ms": r.median_ms,
                "iqr_ms": r.iqr_ms,
                "spread": r.iqr_ms / r.median_ms if r.median_ms > 0 else None,
                "measured_at": r.measured_at,
                "age_s": age,
                "load": r.load,
                "machine": None if e.machine is None else e.machine.to_dict(),
                "reuse": not (why := store.problem(e, now)),
                "remeasure_because": why or None,
                "file": str(e.path),
            }
        )
    if as_json:
        _emit_json({"directory": str(store.directory), "max_age_days": store.policy.max_age_s / 86400,
                    "machine_now": now.to_dict(), "entries": rows})  # fmt: skip
        return
    if not rows:
        click.echo(f"no cached latencies in {store.directory}")
        return
    click.echo(f"{len(rows)} cached latencies in {store.directory}")
    click.echo(f"{'age':>10}  {'median ms':>10}  {'spread':>6}  {'load':>5}  {'reuse':<5}  key")
    for row in rows:
        spread = "-" if row["spread"] is None else f"{row['spread']:.0%}"
        load = "-" if row["load"] is None else f"{row['load']:.2f}"
        click.echo(
            f"{describe_age(row['age_s']):>10}  {row['median_ms']:>10.3f}  {spread:>6}  {load:>5}  "
            f"{'yes' if row['reuse'] else 'no':<5}  {row['key']}"
        )
        if row["remeasure_because"]:
            click.echo(f"{'':>10}  measured again when next asked: {row['remeasure_because']}")


@cache.command("clear")
@click.option(
    "--older-than", "older_than", type=float, metavar="DAYS", help="Remove only entries older than this."
)
def cache_clear(older_than: float | None) -> None:
    """Remove cached latencies (all, or those older than --older-than DAYS); nothing else is touched."""
    if older_than is not None and not (math.isfinite(older_than) and older_than >= 0):
        raise ConfigError(f"--older-than must be a number of days >= 0, got {older_than:g}.")
    from explorer.engine.latency_cache import CachePolicy, LatencyCache

    store = LatencyCache(policy=CachePolicy())  # clearing works even when EXPLORER_CACHE_MAX_AGE is malformed
    removed = store.clear(None if older_than is None else older_than * 86400)
    which = "" if older_than is None else f" older than {older_than:g} days"
    click.echo(f"removed {len(removed)} cached latencies{which} from {store.directory}")


# --------------------------------------------------------------------------------------------- study


@main.group()
def study() -> None:
    """Run, resume and inspect Optuna studies over head counts and schedules."""


def _run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options `study run`, `study resume` and `confirm` share (how long, how many workers, where)."""
    options = [
        click.option("--timeout", type=float, help="Stop starting new trials after this many seconds."),
        click.option(
            "--workers", type=int, default=1, show_default=True, help="Worker processes on this machine."
        ),
        click.option("--device", help="Override the spec's device (auto, cpu, cuda)."),
        _threads_option,
        _json_option,
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _progress(
    handle: Any, as_json: bool
) -> tuple[Callable[..., None], Callable[..., None], Callable[[], None]]:
    """(on_stage, on_progress, close) drawing one tqdm bar per stage on stderr."""
    from tqdm import tqdm

    state: dict[str, Any] = {"bar": None}

    def close() -> None:
        if state["bar"] is not None:
            state["bar"].close()
            state["bar"] = None

    def on_stage(stage: str, total: int) -> None:
        close()
        if not as_json:
            desc = f"{handle.name} {'search' if stage == 'search' else 'finalists'}"
            state["bar"] = tqdm(total=total, desc=desc, unit="trial", file=sys.stderr, dynamic_ncols=True)

    def on_progress(p: Any) -> None:
        bar = state["bar"]
        if bar is None:
            return
        bar.n = min(p.done, p.total)
        best = f"best val {p.best_accuracy:.3f}" if p.best_accuracy is not None else "no result yet"
        bar.set_postfix_str(
            f"{p.epochs} epochs | {p.running} running | {best} | pruned {p.pruned} | failed {p.failed}"
        )
        bar.refresh()

    return on_stage, on_progress, close


def _summary_doc(handle: Any, summary: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return {
        "study": handle.name,
        "storage": handle.masked_url,
        "complete": summary.complete,
        "search": asdict(summary.search),
        "finalists": None if summary.finalists is None else asdict(summary.finalists),
        "finalist_runs_queued": summary.added,
        "next": f"explorer report {handle.name}"
        + ("" if handle.is_default_storage else f" --storage '{handle.masked_url}'"),
    }


def _run_and_report(handle: Any, action: Callable[..., Any], as_json: bool, **kw: Any) -> None:
    """Run a study action with progress; Ctrl-C stops cleanly and says how to resume."""
    where = "" if handle.is_default_storage else f" --storage '{handle.masked_url}'"
    resume = f"explorer study resume {handle.name}{where}"
    on_stage, on_progress, close = _progress(handle, as_json)
    if not as_json:
        _note(f"study {handle.name!r} in {handle.masked_url}: {handle.spec.n_trials} search trials in total")
    try:
        summary = action(handle, on_progress=on_progress, on_stage=on_stage, **kw)
    except KeyboardInterrupt:
        close()
        _note("interrupted: finished trials are saved and the running one will be retried on resume.")
        _note(f"resume with: {resume}")
        sys.exit(130)
    close()
    if as_json:
        _emit_json(_summary_doc(handle, summary))
        return
    s, f = summary.search, summary.finalists
    if s.note.startswith("the search space has no architecture left"):
        _note(f"search: {s.note}, fewer than the {s.total} trials asked for")
    elif s.done < s.total or s.note:
        why = s.note or "timeout"
        _note(f"stopped the search at {s.done}/{s.total} trials ({why}); resume with: {resume}")
    elif f is not None and (f.note or f.done < f.total):
        _note(
            f"stopped the finalists at {f.done}/{f.total} runs ({f.note or 'timeout'}); resume with: {resume}"
        )
    line = f"search: {s.done} trials ({s.pruned} stopped early, {s.failed} failed)"
    if f is not None:
        line += f"; finalists: {f.done} runs ({f.failed} failed)"
    _note(f"{line}. Next: explorer report {handle.name}{where}")


def _options(workers: int, threads: int, device: str | None, timeout: float | None) -> Any:
    from explorer.search.study import RunOptions

    return RunOptions(workers=workers, threads=threads, device=device, timeout=timeout).check()


@study.command("run")
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--storage", help="Storage URL (default: the spec's, else sqlite:///studies/NAME.db).")
@click.option("--n-trials", type=int, help="The study's total of search trials (default: the spec's).")
@click.option("--no-finalists", is_flag=True, help="Stop after the search (no retraining of finalists).")
@_run_options
def study_run(
    spec_path: Path,
    storage: str | None,
    n_trials: int | None,
    no_finalists: bool,
    timeout: float | None,
    workers: int,
    device: str | None,
    threads: int,
    as_json: bool,
) -> None:
    """Run the study a spec describes; running it again resumes it up to its total."""
    options = _options(
        workers, threads, device, timeout
    )  # every option checked before the storage is touched
    from explorer import api
    from explorer.search.spec import load_spec
    from explorer.search.study import prepare_study

    _quiet_optuna()
    handle = prepare_study(load_spec(spec_path), storage, device=device)
    if "spec_path" not in handle.study.user_attrs:
        handle.study.set_user_attr("spec_path", str(spec_path))
    _run_and_report(handle, api.run, as_json, n_trials=n_trials, options=options, finalists=not no_finalists)


@study.command("resume")
@click.argument("name")
@_storage_option
@click.option("--n-trials", type=int, help="A new total of search trials (stored with the study).")
@click.option("--no-finalists", is_flag=True, help="Stop after the search (no retraining of finalists).")
@_run_options
def study_resume(
    name: str,
    storage: str | None,
    n_trials: int | None,
    no_finalists: bool,
    timeout: float | None,
    workers: int,
    device: str | None,
    threads: int,
    as_json: bool,
) -> None:
    """Resume a study from its database alone (its spec is stored with it)."""
    options = _options(workers, threads, device, timeout)
    from explorer import api
    from explorer.search.study import open_study

    _quiet_optuna()
    handle = open_study(name, storage)
    _run_and_report(handle, api.run, as_json, n_trials=n_trials, options=options, finalists=not no_finalists)


@study.command("list")
@click.option("--storage", help="Storage URL (default: every SQLite database in ./studies/).")
@_json_option
def study_list(storage: str | None, as_json: bool) -> None:
    """List the studies in a storage (or in every studies/*.db) with their trial counts."""
    from explorer.search.catalog import list_studies
    from explorer.search.storage import mask_url

    urls = (
        [storage] if storage else [f"sqlite:///{p.as_posix()}" for p in sorted(Path("studies").glob("*.db"))]
    )
    rows = [{**r, "storage": mask_url(url)} for url in urls for r in list_studies(url)]
    if as_json:
        _emit_json(rows)
        return
    if not rows:
        click.echo(
            "no studies " + ("in this storage." if storage else "in studies/*.db; pass --storage URL.")
        )
    for r in rows:
        counts = ", ".join(f"{k.lower()} {v}" for k, v in sorted(r["trials"].items()))
        click.echo(
            f"{r['name']:<24} total {r['total']}  {counts or 'no trials'}  started {r['started']}  ({r['storage']})"
        )


@study.command("status")
@click.argument("name")
@_storage_option
@_json_option
def study_status(name: str, storage: str | None, as_json: bool) -> None:
    """Trials by role and state, early stopping, and the current recommendation of one study."""
    from explorer.search.catalog import study_status as read_status

    doc = read_status(name, storage)
    if as_json:
        _emit_json(doc)
        return
    click.echo(f"study {doc['name']} in {doc['storage']}: search total {doc['total']}")
    for role, counts in doc["trials"].items():
        text = ", ".join(f"{k.lower()} {v}" for k, v in counts.items() if v)
        click.echo(f"  {role}: {text or 'none'}")
    click.echo(f"  stopped early {doc['stopped_early']} trials, {doc['epochs_saved']} epochs saved")
    for r in doc["best"]:
        click.echo(
            f"  #{r['number']:<4} {r['role']:<8} d_model {r['d_model']:<4} heads {_heads_text(r['heads'])}  "
            f"val {r['val_accuracy']:.4f}  {r['latency_ms']:.3f} ms"
        )


# --------------------------------------------------------------------------------------------- report


@main.command()
@click.argument("name")
@_storage_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Default: reports/NAME.")
@_force_option
@_json_option
def report(name: str, storage: str | None, out: Path | None, force: bool, as_json: bool) -> None:
    """Write the recommendation report, figures and CSVs for a study."""
    from explorer import api

    _quiet_optuna()
    paths = api.report(name, storage, out, force)
    if as_json:
        _emit_json({"study": name, "out": str(paths.out_dir), "files": [str(p) for p in paths.files]})
        return
    click.echo(f"wrote the report for {name!r} to {paths.out_dir}/: report.html, report.md, figures and CSVs")


@main.command()
@click.argument("name")
@_storage_option
@_trial_option
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="FILE.json to write."
)
@_json_option
def export(name: str, storage: str | None, which: str, out: Path, as_json: bool) -> None:
    """Write a trial's config so `explorer train --config FILE.json` rebuilds and retrains it exactly."""
    from explorer import api

    _quiet_optuna()
    record = api.export(name, out, which, storage)
    if as_json:
        _emit_json({"study": name, "trial": record.number, "heads": list(record.heads), "out": str(out)})
        return
    click.echo(
        f"wrote trial #{record.number} of {name!r} to {out}; retrain with: explorer train --config {out}"
    )


# --------------------------------------------------------------------------------------------- evidence


@main.command()
@click.argument("name")
@_storage_option
@click.option(
    "--top", type=int, help="Front architectures nearest the knee to retrain (default: the spec's)."
)
@click.option("--seeds", type=int, help="Fresh seeds per finalist (default: the spec's).")
@_run_options
def confirm(
    name: str,
    storage: str | None,
    top: int | None,
    seeds: int | None,
    timeout: float | None,
    workers: int,
    device: str | None,
    threads: int,
    as_json: bool,
) -> None:
    """Run the finalist stage now, with more finalists or seeds; runs already done are kept (resumable)."""
    options = _options(workers, threads, device, timeout)
    from explorer import api
    from explorer.search.study import open_study

    _quiet_optuna()
    handle = open_study(name, storage)
    _run_and_report(handle, api.confirm, as_json, top=top, seeds=seeds, options=options)


@main.command()
@click.argument("name")
@_storage_option
@_trial_option
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Default: reports/NAME-heads.")
@_threads_option
@_force_option
@_json_option
def heads(
    name: str,
    storage: str | None,
    which: str,
    device: str,
    out: Path | None,
    threads: int,
    force: bool,
    as_json: bool,
) -> None:
    """What each head of a trained finalist does: importance, masking, entropy, similarity, attention maps."""
    _check_threads(threads)
    import torch

    from explorer import api

    _quiet_optuna()
    torch.set_num_threads(threads)
    if not as_json:
        _note(f"analysing trial {which} of {name!r} (weights from the study's artifacts, else retrained) ...")
    r, files = api.heads(name, storage, which, device, out, force)
    if as_json:
        _emit_json(
            {
                "study": name,
                "trial": r.trial,
                "heads": list(r.heads),
                "heads_needed": list(r.heads_needed),
                "layout": list(r.layout.heads),
                "layout_accuracy": r.layout.accuracy,
                "val_accuracy": r.val_accuracy,
                "val_accuracy_stored": r.val_accuracy_stored,
                "importance": [list(x) for x in r.importance],
                "verdict": r.verdict,
                "relations_followed": None
                if r.relations_followed is None
                else r.relations_followed.to_dict(orient="records"),
                "files": [str(p) for p in files],
            }
        )
        return
    click.echo(f"trial #{r.trial}: heads per layer {list(r.heads)}; masking suggests {list(r.layout.heads)}")
    click.echo(r.verdict)
    if r.relations_summary:
        click.echo(f"relations: {r.relations_summary}")
    click.echo(f"wrote {len(files)} files to {files[0].parent}/ (heads.md, heads.csv, figures)")


if __name__ == "__main__":
    main()
