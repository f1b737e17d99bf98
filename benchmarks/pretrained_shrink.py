"""A trained checkpoint cut to fewer heads: per-layer plans chosen by importance beside the anchors' global rule at
the same parameter count, each recovered on the same budget and seeds, then measured on held-out text and timed.

    python examples/pretrained/train_llama.py --out checkpoints/llama-text --steps 1500
    python -m benchmarks.pretrained_shrink --checkpoint checkpoints/llama-text --record benchmarks/pretrained_shrink.md

For a Llama causal LM trained on the text task (bytes of Python source; its own held-out windows, which its training
never saw): the importance of every head on 256 held-out windows (:func:`explorer.pretrained.head_importance`),
then each candidate: a uniform per-layer plan keeping the most important ``H`` heads of each layer with ``K``
key/value heads (``--plans H:K ...``), and for each of them the anchors' rule (:func:`explorer.pretrained.global_plan`:
the globally least important heads removed, scores normalized per layer, down to that plan's parameter count).
Each candidate is cut (:func:`explorer.pretrained.shrink`), measured before recovery, recovered
(:func:`explorer.pretrained.recover`: the same steps, learning rate and training windows for all, distillation
from the original's logits, one run per recovery seed) and measured again: held-out bits per byte (the mean
next-byte cross-entropy over ln 2; mean and range over the seeds), the original's decoding latency per token
against a cache of 128 positions (batch 8, one thread; the median of the timer's blocks) and the key/value cache's
bytes per token. The original is measured the same way. This is the comparison the rule's answer will be put
beside; here the candidates are fixed plans, not a search.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import append_record, commit, load_text, machine, markdown_table, record_block
from explorer.data import load_task
from explorer.layout import LatencyConfig
from explorer.measure import pretrained_decode_latency
from explorer.pretrained import (
    HeadPlan,
    Recovery,
    cross_entropy,
    global_plan,
    head_cost,
    head_importance,
    inspect_checkpoint,
    load_checkpoint,
    plan_by_importance,
    recover,
    shrink,
)

CONTEXT = 128  # decoding: positions in the cache when the timed token is decoded


def _bits(model, ids: torch.Tensor) -> float:
    return cross_entropy(model, {"input_ids": ids}) / math.log(2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument(
        "--plans", nargs="+", default=["4:2", "4:1", "2:1"], help="H:K, heads and kv heads a layer"
    )
    ap.add_argument("--steps", type=int, default=150, help="recovery steps (batch 32)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="recovery seeds")
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    torch.set_num_threads(1)
    before_load, t0 = os.getloadavg()[0], time.time()
    checkpoint = inspect_checkpoint(args.checkpoint)
    original = load_checkpoint(checkpoint)
    task = load_task("text", context=64, max_bytes=600_000, seed=0)
    train, held_out = task.train[0], task.val[0][:512]
    importance = head_importance(original, {"input_ids": task.val[0][512:768]})
    timing = LatencyConfig(device="cpu", batch_size=8, threads=1, min_run_time=0.5)
    cpu = torch.device("cpu")
    budget = dict(steps=args.steps, lr=args.lr, distill=1.0, batch_size=32)

    def measured(name: str, plan: HeadPlan | None) -> list:
        model = original if plan is None else shrink(original, plan)
        cut_bits = _bits(model, held_out)
        recovered = []
        if plan is not None:
            for seed in args.seeds:
                student = shrink(original, plan)
                recover(student, original, {"input_ids": train}, Recovery(seed=seed, **budget))
                recovered.append(_bits(student, held_out))
        decode = pretrained_decode_latency(model, CONTEXT, timing, cpu)
        heads = (
            "all"
            if plan is None
            else ", ".join(f"{len(k)}/{kv}" for k, kv in zip(plan.keep, plan.kv_heads, strict=True))
        )
        after = f"{np.mean(recovered):.3f} [{min(recovered):.3f}, {max(recovered):.3f}]" if recovered else "-"
        return [
            name,
            heads,
            f"{head_cost(model).parameters:,}",
            f"{cut_bits:.3f}",
            after,
            f"{decode.ms_per_token:.3f}",
            decode.kv_cache_bytes_per_token,
        ]

    rows = [measured("the original", None)]
    for spec in args.plans:
        h, k = (int(x) for x in spec.split(":"))
        per_layer = plan_by_importance(
            original, importance, (h,) * checkpoint.layers, (k,) * checkpoint.layers
        )
        rows.append(measured(f"{h} heads, {k} kv a layer, by importance", per_layer))
        anchor = global_plan(original, importance, head_cost(original, per_layer).parameters)
        rows.append(measured("the anchors' global rule, same parameters", anchor))
    table = markdown_table(
        [
            "candidate",
            "heads / kv heads by layer",
            "parameters",
            "bits per byte, cut",
            f"after recovery, mean [range] of {len(args.seeds)} seeds",
            f"ms a token (context {CONTEXT}, batch 8)",
            "KV bytes a token",
        ],
        rows,
    )
    facts = [
        f"machine: {machine()}; load average before/after {load_text(before_load, os.getloadavg()[0])}",
        f"commit {commit()}; {time.time() - t0:.0f} s; one CPU thread",
        f"checkpoint: {checkpoint.architecture}, {checkpoint.layers} layers of {checkpoint.heads} heads sharing "
        f"{checkpoint.kv_heads} key/value heads of width {checkpoint.head_dim}, {checkpoint.parameters:,} "
        "parameters (examples/pretrained/train_llama.py)",
        f"recovery: {args.steps} steps of 32 training windows of 64 bytes, AdamW lr {args.lr}, distillation from "
        f"the original's logits alone (temperature 1), seeds {', '.join(map(str, args.seeds))}; held out: 512 "
        "validation windows (importance measured on 256 others)",
    ]
    block = record_block("per-layer plans by importance beside the anchors' global rule", facts, [table])
    append_record(
        args.record,
        block,
        title="# A trained checkpoint cut to fewer heads\n\nWritten by `benchmarks/pretrained_shrink.py`.",
    )
    print(block)


if __name__ == "__main__":
    main()
