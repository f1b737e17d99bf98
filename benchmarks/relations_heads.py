"""The tutorial's claim "one head learns one relation", measured: relations with k relations, 1 vs 2 vs 4 heads.

d_model 64, 2 layers, min_dk 8, 20,000 sequences (14,000 train), batch 64, lr 3e-3, one CPU thread. Prints one
JSON line per run, with which relations each layer's heads follow (explorer.insight.heads.specialized_heads). 120 epochs
get past the task's plateau; 40 do not.
Usage: python benchmarks/relations_heads.py K HEADS [EPOCHS] [SEED]   (e.g. 4 1,2,4 120; EPOCHS defaults to 40)
DEVICE=cuda in the environment trains on the GPU (bf16 autocast) instead of the CPU; LAYERS=1 builds 1 layer, not 2.
Results: benchmarks/relations.md.
"""

import json
import os
import sys
import time

import torch

from explorer.engine.config import ModelConfig, TrainConfig
from explorer.engine.probe import relation_specialization
from explorer.engine.tasks import load_task
from explorer.engine.train import fit
from explorer.insight.heads import specialized_heads

torch.set_num_threads(1)

k, heads_list = int(sys.argv[1]), [int(h) for h in sys.argv[2].split(",")]
epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 40
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
layers = int(os.environ.get("LAYERS", "2"))
task = load_task("relations", n_relations=k)
for h in heads_list:
    t0 = time.time()
    model, r = fit(
        ModelConfig(d_model=64, heads=(h,) * layers, min_dk=8),
        task,
        TrainConfig(epochs=epochs, batch_size=64, lr=3e-3, seed=seed),
        os.environ.get("DEVICE", "cpu"),
    )
    print(
        json.dumps(
            {
                "k": k,
                "heads": h,
                "epochs": epochs,
                "layers": layers,
                "seed": seed,
                "val": r.val_accuracy,
                "test": r.test_accuracy,
                "classes": task.spec.n_classes,
                "history": [round(e.val_accuracy, 3) for e in r.history],
                "seconds": round(time.time() - t0),
                "specialization": specialized_heads(
                    relation_specialization(model, task.val[0], k, task.spec.vocab_size)
                ).to_dict(orient="records"),
            }
        ),
        flush=True,
    )
