"""Decoding latency with a key/value cache: multi-head vs grouped-query vs multi-query attention, one run.

    python -m benchmarks.decoding                                  # print the block
    python -m benchmarks.decoding --record benchmarks/decoding.md  # and append it there

One causal language model (d_model 512, 4 layers, 8 heads of 64, byte vocabulary) with kv_heads = 8 (ordinary
multi-head attention), 2 (grouped-query) and 1 (multi-query), timed by ``explorer.measure._decode.decode_latency``
(one new token per sequence against a cache of N positions, torch.utils.benchmark, fixed threads) at contexts
512 and 2048. Every round times all six configurations, in an order rotated from round to round, so a burst of
load from other processes lands on all of them; the ratios to kv_heads = heads are taken within a round (the
six figures of a round are measured minutes apart at most) and summarized by their median over rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from benchmarks.common import append_record, load_average, load_text, machine, markdown_table, record_block
from explorer.layout import LatencyConfig, ModelConfig
from explorer.measure import decode_latency, device_label, resolve_device


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
    load_before = load_average()
    started = time.perf_counter()
    for r in range(args.rounds):
        shift = r % len(cells)
        for ctx, kv in cells[shift:] + cells[:shift]:
            res = decode_latency(models[kv], ctx, cfg, device)
            times[(ctx, kv)].append(res.ms_per_token)
            iqrs[(ctx, kv)].append(res.latency.iqr_ms)
            cache_mb[(ctx, kv)] = res.kv_cache_bytes / 2**20
    load_after = load_average()
    minutes = (time.perf_counter() - started) / 60

    base = args.kv_heads[0]
    rows = []
    for ctx, kv in cells:
        t = times[(ctx, kv)]
        ratios = [b / x for b, x in zip(times[(ctx, base)], t, strict=True)]
        rows.append(
            [
                ctx,
                kv,
                f"{cache_mb[(ctx, kv)]:.1f}",
                f"{statistics.median(t):.2f}",
                f"{min(t):.2f}",
                f"{max(t):.2f}",
                f"{statistics.median(iqrs[(ctx, kv)]):.2f}",
                f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})",
            ]
        )
    header = [
        "context",
        "kv_heads",
        "kv cache (MiB, batch)",
        "ms/token: median over rounds",
        "best",
        "worst",
        "median IQR",
        f"speed-up over kv_heads={base} (its time / this time): median (min-max) over rounds",
    ]
    m = models[base]
    block = record_block(
        f"decoding, d_model {args.d_model}, {args.layers} layers, {args.heads} heads of {m.d_k[0]}, "
        f"batch {args.batch}",
        [
            f"machine: {machine()}; device label `{device_label(device)}`",
            f"torch {torch.__version__}, threads {args.threads}, min_run_time {args.min_run_time} s per figure, "
            f"{args.rounds} rounds ({minutes:.1f} min)",
            f"load average (1 min) before/after: {load_text(load_before, load_after)}",
        ],
        [markdown_table(header, rows)],
    )
    print(block)
    append_record(args.record, block)


if __name__ == "__main__":
    main()
