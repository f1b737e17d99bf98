"""A finished ``[model] pretrained`` study's answer exported and loaded back as its user would: ``explorer export
NAME --format hf``, then ``AutoModelFor...from_pretrained(DIR, trust_remote_code=True)`` in a fresh Python
process, scored on the task's validation and test splits beside what the study measured.

    explorer study run examples/pretrained/llama.toml
    python -m benchmarks.pretrained_export --spec examples/pretrained/llama.toml \\
        --json benchmarks/pretrained_export_llama.json --record benchmarks/pretrained_export.md

The export is the command's own (``--json``: the trial it wrote and its check of the logits against explorer's
on the test split). The fresh process imports nothing of explorer's but the task loader
(:func:`explorer.data.load_task`): it loads the folder with the Auto class the export names, reads the per-layer
heads from its ``config.json``, and scores the task as the spec loads it, with plain torch: accuracy for a
classifier, bits per byte for a language model (the mean cross-entropy over every target of every window, over
ln 2, as explorer scores it). Transformers copies the folder's
modeling file into its modules cache, which the script points at a temporary folder.

The record sets that beside the study's answer (its validation mean and 95% interval over its finalist runs, as
the report gives them) and the exported run's own validation and test figures; **within the interval** says
whether the exported model's validation score lies inside the answer's interval. A spec that is not
``[model] pretrained`` is refused in one line (exit 3), as is a study the export refuses (its exit code).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from benchmarks.common import append_record, commit, machine, markdown_table, stamp

TITLE = (
    "# A pretrained study's export, loaded back\n\n"
    "Written by `benchmarks/pretrained_export.py`: a finished `[model] pretrained` study's answer exported with "
    "`explorer export --format hf`, loaded by `from_pretrained` in a fresh process and scored beside what the "
    "study measured."
)
EXIT_REFUSED = 3

# what the fresh process runs: argv[1] the folder, argv[2] the Auto class, argv[3] the task as JSON
LOAD_AND_SCORE = """
import json, math, sys
import torch, transformers
from explorer.data import load_task

folder, auto, task_json = sys.argv[1:4]
model = getattr(transformers, auto).from_pretrained(folder, trust_remote_code=True).eval()
config = model.config
task_def = json.loads(task_json)
task = load_task(task_def["name"], **task_def["options"])
causal = bool(task.spec.causal)
layers = config.num_hidden_layers
out = {
    "class": type(model).__name__,
    "heads": list(getattr(config, "num_query_heads", None) or [config.num_attention_heads] * layers),
    "kv_heads": getattr(config, "num_kv_heads", None),
    "parameters": sum(p.numel() for p in model.parameters()),
}
with torch.inference_mode():
    for split in ("val", "test"):
        x, y = getattr(task, split)
        total = 0.0
        for i in range(0, len(x), 64):
            logits = model(input_ids=x[i : i + 64]).logits
            if causal:  # every target of the window, as explorer scores a language model
                total += torch.nn.functional.cross_entropy(
                    logits.flatten(0, 1), y[i : i + 64].flatten(), reduction="sum"
                ).item()
            else:
                total += (logits.argmax(-1) == y[i : i + 64]).sum().item()
        out[split] = total / y.numel() / (math.log(2) if causal else 1.0)
        out[split + "_examples"] = len(x)
print(json.dumps(out))
"""


def refuse(message: str, code: int = EXIT_REFUSED) -> NoReturn:
    print(f"pretrained_export: {message}", file=sys.stderr)
    raise SystemExit(code)


def _args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", type=Path, required=True, help="the study's spec file ([model] pretrained)")
    ap.add_argument("--storage", help="where the finished study is (default: as explorer resolves it)")
    ap.add_argument(
        "--artifacts", help="where its trained weights are (default: where the study recorded them)"
    )
    ap.add_argument("--json", type=Path, help="write what was measured here (JSON, overwritten)")
    ap.add_argument("--record", type=Path, help="append a dated markdown block to this record")
    return ap.parse_args(argv)


def _export(name: str, out: Path, storage: str | None, artifacts: str | None) -> dict[str, Any]:
    """``explorer export NAME --format hf --out OUT --json`` as a user runs it; its JSON document."""
    cmd = [sys.executable, "-m", "explorer", "export", name, "--format", "hf", "--out", str(out), "--json"]
    cmd += ["--storage", storage] if storage else []
    cmd += ["--artifacts", artifacts] if artifacts else []
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        refuse(f"explorer export refused: {done.stderr.strip().splitlines()[-1:]}", done.returncode)
    return json.loads(done.stdout)


def _load_and_score(folder: Path, auto: str, task: dict[str, Any], modules: Path) -> dict[str, Any]:
    """The folder loaded and scored in a fresh Python process (see :data:`LOAD_AND_SCORE`)."""
    env = {**os.environ, "HF_MODULES_CACHE": str(modules), "TRANSFORMERS_VERBOSITY": "error"}
    cmd = [sys.executable, "-c", LOAD_AND_SCORE, str(folder), auto, json.dumps(task)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the fresh process failed to load or score {folder}:\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def run(args: argparse.Namespace, argv: Sequence[str]) -> dict[str, Any]:
    """The export, the fresh load and the comparison (see the module docstring); returns what ``--json`` writes."""
    from explorer.api import load
    from explorer.spec import load_spec
    from explorer.storage import resolve_storage_url

    t0 = time.time()
    spec = load_spec(args.spec)
    if spec.model.pretrained is None:
        refuse(
            f"{args.spec} is not a [model] pretrained study; give the spec of a study of a trained checkpoint."
        )
    storage = resolve_storage_url(spec.name, args.storage, spec.storage)
    with tempfile.TemporaryDirectory(prefix="pretrained-export-") as tmp:
        folder = Path(tmp) / "export"
        exported = _export(spec.name, folder, storage, args.artifacts)
        loaded = _load_and_score(
            folder,
            exported["loads_with"],
            {"name": spec.task.name, "options": dict(spec.task.options)},
            Path(tmp) / "modules",
        )
    data = load(spec.name, storage)
    run_record = next(r for r in data.records if r.number == exported["trial"])
    causal = exported["answer"]["metric"] == "val_bpb"
    answer = exported["answer"]["answer"]
    ran = {
        "val": run_record.val_bpb if causal else run_record.val_accuracy,
        "test": run_record.test_bpb if causal else run_record.test_accuracy,
    }
    return {
        "date": stamp(),
        "machine": machine(),
        "commit": commit(),
        "command": shlex.join(["python", "-m", "benchmarks.pretrained_export", *argv]),
        "wall_s": time.time() - t0,
        "study": spec.name,
        "checkpoint": spec.model.pretrained,
        "metric": "bpb" if causal else "accuracy",
        "trial": exported["trial_label"],
        "export_check": {
            k: exported[k] for k in ("max_abs_logit_diff", "tolerance", "test_examples", "loads_with")
        },
        "answer": {
            k: answer[k] for k in ("heads", "kv_heads", "quality", "quality_low", "quality_high", "runs")
        },
        "decided": exported["answer"]["decided"],
        "exported_run": ran,
        "loaded": loaded,
        "within_interval": answer["quality_low"] <= loaded["val"] <= answer["quality_high"],
    }


def _block(doc: dict[str, Any]) -> str:
    causal = doc["metric"] == "bpb"

    def q(x: float) -> str:
        return f"{x:.4f}" if causal else f"{100 * x:.2f}%"

    a, ran, got = doc["answer"], doc["exported_run"], doc["loaded"]
    metric = "bits per byte" if causal else "accuracy"
    rows = [
        [
            f"the answer's {a['runs']} finalist runs (the report)",
            f"{q(a['quality'])} [{q(a['quality_low'])}, {q(a['quality_high'])}]",
            "",
            "",
        ],
        [f"the exported run, {doc['trial']}, as the study measured it", q(ran["val"]), q(ran["test"]), ""],
        [
            f"the export loaded in a fresh process ({got['class']})",
            q(got["val"]),
            q(got["test"]),
            "yes" if doc["within_interval"] else "no",
        ],
    ]
    table = markdown_table(
        ["", f"val {metric} (mean [95%])", f"test {metric}", "val within the answer's interval"],
        rows,
        align="lrrl",
    )
    check = doc["export_check"]
    return (
        f"## {doc['date']}\n\n"
        f"Recorded {doc['date']} on {doc['machine']} in {doc['wall_s']:.0f} s; command `{doc['command']}`; commit "
        f"{doc['commit']}. Study `{doc['study']}` on the checkpoint `{doc['checkpoint']}`, answer "
        f"{','.join(map(str, a['heads']))} heads a layer (key/value heads {a['kv_heads']}), "
        f"{'decided' if doc['decided'] else 'not decided'}. `explorer export` checked the folder's logits against "
        f"explorer's on {check['test_examples']} test examples: max difference {check['max_abs_logit_diff']:.2e} "
        f"(tolerance {check['tolerance']:g}). The fresh process loaded it with `{check['loads_with']}"
        f".from_pretrained(..., trust_remote_code=True)`: heads {got['heads']}, key/value heads {got['kv_heads']}, "
        f"{got['parameters']:,} parameters; scored on {got['val_examples']:,} validation and "
        f"{got['test_examples']:,} test examples.\n\n{table}\n"
    )


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _args(argv)
    from explorer.errors import ExplorerError

    try:
        doc = run(args, argv)
    except ExplorerError as exc:
        refuse(str(exc), exc.exit_code)
    block = _block(doc)
    print(block)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    if args.record:
        append_record(args.record, block, title=TITLE)


if __name__ == "__main__":
    main()
