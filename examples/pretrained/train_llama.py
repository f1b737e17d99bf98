"""Train a small Llama on byte-level Python source and save it as a transformers checkpoint: the trained model
whose heads `explorer.pretrained` then cuts (docs/hf.md, benchmarks/pretrained_shrink.py).

    python examples/pretrained/train_llama.py --out checkpoints/llama-text --steps 1500

A user's own checkpoint takes its place. This one is a LlamaForCausalLM (hidden 64, 4 layers of 8 query heads
sharing 4 key/value heads of width 8, vocab 256 bytes) trained from scratch with AdamW on the text task (the
Python standard library's source, no download; windows of 64 bytes), then saved with `save_pretrained`
(safetensors). It prints the held-out bits per byte it reached.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
import transformers

from explorer.data import load_task
from explorer.pretrained import cross_entropy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="a new folder for the checkpoint")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    task = load_task("text", context=64, max_bytes=600_000, seed=args.seed)
    train, val = task.train[0], task.val[0]
    config = transformers.LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=172,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=8,
        max_position_embeddings=256,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    model = transformers.LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
    order = torch.Generator().manual_seed(args.seed)
    t0 = time.perf_counter()
    model.train()
    for step in range(1, args.steps + 1):
        batch = train[torch.randint(len(train), (32,), generator=order)]
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 250 == 0 or step == args.steps:
            print(
                f"step {step}/{args.steps}: train {float(loss) / math.log(2):.3f} bits per byte", flush=True
            )
    model.eval()
    model.save_pretrained(args.out)
    print(
        f"saved {args.out}: held-out {cross_entropy(model, {'input_ids': val}) / math.log(2):.3f} bits per byte after {args.steps} steps "
        f"({time.perf_counter() - t0:.0f} s)"
    )


if __name__ == "__main__":
    main()
