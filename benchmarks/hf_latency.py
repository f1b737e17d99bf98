"""explorer's latency of transformers-built layouts against a plain torch.utils.benchmark script, side by side.

    python -m benchmarks.hf_latency                                     # print the block
    python -m benchmarks.hf_latency --record benchmarks/hf_latency.md   # and append it there

For each layout (BERT and Llama sequence classifiers on token ids, a ViT on 8x8 images cut into 2x2 patches, a
Llama causal LM with grouped-query attention), every round times it twice: once as a study does
(``explorer.measure._latency.model_latency`` with ``[model] hf``, the model built by
:class:`explorer.model._hfmodel.HFBuilder`, fed explorer's batch, no cache), and once by a plain script that
knows nothing of explorer: the same transformers class built from its config with the same sizes, under
``torch.inference_mode`` and one thread, ``torch.utils.benchmark.Timer(...).blocked_autorange``. The order of
the two alternates between rounds. The ratio explorer / plain is taken within a round (figures seconds apart)
and summarized by its median over rounds; the timing noise is the plain script's own spread, the ratio of its
slowest to its fastest round. explorer's figure is within the noise when its median ratio lies inside that
spread.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils import benchmark

from benchmarks.common import append_record, load_average, load_text, machine, markdown_table, record_block
from explorer.layout import InputSpec, LatencyConfig, ModelConfig
from explorer.measure import device_label, model_latency, resolve_device
from explorer.model import HFBuilder

D, LAYERS, VOCAB, SEQ, CLASSES = 64, 2, 100, 32, 4
TOKENS = InputSpec(kind="tokens", seq_len=SEQ, n_classes=CLASSES, vocab_size=VOCAB)
TEXT = InputSpec(kind="tokens", seq_len=SEQ, n_classes=256, vocab_size=256, task_kind="language_model")
IMAGES = InputSpec(kind="features", seq_len=16, n_classes=10, n_features=4, image=(8, 8, 1), patch=2)
# (label, model type, heads, kv heads, input) of each layout timed
LAYOUTS = [
    ("bert, 1 head", "bert", 1, 1, TOKENS),
    ("bert, 8 heads", "bert", 8, 8, TOKENS),
    ("vit, 2 heads", "vit", 2, 2, IMAGES),
    ("vit, 8 heads", "vit", 8, 8, IMAGES),
    ("llama, 4 heads", "llama", 4, 4, TOKENS),
    ("llama LM, 8 heads, 2 kv", "llama", 8, 2, TEXT),
]


def plain_model(family: str, heads: int, kv: int, spec: InputSpec) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The layout built as a transformers user would, with no explorer code: the config class, the class, and
    one input batch of keyword arguments (batch filled in by the caller)."""
    import transformers

    common = dict(hidden_size=D, num_hidden_layers=LAYERS, num_attention_heads=heads, intermediate_size=4 * D)
    if family == "vit":
        config = transformers.ViTConfig(**common, image_size=8, patch_size=2, num_channels=1, num_labels=10)
        return transformers.ViTForImageClassification(config), {"pixel_values": (1, 8, 8)}
    if spec.causal:
        config = transformers.LlamaConfig(
            **common,
            num_key_value_heads=kv,
            vocab_size=256,
            max_position_embeddings=SEQ,
            bos_token_id=None,
            eos_token_id=None,
        )
        return transformers.LlamaForCausalLM(config), {"input_ids": 256, "use_cache": False}
    extra = {"num_key_value_heads": kv} if family == "llama" else {}
    config = getattr(transformers, {"bert": "BertConfig", "llama": "LlamaConfig"}[family])(
        **common,
        **extra,
        vocab_size=VOCAB + 1,
        pad_token_id=VOCAB,
        max_position_embeddings=SEQ,
        num_labels=CLASSES,
        bos_token_id=None,
        eos_token_id=None,
    )
    cls = {"bert": "BertForSequenceClassification", "llama": "LlamaForSequenceClassification"}[family]
    inputs: dict[str, Any] = {"input_ids": VOCAB} | ({"use_cache": False} if family == "llama" else {})
    return getattr(transformers, cls)(config), inputs


def plain_time(family: str, heads: int, kv: int, spec: InputSpec, batch: int, min_run_time: float) -> float:
    """Median ms of one forward pass, timed by a plain torch.utils.benchmark script."""
    torch.manual_seed(0)
    model, shapes = plain_model(family, heads, kv, spec)
    model.eval()
    inputs: dict[str, Any] = {}
    for key, what in shapes.items():
        if key == "input_ids":
            inputs[key] = torch.randint(what, (batch, SEQ))
        elif key == "pixel_values":
            inputs[key] = torch.randn(batch, *what)
        else:
            inputs[key] = what
    torch.set_num_threads(1)
    with torch.inference_mode():
        for _ in range(3):
            model(**inputs)
        timer = benchmark.Timer(
            stmt="model(**inputs)", globals={"model": model, "inputs": inputs}, num_threads=1
        )
        return timer.blocked_autorange(min_run_time=min_run_time).median * 1e3


def explorer_time(family: str, heads: int, kv: int, spec: InputSpec, cfg: LatencyConfig) -> float:
    """Median ms of one forward pass as a study of ``[model] hf = family`` measures it."""
    layout = ModelConfig(d_model=D, heads=(heads,) * LAYERS, kv_heads=(kv,) * LAYERS, mlp_ratio=4.0)
    return model_latency(
        layout, spec, cfg, resolve_device(cfg.device), cache=None, builder=HFBuilder.of(family, {})
    ).median_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--min-run-time", type=float, default=0.3)
    ap.add_argument("--record", type=Path, help="append a dated block to this markdown file")
    ap.add_argument("--note", default="", help="free text for the record")
    args = ap.parse_args()

    import transformers

    device = resolve_device("cpu")
    cfg = LatencyConfig(device="cpu", batch_size=args.batch, threads=1, min_run_time=args.min_run_time)
    ours: dict[str, list[float]] = {label: [] for label, *_ in LAYOUTS}
    plain: dict[str, list[float]] = {label: [] for label, *_ in LAYOUTS}
    load_before, started = load_average(), time.perf_counter()
    for r in range(args.rounds):
        for label, family, heads, kv, spec in LAYOUTS:
            for who in ("explorer", "plain") if r % 2 == 0 else ("plain", "explorer"):
                if who == "explorer":
                    ours[label].append(explorer_time(family, heads, kv, spec, cfg))
                else:
                    plain[label].append(plain_time(family, heads, kv, spec, args.batch, args.min_run_time))
    load_after, minutes = load_average(), (time.perf_counter() - started) / 60

    rows, within = [], 0
    for label, *_ in LAYOUTS:
        ratios = [a / b for a, b in zip(ours[label], plain[label], strict=True)]
        med = statistics.median(ratios)
        spread = max(plain[label]) / min(plain[label])
        inside = 1 / spread <= med <= spread
        within += inside
        rows.append(
            [
                label,
                f"{statistics.median(ours[label]):.3f}",
                f"{statistics.median(plain[label]):.3f}",
                f"{med:.3f} ({min(ratios):.3f}-{max(ratios):.3f})",
                f"{spread:.3f}",
                "yes" if inside else "no",
            ]
        )
    header = [
        "layout",
        "explorer ms (median over rounds)",
        "plain script ms",
        "explorer / plain: median (min-max)",
        "plain's own spread (slowest / fastest round)",
        "within the noise",
    ]
    facts = [
        f"machine: {machine()}; device label `{device_label(device)}`",
        f"torch {torch.__version__}, transformers {transformers.__version__}, 1 thread, batch {args.batch}, "
        f"min_run_time {args.min_run_time} s per figure, {args.rounds} rounds ({minutes:.1f} min)",
        f"every layout hidden_size {D}, {LAYERS} layers, intermediate_size {4 * D}; token inputs {SEQ} ids",
        f"load average (1 min) before/after: {load_text(load_before, load_after)}",
        f"within the timing noise: {within} of {len(LAYOUTS)} layouts",
    ] + ([f"note: {args.note}"] if args.note else [])
    block = record_block(
        "explorer's latency of transformers layouts against a plain script",
        facts,
        [markdown_table(header, rows, "lrrrrl")],
        omit=("--note",),
    )
    print(block)
    append_record(
        args.record,
        block,
        title="# transformers layouts: explorer's latency against a plain script\n\n"
        "Written by `python -m benchmarks.hf_latency --record benchmarks/hf_latency.md`; newest last.",
    )


if __name__ == "__main__":
    main()
