"""The tutorial's claim "one head learns one relation", measured: relations with k relations, 1 vs 2 vs 4 heads.

d_model 64, 2 layers, min_dk 8, 20,000 sequences (14,000 train), batch 64, lr 3e-3, one CPU thread. Prints one
JSON line per run, with which relations each layer's heads follow (explorer.analysis._heads.specialized_heads). 120
epochs get past the task's plateau; 40 do not.

    python -m benchmarks.relations_heads K HEADS [EPOCHS] [SEED]   # e.g. 4 1,2,4 120 (EPOCHS defaults to 40)
    python -m benchmarks.relations_heads 4 1,4 120 --device cuda   # on the GPU (bf16 autocast)
    python -m benchmarks.relations_heads 4 2 120 --layers 1        # one layer, not 2

Results, written up by hand from the JSON lines: benchmarks/relations_heads.md.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from explorer.analysis import specialized_heads
from explorer.data import load_task
from explorer.layout import ModelConfig, TrainConfig
from explorer.measure import fit, relation_specialization, resolve_device


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("k", type=int, help="relations planted in every sequence")
    ap.add_argument("heads", help="head counts per layer to train, comma-separated (e.g. 1,2,4)")
    ap.add_argument("epochs", type=int, nargs="?", default=40)
    ap.add_argument("seed", type=int, nargs="?", default=0)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (bf16 autocast)")
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    task = load_task("relations", n_relations=args.k)
    for h in (int(x) for x in args.heads.split(",")):
        t0 = time.time()
        model, r = fit(
            ModelConfig(d_model=64, heads=(h,) * args.layers, min_dk=8),
            task,
            TrainConfig(epochs=args.epochs, batch_size=64, lr=3e-3, seed=args.seed),
            resolve_device(args.device),
        )
        specialization = relation_specialization(model, task.val[0], args.k, task.spec.vocab_size)
        line = {
            "k": args.k,
            "heads": h,
            "epochs": args.epochs,
            "layers": args.layers,
            "seed": args.seed,
            "val": r.val_accuracy,
            "test": r.test_accuracy,
            "classes": task.spec.n_classes,
            "history": [round(e.val_accuracy, 3) for e in r.history],
            "seconds": round(time.time() - t0),
            "specialization": specialized_heads(specialization).to_dict(orient="records"),
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
