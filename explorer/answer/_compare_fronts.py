"""Several studies side by side: each one's accuracy/latency front in one table, labelled with where and how its
latency was measured (CPU vs GPU, eager vs ONNX Runtime, ...). Pure functions over trial records."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from explorer.answer._pareto import knee, pareto_front
from explorer.answer._tables import architecture_table, architectures
from explorer.storage import Role, TrialRecord

COMPARE_COLUMNS = [
    "study",
    "label",
    "device",
    "runtime",
    "batch_size",
    "seq_len",
    "threads",
    "number",
    "d_model",
    "n_layers",
    "heads",
    "family",
    "val_accuracy",
    "val_low",
    "val_high",
    "latency_ms",
    "latency_low",
    "latency_high",
    "params",
    "knee",
]


@dataclass(frozen=True)
class StudySetup:
    """Where and how a study's latencies were measured (the most common setup among its finished trials)."""

    device: str
    runtime: str
    batch_size: int | None
    seq_len: int | None
    threads: int | None

    def label(self, name: str) -> str:
        return f"{name} ({self.device}, {self.runtime}, batch {self.batch_size})"


def study_setup(records: Sequence[TrialRecord]) -> StudySetup:
    """The device, runtime and shape most of a study's finished trials were timed with."""
    setups = Counter(
        (r.latency.device, r.latency.runtime, r.latency.batch_size, r.latency.seq_len, r.latency.threads)
        for r in records
        if r.finished and r.latency is not None
    )
    if not setups:
        return StudySetup("unknown", "unknown", None, None, None)
    return StudySetup(*setups.most_common(1)[0][0])


def compare_fronts(studies: Sequence[tuple[str, Sequence[TrialRecord]]]) -> pd.DataFrame:
    """One row per architecture on each study's search front (feasible ones; fastest first within a study),
    with the study's measurement setup and whether the row is the knee of that front (one run per architecture;
    the study's recommendation, from its finalists, may be another layout). Columns: COMPARE_COLUMNS."""
    frames = []
    for name, records in studies:
        setup = study_setup(records)
        table = architecture_table([a for a in architectures(records, Role.SEARCH) if a.feasible])
        if table.empty:
            continue
        front = pareto_front(table).copy()
        k = knee(front, bounds=table)
        front["knee"] = front["key"] == k["key"]
        front["study"] = name
        front["label"] = setup.label(name)
        front["device"], front["runtime"] = setup.device, setup.runtime
        front["batch_size"], front["seq_len"], front["threads"] = (
            setup.batch_size,
            setup.seq_len,
            setup.threads,
        )
        frames.append(front[COMPARE_COLUMNS])
    if not frames:
        return pd.DataFrame(columns=COMPARE_COLUMNS)
    return pd.concat(frames, ignore_index=True)
