"""The ``explorer`` command line: the click group, assembled from the commands in :mod:`explorer.cli`.

Each command (a thin layer over :mod:`explorer.api` and the stage packages) parses its options, calls one library function and prints. Heavy imports (torch, optuna, seaborn)
happen inside the commands so ``explorer --help`` and read-only commands start fast. Every
:class:`~explorer.errors.ExplorerError` becomes one line on stderr and its exit code, never a traceback (``-v``
shows one). ``--json`` prints exactly one JSON document on stdout; progress and notes go to stderr. Exit codes
are those of :mod:`explorer.errors` (2: usage, 3: bad input, 4: no result, 5: environment, 6: not decided,
130: interrupted).
``-v`` shows explorer's own steps (the ``explorer`` logger) and tracebacks, not other libraries' debug output.
Shell completion is click's: ``eval "$(_EXPLORER_COMPLETE=bash_source explorer)"`` (see the README).
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import click

from explorer.cli._cmd_bench import bench
from explorer.cli._cmd_cache import cache
from explorer.cli._cmd_model import space, train
from explorer.cli._cmd_results import compare, confirm, export, heads, report
from explorer.cli._cmd_spec import spec
from explorer.cli._cmd_study import study
from explorer.cli._common import CliState, is_verbose
from explorer.errors import (
    EXIT_BAD_INPUT,
    EXIT_ENVIRONMENT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_RESULT,
    EXIT_NOT_DECIDED,
    EXIT_USAGE,
    ExplorerError,
)


class ExplorerGroup(click.Group):
    """A click group that turns library errors, and click's own usage errors, into one clear line and an exit
    code."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # `explorer` or `explorer study` alone: the help
            click.echo(exc.ctx.get_help())
            sys.exit(0)
        except click.ClickException as exc:  # usage errors, bad parameters, unreadable files given to click
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} -h`)" if ctx is not None else ""
            click.echo(f"error: {exc.format_message()}{hint}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("aborted.", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ExplorerError as exc:
            if is_verbose(ctx):
                traceback.print_exc(file=sys.stderr)  # -v: the traceback too, and still the documented code
            click.echo(f"error: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted: nothing half-written was kept.", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except MemoryError:  # the limits of explorer.limits missed a case: still one line, not a traceback
            if is_verbose(ctx):
                traceback.print_exc(file=sys.stderr)
            click.echo(
                "error: this machine ran out of memory; choose smaller sizes, or lower EXPLORER_MAX_MEMORY_MB "
                "so explorer refuses such a run before it starts.",
                err=True,
            )
            ctx.exit(EXIT_ENVIRONMENT)


# explorer --help ends with the exit codes a script may rely on (explorer/errors.py says what each means)
_EXIT_CODES = f"""\b
Exit codes:
  0    success
  {EXIT_FAILED}    a run failed for a reason of its own (a worker died, an unexpected error)
  {EXIT_USAGE}    usage: an unknown option or a missing argument
  {EXIT_BAD_INPUT}    bad input: a wrong value, spec, file, study name or storage URL; nothing written
  {EXIT_NO_RESULT}    no result: nothing to give (no completed trial, an export that does not match)
  {EXIT_ENVIRONMENT}    environment: a missing package, device, runtime or database
  {EXIT_NOT_DECIDED}    not decided: confirm --until-decided could queue nothing that decides the answer
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C); finished work is kept
"""


@click.group(cls=ExplorerGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=_EXIT_CODES)
@click.option("-v", "--verbose", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(package_name="explorer")
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """How many attention heads, per layer, should your Transformer have? Measure it.

    Build encoder variants under the head rules, train them on a real task, time them on your device,
    search the trade-off with Optuna, and write a recommendation report.
    """
    ctx.obj = CliState(verbose=verbose)
    _log_to_stderr(logging.DEBUG if verbose else None)


class _StderrHandler(logging.StreamHandler):
    """The handler `-v` puts on the ``explorer`` logger (a type of its own, so it is added once per process).
    It writes to whatever ``sys.stderr`` is at the time (a test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def _log_to_stderr(level: int | None) -> None:
    """Show explorer's own log (``explorer.*`` loggers) on stderr from ``level`` up, or not at all (None: the
    handler of an earlier `-v` call in this process is removed). Other libraries' loggers (matplotlib, PIL,
    torch...) are left alone, so `-v` is explorer's steps, not their debug output."""
    logger = logging.getLogger("explorer")
    ours = [h for h in logger.handlers if isinstance(h, _StderrHandler)]
    if level is None:
        for handler in ours:
            logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
        return
    logger.setLevel(level)
    if not ours:
        handler = _StderrHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)


# Options several commands share, declared once.

for command in (space, train, bench, cache, study, spec, report, export, confirm, heads, compare):
    main.add_command(command)


if __name__ == "__main__":
    main()
