"""The ``explorer`` command line: a thin click group over the library.

Each command parses its options, calls one library function and prints. Heavy imports (torch, optuna, seaborn)
happen inside the commands so ``explorer --help`` is instant. Every :class:`~explorer.errors.ExplorerError`
becomes one line on stderr and a non-zero exit; ``-v`` shows the traceback too. ``--json`` prints exactly one
JSON document on stdout; progress and notes go to stderr.
"""

from __future__ import annotations

import json
import sys
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
    click.echo(json.dumps(doc, indent=2, sort_keys=False, default=str))


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


# --------------------------------------------------------------------------------------------- space


@main.command()
@click.option("--d-model", type=int, required=True, help="Model width.")
@click.option("--min-dk", type=int, default=16, show_default=True, help="Floor on d_k = d_model / heads.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def space(d_model: int, min_dk: int, as_json: bool) -> None:
    """List the valid head counts for a width and d_k floor, with their d_k."""
    from explorer.engine.config import valid_heads

    heads = valid_heads(d_model, min_dk)
    d_k = [d_model // h for h in heads]
    if as_json:
        _emit_json({"d_model": d_model, "min_dk": min_dk, "heads": heads, "d_k": d_k})
        return
    if not heads:
        click.echo(f"no head count gives d_k >= {min_dk} at d_model={d_model}; lower --min-dk.")
        return
    click.echo(f"d_model={d_model}, min_dk={min_dk}: {len(heads)} valid head counts")
    click.echo(f"{'heads':>6}  {'d_k':>5}")
    for h, k in zip(heads, d_k, strict=True):
        click.echo(f"{h:>6}  {k:>5}")


# --------------------------------------------------------------------------------------------- train


@main.command()
@click.option("--task", default="digits", show_default=True, help="digits, relations, or a PATH.npz file.")
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
@click.option("--threads", type=int, default=1, show_default=True, help="CPU threads while timing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def train(
    task: str,
    task_opts: tuple[str, ...],
    config_path: Path | None,
    d_model: int,
    layers: int,
    heads: str,
    min_dk: int,
    mlp_ratio: float,
    attention: str,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    device: str,
    latency_batch: int,
    threads: int,
    as_json: bool,
) -> None:
    """Train one variant; report accuracy, latency, parameters, FLOPs and training time."""
    from explorer.engine.config import LatencyConfig, ModelConfig, TrainConfig
    from explorer.engine.evaluate import load_run_config, run_variant

    options = _parse_options(task_opts)
    if config_path is not None:
        task, options, model_cfg, train_cfg = load_run_config(config_path)
    else:
        model_cfg = ModelConfig.from_schedule(
            d_model, layers, heads, min_dk=min_dk, mlp_ratio=mlp_ratio, attention=attention
        )
        train_cfg = TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, seed=seed)
    lat_cfg = LatencyConfig(batch_size=latency_batch, threads=threads)

    if not as_json:
        _note(
            f"training {task}: d_model={model_cfg.d_model}, heads per layer {list(model_cfg.heads)}, "
            f"d_k {list(model_cfg.d_k)}"
        )
    from tqdm import tqdm

    with tqdm(total=train_cfg.epochs, desc="epochs", unit="ep", file=sys.stderr, leave=False) as bar:

        def on_epoch(stats: Any) -> bool:
            bar.set_postfix(loss=f"{stats.train_loss:.3f}", val=f"{stats.val_accuracy:.3f}")
            bar.update(1)
            return False

        result = run_variant(task, options, model_cfg, train_cfg, lat_cfg, device, on_epoch=on_epoch)
    if as_json:
        _emit_json(result)
        return
    lat = result["latency"]
    click.echo(f"task            {result['task']} ({result['device']})")
    click.echo(f"heads / layer   {result['heads']}   d_k {result['d_k']}")
    click.echo(f"val accuracy    {result['val_accuracy']:.4f}")
    click.echo(f"test accuracy   {result['test_accuracy']:.4f}")
    click.echo(
        f"latency         {result['latency_ms']:.3f} ms/batch (IQR {lat['iqr_ms']:.3f}) at batch "
        f"{lat['batch_size']}, seq {lat['seq_len']}, {lat['threads']} thread(s)"
        f"{' [cached]' if lat['cached'] else ''}"
    )
    click.echo(f"params          {result['params']:,}")
    click.echo(f"FLOPs/example   {result['flops']:,}")
    click.echo(
        f"training        {result['train_time_s']:.1f} s, {result['epochs_run']} epochs, "
        f"{result['samples_per_s']:.0f} samples/s"
    )


# --------------------------------------------------------------------------------------------- bench


@main.group()
def bench() -> None:
    """Micro-benchmarks on this device."""


@bench.command("attention")
@click.option("--d-model", type=int, default=384, show_default=True)
@click.option("--heads", type=int, default=8, show_default=True)
@click.option("--seq-len", type=int, default=197, show_default=True)
@click.option("--batch", type=int, default=8, show_default=True)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--threads", type=int, default=None, help="CPU threads (default: all torch uses).")
@click.option("--min-run-time", type=float, default=1.0, show_default=True, help="Seconds timed per impl.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), help="Write bench.csv and bench.png here."
)
def bench_attention_cmd(
    d_model: int,
    heads: int,
    seq_len: int,
    batch: int,
    device: str,
    threads: int | None,
    min_run_time: float,
    as_json: bool,
    out: Path | None,
) -> None:
    """Serial loop vs merged matmul vs fused kernel vs torch.nn.MultiheadAttention (the seed's table)."""
    from explorer.engine.bench import bench_attention, write_bench
    from explorer.engine.device import resolve_device

    if not as_json:
        _note(f"timing attention at batch {batch}, seq {seq_len}, d_model {d_model}, {heads} heads ...")
    df = bench_attention(
        d_model=d_model,
        heads=heads,
        seq_len=seq_len,
        batch=batch,
        device=resolve_device(device),
        min_run_time=min_run_time,
        threads=threads,
    )
    written = write_bench(df, out) if out is not None else []
    if as_json:
        _emit_json(
            {
                "shape": {"d_model": d_model, "heads": heads, "seq_len": seq_len, "batch": batch},
                "rows": df.to_dict(orient="records"),
                "files": [str(p) for p in written],
            }
        )
        return
    click.echo(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for path in written:
        _note(f"wrote {path}")


# --------------------------------------------------------------------------------------------- study


@main.group()
def study() -> None:
    """Run, resume and inspect Optuna studies over head counts and schedules."""


def _quiet_optuna() -> None:
    """Optuna's per-trial log lines (and failed trials' tracebacks) would break the progress bar; the bar and
    the report say what failed and why (`-v` turns the log back on)."""
    import optuna

    root = click.get_current_context().find_root()
    if not (root.obj or {}).get("verbose"):
        optuna.logging.set_verbosity(optuna.logging.ERROR)


def _run_with_progress(
    handle: Any,
    n_trials: int | None,
    timeout: float | None,
    workers: int,
    device: str | None,
    threads: int | None,
) -> None:
    """Run a study with a progress bar on stderr; Ctrl-C stops cleanly and says how to resume."""
    from tqdm import tqdm

    from explorer.search.study import run_study

    total = n_trials if n_trials is not None else handle.spec.n_trials
    resume = f"explorer study resume {handle.spec.name} --storage '{handle.masked_url}'"
    _note(f"study {handle.spec.name!r} in {handle.masked_url}: {total} trials in total, {workers} worker(s)")
    with tqdm(total=total, desc=handle.spec.name, unit="trial", file=sys.stderr, dynamic_ncols=True) as bar:

        def on_progress(p: Any) -> None:
            bar.n = min(p.done, total)
            best = (
                f"acc {p.best_accuracy:.3f}, {p.best_latency_ms:.2f} ms"
                if p.best_accuracy is not None
                else "no trial yet"
            )
            bar.set_postfix_str(
                f"pareto {p.pareto_size} | best {best} | pruned {p.pruned} | failed {p.failed}"
            )
            bar.refresh()

        try:
            final = run_study(
                handle,
                n_trials=n_trials,
                timeout=timeout,
                workers=workers,
                device=device,
                threads=threads,
                on_progress=on_progress,
            )
        except KeyboardInterrupt:
            bar.close()
            _note("interrupted: finished trials are saved and the running one will be retried on resume.")
            _note(f"resume with: {resume}")
            sys.exit(130)
    if final.done < total:
        _note(f"stopped at {final.done}/{total} trials (timeout or repeated failures); resume with: {resume}")
    _note(
        f"done: {final.done} trials ({final.pruned} stopped early, {final.failed} failed), "
        f"{final.pareto_size} on the Pareto front. Next: explorer report {handle.spec.name}"
        + (
            ""
            if handle.storage_url == _default_url(handle.spec.name)
            else f" --storage '{handle.masked_url}'"
        )
    )


def _default_url(name: str) -> str:
    from explorer.search.storage import default_storage_url

    return default_storage_url(name)


# Options several commands share, declared once.
_storage_option = click.option("--storage", help="Storage URL (default: sqlite:///studies/NAME.db).")
_trial_option = click.option(
    "--trial",
    "which",
    default="knee",
    show_default=True,
    help="knee, most-accurate, fastest or a trial number.",
)


def _run_options(f: Any) -> Any:
    """The options `study run` and `study resume` share (how long, how many workers, where)."""
    options = [
        click.option(
            "--n-trials", type=int, help="The study's total number of trials (default: the spec's)."
        ),
        click.option("--timeout", type=float, help="Stop starting new trials after this many seconds."),
        click.option(
            "--workers", type=int, default=1, show_default=True, help="Worker processes on this machine."
        ),
        click.option("--device", help="Override the spec's device (auto, cpu, cuda)."),
        click.option(
            "--threads", type=int, help="CPU threads per worker (default: the cores divided among them)."
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@study.command("run")
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--storage", help="Storage URL (default: the spec's, else sqlite:///studies/NAME.db).")
@_run_options
def study_run(spec_path: Path, storage: str | None, **run: Any) -> None:
    """Run the study a spec describes; running it again resumes it up to its total."""
    from explorer.search.spec import load_spec
    from explorer.search.study import prepare_study

    _quiet_optuna()
    _run_with_progress(prepare_study(load_spec(spec_path), storage), **run)


@study.command("resume")
@click.argument("name")
@_storage_option
@_run_options
def study_resume(name: str, storage: str | None, **run: Any) -> None:
    """Resume a study from its database alone (its spec is stored with it)."""
    from explorer.search.study import open_study

    _quiet_optuna()
    _run_with_progress(open_study(name, storage), **run)


@study.command("list")
@click.option("--storage", help="Storage URL (default: every SQLite database in ./studies/).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def study_list(storage: str | None, as_json: bool) -> None:
    """List the studies in a storage (or in every studies/*.db) with their trial counts."""
    from explorer.search.storage import mask_url
    from explorer.search.study import list_studies

    _quiet_optuna()
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
            f"{r['name']:<24} total {r['total']}  {counts or 'no trials'}  started {r['started']}  "
            f"({r['storage']})"
        )


@study.command("status")
@click.argument("name")
@_storage_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def study_status(name: str, storage: str | None, as_json: bool) -> None:
    """Trial counts by state, early stopping and the Pareto trials of one study."""
    from explorer.search.study import open_study, status

    _quiet_optuna()
    doc = status(open_study(name, storage))
    if as_json:
        _emit_json(doc)
        return
    counts = ", ".join(f"{k.lower()} {v}" for k, v in doc["trials"].items() if v)
    click.echo(f"study {doc['name']} in {doc['storage']}: total {doc['total']}; {counts or 'no trials'}")
    click.echo(
        f"early stopped {doc['early_stopped']} trials, {doc['epochs_saved']} epochs saved; "
        f"rejected configs {doc['rejected_configs']}, repaired {doc['repaired_configs']}"
    )
    click.echo(f"Pareto front ({len(doc['pareto'])} trials):")
    for p in doc["pareto"]:
        click.echo(
            f"  #{p['number']:<4} d_model {p['d_model']:<4} heads {p['heads']} d_k {p['d_k']}  "
            f"val {p['val_accuracy']:.4f}  {p['latency_ms']:.3f} ms  {p['params']:,} params"
        )


# --------------------------------------------------------------------------------------------- report


@main.command()
@click.argument("name")
@_storage_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Default: reports/NAME.")
@click.option("--json", "as_json", is_flag=True, help="Print the written paths as one JSON document.")
def report(name: str, storage: str | None, out: Path | None, as_json: bool) -> None:
    """Write the recommendation report, figures and CSVs for a study."""
    from explorer.output.report import write_report
    from explorer.search.study import open_study

    _quiet_optuna()
    handle = open_study(name, storage)
    out_dir = out or Path("reports") / name
    paths = write_report(handle.study, out_dir, handle.storage_url)
    files = [paths.markdown, paths.html, paths.trials_csv, paths.pareto_csv, *paths.figures.values()]
    if as_json:
        _emit_json({"study": name, "out": str(paths.out_dir), "files": [str(p) for p in files]})
        return
    click.echo(
        f"wrote the report for {name!r} to {paths.out_dir}/: report.html, report.md, "
        f"{len(paths.figures)} figures, trials.csv, pareto.csv"
    )


@main.command()
@click.argument("name")
@_storage_option
@_trial_option
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="FILE.json to write."
)
def export(name: str, storage: str | None, which: str, out: Path) -> None:
    """Write a trial's config so `explorer train --config FILE.json` rebuilds and retrains it exactly."""
    from explorer.output.export import export_trial
    from explorer.search.study import open_study

    _quiet_optuna()
    number = export_trial(open_study(name, storage), which, out)
    click.echo(f"wrote trial #{number} of {name!r} to {out}; retrain with: explorer train --config {out}")


# --------------------------------------------------------------------------------------------- evidence


@main.command()
@click.argument("name")
@_storage_option
@click.option(
    "--top", type=int, default=3, show_default=True, help="Pareto finalists to confirm (knee first)."
)
@click.option("--seeds", type=int, default=3, show_default=True, help="Training seeds per configuration.")
@click.option("--device", help="Override the stored spec's device (auto, cpu, cuda).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def confirm(name: str, storage: str | None, top: int, seeds: int, device: str | None, as_json: bool) -> None:
    """Retrain the finalists (plus 1-head and 8-head references) with fresh seeds; resumable."""
    from tqdm import tqdm

    from explorer.insight.confirm import confirm as run_confirm
    from explorer.insight.confirm import confirm_summary, significant_differences
    from explorer.search.study import open_study

    _quiet_optuna()
    handle = open_study(name, storage)
    with tqdm(desc="confirm", unit="run", file=sys.stderr, leave=False) as bar:

        def on_progress(done: int, total: int, row: dict[str, Any]) -> None:
            bar.total = total
            bar.n = done
            bar.set_postfix_str(f"{row['label']} seed {row['seed']}: val {row['val_accuracy']:.3f}")
            bar.refresh()

        try:
            rows = run_confirm(handle, top=top, seeds=seeds, device=device, on_progress=on_progress)
        except KeyboardInterrupt:
            bar.close()
            _note(
                f"interrupted: finished runs are stored; continue with: explorer confirm {name}"
                + (f" --storage '{handle.masked_url}'" if storage else "")
            )
            sys.exit(130)
    summary, tests = confirm_summary(rows), significant_differences(rows)
    if as_json:
        _emit_json(
            {
                "study": name,
                "summary": summary.to_dict(orient="records"),
                "differences": tests.to_dict(orient="records"),
            }
        )
        return
    cols = [
        c
        for c in (
            "label",
            "heads",
            "n",
            "val_accuracy_mean",
            "val_accuracy_ci_low",
            "val_accuracy_ci_high",
            "latency_ms_mean",
            "latency_ms_ci_low",
            "latency_ms_ci_high",
        )
        if c in summary
    ]
    click.echo(summary[cols].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    if len(tests):
        click.echo("\nWelch t-tests against the knee (significant at 0.05):")
        click.echo(tests.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    _note(f"stored with the study; `explorer report {name}` now shows confirmed figures.")


@main.command()
@click.argument("name")
@_storage_option
@_trial_option
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Default: reports/NAME-heads.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def heads(name: str, storage: str | None, which: str, device: str, out: Path | None, as_json: bool) -> None:
    """What each head of a trained finalist does: importance, masking, entropy, similarity, attention maps."""
    from explorer.insight.heads import analyse_trial
    from explorer.search.study import open_study

    _quiet_optuna()
    handle = open_study(name, storage)
    out_dir = out or Path("reports") / f"{name}-heads"
    if not as_json:
        _note(f"analysing trial {which} of {name!r} (weights from the study's artifacts, else retrained) ...")
    r = analyse_trial(handle, which, device, out_dir)
    if as_json:
        _emit_json(
            {
                "study": name,
                "trial": r.trial,
                "heads": list(r.heads),
                "heads_needed": list(r.heads_needed),
                "val_accuracy": r.val_accuracy,
                "val_accuracy_stored": r.val_accuracy_stored,
                "importance": [list(x) for x in r.importance],
                "verdict": r.verdict,
                "relations_followed": None
                if r.relations_followed is None
                else r.relations_followed.to_dict(orient="records"),
                "files": {k: str(v) for k, v in r.files.items()},
            }
        )
        return
    click.echo(
        f"trial #{r.trial}: heads per layer {list(r.heads)}; masking says {list(r.heads_needed)} suffice"
    )
    click.echo(r.verdict)
    if r.relations_summary:
        click.echo(f"relations: {r.relations_summary}")
    click.echo(f"wrote {out_dir}/ (heads.md, heads.csv, importance, masking, attention maps and statistics)")


if __name__ == "__main__":
    main()
