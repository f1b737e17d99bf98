"""Timing a model `explorer export` wrote: `explorer bench model PATH`, next to the study's figure for it.

The file is loaded by :mod:`explorer.model._export_files` (onnx on ONNX Runtime, pt2 as the torch.export program,
state eagerly) and timed like the study timed the trial, at its batch size and thread count unless given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from explorer.errors import ConfigError
from explorer.layout import LatencyConfig
from explorer.limits import BATCH, RUN_TIME_S, THREADS
from explorer.measure._latency import random_input, time_call
from explorer.measurements import LatencyResult
from explorer.model import Exported, check_model_fits, declared_config, load_exported


@dataclass(frozen=True)
class ModelBench:
    """An exported model's latency here, next to the study's figure for the same trial."""

    path: str
    format: str
    latency: LatencyResult
    study: dict[str, Any] | None  # the study's figure: median_ms, low, high (its stated spread), runtime ...
    within_spread: bool | None  # whether this median lies in the study's interval (None: no study figure)
    same_setup: bool | None  # same runtime, batch, sequence length and threads as the study's figure

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "runtime": self.latency.runtime,
            "latency_ms": self.latency.median_ms,
            "latency": self.latency.to_dict(),
            "study": self.study,
            "ratio_to_study": None if not self.study else self.latency.median_ms / self.study["median_ms"],
            "within_spread": self.within_spread,
            "same_setup": self.same_setup,
        }


def bench_model(
    path: str | Path,
    batch_size: int | None = None,
    threads: int | None = None,
    device: torch.device | None = None,
    min_run_time: float = 1.0,
) -> ModelBench:
    """Time an exported model (onnx on ONNX Runtime, pt2 as the torch.export program, state eagerly) at the
    study's batch size and thread count unless given, on ``device`` (default: the CPU); compare with the study's
    figure for that trial."""
    _check_bench_options(batch_size, threads, min_run_time)
    exported = load_exported(path)
    study = exported.meta.get("study_latency") or None
    batch = batch_size if batch_size is not None else int((study or {}).get("batch_size") or 1)
    threads = threads if threads is not None else int((study or {}).get("threads") or 1)
    BATCH.check(batch, "the batch size")
    check_model_fits(
        declared_config(exported.meta, exported.path),
        exported.input,
        train_batch=None,
        infer_batch=batch,
        what=f"timing {path} at batch {batch}",
    )
    device = torch.device("cpu") if device is None else device
    cfg = LatencyConfig(batch_size=batch, threads=threads, min_run_time=min_run_time)
    result = _time_exported(exported, device, cfg)
    within = same = None
    if study:
        within, same = _against_study(study, result, batch, exported.input.seq_len, threads)
    return ModelBench(str(path), exported.format, result, study, within, same)


def _check_bench_options(batch_size: int | None, threads: int | None, min_run_time: float) -> None:
    """The command's options, refused in one line before any file is read."""
    for flag, value in (("--batch", batch_size), ("--threads", threads)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be at least 1, got {value}.")
    if not 0 < min_run_time < math.inf:
        raise ConfigError(f"--min-run-time must be a positive number of seconds, got {min_run_time:g}.")
    RUN_TIME_S.check(min_run_time, "--min-run-time", "time for fewer seconds")
    for limit, flag, value in ((BATCH, "--batch", batch_size), (THREADS, "--threads", threads)):
        if value is not None:
            limit.check(value, flag)


def _time_exported(exported: Exported, device: torch.device, cfg: LatencyConfig) -> LatencyResult:
    """The loaded model timed on a seeded random input at ``cfg``'s batch and thread count."""
    batch, threads = cfg.batch_size, cfg.threads
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        x = random_input(exported.input, batch)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            runner = exported.make_runner(x, device, threads)
            return time_call(runner, device, cfg, batch, exported.input.seq_len, runtime=runner.runtime)
    finally:
        torch.set_num_threads(old)


def _against_study(
    study: dict[str, Any], result: LatencyResult, batch: int, seq_len: int, threads: int
) -> tuple[bool, bool]:
    """Whether this median lies in the study's interval, and whether it was measured the same way (runtime,
    batch, sequence length, threads; the study times a torch.export program's model eagerly)."""
    within = bool(study["low"] <= result.median_ms <= study["high"])
    same = (
        study.get("runtime"),
        study.get("batch_size"),
        study.get("seq_len"),
        study.get("threads"),
    ) == (
        result.runtime if result.runtime != "torch.export" else "eager",
        batch,
        seq_len,
        threads,
    )
    return within, same
