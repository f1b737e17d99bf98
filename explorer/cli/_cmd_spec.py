"""`explorer spec show`: a spec as a run sees it, every default filled in and where each value came from."""

from __future__ import annotations

import json

import click

from explorer.cli._common import emit_json, json_option, note, set_option, storage_option


@click.group()
def spec() -> None:
    """Read study specs as a run resolves them."""


@spec.command("show")
@click.argument("target", metavar="SPEC|NAME")
@set_option
@storage_option
@json_option
def spec_show(target: str, overrides: tuple[str, ...], storage: str | None, as_json: bool) -> None:
    """Print the resolved spec of a spec file (with --set overrides) or of a stored study: every key, its value
    and its source (file, override, default). Reads only: nothing is created."""
    from explorer.study import resolved_spec

    doc = resolved_spec(target, storage, overrides)
    if as_json:
        emit_json(doc)
        return
    where = doc["from"]
    origin = where.get("file") or f"study {where['study']} in {where['storage']}"
    given = "".join(f" --set {o}" for o in doc["overrides"])
    click.echo(f"spec {doc['name']} (from {origin}{given})")
    if not doc["sources_recorded"]:
        note(
            "this study was created before explorer recorded where its values came from: each shows 'stored'."
        )
    width = max(len(r["key"]) for r in doc["keys"])
    click.echo(f"{'key':<{width}}  {'value':<40}  source")
    for row in doc["keys"]:
        value = "none" if row["value"] is None else json.dumps(row["value"])
        click.echo(f"{row['key']:<{width}}  {value:<40}  {row['source']}")
