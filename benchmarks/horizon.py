"""Does the finalists' horizon rank the layouts as a longer one does, and have its runs finished learning?

The quickstart's ladder (1, 2, 4, 8 and 16 heads in both layers of its d_model 64, 2-layer base) is trained on the
first units of the quickstart's own evidence grid (its folds and seeds, :func:`explorer.answer._finalists.unit_at`)
at each of several horizons (the finalists' schedule: warm-up, then cosine decay to zero over the horizon). For
each horizon the record gives:

* each layout's mean cross-validated accuracy over the units, and its paired difference from 16,16 with a 90% t
  interval (each bound a one-sided test at 5%: the rule's level) and whether that places it within the 1-point
  margin, beyond it, or neither;
* Kendall's tau between the layouts' means at this horizon and at the longest;
* the share of runs that plateaued (:func:`explorer.answer._horizon.run_plateaued`: the last quarter of the
  schedule added no more than one binomial standard error), the acceptance figure of the plateau criterion;
* the pilot's statistic between this horizon and twice it (the mean paired gain over every layout-unit pair and
  its one-sided 95% lower bound): where the pilot would stop.

    python -m benchmarks.horizon --units 5 --horizons 20 40 80 160 --jobs 2 --record benchmarks/horizon.md
    python -m benchmarks.horizon --replay benchmarks/horizon.json --record benchmarks/horizon.md
    python -m benchmarks.horizon --units 12 --horizons 40 --folds 3 --json benchmarks/horizon_folds.json \
        --record benchmarks/horizon.md
    python -m benchmarks.horizon --units 5 --horizons 40 --seeds 1 2 3 4 --json benchmarks/horizon_seeds.json \
        --record benchmarks/horizon.md
    python -m benchmarks.horizon --units 6 --horizons 40 --base 32 2 2 --ladder 1 2 4 8 \
        --json benchmarks/horizon_bases.json --record benchmarks/horizon.md

``--folds`` cuts the labelled images into that many folds instead of the spec's (fewer folds: a larger evaluation
split, fewer training images): what a quickstart with other folds would rank and how noisy its units are.
``--seeds`` trains the units of studies with those seeds instead (each study seed cuts its own folds and draws its
own initial seeds; default: the spec's seed alone), and the record then gives each layout's difference from 16,16
by study seed: how far one study's units may sit from another's. Either one's runs go to a file of their own
(``--json``); the decision and forecast benchmarks take the last entry of each record they are given
(``--horizon horizon.json horizon_seeds.json``) as the quickstart's truth. The paired spread of each layout's difference from 16,16 is recorded
beside the means.

``--base D_MODEL LAYERS PATCH`` (with ``--ladder``, the head counts) trains another base model's uniform ladder on
the same units: a candidate question for the quickstart, read as the quickstart's is (differences from the widest
layout, their spread); its latency is not measured here.

Each run uses one CPU thread; ``--jobs 2`` runs two at a time on a 2-core machine. Raw runs: ``horizon.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import json
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from benchmarks.common import (
    ROOT,
    append_json,
    append_record,
    commit,
    load_text,
    machine,
    markdown_table,
    record_block,
)

SPEC = ROOT / "studies" / "quickstart.toml"
LADDER = (1, 2, 4, 8, 16)


@dataclasses.dataclass(frozen=True)
class Base:
    """The base model a ladder is trained on: its width, depth, the digits patch (None: the spec's) and the
    uniform head counts tried."""

    d_model: int = 64
    layers: int = 2
    patch: int | None = None
    ladder: tuple[int, ...] = LADDER


QUICKSTART = Base()  # the quickstart's own base model; runs recorded before --base carry no "base" entry


def base_of(run: dict[str, Any]) -> Base:
    b = run.get("base")
    return QUICKSTART if b is None else Base(b["d_model"], b["layers"], b["patch"], tuple(b["ladder"]))


MARGIN = 0.01  # the quickstart's margin, one accuracy point
RISK = 0.05


def _spec(folds: int | None, seed: int | None = None) -> Any:
    """The quickstart's spec, its finalists' folds set to ``folds`` (None: as the spec has them) and its seed to
    ``seed`` (None: the spec's)."""
    from explorer.spec import load_spec

    spec = load_spec(SPEC)
    if seed is not None:
        spec = dataclasses.replace(spec, seed=seed)
    if folds is None:
        return spec
    return dataclasses.replace(spec, finalists=dataclasses.replace(spec.finalists, folds=folds))


def _train(job: tuple[int, int, int, int | None, int | None, Base]) -> dict[str, Any]:
    """Train the ladder layout ``heads`` on unit ``u`` of the quickstart's grid (its finalists' folds set to
    ``folds``, None: the spec's; the study's seed ``seed``, None: the spec's) for ``epochs`` epochs, on the base
    model ``base`` (its width, depth and digits patch)."""
    import torch

    from explorer.answer._finalists import unit_at
    from explorer.data import fold_task, load_task
    from explorer.layout import ModelConfig, TrainConfig
    from explorer.measure import fit

    torch.set_num_threads(1)
    heads, u, epochs, folds, seed, base = job
    spec = _spec(folds, seed)
    unit = unit_at(spec, u)
    options = {**spec.task.options, **({} if base.patch is None else {"patch": base.patch})}
    task = fold_task(load_task(spec.task.name, **options), unit.fold, unit.folds, unit.fold_seed)
    config = ModelConfig(
        d_model=base.d_model,
        heads=(heads,) * base.layers,
        min_dk=1,
        mlp_ratio=spec.space.mlp_ratio[0],
        dropout=spec.space.dropout,
        attention=spec.space.attention,
    )
    cfg = TrainConfig(epochs=epochs, batch_size=spec.task.batch_size, lr=float(spec.space.lr), seed=unit.seed)
    t0 = time.perf_counter()
    _, result = fit(config, task, cfg, torch.device("cpu"))
    return {
        "heads": heads,
        **({} if base == QUICKSTART else {"base": dataclasses.asdict(base)}),
        "unit": u,
        "epochs": epochs,
        "val": result.val_accuracy,
        "val_size": len(task.val[1]),
        "folds": unit.folds,
        "seed": spec.seed,
        "history": [s.val_accuracy for s in result.history],
        "seconds": time.perf_counter() - t0,
    }


def _plateaued(run: dict[str, Any]) -> bool:
    from explorer.measurements import plateaued

    h = run["history"]
    return plateaued(h, run["val_size"], max(2, len(h) // 4))


def _bounds(d: np.ndarray, level: float) -> tuple[float, float]:
    """Two-sided t interval of the mean of ``d`` at ``level``."""
    se = d.std(ddof=1) / math.sqrt(len(d))
    q = stats.t.ppf((1 + level) / 2, len(d) - 1)
    return float(d.mean() - q * se), float(d.mean() + q * se)


def score(runs: list[dict[str, Any]]) -> list[str]:
    """The record's tables from the raw runs."""
    horizons = sorted({r["epochs"] for r in runs})
    units = sorted({unit_key(r) for r in runs})
    ladder = sorted({r["heads"] for r in runs})
    top = f"{ladder[-1]},{ladder[-1]}"  # every difference is from the widest layout
    acc = {(r["heads"], unit_key(r), r["epochs"]): r["val"] for r in runs}

    def grid(h: int) -> np.ndarray:  # [layouts, units]
        return np.array([[acc.get((k, u, h), np.nan) for u in units] for k in ladder])

    longest = grid(horizons[-1]).mean(axis=1)
    rows = []
    for h in horizons:
        g = grid(h)
        cells = []
        for i, k in enumerate(ladder):
            if k == ladder[-1]:
                cells.append(f"{100 * np.nanmean(g[i]):.2f}")
                continue
            d = g[-1] - g[i]  # how far below the widest, unit by unit
            lo, hi = _bounds(d, 1 - 2 * RISK)
            verdict = "within" if hi < MARGIN else "beyond" if lo > MARGIN else "open"
            cells.append(
                f"{100 * np.nanmean(g[i]):.2f} ({100 * d.mean():+.2f} [{100 * lo:.2f}, {100 * hi:.2f}], {verdict}; "
                f"spread {100 * np.nanstd(d, ddof=1):.2f})"
            )
        tau = stats.kendalltau(g.mean(axis=1), longest).statistic
        flat = [_plateaued(r) for r in runs if r["epochs"] == h]
        secs = np.median([r["seconds"] for r in runs if r["epochs"] == h])
        rows.append([h, *cells, f"{tau:.2f}", f"{sum(flat)} of {len(flat)}", f"{secs:.1f}"])
    table = markdown_table(
        [
            "epochs",
            *[f"{k},{k}" for k in ladder],
            "Kendall tau vs longest",
            "runs plateaued",
            "s a run (median)",
        ],
        rows,
    )
    gains = []
    for h in horizons[:-1]:
        if 2 * h not in horizons:
            continue
        d = (grid(2 * h) - grid(h)).ravel()
        d = d[~np.isnan(d)]
        lower = float(d.mean() - stats.t.ppf(0.95, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
        gains.append(
            [
                f"{h} -> {2 * h}",
                len(d),
                f"{100 * d.mean():+.2f}",
                f"{100 * lower:+.2f}",
                "yes" if lower > 0 else "no",
            ]
        )
    pilot = markdown_table(
        [
            "doubling",
            "layout-unit pairs",
            "mean gain (points)",
            "one-sided 95% lower bound",
            "the pilot doubles",
        ],
        gains,
    )
    seeds = sorted({seed for seed, _ in units})
    by_seed = []
    if len(seeds) > 1:
        g = grid(horizons[-1])
        for seed in seeds:
            cols = [j for j, (s, _) in enumerate(units) if s == seed]
            diffs = [f"{100 * np.nanmean(g[-1, cols] - g[i, cols]):+.2f}" for i in range(len(ladder) - 1)]
            by_seed.append([seed, len(cols), *diffs])
        by_seed = [
            "",
            f"By study seed, at {horizons[-1]} epochs: each layout's mean paired difference below {top} over that "
            "seed's units (points):",
            "",
            markdown_table(["study seed", "units", *[f"{k},{k}" for k in ladder[:-1]]], by_seed),
        ]
    return [
        f"Each cell: the layout's mean cross-validated accuracy over {len(units)} units (%), then how far it lies "
        f"below {top} (paired by unit, points) with its 90% t interval and whether that interval places it within "
        "the 1-point margin, beyond it, or neither (open); then the standard deviation of that difference over the "
        "units (its paired spread, points).",
        "",
        table,
        "",
        "The pilot's statistic over every layout (the stage's pilot uses two of them):",
        "",
        pilot,
        *by_seed,
    ]


def unit_key(run: dict[str, Any]) -> tuple[int, int]:
    """A run's unit: its study's seed (entries recorded before ``--seeds``: the spec's, 0) and its index."""
    return run.get("seed", 0), run["unit"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--units", type=int, default=5)
    parser.add_argument("--horizons", type=int, nargs="+", default=[20, 40, 80, 160])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--folds", type=int, help="the finalists' folds (default: the spec's)")
    parser.add_argument(
        "--seeds", type=int, nargs="+", help="train the units of these study seeds (default: the spec's)"
    )
    parser.add_argument(
        "--base",
        nargs=3,
        type=int,
        metavar=("D_MODEL", "LAYERS", "PATCH"),
        help="train another base model on the same units (default: the quickstart's, 64 2 2)",
    )
    parser.add_argument(
        "--ladder", type=int, nargs="+", help=f"the head counts tried in every layer (default {LADDER})"
    )
    parser.add_argument("--replay", type=Path, help="score the runs of a recorded entry (no training)")
    parser.add_argument("--record", type=Path)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "horizon.json")
    args = parser.parse_args()
    before = os.getloadavg()[0]
    t0 = time.time()
    base = QUICKSTART
    if args.base or args.ladder:
        d_model, layers, patch = args.base or (64, 2, 2)
        base = Base(d_model, layers, None if args.base is None else patch, tuple(args.ladder or LADDER))
    if args.replay:
        runs = json.loads(args.replay.read_text())[-1]["runs"]
    else:
        jobs = [
            (k, u, h, args.folds, seed, base)
            for h in sorted(args.horizons, reverse=True)
            for seed in args.seeds or [None]
            for u in range(args.units)
            for k in base.ladder
        ]
        with cf.ProcessPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(_train, jobs))
        append_json(args.json, {"commit": commit(), "runs": runs})
    body = score(runs)
    units = len({r["unit"] for r in runs})
    seeds = sorted({unit_key(r)[0] for r in runs})
    folds = runs[0].get("folds") or _spec(None).finalists.folds  # entries before --folds: the spec's
    trained = base_of(runs[0])
    where = (
        "the quickstart's ladder at d_model 64, 2 layers"
        if trained == QUICKSTART
        else f"the ladder {', '.join(map(str, trained.ladder))} heads a layer at d_model {trained.d_model}, "
        f"{trained.layers} layer(s), digits patch {trained.patch or 'as the spec'} (another base model than the "
        "quickstart's)"
    )
    facts = [
        f"machine: {machine()}; load average before/after {load_text(before, os.getloadavg()[0])}",
        f"commit {commit()}; {time.time() - t0:.0f} s; one CPU thread a run, {args.jobs} at a time",
        f"{where}, on units 0-{units - 1} of the quickstart's grid (study seed"
        f"{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))}; {folds} folds of "
        f"the 1,527 labelled digits, {runs[0]['val_size']} images evaluated a unit); raw runs: "
        f"{os.path.relpath(args.replay or args.json, ROOT)}",
    ]
    block = record_block("the ladder at several horizons", facts, body)
    append_record(
        args.record,
        block,
        title="# Horizons: do the finalists' runs rank layouts as longer runs do?\n\nWritten by "
        "`benchmarks/horizon.py`.",
    )
    print(block)


if __name__ == "__main__":
    main()
