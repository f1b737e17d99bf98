"""Is a latency figure repeatable? Measure one architecture in two fresh processes and compare the medians.

    python -m benchmarks.latency_repeatability [--pairs 3] [--record benchmarks/latency_repeatability.md]

Each measurement runs in its own Python process with no latency cache, so nothing is shared between the two
but the machine. Target: the two medians within 5% of each other (relative to their mean).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.common import ROOT, append_record, load_average, load_text, markdown_table, record_block

TARGET = 0.05


def measure(args: argparse.Namespace) -> dict:
    """One measurement in this process (the child's job)."""
    from explorer.layout import InputSpec, LatencyConfig, ModelConfig
    from explorer.measure import model_latency, resolve_device

    model_cfg = ModelConfig.from_schedule(args.d_model, args.layers, args.heads)
    spec = InputSpec(kind="tokens", seq_len=args.seq_len, n_classes=10, vocab_size=64)
    cfg = LatencyConfig(batch_size=args.batch, threads=args.threads, min_run_time=args.min_run_time)
    res = model_latency(model_cfg, spec, cfg, resolve_device(args.device), cache=None)
    return {"arch": model_cfg.key(), **res.to_dict()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", default="increasing:4-8")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--min-run-time", type=float, default=1.0)
    ap.add_argument("--pairs", type=int, default=3, help="how many two-process comparisons to make")
    ap.add_argument("--record", type=Path, help="append a dated block to this markdown file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return

    shape = [
        "--d-model",
        args.d_model,
        "--layers",
        args.layers,
        "--heads",
        args.heads,
        "--seq-len",
        args.seq_len,
    ]
    timing = [
        "--batch",
        args.batch,
        "--threads",
        args.threads,
        "--device",
        args.device,
        "--min-run-time",
        args.min_run_time,
    ]
    child = [sys.executable, "-m", "benchmarks.latency_repeatability", "--child", *map(str, shape + timing)]
    load_before = load_average()
    rows = []
    for pair in range(1, args.pairs + 1):
        a, b = (
            json.loads(subprocess.run(child, capture_output=True, text=True, check=True, cwd=ROOT).stdout)
            for _ in "ab"
        )
        diff = abs(a["median_ms"] - b["median_ms"]) / ((a["median_ms"] + b["median_ms"]) / 2)
        rows.append((pair, a, b, diff))
    load_after = load_average()

    a0 = rows[0][1]
    table = markdown_table(
        [
            "pair",
            "process A median ms (IQR)",
            "process B median ms (IQR)",
            "relative difference",
            "within 5%",
        ],
        [
            [
                pair,
                f"{a['median_ms']:.3f} ({a['iqr_ms']:.3f})",
                f"{b['median_ms']:.3f} ({b['iqr_ms']:.3f})",
                f"{100 * diff:.1f}%",
                "yes" if diff <= TARGET else "NO",
            ]
            for pair, a, b, diff in rows
        ],
    )
    met = sum(d <= TARGET for *_, d in rows)
    block = record_block(
        f"{a0['arch']}, batch {args.batch}, seq {args.seq_len}",
        [
            f"device `{a0['device']}`, dtype {a0['dtype']}, threads {args.threads}, "
            f"min_run_time {args.min_run_time} s",
            f"load average (1 min) before/after: {load_text(load_before, load_after)}",
        ],
        [
            table,
            "",
            f"Target (medians within 5%): met in {met} of {len(rows)} pairs; "
            f"worst {100 * max(d for *_, d in rows):.1f}%.",
        ],
    )
    print(block)
    append_record(args.record, block)


if __name__ == "__main__":
    main()
