"""A finished ``[model] pretrained`` study's answer beside the anchors' rule at the same parameter count: the same
checkpoint, the same recovery budget and the same training seeds, then timed side by side.

    explorer study run examples/pretrained/bert.toml
    python -m benchmarks.pretrained_rule --spec examples/pretrained/bert.toml --seeds 3 --rounds 5 \\
        --json /tmp/pretrained_rule.json --record benchmarks/pretrained_rule.md

Three layouts of the checkpoint the spec names:

- **the answer**: the layout the study recommends (``explorer.api.recommend``; it must rest on the finalists),
  cut as the study cut it (:meth:`explorer.pretrained.PretrainedBuilder.plan`: each layer's most important heads);
- **the anchors' rule**: :func:`explorer.pretrained.global_plan` (the globally least important heads removed,
  scores normalized per layer, each layer's key/value heads as many as divide its heads up to the original
  number) down to the answer's parameter count, both counted by :func:`explorer.pretrained.head_cost`; it is
  written as a layout (per-layer heads and key/value heads, the checkpoint's head width, the answer's other
  settings) and the script checks that the builder cuts exactly the heads ``global_plan`` chose;
- **the original**: every head, as the study's ``original`` finalist.

Each is trained on each seed ``0 .. --seeds - 1`` exactly as the study's finalist runs train: through
:func:`explorer.measure.evaluate_variant` with the study's builder (recovery with distillation from the
original), the task as the spec loads it, and the answer's recorded training settings (epochs, batch size,
schedule, the answer's learning rate) with the seed replaced. The validation and test quality of each run
(accuracy, or bits per byte for a language model) are recorded, and each layout's paired difference from the
original on the same seed. Then the three are timed again in ``--rounds`` interleaved rounds in this process
(the order rotated each round): the forward pass (:func:`explorer.measure.model_latency`, the spec's
``[latency]``) and, for a causal LM with ``[decode]``, one decoding step (:func:`explorer.measure.decode_latency`);
the record gives each layout's median over the rounds and the median over rounds of its ratio to the original's
time in the same round.

``--json`` writes every run and timing; ``--record`` appends a dated block (machine, load, commit, command, wall
time, the table and a reading of it) to a markdown record. A spec that is not ``[model] pretrained``, a study
whose spec is not the file's, and a study with no answer from its finalists are refused in one line (exit 3).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import torch

from benchmarks.common import append_record, commit, load_text, machine, markdown_table, stamp

TITLE = (
    "# A pretrained study's answer beside the anchors' rule\n\n"
    "Written by `benchmarks/pretrained_rule.py`: a finished `[model] pretrained` study's answer, the anchors' "
    "global rule at the same parameter count and the original, recovered on the same seeds and timed side by "
    "side."
)
EXIT_REFUSED = 3


def refuse(message: str) -> NoReturn:
    print(f"pretrained_rule: {message}", file=sys.stderr)
    raise SystemExit(EXIT_REFUSED)


@dataclass
class Layout:
    """One row of the comparison: a layout of the checkpoint, its cut, and what was measured of it."""

    name: str
    config: Any  # explorer.layout.ModelConfig
    plan: Any  # explorer.pretrained.HeadPlan
    parameters: int  # head_cost's count, as global_plan counts
    runs: list[dict[str, Any]] = field(default_factory=list)  # one per seed
    forward_ms: list[float] = field(default_factory=list)  # one median a round
    decode_ms: list[float] = field(default_factory=list)  # ms per token, one median a round


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", type=Path, required=True, help="the study's spec file ([model] pretrained)")
    ap.add_argument(
        "--storage",
        help="where the finished study is (default: $EXPLORER_STORAGE, else the spec's storage, else "
        "studies/NAME.db, as explorer resolves it)",
    )
    ap.add_argument("--seeds", type=int, default=3, help="recovery seeds: 0 .. N-1 as training seeds")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds after training")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads while training")
    ap.add_argument("--json", type=Path, help="write every run and timing here (JSON, overwritten)")
    ap.add_argument("--record", type=Path, help="append a dated markdown block to this record")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.rounds < 1:
        ap.error("--seeds and --rounds must be at least 1")
    return args


def _checked_spec(path: Path) -> Any:
    from explorer.spec import load_spec

    spec = load_spec(path)
    if spec.model.pretrained is None:
        refuse(f"{path} is not a [model] pretrained study; give the spec of a study of a trained checkpoint.")
    return spec


def _same_study(spec: Any, stored: Any, where: str) -> None:
    """The study at ``where`` must have been run from this spec's checkpoint, distillation and task."""
    ours = (spec.model.pretrained, spec.model.distill, spec.task.name, dict(spec.task.options))
    theirs = (stored.model.pretrained, stored.model.distill, stored.task.name, dict(stored.task.options))
    if ours != theirs:
        refuse(
            f"the study {spec.name!r} in {where} was run on {theirs[0]!r} (distill {theirs[1]}, task {theirs[2]} "
            f"{theirs[3]}), not on what the spec names; give the spec it was run from."
        )


def _answer_train_config(answer: Any, records: Sequence[Any]) -> Any:
    """The training settings of the answer's finalist runs (seed 0 put in their place; the caller sets its own)."""
    runs = [r for r in records if r.number in set(answer.numbers) and r.finished]
    configs = {dataclasses.replace(r.train_config(), seed=0) for r in runs}
    if len(configs) != 1:
        refuse(
            f"the answer's {len(runs)} finalist runs trained with {len(configs)} different settings; this "
            "benchmark trains one."
        )
    return configs.pop()


def _layout_config(base: Any, heads: Sequence[int], kv_heads: Sequence[int], head_dim: int) -> Any:
    """``base`` (the answer's layout: width, MLP, attention, dropout) with these heads, key/value heads and the
    checkpoint's head width in every layer."""
    return dataclasses.replace(
        base,
        heads=tuple(heads),
        kv_heads=tuple(kv_heads),
        head_dim=(head_dim,) * len(heads),
        schedule="",
        kv_schedule="",
    )


def _quality(result: Any, causal: bool) -> tuple[float, float]:
    """Validation and test quality: bits per byte for a language model, accuracy for a classifier."""
    if causal:
        return float(result.quality), float(result.test_bpb)
    return float(result.quality), float(result.test_accuracy)


def _timed_rounds(
    layouts: list[Layout], task: Any, spec: Any, builder: Any, device: Any, rounds: int
) -> None:
    """Each layout's forward pass (and decoding step) timed once a round, the order rotated each round."""
    from explorer.measure import decode_latency, model_latency

    step = (
        None if spec.decode is None else dataclasses.replace(spec.latency, batch_size=spec.decode.batch_size)
    )
    for r in range(rounds):
        shift = r % len(layouts)
        for layout in layouts[shift:] + layouts[:shift]:
            lat = model_latency(layout.config, task.spec, spec.latency, device, cache=None, builder=builder)
            layout.forward_ms.append(lat.median_ms)
            if step is not None:
                dec = decode_latency(
                    layout.config, spec.decode.context, step, device, None, task.spec.vocab_size, builder
                )
                layout.decode_ms.append(dec.ms_per_token)


def _ratios(layout: Layout, original: Layout, decode: bool = False) -> list[float]:
    """Per round, this layout's time over the original's in the same round."""
    mine, theirs = (
        (layout.decode_ms, original.decode_ms) if decode else (layout.forward_ms, original.forward_ms)
    )
    return [a / b for a, b in zip(mine, theirs, strict=True)]


def _summary(layout: Layout, original: Layout, causal: bool) -> dict[str, Any]:
    """The figures of one row: means over seeds, paired differences from the original, timing medians."""
    out: dict[str, Any] = {}
    for part in ("val", "test"):
        values = [run[part] for run in layout.runs]
        diffs = [run[part] - ref[part] for run, ref in zip(layout.runs, original.runs, strict=True)]
        out[part] = statistics.fmean(values)
        out[f"{part}_diff"] = {"mean": statistics.fmean(diffs), "min": min(diffs), "max": max(diffs)}
    out["forward_ms"] = statistics.median(layout.forward_ms)
    out["forward_ratio"] = statistics.median(_ratios(layout, original))
    if layout.decode_ms:
        out["decode_ms"] = statistics.median(layout.decode_ms)
        out["decode_ratio"] = statistics.median(_ratios(layout, original, decode=True))
    out["kv_bytes_per_token"] = layout.runs[0]["kv_cache_bytes_per_token"] if causal else None
    return out


def _per_layer(values: Sequence[int]) -> str:
    return ", ".join(map(str, values))


def _table(
    layouts: list[Layout], summaries: list[dict[str, Any]], causal: bool, decode: bool, rounds: int
) -> str:
    """One row per layout: heads, parameters, quality and its paired difference, timings."""

    def q(x: float) -> str:
        return f"{x:.3f}" if causal else f"{100 * x:.2f}%"

    def d(diff: dict[str, float]) -> str:
        scale, fmt = (1, "+.3f") if causal else (100, "+.2f")
        m, lo, hi = (scale * diff[k] for k in ("mean", "min", "max"))
        return f"{m:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"

    metric = "bits per byte" if causal else "accuracy"
    unit = "" if causal else " (points)"
    header = ["layout", "heads by layer", "kv heads by layer", "parameters"]
    header += ["KV bytes a token"] if causal else []
    header += [
        f"val {metric}, mean",
        f"val minus original{unit}, mean [range]",
        f"test {metric}, mean",
        f"test minus original{unit}, mean [range]",
        f"forward ms (median of {rounds})",
        "x original",
    ]
    header += [f"decode ms a token (median of {rounds})", "x original"] if decode else []
    rows = []
    for layout, s in zip(layouts, summaries, strict=True):
        row: list[Any] = [
            layout.name,
            _per_layer(layout.plan.heads),
            _per_layer(layout.plan.kv_heads),
            f"{layout.parameters:,}",
        ]
        row += [s["kv_bytes_per_token"]] if causal else []
        row += [
            q(s["val"]),
            d(s["val_diff"]),
            q(s["test"]),
            d(s["test_diff"]),
            f"{s['forward_ms']:.3f}",
            f"{s['forward_ratio']:.3f}",
        ]
        row += [f"{s['decode_ms']:.3f}", f"{s['decode_ratio']:.3f}"] if decode else []
        rows.append(row)
    return markdown_table(header, rows, align="lllr" + "r" * (len(header) - 4))


def _reading(
    layouts: list[Layout], summaries: list[dict[str, Any]], causal: bool, decode: bool, seeds: int
) -> str:
    """What the numbers show, in one or two sentences (every figure from this run)."""
    answer, anchor, original = layouts
    sa, sg = summaries[0], summaries[1]
    metric = "bits per byte" if causal else "accuracy"
    same = " (the original's own)" if answer.plan == original.plan else ""

    def q(x: float) -> str:
        return f"{x:.3f}" if causal else f"{100 * x:.2f}%"

    def diff(x: float) -> str:
        return f"{x:+.3f}" if causal else f"{100 * x:+.2f} points"

    if answer.plan == anchor.plan:
        heads = (
            f"At {answer.parameters:,} parameters the anchors' rule kept the same heads as the answer "
            f"({_per_layer(answer.plan.heads)} a layer{same})"
        )
    else:
        heads = (
            f"At the answer's {answer.parameters:,} parameters the anchors' rule kept "
            f"{_per_layer(anchor.plan.heads)} heads a layer ({_per_layer(anchor.plan.kv_heads)} key/value heads; "
            f"{anchor.parameters:,} parameters) against the answer's {_per_layer(answer.plan.heads)} "
            f"({_per_layer(answer.plan.kv_heads)})"
        )
    text = (
        f"{heads}; over {seeds} seed{'s' * (seeds != 1)} the answer's mean validation {metric} was {q(sa['val'])} "
        f"({diff(sa['val_diff']['mean'])} from the original) and the anchors' {q(sg['val'])} "
        f"({diff(sg['val_diff']['mean'])}). "
        f"The answer's forward pass took {sa['forward_ratio']:.3f} of the original's time and the anchors' "
        f"{sg['forward_ratio']:.3f}"
    )
    if decode:
        text += f"; decoding a token {sa['decode_ratio']:.3f} and {sg['decode_ratio']:.3f}"
    return text + " (medians over rounds of the ratio within a round)."


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _args(argv)
    from explorer.errors import ExplorerError

    threads = torch.get_num_threads()
    try:
        run(args, argv)
    except ExplorerError as exc:
        print(f"pretrained_rule: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    finally:
        torch.set_num_threads(threads)


def run(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    """The comparison (see the module docstring); returns what ``--json`` writes."""
    from explorer.api import load
    from explorer.data import load_task
    from explorer.measure import evaluate_variant, resolve_device
    from explorer.pretrained import HeadPlan, PretrainedBuilder, global_plan, head_cost
    from explorer.storage import Role, resolve_storage_url
    from explorer.study import model_builder

    torch.set_num_threads(args.threads)
    before_load, t0 = os.getloadavg()[0], time.time()
    spec = _checked_spec(args.spec)
    # as explorer resolves it: --storage, else $EXPLORER_STORAGE, else the spec's, else studies/NAME.db
    storage = resolve_storage_url(spec.name, args.storage, spec.storage)
    data = load(spec.name, storage)  # what explorer.api.recommend reads its answer from
    where = data.study.masked_url
    _same_study(spec, data.study.spec, where)
    answer = data.answer
    rec = answer.recommended
    if rec is None:
        refuse(f"the study {spec.name!r} in {where} has no answer: {answer.no_answer or 'none given'}.")
    if rec.role is not Role.FINALIST:
        refuse(
            f"the answer of {spec.name!r} rests on the search alone; run its finalists first "
            f"(explorer confirm {spec.name})."
        )
    train = _answer_train_config(rec, data.records)
    builder = model_builder(spec)
    assert isinstance(builder, PretrainedBuilder)
    task = load_task(spec.task.name, **spec.task.options)
    checkpoint, original = builder.checkpoint, builder.original
    causal = bool(task.spec.causal)
    decode = spec.decode is not None and causal

    # the three layouts, each cut by the builder the study used
    answer_plan = builder.plan(rec.config)
    budget = head_cost(original, answer_plan).parameters
    anchor_plan = global_plan(original, builder.importance, budget)
    anchor_cfg = _layout_config(rec.config, anchor_plan.heads, anchor_plan.kv_heads, checkpoint.head_dim)
    cut = builder.plan(anchor_cfg)
    if cut != anchor_plan:
        raise AssertionError(
            f"the builder cuts {cut} for the anchors' layout, not global_plan's {anchor_plan}"
        )
    layers = checkpoint.layers
    original_cfg = _layout_config(
        rec.config, (checkpoint.heads,) * layers, (checkpoint.kv_heads,) * layers, checkpoint.head_dim
    )
    whole = builder.plan(original_cfg)
    assert whole == HeadPlan.unchanged(original), "the original's layout must keep every head"
    layouts = [
        Layout("the answer", rec.config, answer_plan, budget),
        Layout(
            "the anchors' rule, same parameters",
            anchor_cfg,
            anchor_plan,
            head_cost(original, anchor_plan).parameters,
        ),
        Layout("the original", original_cfg, whole, head_cost(original).parameters),
    ]
    assert layouts[1].parameters <= budget

    device = resolve_device(spec.latency.device)
    for seed in range(args.seeds):
        for layout in layouts:
            settings = dataclasses.replace(train, seed=seed)
            print(f"training {layout.name}, heads {list(layout.plan.heads)}, seed {seed}", file=sys.stderr)
            result = evaluate_variant(
                layout.config, task, settings, spec.latency, device, builder=builder, decode=spec.decode
            )
            val, test = _quality(result, causal)
            layout.runs.append(
                {
                    "seed": seed,
                    "val": val,
                    "test": test,
                    "val_accuracy": result.val_accuracy,
                    "test_accuracy": result.test_accuracy,
                    "val_bpb": result.val_bpb,
                    "test_bpb": result.test_bpb,
                    "params": result.params,
                    "kv_cache_bytes_per_token": result.kv_cache_bytes_per_token,
                    "latency_ms": result.latency.median_ms,
                    "decode_ms_per_token": None if result.decode is None else result.decode.ms_per_token,
                    "train_time_s": result.fit.train_time_s,
                    "epochs_run": result.fit.epochs_run,
                }
            )
    print(f"timing the three layouts in {args.rounds} interleaved rounds", file=sys.stderr)
    _timed_rounds(layouts, task, spec, builder, device, args.rounds)
    summaries = [_summary(layout, layouts[2], causal) for layout in layouts]
    wall = time.time() - t0
    after_load = os.getloadavg()[0]
    command = shlex.join(["python", "-m", "benchmarks.pretrained_rule", *argv])

    doc: dict[str, Any] = {
        "date": stamp(),
        "machine": machine(),
        "commit": commit(),
        "command": command,
        "wall_s": wall,
        "load": [before_load, after_load],
        "study": spec.name,
        "storage": where,
        "checkpoint": str(checkpoint.path),
        "metric": "bpb" if causal else "accuracy",
        "train": dataclasses.asdict(train) | {"seeds": list(range(args.seeds))},
        "answer": {"key": rec.key, "lr": rec.lr, "decided": answer.decided, "evidence": str(answer.evidence)},
        "anchor_plan_check": "builder.plan(anchors' layout) == global_plan(...)",
        "layouts": {
            layout.name: {
                "config": layout.config.to_dict(),
                "keep": [list(k) for k in layout.plan.keep],
                "heads": list(layout.plan.heads),
                "kv_heads": list(layout.plan.kv_heads),
                "parameters": layout.parameters,
                "runs": layout.runs,
                "forward_ms": layout.forward_ms,
                "decode_ms_per_token": layout.decode_ms,
                "summary": s,
            }
            for layout, s in zip(layouts, summaries, strict=True)
        },
    }
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")

    table = _table(layouts, summaries, causal, decode, args.rounds)
    seeds = ", ".join(map(str, range(args.seeds)))
    timing = f"forward pass, batch {spec.latency.batch_size}, {spec.latency.threads} thread(s), {spec.latency.dtype}"
    if decode:
        timing += (
            f"; one decoding step, batch {spec.decode.batch_size}, against a cache of {spec.decode.context}"
        )
    facts = [
        f"machine: {machine()}; load average before/after {load_text(before_load, after_load)}",
        f"commit {commit()}; {wall:.0f} s; {args.threads} torch thread(s) while training",
        f"study {spec.name!r} in {where}: the answer {_per_layer(rec.config.heads)} heads a layer "
        f"(kv {_per_layer(rec.config.kv_per_layer)}), lr {rec.lr:g}, "
        f"{'decided' if answer.decided else 'not decided'}, from the finalists",
        f"checkpoint: {checkpoint.architecture} at {checkpoint.path}, {layers} layers of {checkpoint.heads} heads "
        f"({checkpoint.kv_heads} key/value heads) of width {checkpoint.head_dim}",
        f"recovery as the study's finalists train (evaluate_variant with the study's builder, distill "
        f"{spec.model.distill}): {train.epochs} epoch(s) of batch {train.batch_size}, {train.schedule} schedule, "
        f"lr {train.lr:g}; training seeds {seeds}, the same for every layout",
        "parameters: explorer.pretrained.head_cost of each cut, as global_plan counts them; the anchors' layout "
        "is global_plan down to the answer's count, and builder.plan(that layout) keeps exactly the heads "
        "global_plan chose (checked)",
        f"timing after training, {args.rounds} interleaved rounds in this process, the order rotated each round: "
        f"{timing}; `x original` is the median over rounds of the ratio to the original in the same round",
    ]
    lines = [f"## {stamp()}: the answer of {spec.name} beside the anchors' rule", ""]
    lines += [f"- {f}" for f in facts] + [f"- command: `{command}`", "", table, ""]
    lines.append(_reading(layouts, summaries, causal, decode, args.seeds))
    block = "\n".join(lines) + "\n"
    append_record(args.record, block, title=TITLE)
    print(block)
    return doc


if __name__ == "__main__":
    main()
