"""Our pre-norm encoder block against torch.nn.TransformerEncoderLayer at the same size.

Both blocks compute the same function (pre-norm, GELU MLP, no dropout); the reference gets our weights copied
in and the outputs are checked to agree before anything is timed. Two figures per block, measured in ONE run
with the two blocks alternated round by round (so drift in a shared machine's load hits both alike):

* inference: ``block(x)`` in eval mode under ``torch.inference_mode`` (where nn.TransformerEncoderLayer takes
  its native fast path, ``aten::_transformer_encoder_layer_fwd``);
* one training step: forward, ``.square().mean()`` loss, backward, AdamW step, zero_grad.

Timing is torch.utils.benchmark (blocked_autorange); each figure is the median over rounds of each round's
median. Target: ours/torch <= 1.05 for both.

    python -m benchmarks.encoder_layer --threads 1 --record benchmarks/encoder_layer.md
"""

from __future__ import annotations

import argparse
import statistics

import torch
from torch import nn
from torch.utils import benchmark

from benchmarks.common import add_run_args, append_record, machine, markdown_table, record_block
from explorer.model import Block


def build(args: argparse.Namespace, device: torch.device) -> tuple[nn.Module, nn.Module]:
    """Our block and the reference with identical weights."""
    torch.manual_seed(0)
    ours = Block(args.d_model, args.heads, mlp_ratio=args.mlp_ratio, impl="fused")
    hidden = ours.mlp.fc1.out_features
    ref = nn.TransformerEncoderLayer(
        args.d_model,
        args.heads,
        dim_feedforward=hidden,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=True,
    )
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(ours.attn.qkv.weight)  # both pack [W_Q; W_K; W_V] row-wise
        ref.self_attn.in_proj_bias.copy_(ours.attn.qkv.bias)
        ref.self_attn.out_proj.load_state_dict(ours.attn.proj.state_dict())
        ref.linear1.load_state_dict(ours.mlp.fc1.state_dict())
        ref.linear2.load_state_dict(ours.mlp.fc2.state_dict())
        ref.norm1.load_state_dict(ours.ln1.state_dict())
        ref.norm2.load_state_dict(ours.ln2.state_dict())
    return ours.to(device), ref.to(device)


MEASURES = ("inference", "train step")


def _ours_fwd(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return m(x)[0]


def _ref_fwd(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return m(x)


def _train_step(fwd, m: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    fwd(m, x).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _infer(fwd, m: nn.Module, x: torch.Tensor) -> None:
    with torch.inference_mode():
        fwd(m, x)


def measure(args: argparse.Namespace) -> dict:
    """Time both blocks, alternating them (and which goes first) within every round of every measure."""
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    ours, ref = build(args, device)
    x = torch.randn(args.batch, args.seq_len, args.d_model, device=device)
    for m in (ours, ref):
        m.eval()
    with torch.inference_mode():
        max_diff = (_ours_fwd(ours, x) - _ref_fwd(ref, x)).abs().max().item()
    timers: dict[tuple[str, str], tuple[nn.Module, benchmark.Timer]] = {}
    for name, fwd, m in (("ours", _ours_fwd, ours), ("torch", _ref_fwd, ref)):
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        g = {"infer": _infer, "step": _train_step, "fwd": fwd, "m": m, "opt": opt, "x": x}
        timers[("inference", name)] = (
            m,
            benchmark.Timer("infer(fwd, m, x)", globals=g, num_threads=args.threads),
        )
        timers[("train step", name)] = (
            m,
            benchmark.Timer("step(fwd, m, opt, x)", globals=g, num_threads=args.threads),
        )
    times: dict[tuple[str, str], list[float]] = {k: [] for k in timers}
    for r in range(args.rounds):
        for what in MEASURES:
            for name in ("ours", "torch") if r % 2 == 0 else ("torch", "ours"):
                m, timer = timers[(what, name)]
                m.train(what == "train step")
                times[(what, name)].append(timer.blocked_autorange(min_run_time=args.min_run_time).median)
    return {"times": times, "max_diff": max_diff}


def summarize(res: dict) -> dict[str, dict[str, float]]:
    """Per measure: median and min ms of each block, the median of the per-round ratios, the ratio of minima."""
    t = res["times"]
    out = {}
    for what in MEASURES:
        ours, ref = t[(what, "ours")], t[(what, "torch")]
        out[what] = {
            "ours_ms": 1e3 * statistics.median(ours),
            "torch_ms": 1e3 * statistics.median(ref),
            "ours_min_ms": 1e3 * min(ours),
            "torch_min_ms": 1e3 * min(ref),
            "ratio": statistics.median(a / b for a, b in zip(ours, ref, strict=True)),
            "ratio_of_min": min(ours) / min(ref),
        }
    return out


def table(res: dict) -> str:
    rows = [
        [
            what,
            f"{s['ours_ms']:.2f} ({s['ours_min_ms']:.2f})",
            f"{s['torch_ms']:.2f} ({s['torch_min_ms']:.2f})",
            f"{s['ratio']:.3f}",
            f"{s['ratio_of_min']:.3f}",
            "met" if s["ratio"] <= 1.05 else "MISSED",
        ]
        for what, s in summarize(res).items()
    ]
    header = [
        "measure",
        "ours median (min) ms",
        "torch median (min) ms",
        "ours/torch, median of paired rounds",
        "ours/torch, ratio of minima",
        "target <= 1.05",
    ]
    return markdown_table(header, rows, align="lrrrrl")


def record(args: argparse.Namespace, res: dict) -> str:
    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else machine()
    return record_block(
        f"d_model {args.d_model}, heads {args.heads}, seq {args.seq_len}, batch {args.batch}",
        [
            f"machine: {device}; torch {torch.__version__}; threads {args.threads}; device {args.device}",
            f"shape: d_model {args.d_model}, heads {args.heads}, mlp {args.mlp_ratio:g}x, seq {args.seq_len}, "
            f"batch {args.batch}; {args.rounds} alternating rounds, min_run_time {args.min_run_time}s each; "
            f"max |ours - torch| output diff {res['max_diff']:.1e}",
            *([f"note: {args.note}"] if args.note else []),
        ],
        [
            "Per round, each block's blocked_autorange median; the table gives the median and min over rounds:",
            "",
            table(res),
        ],
        omit=("--note",),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--mlp-ratio", type=float, default=4.0)
    p.add_argument("--seq-len", type=int, default=197)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--rounds", type=int, default=6, help="alternating rounds per model")
    p.add_argument("--min-run-time", type=float, default=1.0, help="seconds per blocked_autorange")
    add_run_args(p)
    args = p.parse_args()
    res = measure(args)
    print(table(res))
    print(f"max |ours - torch| = {res['max_diff']:.1e}")
    append_record(args.record, record(args, res))


if __name__ == "__main__":
    main()
