"""The tutorial's attention table at the ViT-S shape on this machine, with the two performance targets checked.

    python -m benchmarks.attention                                 # print the table
    python -m benchmarks.attention --record benchmarks/attention.md

Targets: fused at least 1.3x faster than serial; fused achieved GFLOP/s at least 80% of a large fp32 matmul
timed the same way. The breakdown times the fused path's two halves apart (the Q/K/V + output projections,
which are plain matmuls, and scaled_dot_product_attention over the T x T scores) to show what limits it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.common import append_record, frame_table, load_average, load_text, machine, record_block
from explorer.layout import LatencyConfig
from explorer.measure import bench_attention, resolve_device, time_forward
from explorer.model import MultiHeadAttention, attention_flops

SPEEDUP_TARGET, PEAK_TARGET = 1.3, 80.0


class Projections(nn.Module):
    """Only the fused path's matmuls: x -> Q/K/V (one Linear) and the output Linear on a same-shaped tensor."""

    def __init__(self, attn: MultiHeadAttention):
        super().__init__()
        self.attn = attn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.attn.qkv(x)  # [B, T, 3C]
        return self.attn.proj(qkv[..., : x.shape[-1]])  # [B, T, C]


class ScoresOnly(nn.Module):
    """Only scaled_dot_product_attention on precomputed [B, H, T, dk] tensors (x holds q, k, v stacked)."""

    def forward(self, qkv: torch.Tensor) -> torch.Tensor:
        q, k, v = qkv.unbind(0)
        return F.scaled_dot_product_attention(q, k, v)


def breakdown(
    d_model: int, heads: int, seq_len: int, batch: int, device: torch.device, cfg: LatencyConfig
) -> pd.DataFrame:
    """Time and GFLOP/s of the fused path's projections and its attention core separately."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(d_model, heads)
    x = torch.randn(batch, seq_len, d_model)
    qkv = torch.randn(3, batch, heads, seq_len, d_model // heads)
    parts = {
        "projections (QKV + out, matmul)": (
            Projections(attn),
            x,
            2 * batch * seq_len * d_model * 4 * d_model,
        ),
        "sdpa (QK^T, softmax, AV)": (ScoresOnly(), qkv, 2 * 2 * batch * seq_len * seq_len * d_model),
    }
    rows = []
    for name, (model, inp, flops) in parts.items():
        res = time_forward(model, inp, device, cfg)
        rows.append(
            {
                "part": name,
                "median_ms": res.median_ms,
                "gflop": flops / 1e9,
                "gflops": flops / res.median_ms / 1e6,
            }
        )
    return pd.DataFrame(rows)


def best_of(tables: list[pd.DataFrame], by: str) -> pd.DataFrame:
    """Per ``by`` value, the row of the round with the lowest median (other processes only ever slow us down)."""
    rows = pd.concat(tables, ignore_index=True)
    return rows.loc[rows.groupby(by, sort=False).median_ms.idxmin()].reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-model", type=int, default=384)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=197)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-run-time", type=float, default=1.0)
    ap.add_argument(
        "--rounds", type=int, default=5, help="repeat the whole table; report each row's best round"
    )
    ap.add_argument("--record", type=Path, help="append a dated block to this markdown file")
    args = ap.parse_args()

    device = resolve_device(args.device)
    shape = (args.d_model, args.heads, args.seq_len, args.batch)
    cfg = LatencyConfig(batch_size=args.batch, threads=args.threads, min_run_time=args.min_run_time)
    load_before = load_average()
    # Whole rounds interleave the implementations, so a burst of load from other processes hits all of them.
    tables, splits = [], []
    for _ in range(args.rounds):
        tables.append(bench_attention(*shape, device, args.min_run_time, args.threads))
        splits.append(breakdown(*shape, device, cfg))
    load_after = load_average()

    df, parts = best_of(tables, "impl"), best_of(splits, "part")
    peak = max(t.matmul_peak_gflops.iloc[0] for t in tables)
    df["speedup_vs_serial"] = df.median_ms[df.impl == "serial"].item() / df.median_ms
    df["gflops"] = attention_flops(args.batch, args.seq_len, args.d_model) / df.median_ms / 1e6
    df["matmul_peak_gflops"] = peak
    df["pct_of_peak"] = 100 * df.gflops / peak
    parts["pct_of_peak"] = 100 * parts.gflops / peak
    spread = pd.concat(tables).groupby("impl", sort=False).median_ms.agg(["min", "max"])

    fused = df.set_index("impl").loc["fused"]
    met = {
        f"fused >= {SPEEDUP_TARGET}x faster than serial": (
            fused.speedup_vs_serial >= SPEEDUP_TARGET,
            f"{fused.speedup_vs_serial:.2f}x",
        ),
        f"fused >= {PEAK_TARGET:.0f}% of matmul peak": (
            fused.pct_of_peak >= PEAK_TARGET,
            f"{fused.pct_of_peak:.1f}% ({fused.gflops:.1f} of {peak:.1f} GFLOP/s)",
        ),
    }
    shown = df.drop(columns=["device", "threads", "d_model", "heads", "seq_len", "batch"])
    block = record_block(
        f"B={args.batch} T={args.seq_len} d_model={args.d_model} heads={args.heads}",
        [
            f"machine: {machine() if device.type == 'cpu' else fused.device}; device label `{fused.device}`",
            f"torch {torch.__version__}, threads {args.threads}, min_run_time {args.min_run_time} s per row",
            f"{args.rounds} rounds; each row is its best round (lowest median), speed-ups and GFLOP/s recomputed "
            "from those, the peak is the best round's matmul",
            "median_ms range over rounds: "
            + ", ".join(f"{i} {lo:.2f}-{hi:.2f}" for i, (lo, hi) in spread.iterrows()),
            f"load average (1 min) before/after: {load_text(load_before, load_after)}",
        ],
        [
            frame_table(shown),
            "",
            "Fused path broken into its two halves (same timer, best round):",
            "",
            frame_table(parts),
            "",
            "Targets:",
            "",
            *[f"- {name}: {'MET' if ok else 'NOT MET'} ({value})" for name, (ok, value) in met.items()],
        ],
    )
    print(block)
    append_record(args.record, block)


if __name__ == "__main__":
    main()
