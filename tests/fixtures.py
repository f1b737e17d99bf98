"""Synthetic studies and records with a known structure, and a tiny real spec, for tests and benchmarks.

:func:`make_study` fills an Optuna study with trials written exactly as the objective writes them
(:meth:`explorer.storage._record.TrialRecord.to_attrs`), whose accuracy falls at one head and saturates by eight,
drops when d_k < 16, and whose latency grows with width and head count, so the analysis has right answers to
find. :func:`record` builds one :class:`~explorer.storage._record.TrialRecord` for pure-function tests.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.trial import TrialState

from benchmarks import synthetic
from benchmarks.synthetic import (  # the synthetic truth the benchmarks share
    N_VAL,
    synthetic_accuracy,
    synthetic_latency,
)
from explorer.layout import ModelConfig, unit_seed
from explorer.measurements import DecodeResult, LatencyResult
from explorer.spec import spec_from_dict
from explorer.storage import TrialRecord

if TYPE_CHECKING:
    from explorer.spec import StudySpec
    from explorer.study import StudyRunPlan

__all__ = [
    "LM_SPEC",
    "lm",
    "lm_search",
    "make_study",
    "plan_study",
    "record",
    "synthetic_accuracy",
    "synthetic_latency",
    "write_tiny_spec",
]


def latency(ms: float, when: str = "2025-01-01T12:00:00+00:00", spread: float = 0.02, cached: bool = False):
    """A latency measurement of median ``ms`` with ten block times spread by ``spread`` (relative)."""
    blocks = tuple(ms * (1 + spread * (k - 4.5) / 4.5) for k in range(10))
    return LatencyResult(ms, ms * spread, 64, 16, 1, "cpu (test)", "float32", 10, cached, blocks, when, 0.1)


def record(
    number: int,
    heads: tuple[int, ...],
    acc: float,
    lat: float,
    *,
    d_model: int = 64,
    role: str = "search",
    state: TrialState = TrialState.COMPLETE,
    seed: int | None = None,
    epochs: int = 10,
    history: tuple[float, ...] | None = None,
    params: int | None = None,
    label: str | None = None,
    when: str | None = None,
    lr: float = 1e-3,
    **changes: Any,
) -> TrialRecord:
    """One trial record; ``history`` defaults to a run that reached ``acc`` at its last of ``epochs`` epochs."""
    config = ModelConfig(d_model=d_model, heads=heads, min_dk=1, mlp_ratio=2.0)
    hist = (
        history if history is not None else tuple(acc * (0.6 + 0.4 * (e + 1) / epochs) for e in range(epochs))
    )
    return TrialRecord(
        number=number,
        state=state,
        role=role,
        config=config,
        lr=lr,
        seed=number if seed is None else seed,
        epochs_planned=epochs,
        batch_size=32,
        history=hist,
        val_accuracy=hist[-1] if hist else None,
        test_accuracy=(hist[-1] - 0.005) if hist else None,
        val_size=N_VAL,
        latency=latency(lat, when or f"2025-01-01T12:{number // 60:02d}:{number % 60:02d}+00:00"),
        params=params if params is not None else d_model * d_model * 12 * len(heads),
        flops=d_model * d_model * 24 * len(heads),
        device="cpu (test)",
        torch_version="2.13",
        proposal="sampler" if role == "search" else "enqueued",
        label=label,
        **changes,
    )


# --------------------------------------------------------------------------------------------- language models

LM_SPEC = spec_from_dict(
    {
        "name": "lm",
        "n_trials": 9,
        "task": {"name": "text"},
        "objectives": {"decode": "minimize"},
        "space": {
            "d_model": [64],
            "n_layers": [2],
            "heads": [2, 4, 8],
            "kv_heads": [1, 2, 4, 8],
            "families": ["uniform"],
        },
        "decode": {"context": 512, "batch_size": 4},
    }
)


def lm(
    number, heads, kv, bpb, decode_ms, *, role="search", seed=None, label=None, lat=2.0, se=0.01, epochs=4
):
    """One language-model trial (text task, decoding measured): ``heads``/``kv`` per layer (2 layers), validation
    bits per byte ``bpb``."""
    config = ModelConfig(64, (heads, heads), kv_heads=(kv, kv))
    timing = latency(decode_ms, f"2025-01-01T13:{number // 60:02d}:{number % 60:02d}+00:00")
    decode = DecodeResult(timing, 512, config.kv_cache_bytes(512, 4), config.kv_cache_bytes_per_token())
    base = record(number, (4, 4), 0.0, lat, role=role, seed=seed, label=label, epochs=epochs)
    history = tuple(bpb + 0.3 * (epochs - 1 - e) for e in range(epochs))
    return dataclasses.replace(
        base,
        config=config,
        task_kind="language_model",
        history=history,
        val_accuracy=0.4,
        test_accuracy=0.4,
        val_bpb=bpb,
        test_bpb=bpb + 0.1,
        val_bpb_se=se,
        decode=decode,
    )


def lm_search(gqa_loss=0.0, gqa_cost=1.05, mha_cost=2.0, noise=0.005, seed=0) -> list[TrialRecord]:
    """Every (heads, kv) pair once: multi-head at 3.50 bits per byte, grouped-query ``gqa_loss`` worse,
    multi-query 0.1 worse; decoding 1 ms for multi-query, ``gqa_cost`` for grouped-query, ``mha_cost`` for
    multi-head."""
    rng = np.random.default_rng(seed)
    out = []
    pairs = [(h, k) for h in (2, 4, 8) for k in (1, 2, 4, 8) if h % k == 0]
    for i, (h, k) in enumerate(pairs):
        kind = "multi-head" if k == h else "multi-query" if k == 1 else "grouped-query"
        bpb = {"multi-head": 3.50, "grouped-query": 3.50 + gqa_loss, "multi-query": 3.60}[kind]
        cost = {"multi-head": mha_cost, "grouped-query": gqa_cost, "multi-query": 1.0}[kind]
        out.append(lm(i, h, k, bpb + rng.normal(0, noise), cost * (1 + rng.normal(0, 0.01))))
    return out


def make_study(
    n: int = 120,
    *,
    storage: str | optuna.storages.BaseStorage | None = None,
    name: str = "synthetic",
    **kw: Any,
) -> optuna.Study:
    """:func:`benchmarks.synthetic.make_study` with the tests' defaults: 120 trials, in memory, named synthetic."""
    return synthetic.make_study(n, storage=storage, name=name, **kw)


def write_tiny_spec(
    tmp_path: Path, name: str = "tiny", n_trials: int = 4, epochs: int = 2, **kw: Any
) -> Path:
    """:func:`benchmarks.synthetic.write_tiny_spec` with the finalists' reference layouts on (the spec's
    default): 24 architectures, d_model 16 or 32, one layer (1, 2 or 4 heads) or two (3 uniform, 3 increasing
    and 3 decreasing layouts)."""
    return synthetic.write_tiny_spec(tmp_path, name, n_trials, epochs, **{"references": True, **kw})


def lm_finalists(start: int = 100, seeds: int = 6) -> list[TrialRecord]:
    """Finalist runs of a kv study at 4 query heads on ``seeds`` shared units (a language model keeps its fixed
    split: one unit per seed): the knee (2 key/value heads, grouped-query) as good as multi-head (4) at about
    half its decoding time, and multi-query (1) 0.2 bits per byte worse."""
    finals, n = [], start
    rng = np.random.default_rng(7)
    for label, kv, bpb, dec in (
        ("knee", 2, 3.50, 1.1),
        ("multi-head", 4, 3.50, 2.0),
        ("multi-query", 1, 3.70, 1.0),
    ):
        for s in range(seeds):
            value = bpb + 0.01 * (s - 1) + float(rng.normal(0, 0.004))
            finals.append(lm(n, 4, kv, value, dec, role="finalist", seed=unit_seed(0, s), label=label))
            n += 1
    return finals


def plan_study(spec: StudySpec, url: str | None = None, **options: Any) -> StudyRunPlan:
    """The plan of a run of ``spec`` in ``url`` with :class:`explorer.study.RunOptions` ``options``: its study
    created (or loaded), every input checked, nothing run (``.study``: the study; ``.context``: its task and
    space)."""
    from explorer.study import RunOptions, plan_run  # torch: only for the tests that create a study

    return plan_run(spec, RunOptions(**options), url)
