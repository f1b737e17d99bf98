"""The ``explorer`` command line: the click group, assembled from the commands in :mod:`explorer.commands`.

Each command (a thin layer over :mod:`explorer.api` and the stage packages) parses its options, calls one library function and prints. Heavy imports (torch, optuna, seaborn)
happen inside the commands so ``explorer --help`` and read-only commands start fast. Every
:class:`~explorer.errors.ExplorerError` becomes one line on stderr and its exit code, never a traceback (``-v``
shows one). ``--json`` prints exactly one JSON document on stdout; progress and notes go to stderr.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from explorer.commands.model import bench, space, train
from explorer.commands.results import confirm, export, heads, report
from explorer.commands.study import study
from explorer.errors import ExplorerError


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

for command in (space, train, bench, study, report, export, confirm, heads):
    main.add_command(command)


if __name__ == "__main__":
    main()
