"""`explorer study run|resume|list|status`: run studies with progress, and read them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from explorer.cli._common import (
    emit_json,
    heads_text,
    json_option,
    no_bench_option,
    note,
    quiet_optuna,
    run_options,
    set_option,
    storage_option,
    storage_option_with,
    with_progress,
    workers_as_before,
)

# --------------------------------------------------------------------------------------------- study


@click.group()
def study() -> None:
    """Run, resume and inspect Optuna studies over head counts and schedules."""


def _run_flags(n_trials_help: str) -> Callable[[Any], Any]:
    """The options `study run` and `study resume` share, handed to the command as ``**run``."""

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in (
            run_options,
            no_bench_option,
            click.option(
                "--no-finalists", is_flag=True, help="Stop after the search (no retraining of finalists)."
            ),
            click.option("--n-trials", type=int, help=n_trials_help),
        ):
            f = option(f)
        return f

    return wrap


@study.command("run")
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@storage_option_with(
    "Storage URL (default: $EXPLORER_STORAGE, else the spec's, else sqlite:///studies/NAME.db)."
)
@set_option
@_run_flags("The study's total of search trials (default: the spec's).")
def study_run(spec_path: Path, storage: str | None, overrides: tuple[str, ...], **run: Any) -> None:
    """Run the study a spec describes (--set overrides a key, stored with the study); running it again resumes
    it up to its total."""
    from explorer.spec import load_spec

    spec = load_spec(spec_path, overrides)  # torch-free: a bad spec is answered before PyTorch loads
    from explorer import api

    quiet_optuna()
    with_progress(
        lambda bars: api.run_study(
            spec,
            storage,
            spec_path=str(spec_path),
            n_trials=run["n_trials"],
            options=run["options"],
            finalists=not run["no_finalists"],
            bench=not run["no_bench"],
            on_start=bars.start,
            **bars.callbacks,
        ),
        run["as_json"],
    )


@study.command("resume")
@click.argument("name")
@storage_option
@_run_flags("A new total of search trials (stored with the study).")
def study_resume(name: str, storage: str | None, **run: Any) -> None:
    """Resume a study from its database alone (its spec is stored with it)."""
    from explorer.study import Study

    stored = Study.open(name, storage)  # a missing or foreign study is answered before PyTorch loads
    run["options"] = workers_as_before(run["options"], stored)
    from explorer import api

    quiet_optuna()
    with_progress(
        lambda bars: api.run(
            stored,  # opened to write by the run's plan
            n_trials=run["n_trials"],
            options=run["options"],
            finalists=not run["no_finalists"],
            bench=not run["no_bench"],
            **bars.callbacks,
        ),
        run["as_json"],
        stored,
    )


@study.command("list")
@storage_option_with("Storage URL (default: $EXPLORER_STORAGE, else every SQLite database in ./studies/).")
@json_option
def study_list(storage: str | None, as_json: bool) -> None:
    """List the studies in a storage (or in every studies/*.db) with their trial counts."""
    from explorer.errors import ExplorerError
    from explorer.storage import mask_url
    from explorer.study import list_studies

    if storage:
        rows = [{**r, "storage": mask_url(storage)} for r in list_studies(storage)]
    else:  # every studies/*.db: one that is not an Optuna database is named and passed over
        rows = []
        for path in sorted(Path("studies").glob("*.db")):
            url = f"sqlite:///{path.as_posix()}"
            try:
                rows += [{**r, "storage": url} for r in list_studies(url)]
            except ExplorerError as exc:
                note(f"skipped {path}: {exc}")
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo(
            "no studies " + ("in this storage." if storage else "in studies/*.db; pass --storage URL.")
        )
    for r in rows:
        counts = ", ".join(f"{k.lower()} {v}" for k, v in sorted(r["trials"].items()))
        apart = f"  finalist runs in {r['finalists']['study']}" if r.get("finalists") else ""
        click.echo(
            f"{r['name']:<24} total {r['total']}  {counts or 'no trials'}{apart}  started {r['started']}  "
            f"({r['storage']})"
        )


@study.command("status")
@click.argument("name")
@storage_option
@json_option
def study_status(name: str, storage: str | None, as_json: bool) -> None:
    """Trials by role and state, early stopping, and the most accurate runs so far of one study (quick: no
    statistics; `explorer report NAME` names the answer)."""
    from explorer.storage import trial_label
    from explorer.study import study_status as read_status

    doc = read_status(name, storage)

    if as_json:
        emit_json(doc)
        return
    click.echo(f"study {doc['name']} in {doc['storage']}: search total {doc['total']}")
    for role, counts in doc["trials"].items():
        text = ", ".join(f"{k.lower()} {v}" for k, v in counts.items() if v)
        click.echo(f"  {role}: {text or 'none'}")
    click.echo(f"  stopped early {doc['stopped_early']} trials, {doc['epochs_saved']} epochs saved")
    if doc["finalists_study"]:
        click.echo(f"  finalist runs and re-timings: the study {doc['finalists_study']} in the same storage")
    if doc["note"]:
        click.echo(f"  note: {doc['note']}")
    if track := doc.get("tracking"):
        missing = len(track["not_logged"])
        state = (
            f"{missing} finished trials not logged ({track['error']})" if missing else "every finished trial"
        )
        click.echo(f"  MLflow {track['uri']} experiment {track['experiment']}: {state}, at {track['at']}")
    bpb = doc["metric"]["name"] == "val_bpb"
    width = max((len(trial_label(name, r["number"])) for r in doc["best"]), default=0)
    for r in doc["best"]:
        kv = f" kv {heads_text(r['kv_heads'])}" if r["kv_heads"] != r["heads"] else ""
        val = f"{r['quality']:.4f} bits/byte" if bpb else f"{r['quality']:.4f}"
        decode = f"  {r['decode_ms']:.3f} ms/token" if r.get("decode_ms") is not None else ""
        click.echo(
            f"  {trial_label(name, r['number']):<{width}} {r['role']:<8} d_model {r['d_model']:<4} heads "
            f"{heads_text(r['heads'])}{kv}  "
            f"val {val}  {r['latency_ms']:.3f} ms{decode}"
        )
