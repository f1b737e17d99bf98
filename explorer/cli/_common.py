"""What the commands share: output helpers, options declared once, and running a study with progress."""

from __future__ import annotations

import functools
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from explorer.errors import ConfigError
from explorer.layout import DEVICE_NAMES
from explorer.storage import STORAGE_ENV, Role

if TYPE_CHECKING:
    from explorer.study import Step, Study


def emit_json(doc: Any) -> None:
    def plain(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        return v

    click.echo(json.dumps(plain(doc), indent=2, default=str))


def note(message: str) -> None:
    click.echo(message, err=True)


def parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
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


@dataclass(frozen=True)
class CliState:
    """What the ``explorer`` group passes down to its commands (click's ``ctx.obj``)."""

    verbose: bool = False


def is_verbose(ctx: click.Context | None = None) -> bool:
    """Whether `-v` was given to the group of ``ctx`` (default: the current context); False outside the group,
    as when a command is invoked on its own."""
    state = (ctx or click.get_current_context()).find_object(CliState)
    return state is not None and state.verbose


def quiet_optuna() -> None:
    """Optuna's per-trial log lines would break the progress bar; `-v` turns them back on."""
    import optuna

    if not is_verbose():
        optuna.logging.set_verbosity(optuna.logging.ERROR)


def answer_line(name: str, ans: Any) -> str:
    """The answer in one line, as every command that names it prints it."""
    if ans.recommended is None:
        return f"{name}: no answer ({ans.no_answer or 'no feasible trial finished'})"
    from explorer.answer import Evidence, prob_text as prob

    rec = ans.recommended
    if ans.evidence is not Evidence.FINALISTS:
        return f"{name}: provisional answer {heads_text(rec.heads)} heads per layer (the search's knee, one run each)"
    margin = (
        f"{ans.margin:.3g} bits per byte"
        if rec.metric.direction == "minimize"
        else f"{ans.margin * 100:g} accuracy point(s)"
    )
    best = ans.best if ans.best is not None else rec
    if ans.placed:
        how = (
            f"the fastest layout within {margin} of the best ({heads_text(best.heads)}) with probability "
            f"{prob(ans.confidence)}"
        )
    else:
        how = f"the most accurate, no layout placed within {margin} of it with probability {1 - ans.risk:.0%} yet"
    if ans.decided:
        return f"{name}: answer {heads_text(rec.heads)} heads per layer, {how}; decided"
    if ans.contradicted:
        return (
            f"{name}: answer {heads_text(rec.heads)} heads per layer, {how}; not decided: the verdict does not hold "
            f"at {ans.check.long} epochs (a study whose grid trains that long: {ans.check.longer_study(name)})"
        )
    line = f"{name}: answer {heads_text(rec.heads)} heads per layer, {how}; not decided: {ans.cost_text()}"
    if ans.to_decide is None:
        return line
    return f"{line} (explorer confirm {name} --until-decided --budget {ans.to_decide})"


def heads_text(heads: Any) -> str:
    return ",".join(map(str, heads))


def _env_storage(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--storage`` as given, else ``$EXPLORER_STORAGE`` stripped; None when that is blank too (the command's
    own default applies). An empty ``--storage ""`` reads the variable, as an unset option does."""
    source = ctx.get_parameter_source(param.name or "")
    if value == "" and source is click.core.ParameterSource.COMMANDLINE:
        value, source = param.resolve_envvar_value(ctx) or "", click.core.ParameterSource.ENVIRONMENT
    if value is not None and source is click.core.ParameterSource.ENVIRONMENT:
        return value.strip() or None
    return value


def storage_option_with(help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A ``--storage`` option that defaults to ``$EXPLORER_STORAGE`` (a URL with a password stays out of argv)."""
    return click.option("--storage", envvar=STORAGE_ENV, callback=_env_storage, help=help)


# Options several commands share, declared once.
storage_option = storage_option_with(
    "Storage URL (default: $EXPLORER_STORAGE, else sqlite:///studies/NAME.db)."
)


def _artifacts(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--artifacts`` checked by form before anything loads (an unknown scheme, a bucket with a path, a file)."""
    from explorer.storage import check_artifact_location

    return None if value is None else check_artifact_location(value)


artifacts_option = click.option(
    "--artifacts",
    callback=_artifacts,
    help="Where trained weights and figures are kept: a directory, file://, s3://BUCKET or gs://BUCKET "
    "(default: $EXPLORER_ARTIFACTS, else where the study recorded them).",
)
no_bench_option = click.option(
    "--no-bench",
    is_flag=True,
    help="Skip the once-per-study attention bench this time (spec: bench = false).",
)
# explorer.answer._pick.PICK_NAMES, torch-free
TRIAL_NAMES = ("answer", "knee", "most-accurate", "fastest")


def _trial(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``--trial`` checked by form before anything loads ("²" is a digit to str.isdigit, not to int); a finalist
    run named as its study and commands print it (``finalists#4``, ``NAME/finalists#4``) is explorer's number
    for it."""
    from explorer.storage import FINALIST_BASE, companion_name

    finalists = companion_name("x").removeprefix("x/")  # "finalists", as NAME/finalists ends
    prefix, hash_, local = value.rpartition("#")
    if hash_ and prefix.rsplit("/", 1)[-1] == finalists and local.isascii() and local.isdigit():
        return str(FINALIST_BASE + int(local))
    if value in TRIAL_NAMES or (value.isascii() and value.isdigit()):
        return value
    raise ConfigError(
        f"--trial {value!r} is not answer, most-accurate, fastest, a trial number or a finalist run (finalists#4)."
    )


trial_option = click.option(
    "--trial",
    "which",
    default="answer",
    show_default=True,
    callback=_trial,
    help="answer (the report's recommendation; knee is the same), most-accurate, fastest, a trial number or a "
    "finalist run (finalists#4).",
)


def check_readable(names: list[str] | tuple[str, ...], storage: str | None, which: str | None = None) -> None:
    """Every named study exists and was created by explorer, and holds the finished trial ``which`` where it
    names one by number, checked read-only before PyTorch loads (the command then opens it for real): a missing
    or foreign study, or a trial it does not hold, is answered in a second."""
    from explorer.answer import resolve_trial
    from explorer.study import Study

    for name in names:
        study = Study.open(name, storage)
        try:
            if which is not None and which.isascii() and which.isdigit():
                resolve_trial(study.records(), study.spec, which)
        finally:
            study.close()


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")
set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one spec key, as TABLE.KEY=VALUE with a TOML value (e.g. space.heads=[1,2,4]); repeatable.",
)
threads_option = click.option(
    "--threads", type=int, default=1, show_default=True, help="CPU threads for training (per worker)."
)
force_option = click.option(
    "--force", is_flag=True, help="Write into a folder holding other files (they are left alone)."
)


def out_path(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """``--out`` as a Path; an empty one is refused (Path("") would be the working folder)."""
    if value is None:
        return None
    if not value.strip():
        raise click.BadParameter("is empty; give the path to write", ctx, param)
    return Path(value)


def out_option(help: str, required: bool = False) -> Callable[[Any], Any]:
    """The ``--out`` option (a file or folder to write), refusing an empty value."""
    return click.option("--out", callback=out_path, required=required, help=help)


def choice_option(flag: str, choices: tuple[str, ...], help: str) -> Callable[[Any], Any]:
    """An option taking one of ``choices``, the first being the default."""
    return click.option(flag, type=click.Choice(choices), default=choices[0], show_default=True, help=help)


def check_threads(threads: int, flag: str = "--threads") -> None:
    from explorer.limits import THREADS

    if threads < 1:
        raise ConfigError(f"{flag} must be at least 1, got {threads}.")
    THREADS.check(threads, flag, "use fewer threads")


def check_run_time(seconds: float) -> None:
    """``--min-run-time``: a positive number of seconds within the limit (inf and nan refused)."""
    from explorer.limits import RUN_TIME_S

    if not seconds > 0:
        raise ConfigError(f"--min-run-time must be a positive number of seconds, got {seconds:g}.")
    RUN_TIME_S.check(seconds, "--min-run-time", "time for fewer seconds")


def run_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options `study run`, `study resume` and `confirm` share (how long, how many workers, where), handed to
    the command as one ``options`` (a :class:`~explorer.study._run_options.RunOptions`, checked as it is made,
    before PyTorch loads) and ``as_json``."""

    @functools.wraps(f)
    def command(
        *args: Any,
        timeout: float | None,
        workers: int,
        device: str | None,
        threads: int,
        artifacts: str | None,
        **kwargs: Any,
    ) -> Any:
        from explorer.study import RunOptions

        # every option is checked before the storage is touched (the device it names: by the run's plan)
        options = RunOptions(
            workers=workers, threads=threads, device=device, timeout=timeout, artifacts=artifacts
        )
        return f(*args, options=options, **kwargs)

    decorators = [
        click.option("--timeout", type=float, help="Stop starting new trials after this many seconds."),
        click.option(
            "--workers",
            type=int,
            default=1,
            help="Worker processes on this machine [default: 1; study resume and confirm: as many as the "
            "study's last run].",
        ),
        click.option("--device", help=f"Override the spec's device ({DEVICE_NAMES})."),
        threads_option,
        artifacts_option,
        json_option,
    ]
    for option in reversed(decorators):
        command = option(command)
    return command


def workers_as_before(options: Any, study: Study) -> Any:
    """``options`` with the worker count the study's last run used, where ``--workers`` was not given: a
    command that continues a study (the one its answer line names) runs at the pace that line quotes."""
    import dataclasses

    from explorer.errors import BadInputError
    from explorer.study import WORKERS_ATTR

    given = click.get_current_context().get_parameter_source("workers")
    stored = study.user_attrs.get(WORKERS_ATTR)
    if (
        given is not click.core.ParameterSource.DEFAULT
        or not isinstance(stored, int)
        or stored == options.workers
    ):
        return options
    try:
        return dataclasses.replace(options, workers=stored)
    except BadInputError:  # above this machine's limit now: the default stands
        return options


LOG_EVERY_S = 120.0  # without a terminal, a stage's progress is printed at least this often


class ProgressBars:
    """One tqdm bar per stage on stderr when it is a terminal, else one plain line per stage as it ends (a log
    file gets no redrawn bar); nothing with ``--json``. Fed by a run's ``on_stage`` and ``on_progress``.
    ``start(study, notice)`` comes once the study is open and every input accepted; the first stage then names
    the study (and ``notice``), so a refused run stays one line."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.study: Study | None = None
        self.notice = ""
        self._bar: Any = None
        self._announced = False
        self._stage: tuple[str, int] | None = None  # without a terminal: the stage running and its total
        self._status = ""  # its progress, as the bar's text says it
        self._rounds = 0  # the finalist rounds a line was printed for
        self._logged = time.monotonic()  # when the last line was printed
        self._timing = False  # the last step announced was a timing one (the next is said as more of it)

    def start(self, study: Study, notice: str = "") -> None:
        self.study, self.notice = study, notice

    @property
    def opened(self) -> Study:
        """The study, once :meth:`start` has named it (before any stage or progress)."""
        assert self.study is not None, "a run starts its study before its first stage"
        return self.study

    @property
    def callbacks(self) -> dict[str, Any]:
        """``on_stage`` and ``on_progress`` for :func:`explorer.api.run` and its kin."""
        return {"on_stage": self.on_stage, "on_progress": self.on_progress}

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._stage is not None:
            desc, total = self._stage
            note(f"{desc}: {self._status or f'0/{total} trials'}")
            self._stage, self._status, self._rounds = None, "", 0

    def on_stage(self, stage: Role | Step, total: int) -> None:
        from tqdm import tqdm

        from explorer.study import Step

        self.close()
        if self.as_json:
            return
        if not self._announced:
            self._announced = True
            note(f"study {self.opened.name!r} in {self.opened.masked_url}")
            if self.notice:
                note(self.notice)
        if stage == Step.TIMING:
            # timing that follows timing (decoding, then the forward pass; rounds on a busy machine again) is
            # said as more of the same, not as a second start
            more = " more" if self._timing else ""
            self._timing = True
            note(f"timing: {total}{more} measurements in interleaved rounds, no training running")
            return
        self._timing = False
        desc = f"{self.opened.name} {'search' if stage == Role.SEARCH else 'finalists'}"
        if not sys.stderr.isatty():
            self._stage = (desc, total)
            return
        if stage == Role.SEARCH:
            self._bar = tqdm(total=total, desc=desc, unit="trial", file=sys.stderr, dynamic_ncols=True)
            return
        # the finalists' total is a budget the stage stops short of once the answer is decided: no percentage
        self._bar = tqdm(
            total=total,
            desc=desc,
            file=sys.stderr,
            dynamic_ncols=True,
            bar_format="{desc}: {n_fmt} runs done of at most {total_fmt} [{elapsed}{postfix}]",
        )

    def _log_line(self, p: Any) -> None:
        """Without a terminal: a line for each finalist round the stage finishes (runs done, comparisons still
        open, what deciding costs from here), and one for any stage at least every :data:`LOG_EVERY_S` seconds,
        so a log shows motion."""
        assert self._stage is not None
        desc = self._stage[0]
        now = time.monotonic()
        if p.rounds > self._rounds:
            self._rounds = p.rounds
            if p.open_comparisons == 0:
                outlook = "decided"
            else:
                outlook = f"{p.open_comparisons} comparison(s) open"
                outlook += _cost_words(p)
            note(f"{desc}: round {p.rounds}: {p.done} runs done | {outlook}")
        elif now - self._logged < LOG_EVERY_S:
            return
        else:
            note(f"{desc}: {self._status}")
        self._logged = now

    def on_progress(self, p: Any) -> None:
        if self._bar is None and self._stage is None:
            return
        unit = "" if self.opened.spec.metric.name == "val_accuracy" else " bits/byte"
        best = f"best val {p.best_score:.3f}{unit}" if p.best_score is not None else "no result yet"
        decision = ""
        if p.to_decide == 0:
            decision = " | decided"
        elif p.to_decide is not None:
            decision = f" | a decision needs ~{p.median_to_decide} more runs ({p.to_decide} in 80%)"
        status = f"{p.epochs} epochs | {p.running} running | {best} | pruned {p.pruned} | failed {p.failed}{decision}"
        if self._bar is None:
            done = (
                f"{min(p.done, p.total)}/{p.total} trials"
                if p.stage == Role.SEARCH
                else f"{p.done} runs done of at most {p.total}"
            )
            self._status = f"{done} | {status}"
            self._log_line(p)
            return
        self._bar.n = min(p.done, p.total)
        self._bar.set_postfix_str(status)
        self._bar.refresh()


def _about(minutes: float) -> str:
    """``minutes`` in words: whole minutes from a minute and a half, else seconds."""
    return f"about {minutes:.0f} minutes" if minutes >= 1.5 else f"about {minutes * 60:.0f} s"


def _cost_words(p: Any) -> str:
    """What deciding costs after a finalist round, as the forecast put it ("" before one exists)."""
    if p.to_decide:
        took = f", {_about(p.minutes_to_decide)}" if p.minutes_to_decide is not None else ""
        median = f", {_about(p.median_minutes)}" if p.median_minutes is not None else ""
        return (
            f"; a decision needs about {p.median_to_decide} more runs{median} ({p.to_decide} in 80% of simulated "
            f"continuations of the stage{took})"
        )
    if p.decided_share is not None and p.forecast_cap is not None and p.open_comparisons:
        return (
            f"; no affordable budget decides it ({p.decided_share:.0%} of simulated continuations of the stage "
            f"decided within {p.forecast_cap:,} more runs)"
        )
    return ""


def _storage_flag(study: Study) -> str:
    """`` --storage 'URL'`` (password masked) for a study outside the default storage, else nothing."""
    return "" if study.is_default_storage else f" --storage '{study.masked_url}'"


def _resume_command(study: Study) -> str:
    return f"explorer study resume {study.name}{_storage_flag(study)}"


def _progress_doc(progress: Any) -> dict[str, Any]:
    """A stage's progress as the JSON summary shows it: its stage and its stop reason as words (reason null: not
    stopped short; ``budget``: the budget left cannot hold the next round that decides, ``need`` its runs;
    ``minutes``: the stage's minutes are spent; ``horizon``: the horizon check contradicts the verdict), and its
    note."""
    from dataclasses import asdict

    doc = asdict(progress)
    doc["stage"] = str(progress.stage)  # the role's word
    doc["reason"] = None if progress.reason is None else progress.reason.value
    return doc


def summary_doc(study: Study, summary: Any) -> dict[str, Any]:
    return {
        "study": study.name,
        "storage": study.masked_url,
        "complete": summary.complete,
        "search": _progress_doc(summary.search),
        "finalists": None if summary.finalists is None else _progress_doc(summary.finalists),
        "finalist_runs_queued": summary.added,
        "finalist_rounds_joined": summary.joined,  # rounds another command on the study queued, run here too
        "tracking": study.user_attrs.get("tracking"),  # the last MLflow sync, when the study is tracked
        "next": f"explorer report {study.name}{_storage_flag(study)}",
    }


def with_progress(run: Callable[[ProgressBars], Any], as_json: bool, study: Study | None = None) -> Any:
    """Run a study action with progress bars: ``run(bars)`` calls it with ``bars.callbacks`` (and ``bars.start``
    as its ``on_start``, unless the caller opened the study: ``study``). Ctrl-C stops cleanly and says how to
    resume; then the summary (or its JSON) is printed."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    from explorer.study import StopReason

    bars = ProgressBars(as_json)
    if study is not None:
        bars.start(study)
    try:
        # explorer's warnings (a tracking server down...) print above the bar, not into it
        with logging_redirect_tqdm(loggers=[logging.getLogger("explorer")]):
            summary = run(bars)
    except KeyboardInterrupt:
        bars.close()
        note("interrupted: finished trials are saved and the running one will be retried on resume.")
        if bars.study is not None:
            note(f"resume with: {_resume_command(bars.study)}")
        sys.exit(130)
    bars.close()
    study = bars.opened
    if as_json:
        emit_json(summary_doc(study, summary))
        return summary
    resume = _resume_command(study)
    s, f = summary.search, summary.finalists
    if s.reason is StopReason.EXHAUSTED:
        note(f"search: {s.note}, fewer than the {s.total} trials asked for")
    elif s.done < s.total or s.reason is not None:
        why = s.note or "timeout"
        note(f"stopped the search at {s.done}/{s.total} trials ({why}); resume with: {resume}")
    elif f is not None and f.reason is StopReason.HORIZON:  # more runs here cannot decide: say what can
        note(f"finalists: {f.note}")
    elif f is not None and f.reason in (StopReason.BUDGET, StopReason.MINUTES):  # undecided: say the cost
        cost = _cost_words(f)
        # what decides it, as the report names it (else the next round, which moves it)
        runs = f.to_decide or (f.need if f.reason is StopReason.BUDGET else None)
        budget = f" --budget {runs}" if runs else ""
        note(
            f"finalists: {f.note}{cost}: `explorer confirm {study.name} --until-decided{budget}"
            f"{_storage_flag(study)}` goes on"
        )
    elif f is not None and f.reason is not None:
        note(f"stopped the finalists at {f.done}/{f.total} runs ({f.note}); resume with: {resume}")
    line = f"search: {s.done} trials ({s.pruned} stopped early, {s.failed} failed)"
    if f is not None:
        grid = f.done - summary.horizon_runs
        spent = f"a budget of {f.total}"
        if grid > f.total:  # the stage's budget, run again by a resume after confirms that went beyond it
            spent = f"the stage's budget of {f.total} and {grid - f.total} more from `explorer confirm`"
        line += f"; finalists: {grid} runs of {spent} ({f.failed} failed)"
        if summary.horizon_runs:
            line += f", and {summary.horizon_runs} runs of the pilot and the horizon check"
    note(f"{line}. Next: explorer report {study.name}{_storage_flag(study)}")
    return summary
