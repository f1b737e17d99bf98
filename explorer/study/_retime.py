"""Re-timing the finalists: interleaved rounds of latency measurements with nothing else running.

A trial times its architecture while other workers train on the same cores, and a figure measured under load is
wrong in a way no seed can average out. After the finalist stage, this module times every finalist architecture
again in ``rounds`` rounds, each a fresh random order of them (so a drift in the machine's speed hits them
alike), with no training running. Each round runs in a fresh process of its own (spawned, not forked from the
workers' fork server, whose children all start from one memory image): a process's memory layout, thread
placement and allocator state shift its timings for as long as it lives (benchmarks/deploy.md, 07:41: fresh
processes timed a study's knee at 1.13-1.22x the figure its one re-timing process gave), so rounds in one
process agree with each other more than with the process a user later times the model in (``explorer bench
model``). Across rounds in fresh processes that shift is part of the spread between rounds, which the report's
latency intervals are built from (never narrower than the timer's own block spread:
:func:`explorer.answer._latency_stats.block_spread`). Each (architecture, round) is stored with the finalist
runs as it is measured (user attribute ``retimed`` of the study's companion, ``NAME/finalists``), so an
interrupted re-timing continues where it stopped. A study that measures decoding (``[decode]``) re-times one
decoding step of every finalist in the same rounds (timing kind ``decode``), and, before its finalists are
chosen, the decoding of the search's architectures (:func:`search_configs`): a decoding step of a small model is short,
so a figure taken while another worker trains says more about that worker than about the architecture, and the
knee and the grouped-query rule compare decoding times.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import random
import signal
import sys
from collections.abc import Sequence
from typing import Any

import optuna
import torch

from explorer.errors import ExplorerError
from explorer.layout import InputSpec, ModelConfig
from explorer.measure import decode_latency, model_latency, resolve_device
from explorer.model import ModelBuilder
from explorer.spec import StudySpec
from explorer.storage import (
    RETIMED_ATTR,
    Retiming,
    Role,
    TimingKind,
    load_records,
    sqlite_path,
)
from explorer.study._context import RunContext, context_on
from explorer.study._model_builder import model_builder
from explorer.study._study import Study

# search architectures whose decoding is re-timed (the best ones, when there are more)
SEARCH_RETIME_LIMIT = 64


def search_configs(study: optuna.Study, limit: int = SEARCH_RETIME_LIMIT) -> list[tuple[str, ModelConfig]]:
    """The distinct (key, architecture) of the study's COMPLETE search trials, the ``limit`` best in quality."""
    runs = [r for r in load_records(study, roles=(Role.SEARCH,)) if r.finished and r.key and r.config]
    sign = -1.0 if runs and runs[0].metric.direction == "minimize" else 1.0
    runs.sort(key=lambda r: -sign * float(r.quality))  # type: ignore[arg-type]
    seen: dict[str, ModelConfig] = {}
    for r in runs:
        if len(seen) < limit:
            seen.setdefault(r.key, r.config)  # type: ignore[arg-type]
    return list(seen.items())


def retime(
    study: Study,
    configs: Sequence[tuple[str, ModelConfig]],
    rounds: int = 3,
    device: torch.device | None = None,
    kinds: Sequence[str] | None = None,
    *,
    fresh_processes: bool = True,
    context: RunContext | None = None,
) -> list[Retiming]:
    """Time ``configs`` in ``rounds`` interleaved rounds (see the module docstring); return every stored timing.

    ``kinds``: forward and/or decode (:class:`~explorer.storage.TimingKind`, or their stored names; default:
    forward, and decode when the spec measures decoding). Timings already stored for a (key, round, kind) are
    kept, so a rerun only measures what is missing. Threads, batch and dtype are the spec's ``[latency]`` (a
    decoding step: ``[decode]``'s batch and context); the device is ``device``, else the run context's, else the
    spec's. ``context``: the run's context (device, task, model builder) for rounds timed in this process; a
    fresh process builds its own. ``fresh_processes=False`` times every round in this process (for a caller that
    cannot spawn one; its spread then misses the differences between processes), as does a study in an
    in-memory database, which no other process can open.

    Raises:
        ExplorerError: a round's process failed (its error, in one line) or was killed.
    """
    spec = study.spec
    if context is not None:
        context = context.on(device)
    where = context.device if context is not None else device  # None: the spec's, resolved once it is needed
    if kinds is None:
        kinds = tuple(TimingKind) if spec.decode is not None else (TimingKind.FORWARD,)
    timed = [TimingKind(k) for k in kinds]
    done = {(t.key, t.round, t.kind) for t in study.retimings()}
    rng = random.Random(spec.seed)
    for r in range(rounds):
        order = list(configs)
        rng.shuffle(order)  # drawn for every round, done or not, so a rerun keeps the same orders
        todo = [(key, config, [k for k in timed if (key, r, k) not in done]) for key, config in order]
        todo = [(key, config, ks) for key, config, ks in todo if ks]
        if not todo:
            continue
        if where is None:  # resolved once, for every round
            where = resolve_device(spec.latency.device)
        if fresh_processes and not _in_memory(study.url):
            inputs = context.task.spec if context is not None else None  # the round's process loads no data
            _round_in_fresh_process(study, r, todo, where, inputs)
        else:
            # one context for every round timed in this process
            context = context or context_on(spec, where)
            _time_round(study, r, todo, context.device, context.task.spec, context.builder)
    return study.retimings()


def _in_memory(url: str) -> bool:
    """An in-memory SQLite database: another process would open an empty one of its own."""
    return url.startswith("sqlite:") and sqlite_path(url) is None


# (key, architecture, kinds still to time) in timing order
_Todo = list[tuple[str, ModelConfig, list[TimingKind]]]


def _time_round(
    study: Study,
    r: int,
    todo: _Todo,
    device: torch.device,
    inputs: InputSpec,
    builder: ModelBuilder | None,
) -> None:
    """Time one round's architectures in order on ``device``, for the task's ``inputs`` and with the spec's model
    ``builder``, storing each timing as it is made."""
    spec = study.spec
    cfg = spec.latency  # timed on ``device``, whatever device the spec names
    where = study.stage_study(Role.FINALIST)  # the re-timings live with the finalist runs
    for key, config, kinds in todo:
        for kind in kinds:
            if kind is TimingKind.FORWARD:
                lat = model_latency(config, inputs, cfg, device, cache=None, builder=builder)
            else:
                assert spec.decode is not None
                step = dataclasses.replace(cfg, batch_size=spec.decode.batch_size)
                vocab = inputs.vocab_size
                lat = decode_latency(config, spec.decode.context, step, device, None, vocab, builder).latency
            rows = list(where.user_attrs.get(RETIMED_ATTR) or [])  # one re-timing process per study
            rows.append({"key": key, "round": r, "latency": lat.to_dict(), "kind": kind, "pid": os.getpid()})
            where.set_user_attr(RETIMED_ATTR, rows)


def _round_main(
    storage_url: str,
    spec: StudySpec,
    r: int,
    todo: list[tuple[str, dict, list[TimingKind]]],
    device: torch.device,
    inputs: InputSpec | None,
    out: Any,
) -> None:
    """Entry point of a round's process (spawned): open the study with the command's ``spec`` and ``device``
    (read, checked and resolved there: not again), build the model builder, take the task's inputs from the
    command (else load the task) and time the round; put "" or the error, then exit at once (see
    :func:`_exit_now`)."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = None
    try:
        study = Study.open_at(spec.name, storage_url, write=True, spec=spec)
        if inputs is None:
            context = context_on(spec, device)
            inputs, builder = context.task.spec, context.builder
        else:
            builder = model_builder(spec)
        configs = [(key, ModelConfig.from_dict(c), ks) for key, c, ks in todo]
        _time_round(study, r, configs, device, inputs, builder)
        out.put("")
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # exit quietly; the command reports
    except Exception as exc:  # one line for the command to show
        out.put(f"{type(exc).__name__}: {exc}")
    _exit_now(study)


def _exit_now(study: Study | None) -> None:
    """End a round's process once its timings are stored and its answer sent: close its database connections
    and exit without the interpreter's teardown (of torch's modules among others), which has nothing left to
    save and would cost every round's process CPU time for nothing (multiprocessing's forked children end the
    same way)."""
    if study is not None:
        study.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _round_in_fresh_process(
    study: Study, r: int, todo: _Todo, device: torch.device, inputs: InputSpec | None
) -> None:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.SimpleQueue()
    items = [(key, config.to_dict(), ks) for key, config, ks in todo]
    args = (study.url, study.spec, r, items, device, inputs, out)
    proc = ctx.Process(target=_round_main, args=args)
    proc.start()
    try:
        proc.join()
    except KeyboardInterrupt:
        proc.join(timeout=30)
        raise
    error = out.get() if not out.empty() else None
    if error is None:
        error = f"its process exited with code {proc.exitcode}"
    if error:
        raise ExplorerError(
            f"re-timing round {r + 1} failed: {error}; the timings made so far are kept, and "
            f"`explorer study resume {study.name}` takes it up again."
        )
