"""`explorer report`, `export`, `confirm` and `heads`: what a study found, and more evidence for it."""

from __future__ import annotations

from pathlib import Path

import click

from explorer.commands.common import (
    check_threads,
    emit_json,
    force_option,
    json_option,
    note,
    quiet_optuna,
    run_and_report,
    run_options,
    run_options_of,
    storage_option,
    threads_option,
    trial_option,
)

__all__ = ["confirm", "export", "heads", "report"]


# --------------------------------------------------------------------------------------------- report


@click.command()
@click.argument("name")
@storage_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Default: reports/NAME.")
@force_option
@json_option
def report(name: str, storage: str | None, out: Path | None, force: bool, as_json: bool) -> None:
    """Write the recommendation report, figures and CSVs for a study."""
    from explorer import api

    quiet_optuna()
    paths = api.report(name, storage, out, force)
    if as_json:
        emit_json({"study": name, "out": str(paths.out_dir), "files": [str(p) for p in paths.files]})
        return
    click.echo(f"wrote the report for {name!r} to {paths.out_dir}/: report.html, report.md, figures and CSVs")


@click.command()
@click.argument("name")
@storage_option
@trial_option
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="FILE.json to write."
)
@json_option
def export(name: str, storage: str | None, which: str, out: Path, as_json: bool) -> None:
    """Write a trial's config so `explorer train --config FILE.json` rebuilds and retrains it exactly."""
    from explorer import api

    quiet_optuna()
    record = api.export(name, out, which, storage)
    if as_json:
        emit_json({"study": name, "trial": record.number, "heads": list(record.heads), "out": str(out)})
        return
    click.echo(
        f"wrote trial #{record.number} of {name!r} to {out}; retrain with: explorer train --config {out}"
    )


# --------------------------------------------------------------------------------------------- evidence


@click.command()
@click.argument("name")
@storage_option
@click.option(
    "--top", type=int, help="Front architectures nearest the knee to retrain (default: the spec's)."
)
@click.option("--seeds", type=int, help="Fresh seeds per finalist (default: the spec's).")
@run_options
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
    options = run_options_of(workers, threads, device, timeout)
    from explorer import api
    from explorer.search.study import open_study

    quiet_optuna()
    handle = open_study(name, storage)
    run_and_report(handle, api.confirm, as_json, top=top, seeds=seeds, options=options)


@click.command()
@click.argument("name")
@storage_option
@trial_option
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Default: reports/NAME-heads.")
@threads_option
@force_option
@json_option
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
    check_threads(threads)
    import torch

    from explorer import api

    quiet_optuna()
    torch.set_num_threads(threads)
    if not as_json:
        note(f"analysing trial {which} of {name!r} (weights from the study's artifacts, else retrained) ...")
    r, files = api.heads(name, storage, which, device, out, force)
    if as_json:
        emit_json(
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
