"""Does the head-count answer hold up when someone re-runs it? (the acceptance check)

Reads a finished study's answer (the layout its report recommends, with the 95% prediction interval for the mean
of 3 fresh seeds and the 95% interval for a new timing), then, in this new process:

1. times the recommended layout afresh ``--timings`` times (no latency cache, nothing else running, the study's
   latency settings), and checks each new median against the report's latency interval;
2. retrains it with ``--seeds`` fresh seeds (never used by the study), exactly as the study's finalists trained
   (same learning rate, batch, plateau schedule, patience and cap), and checks the mean validation accuracy
   against the report's re-run interval.

The result is appended to ``benchmarks/rerun_check.md`` (and ``rerun_check.json``) with the command, machine and
date.

    python -m benchmarks.rerun_check quickstart [--storage URL] [--seeds 3] [--jobs 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import dataclasses
import multiprocessing
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import (
    HERE,
    append_json,
    append_record,
    command,
    load_average,
    load_text,
    machine,
    stamp,
)

FRESH_SEED = 7_000_000  # far from the study's search (seed + number) and finalist (seed + 1e6 + i) seeds


def _train(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from explorer.data import load_task
    from explorer.layout import LatencyConfig, ModelConfig, TrainConfig
    from explorer.measure import evaluate_variant

    torch.set_num_threads(1)
    task = load_task(job["task"], **job["options"])
    lat = LatencyConfig(**job["latency"])
    r = evaluate_variant(ModelConfig.from_dict(job["model"]), task, TrainConfig(**job["train"]), lat)
    return {
        "seed": job["train"]["seed"],
        "val_accuracy": r.val_accuracy,
        "test_accuracy": r.test_accuracy,
        "epochs": r.fit.epochs_run,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study")
    ap.add_argument("--storage", default=None)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--timings", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "rerun_check.md")
    args = ap.parse_args()

    import explorer
    from explorer.answer import answer
    from explorer.data import load_task
    from explorer.measure import model_latency, resolve_device

    data = explorer.load(args.study, args.storage)
    spec = data.study.spec
    ans = answer(data.records, spec, data.report_input().retimings)
    rec = ans.recommended
    if rec is None or ans.evidence != "finalists":
        sys.exit(f"{args.study}: no finalist-backed recommendation to check (evidence: {ans.evidence}).")
    run = next(r for r in data.records if r.number == rec.numbers[0])
    train = run.train_config()

    # 1. fresh timings, before any training, with nothing else running in this process
    task = load_task(spec.task.name, **spec.task.options)
    device = resolve_device(spec.latency.device)
    timings = []
    for _ in range(args.timings):
        lat = model_latency(rec.config, task.spec, spec.latency, device, cache=None)
        timings.append(lat.median_ms)
        print(
            f"timing: {lat.median_ms:.3f} ms (report's interval [{rec.latency.low:.3f}, {rec.latency.high:.3f}])"
        )

    # 2. fresh seeds, trained like the finalists
    jobs = [
        {
            "task": spec.task.name,
            "options": dict(spec.task.options),
            "model": rec.config.to_dict(),
            "latency": dataclasses.asdict(spec.latency) | {"min_run_time": 0.05},
            "train": dataclasses.asdict(dataclasses.replace(train, seed=FRESH_SEED + i)),
        }
        for i in range(args.seeds)
    ]
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max(1, args.jobs), mp_context=ctx) as pool:
        runs = list(pool.map(_train, jobs))
    for r in runs:
        print(f"seed {r['seed']}: {r['val_accuracy']:.4f} val after {r['epochs']} epochs")
    mean = statistics.fmean(r["val_accuracy"] for r in runs)
    acc_inside = rec.rerun.low <= mean <= rec.rerun.high
    lat_inside = [rec.latency.low <= t <= rec.latency.high for t in timings]

    result = {
        "date": stamp(),
        "machine": machine(),
        "load_average": load_average(),
        "command": command(),
        "study": args.study,
        "heads": list(rec.config.heads),
        "d_model": rec.config.d_model,
        "n_layers": rec.config.n_layers,
        "report_accuracy": [rec.quality.estimate, rec.quality.low, rec.quality.high],
        "report_rerun_interval": [rec.rerun.low, rec.rerun.high],
        "report_latency": [rec.latency.estimate, rec.latency.low, rec.latency.high],
        "fresh_runs": runs,
        "fresh_mean": mean,
        "fresh_timings_ms": timings,
        "accuracy_inside": acc_inside,
        "timings_inside": sum(lat_inside),
    }
    heads = ",".join(map(str, rec.config.heads))
    accs = ", ".join(f"{r['val_accuracy']:.2%}" for r in runs)
    epochs = ", ".join(str(r["epochs"]) for r in runs)
    seeds = ", ".join(str(r["seed"]) for r in runs)
    times = ", ".join(f"{t:.3g}" for t in timings)
    text = "\n".join(
        [
            f"## {args.study}: {heads} heads per layer (d_model {rec.config.d_model}, {rec.config.n_layers} layers)",
            "",
            f"Recorded {result['date']} on {result['machine']}; load average {load_text(result['load_average'])}; "
            f"command `{result['command']}`.",
            "",
            f"- Accuracy: the report says {rec.quality.estimate:.2%} [{rec.quality.low:.2%}, {rec.quality.high:.2%}] "
            f"(mean of {rec.n} seeds) and that 3 fresh seeds should average within [{rec.rerun.low:.2%}, "
            f"{rec.rerun.high:.2%}]. Fresh seeds {seeds}: {accs} (epochs {epochs}), "
            f"mean {mean:.2%}: {'inside' if acc_inside else 'OUTSIDE'} the stated interval.",
            f"- Latency: the report says {rec.latency.estimate:.3g} ms [{rec.latency.low:.3g}, {rec.latency.high:.3g}] "
            f"for a new timing. Fresh timings in this process: {times} ms: "
            f"{sum(lat_inside)} of {len(timings)} inside.",
        ]
    )
    print(text)
    title = (
        "# Re-running the recommendation: fresh seeds and fresh timings against the report's intervals\n\n"
        "Written by `python -m benchmarks.rerun_check` (one block per check, appended); raw figures in "
        f"`{args.out.with_suffix('.json').name}`.\n"
    )
    append_record(args.out, text, title=title)
    append_json(args.out.with_suffix(".json"), result)


if __name__ == "__main__":
    main()
