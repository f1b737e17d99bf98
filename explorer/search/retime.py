"""Re-timing the finalists: interleaved rounds of latency measurements with nothing else running.

A trial times its architecture while other workers train on the same cores, and a figure measured under load
is wrong in a way no seed can average out. After the finalist stage, this module times every finalist
architecture again in ``rounds`` rounds, each a fresh random order of them (so a drift in the machine's speed
hits them alike), in the one process of the command, with no training running. Each (architecture, round) is
stored with the study as it is measured (user attribute ``retimed``), so an interrupted re-timing continues
where it stopped. The spread between rounds is what the report's latency intervals are built from. A study
that measures decoding (``[decode]``) re-times one decoding step of every finalist in the same rounds
(``kind = "decode"``), and, before its finalists are chosen, the decoding of the search's architectures
(:func:`search_configs`): a decoding step of a small model is short, so a figure taken while another worker
trains says more about that worker than about the architecture, and the knee and the grouped-query rule
compare decoding times.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

import optuna
import torch

from explorer.engine.config import ModelConfig
from explorer.engine.decode import decode_latency
from explorer.engine.latency import model_latency
from explorer.engine.tasks import load_task
from explorer.search.record import RETIMED_ATTR, Retiming, load_records, load_retimings
from explorer.search.study import StudyHandle

__all__ = ["SEARCH_RETIME_LIMIT", "finalist_configs", "retime", "search_configs"]

SEARCH_RETIME_LIMIT = (
    64  # search architectures whose decoding is re-timed (the best ones, when there are more)
)


def finalist_configs(study: optuna.Study) -> list[tuple[str, ModelConfig]]:
    """The distinct (key, architecture) of the study's COMPLETE finalist runs, by first trial number."""
    seen: dict[str, ModelConfig] = {}
    for r in load_records(study, roles=("finalist",)):
        if r.finished and r.key is not None and r.config is not None:
            seen.setdefault(r.key, r.config)
    return list(seen.items())


def search_configs(study: optuna.Study, limit: int = SEARCH_RETIME_LIMIT) -> list[tuple[str, ModelConfig]]:
    """The distinct (key, architecture) of the study's COMPLETE search trials, the ``limit`` best in quality."""
    runs = [r for r in load_records(study, roles=("search",)) if r.finished and r.key and r.config]
    sign = -1.0 if runs and runs[0].metric.direction == "minimize" else 1.0
    runs.sort(key=lambda r: -sign * float(r.quality))  # type: ignore[arg-type]
    seen: dict[str, ModelConfig] = {}
    for r in runs:
        if len(seen) < limit:
            seen.setdefault(r.key, r.config)  # type: ignore[arg-type]
    return list(seen.items())


def retime(
    handle: StudyHandle,
    configs: Sequence[tuple[str, ModelConfig]],
    rounds: int = 3,
    device: torch.device | str | None = None,
    kinds: Sequence[str] | None = None,
) -> list[Retiming]:
    """Time ``configs`` in ``rounds`` interleaved rounds (see the module docstring); return every stored timing.

    ``kinds``: forward and/or decode (default: forward, and decode when the spec measures decoding). Timings
    already stored for a (key, round, kind) are kept, so a rerun only measures what is missing. Threads, batch
    and dtype are the spec's ``[latency]`` (a decoding step: ``[decode]``'s batch and context); the device is
    ``device`` or the spec's.
    """
    spec = handle.spec
    cfg = dataclasses.replace(spec.latency, device=str(device) if device is not None else spec.latency.device)
    if kinds is None:
        kinds = ("forward", "decode") if spec.decode is not None else ("forward",)
    done = {(t.key, t.round, t.kind) for t in load_retimings(handle.study)}
    todo = [
        (key, r, k) for key, _ in configs for r in range(rounds) for k in kinds if (key, r, k) not in done
    ]
    if not todo:
        return load_retimings(handle.study)
    task = load_task(spec.task.name, **spec.task.options)
    rng = random.Random(spec.seed)
    for r in range(rounds):
        order = list(configs)
        rng.shuffle(order)  # drawn for every round, done or not, so a rerun keeps the same orders
        for key, config in order:
            for kind in kinds:
                if (key, r, kind) in done:
                    continue
                if kind == "forward":
                    lat = model_latency(config, task.spec, cfg, cfg.device, cache=None)
                else:
                    assert spec.decode is not None
                    step = dataclasses.replace(cfg, batch_size=spec.decode.batch_size)
                    vocab = task.spec.vocab_size
                    lat = decode_latency(config, spec.decode.context, step, cfg.device, None, vocab).latency
                rows = list(
                    handle.study.user_attrs.get(RETIMED_ATTR) or []
                )  # one re-timing process per study
                rows.append({"key": key, "round": r, "latency": lat.to_dict(), "kind": kind})
                handle.study.set_user_attr(RETIMED_ATTR, rows)
    return load_retimings(handle.study)
