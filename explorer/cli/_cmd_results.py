"""`explorer report`, `export`, `confirm` and `heads`: what a study found, and more evidence for it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from explorer.cli._common import (
    answer_line,
    artifacts_option,
    check_readable,
    check_threads,
    emit_json,
    force_option,
    heads_text,
    json_option,
    note,
    out_option,
    quiet_optuna,
    run_options,
    storage_option,
    threads_option,
    trial_option,
    with_progress,
    workers_as_before,
)
from explorer.errors import EXIT_NOT_DECIDED
from explorer.layout import DEVICE_NAMES

# --------------------------------------------------------------------------------------------- report


@click.command()
@click.argument("name")
@storage_option
@out_option("Default: reports/NAME.")
@force_option
@artifacts_option
@click.option(
    "--no-artifacts",
    is_flag=True,
    help="Keep nothing with the study: neither the figures (optuna.artifacts) nor the answer (user attribute).",
)
@json_option
def report(
    name: str,
    storage: str | None,
    out: Path | None,
    force: bool,
    artifacts: str | None,
    no_artifacts: bool,
    as_json: bool,
) -> None:
    """Write the recommendation report, figures and CSVs for a study; keep the figures with the study."""
    check_readable([name], storage)
    from explorer import api
    from explorer.storage import storage_writable
    from explorer.study import existing_study_url

    quiet_optuna()
    paths = api.report(name, storage, out, force, artifacts=artifacts, keep_figures=not no_artifacts)
    ans = paths.answer
    if not no_artifacts and not storage_writable(existing_study_url(name, storage)):
        note(
            "the study's database is read-only: its figures were not kept with it (only in the report folder)"
        )
    if as_json:
        emit_json(
            {
                "study": name,
                "out": str(paths.out_dir),
                "files": [str(p) for p in paths.files],
                "answer": None if ans is None else ans.to_dict(),
            }
        )
        return
    if ans is not None:
        click.echo(answer_line(name, ans))
    click.echo(f"wrote the report for {name!r} to {paths.out_dir}/: report.html, report.md, figures and CSVs")


@click.command()
@click.argument("name")
@storage_option
@trial_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["config", "state", "pt2", "onnx", "hf"]),
    default="config",
    show_default=True,
    help="config: run config JSON; state: weights + config (.pt); pt2: torch.export; onnx: ONNX (onnx extra); "
    "hf: the --out folder for transformers' from_pretrained (hf extra; a [model] hf study's trained model, "
    "else a config.json only).",
)
@out_option("The file to write (hf: the folder).", required=True)
@artifacts_option
@threads_option
@json_option
def export(
    name: str,
    storage: str | None,
    which: str,
    fmt: str,
    out: Path,
    artifacts: str | None,
    threads: int,
    as_json: bool,
) -> None:
    """Export a trial: its run config (`explorer train --config` retrains it exactly), or its trained model
    with the config, checked against PyTorch on the test split (`explorer bench model` times it)."""
    check_threads(threads)
    check_readable([name], storage, which)
    from explorer import api

    quiet_optuna()
    if fmt != "config":
        import torch

        torch.set_num_threads(threads)
    result = api.export(name, out, which, storage, fmt, artifacts)
    from explorer.storage import trial_label

    if as_json:
        emit_json(result.to_dict(name))
        return
    if result.answer is not None and which in ("answer", "knee"):
        click.echo(answer_line(name, result.answer))
    record = result.record
    if fmt == "config":
        click.echo(
            f"wrote trial {trial_label(name, record.number)} to {out}; retrain with: explorer train --config {out}"
        )
        return
    if fmt == "hf" and result.loader:
        click.echo(
            f"wrote trial {trial_label(name, record.number)} (heads {heads_text(record.heads)}) to {result.path}/ "
            f"(config.json, model.safetensors) for transformers.{result.loader}.from_pretrained({str(out)!r}"
            f"{', trust_remote_code=True' if result.remote_code else ''}); max "
            f"|logit difference| from explorer's on {result.examples} test examples: {result.max_abs_diff:.2e} "
            f"(tolerance 1e-4), same prediction on {result.agreement:.1%}."
        )
        return
    if fmt == "hf":
        lost = (
            f"; the stock config holds one head layout for every layer and cannot express {'; '.join(result.notes)} "
            "(those are in num_query_heads / num_kv_heads / head_dims)"
            if result.notes
            else "; the stock fields hold the layout exactly"
        )
        click.echo(
            f"wrote trial {trial_label(name, record.number)} (heads {heads_text(record.heads)}) as {result.path} for "
            f"transformers.AutoConfig.from_pretrained({str(out)!r}){lost}. A config only: explorer's own encoder's "
            "weights are not converted (a study of a transformers model, [model] hf, exports its weights)."
        )
        return
    click.echo(
        f"wrote trial {trial_label(name, record.number)} (heads {heads_text(record.heads)}) as {fmt} to {out}; "
        f"max |logit difference| from PyTorch on {result.examples} test examples: {result.max_abs_diff:.2e} "
        f"(tolerance 1e-4), same prediction on {result.agreement:.1%}. Time it with: explorer bench model {out}"
    )


@click.command()
@click.argument("names", nargs=-1, required=True)
@storage_option
@out_option("Default: reports/compare-A-B.")
@force_option
@json_option
def compare(
    names: tuple[str, ...], storage: str | None, out: Path | None, force: bool, as_json: bool
) -> None:
    """Overlay the accuracy/latency fronts of several studies (CPU vs GPU, eager vs ONNX Runtime, two tasks)
    in one figure and one table, each study labelled with its device and runtime."""
    check_readable(names, storage)
    from explorer import api

    quiet_optuna()
    df, files, answers = api.compare(list(names), storage, out, force)
    if as_json:
        from explorer.answer import csv_ready

        emit_json(
            {
                "studies": list(names),
                "answers": {n: a.to_dict() for n, a in answers.items()},
                "rows": csv_ready(df).to_dict(orient="records"),
                "files": [str(p) for p in files],
            }
        )
        return
    for study in names:
        click.echo(answer_line(study, answers[study]))
    for label, rows in df.groupby("label", sort=False):
        k = rows[rows["knee"].astype(bool)].iloc[0]
        click.echo(
            f"{label}: {len(rows)} search-front architectures (one run each); the front's knee "
            f"{heads_text(k['heads'])}, val {k['val_accuracy']:.4f}, {k['latency_ms']:.3f} ms"
        )
    click.echo(f"wrote {', '.join(p.name for p in files)} to {files[0].parent}/")


# --------------------------------------------------------------------------------------------- evidence


@click.command()
@click.argument("name")
@storage_option
@click.option(
    "--top", type=int, help="Front architectures nearest the knee to retrain (default: the spec's)."
)
@click.option("--seeds", type=int, help="Train every finalist on this many replicates (a fixed grid).")
@click.option(
    "--until-decided",
    is_flag=True,
    help="Spend more paired runs where the answer is still open, until it is decided or --budget is spent.",
)
@click.option(
    "--budget",
    type=int,
    help="With --until-decided: finalist runs to add at most (default: the spec's budget for the stage).",
)
@run_options
def confirm(
    name: str,
    storage: str | None,
    top: int | None,
    seeds: int | None,
    until_decided: bool,
    budget: int | None,
    options: Any,
    as_json: bool,
) -> None:
    """Run the finalist stage now: more finalists, a fixed grid of seeds, or runs until the answer is decided;
    runs already done are kept (resumable)."""
    from explorer.study import Study

    study = Study.open(name, storage)  # a missing or foreign study is answered before PyTorch loads
    options = workers_as_before(options, study)
    from explorer import api

    quiet_optuna()
    summary = with_progress(
        lambda bars: api.confirm(
            study,  # opened to write by the run's plan
            top=top,
            seeds=seeds,
            until_decided=until_decided,
            budget=budget,
            options=options,
            **bars.callbacks,
        ),
        as_json,
        study,
    )
    if until_decided and summary.added == 0 and summary.joined == 0 and summary.undecided:
        # nothing could be queued (nor run in another command's rounds): the line above says what the next
        # round needs
        sys.exit(EXIT_NOT_DECIDED)


@click.command()
@click.argument("name")
@storage_option
@trial_option
@click.option("--device", default="auto", show_default=True, help=f"{DEVICE_NAMES}.")
@out_option("Default: reports/NAME-heads.")
@threads_option
@force_option
@artifacts_option
@json_option
def heads(
    name: str,
    storage: str | None,
    which: str,
    device: str,
    out: Path | None,
    threads: int,
    force: bool,
    artifacts: str | None,
    as_json: bool,
) -> None:
    """What each head of a trained finalist does: importance, masking, entropy, similarity, attention maps."""
    check_threads(threads)
    check_readable([name], storage)
    import torch

    from explorer import api
    from explorer.storage import trial_label

    quiet_optuna()
    torch.set_num_threads(threads)

    def started(record: Any) -> None:
        if not as_json:
            note(
                f"analysing trial {trial_label(name, record.number)} (weights from the study's artifacts, else "
                "retrained)"
            )

    r, files = api.heads(name, storage, which, device, out, force, artifacts, on_start=started)
    if as_json:
        emit_json(
            {
                "study": name,
                "trial": r.trial,
                "trial_label": trial_label(name, r.trial),
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
    click.echo(
        f"trial {trial_label(name, r.trial)}: heads per layer {list(r.heads)}; masking suggests "
        f"{list(r.layout.heads)}"
    )
    click.echo(r.verdict)
    if r.relations_summary:
        click.echo(f"relations: {r.relations_summary}")
    click.echo(f"wrote {len(files)} files to {files[0].parent}/ (heads.md, heads.csv, figures)")
