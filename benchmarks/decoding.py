"""Decoding latency with a key/value cache: multi-head vs grouped-query vs multi-query attention, one run.

    .venv/bin/python benchmarks/decoding.py                                  # print the block
    .venv/bin/python benchmarks/decoding.py --record benchmarks/decoding.md  # and append it there

One causal language model (d_model 512, 4 layers, 8 heads of 64, byte vocabulary) with kv_heads = 8 (ordinary
multi-head attention), 2 (grouped-query) and 1 (multi-query), timed by ``explorer.engine.decode.decode_latency``
(one new token per sequence against a cache of N positions, torch.utils.benchmark, fixed threads) at contexts
512 and 2048. Every round times all six configurations, in an order rotated from round to round, so a burst of
load from other processes lands on all of them; the ratios to kv_heads = heads are taken within a round (the
six figures of a round are measured minutes apart at most) and summarized by their median over rounds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.engine.config import LatencyConfig, ModelConfig  # noqa: E402
from explorer.engine.decode import decode_latency  # noqa: E402
from explorer.engine.device import cpu_model_name, device_label, resolve_device  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, nargs="+", default=[8, 2, 1])
    ap.add_argument("--contexts", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-run-time", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--record", type=Path, help="append a dated block to this markdown file")
    args = ap.parse_args()

    device = resolve_device(args.device)
    cfg = LatencyConfig(batch_size=args.batch, threads=args.threads, min_run_time=args.min_run_time)
    models = {
        kv: ModelConfig.from_schedule(
            args.d_model, args.layers, f"uniform:{args.heads}", kv_heads=f"uniform:{kv}"
        )
        for kv in args.kv_heads
    }
    cells = [(ctx, kv) for ctx in args.contexts for kv in args.kv_heads]
    times: dict[tuple[int, int], list[float]] = {c: [] for c in cells}
    iqrs: dict[tuple[int, int], list[float]] = {c: [] for c in cells}
    cache_mb: dict[tuple[int, int], float] = {}
    load_before = os.getloadavg()[0]
    started = dt.datetime.now()
    for r in range(args.rounds):
        shift = r % len(cells)
        for ctx, kv in cells[shift:] + cells[:shift]:
            res = decode_latency(models[kv], ctx, cfg, device)
            times[(ctx, kv)].append(res.ms_per_token)
            iqrs[(ctx, kv)].append(res.latency.iqr_ms)
            cache_mb[(ctx, kv)] = res.kv_cache_bytes / 2**20
    load_after = os.getloadavg()[0]
    minutes = (dt.datetime.now() - started).total_seconds() / 60

    base = args.kv_heads[0]
    lines = [
        "| context | kv_heads | kv cache (MiB, batch) | ms/token: median over rounds | best | worst | "
        f"median IQR | speed-up over kv_heads={base} (its time / this time): median (min-max) over rounds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for ctx, kv in cells:
        t = times[(ctx, kv)]
        ratios = [b / x for b, x in zip(times[(ctx, base)], t, strict=True)]
        lines.append(
            f"| {ctx} | {kv} | {cache_mb[(ctx, kv)]:.1f} | {statistics.median(t):.2f} | {min(t):.2f} | "
            f"{max(t):.2f} | {statistics.median(iqrs[(ctx, kv)]):.2f} | "
            f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |"
        )
    m = models[base]
    command = "python benchmarks/decoding.py " + " ".join(sys.argv[1:])
    block = "\n".join(
        [
            f"## {started.isoformat(timespec='minutes')}: decoding, d_model {args.d_model}, {args.layers} layers, "
            f"{args.heads} heads of {m.d_k[0]}, batch {args.batch}",
            "",
            f"- machine: {cpu_model_name()}, {os.cpu_count()} CPU(s); device label `{device_label(device)}`",
            f"- torch {torch.__version__}, threads {args.threads}, min_run_time {args.min_run_time} s per figure, "
            f"{args.rounds} rounds ({minutes:.1f} min)",
            f"- load average (1 min) before/after: {load_before:.2f} / {load_after:.2f}",
            f"- command: `{command}`",
            "",
            *lines,
            "",
        ]
    )
    print(block)
    if args.record:
        with args.record.open("a") as f:
            f.write(block + "\n")


if __name__ == "__main__":
    main()
