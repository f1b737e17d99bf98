"""Training throughput (samples/s) of one variant on a real task, through explorer.measure._train.fit.

Default: the digits variant the README trains (d_model 64, 4 layers, heads increasing:2-8, min_dk 8). Each
repeat is a fresh ``fit`` with the same seed; ``samples/s`` is fit's own figure (training examples processed
per second of training steps, evaluation excluded). With several ``--attention`` impls the repeats alternate
between them, so a shared machine's load drifts over all alike.

    python -m benchmarks.train_throughput --threads 1 --record benchmarks/train_throughput.md
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.common import add_run_args, append_record, machine, markdown_table, record_block
from explorer.data import load_task
from explorer.layout import ModelConfig, TrainConfig
from explorer.measure import fit, resolve_device


def measure(args: argparse.Namespace) -> dict[str, list]:
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    task = load_task(args.task)
    train_cfg = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, seed=0)
    impls = args.attention.split(",")
    results: dict[str, list] = {impl: [] for impl in impls}
    for r in range(args.repeats):
        for impl in impls if r % 2 == 0 else impls[::-1]:
            cfg = ModelConfig.from_schedule(
                args.d_model,
                args.layers,
                args.heads,
                min_dk=args.min_dk,
                mlp_ratio=args.mlp_ratio,
                attention=impl,
            )
            _, res = fit(cfg, task, train_cfg, device)
            results[impl].append(res)
    results["_meta"] = [task.sizes(), cfg.heads, device]
    return results


def table(results: dict[str, list]) -> str:
    rows = []
    for impl, runs in results.items():
        if impl == "_meta":
            continue
        sps = [r.samples_per_s for r in runs]
        per_epoch = statistics.median(r.train_time_s / r.epochs_run for r in runs)
        rows.append(
            [
                impl,
                f"{statistics.median(sps):,.0f} ({min(sps):,.0f}-{max(sps):,.0f})",
                f"{per_epoch:.2f}",
                f"{runs[0].val_accuracy:.3f}",
                f"{runs[0].test_accuracy:.3f}",
            ]
        )
    header = ["attention", "samples/s median (min-max)", "train s/epoch", "val acc", "test acc"]
    return markdown_table(header, rows, align="lrrrr")


def record(args: argparse.Namespace, results: dict[str, list]) -> str:
    sizes, heads, device = results["_meta"]
    hardware = torch.cuda.get_device_name(device) if device.type == "cuda" else machine()
    return record_block(
        f"{args.task}, d_model {args.d_model}, heads {args.heads}, attention {args.attention}",
        [
            f"machine: {hardware}; torch {torch.__version__}; threads {args.threads}; device {device}",
            f"task {args.task} ({sizes}); d_model {args.d_model}, heads {args.heads} -> {list(heads)}, "
            f"min_dk {args.min_dk}, mlp {args.mlp_ratio:g}x; {args.epochs} epochs, batch {args.batch_size}, "
            f"other TrainConfig defaults; {args.repeats} repeats",
            *([f"note: {args.note}"] if args.note else []),
        ],
        [table(results)],
        omit=("--note",),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="digits")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument(
        "--heads",
        default="increasing:2-8",
        help="head schedule (see explorer.layout._schedules.expand_schedule)",
    )
    p.add_argument("--min-dk", type=int, default=8)
    p.add_argument("--mlp-ratio", type=float, default=4.0)
    p.add_argument("--attention", default="fused", help="comma-separated impls, e.g. fused,merged,serial")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    add_run_args(p)
    args = p.parse_args()
    results = measure(args)
    print(table(results))
    append_record(args.record, record(args, results))


if __name__ == "__main__":
    main()
