"""Trial records -> one flat row per trial (every state and role), for the CSV and the figures."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from explorer.answer._tables import attention_kind
from explorer.storage import TrialRecord


def _heads_text(heads: Sequence[int]) -> str:
    return ",".join(map(str, heads))


def trials_table(records: Iterable[TrialRecord]) -> pd.DataFrame:
    """One row per record (every state and role), flat, for the CSV and the figures.

    ``heads`` and ``d_k`` are tuples; :func:`csv_ready` turns them into "4,2" strings for the CSV edge.
    """
    rows = [_row(r) for r in records]
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(
            columns=["number", "state", "role", "heads", "val_accuracy", "latency_ms", "feasible"]
        )
    return df


def _row(r: TrialRecord) -> dict[str, Any]:
    """One record as a flat row, one ``constraint_NAME`` column per constraint value it recorded."""
    lat = r.latency
    row = {
        "number": r.number,
        "state": r.state.name,
        "role": r.role,
        "label": r.label,
        "d_model": r.config.d_model if r.config else np.nan,
        "n_layers": r.config.n_layers if r.config else np.nan,
        "heads": r.heads,
        "kv_heads": r.config.kv_per_layer if r.config else (),
        "d_k": r.d_k,
        "family": r.family,
        "attention_kind": attention_kind(r.config) if r.config else None,
        "min_dk": r.config.min_dk if r.config else np.nan,
        "heads_max": max(r.heads) if r.heads else np.nan,
        "heads_min": min(r.heads) if r.heads else np.nan,
        "dk_min": min(r.d_k) if r.d_k else np.nan,
        "lr": r.lr,
        "seed": r.seed,
        "task_kind": r.task_kind,
        "quality": r.quality,
        "val_accuracy": r.val_accuracy,
        "test_accuracy": r.test_accuracy,
        "val_bpb": r.val_bpb,
        "test_bpb": r.test_bpb,
        "val_size": r.val_size,
        "latency_ms": lat.median_ms if lat else np.nan,
        "decode_ms": r.decode_ms if r.decode_ms is not None else np.nan,
        "kv_cache_bytes": r.decode.kv_cache_bytes if r.decode else np.nan,
        "latency_iqr_ms": lat.iqr_ms if lat else np.nan,
        "latency_cached": lat.cached if lat else None,
        "params": r.params,
        "flops": r.flops,
        "epochs_run": r.epochs_run,
        "epochs_planned": r.epochs_planned,
        "stop": r.stop,
        "fail_reason": r.fail_reason,
        "retry_of": r.retry_of,
        "feasible": r.feasible,
        "proposal": r.proposal,
        "rejected": r.rejected,
        "device": r.device,
        "duration_s": r.duration_s,
        "started": r.started,
        "completed": r.completed,
        "key": r.key,
    }
    for name, value in r.constraints:
        row[f"constraint_{name}"] = value
    return row


def csv_ready(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with tuple columns written as "4,2" strings (the CSV edge)."""
    out = df.copy()
    for col in out.columns:
        if out[col].map(lambda v: isinstance(v, tuple)).any():
            out[col] = out[col].map(lambda v: _heads_text(v) if isinstance(v, tuple) else v)
    return out
