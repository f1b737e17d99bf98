"""Deploy and share, measured: runtimes side by side, ONNX export parity, `bench model` against the study.

    python -m benchmarks.deploy [--rounds 5] [--min-run-time 0.5] [--record benchmarks/deploy.md]

What it does, in a fresh temporary folder with its own latency cache (nothing outside it is touched):

1. runs two small quickstart-like digits studies through the command line, the same space timed two ways:
   ``deploy-eager`` (``[latency] runtime = "eager"``) and ``deploy-ort`` (``runtime = "onnxruntime"``);
2. exports the eager study's knee (``--format state`` and ``onnx``; the ONNX parity on the test split is the
   export's own check) and the ORT study's knee as ONNX;
3. times the eager knee's trained model under eager PyTorch, ``torch.compile`` and ONNX Runtime in one process,
   in alternating rounds (the order rotates every round), and reports the ratio of the medians;
4. times the exported files with ``explorer bench model`` (three fresh processes each) and says whether each
   lands within the study's stated interval for that trial (like for like: the state file against the eager
   study, the ONNX file against the ORT study);
5. overlays both studies' fronts with ``explorer compare``.

Appends a dated block (machine, load, command, figures) to ``--record``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    EXPLORER,
    append_record,
    explorer_env,
    load_average,
    load_text,
    machine,
    markdown_table,
    record_block,
)

SPEC = """\
name = "{name}"
n_trials = 6
sampler = "tpe"
seed = 0

[task]
name = "digits"
epochs = 4
batch_size = 128

[space]
d_model = [32]
n_layers = [2]
heads = [1, 2, 4, 8]
min_dk = [4]
families = ["uniform", "increasing", "decreasing"]
mlp_ratio = [2.0]
lr = 3e-3

[latency]
device = "cpu"
batch_size = 16
threads = 1
runtime = "{runtime}"

[early_stopping]
min_epochs = 1

[finalists]
seeds = 2
epochs = 6
"""


def cli(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[dict, float]:
    """Run `explorer ... --json` in a fresh process; return its JSON document and wall time."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [*EXPLORER, *args, "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"explorer {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        )
    return json.loads(done.stdout), time.perf_counter() - t0


def compare_runtimes(knee: Path, rounds: int, min_run_time: float) -> dict:
    """Eager vs torch.compile vs ONNX Runtime on the same trained model and batch, alternating rounds."""
    import torch

    from explorer.layout import InputSpec, LatencyConfig, ModelConfig
    from explorer.measure import random_input, time_call
    from explorer.model import build_model, prepare_runner

    torch.set_num_threads(1)
    doc = torch.load(knee, weights_only=True)
    meta = json.loads(doc["explorer"])
    spec = InputSpec(**meta["input"])
    model = build_model(ModelConfig.from_dict(meta["run_config"]["model"]), spec)
    model.load_state_dict(doc["state_dict"])
    model.eval()
    batch = meta["study_latency"]["batch_size"]
    cfg = LatencyConfig(device="cpu", batch_size=batch, threads=1, min_run_time=min_run_time)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        x = random_input(spec, batch)
    cpu = torch.device("cpu")
    runners, prepare_s, diffs = {}, {}, {}
    with torch.inference_mode():
        reference = model(x)
        for runtime in ("eager", "compile", "onnxruntime"):
            t0 = time.perf_counter()
            runners[runtime] = prepare_runner(model, x, cpu, runtime, 1)
            prepare_s[runtime] = time.perf_counter() - t0
            diffs[runtime] = float((runners[runtime].output() - reference).abs().max())
        names = list(runners)
        per_round: dict[str, list[float]] = {n: [] for n in names}
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for runtime in order:
                res = time_call(runners[runtime], cpu, cfg, batch, spec.seq_len, runtime=runtime)
                per_round[runtime].append(res.median_ms)
    medians = {n: statistics.median(v) for n, v in per_round.items()}
    return {
        "config": meta["run_config"]["model"],
        "trial": meta["run_config"]["source"]["trial"],
        "batch": batch,
        "seq_len": spec.seq_len,
        "per_round": per_round,
        "median_ms": medians,
        "speedup_vs_eager": {n: medians["eager"] / m for n, m in medians.items()},
        "prepare_s": prepare_s,
        "max_abs_diff": diffs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rounds", type=int, default=5, help="alternating rounds of eager / compile / onnxruntime"
    )
    ap.add_argument("--min-run-time", type=float, default=0.5, help="seconds timed per runtime per round")
    ap.add_argument("--repeats", type=int, default=3, help="`bench model` processes per exported file")
    ap.add_argument("--record", type=Path, help="append a dated block to this markdown file")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="explorer-deploy-"))
    env = explorer_env(work / "cache")
    load_before = load_average()

    studies = {}
    for name, runtime in (("deploy-eager", "eager"), ("deploy-ort", "onnxruntime")):
        (work / f"{name}.toml").write_text(SPEC.format(name=name, runtime=runtime))
        doc, wall = cli(["study", "run", f"{name}.toml", "--no-bench"], work, env)
        studies[name] = {"runtime": runtime, "wall_s": wall, "complete": doc["complete"]}
        print(f"{name}: {wall:.0f} s", file=sys.stderr)

    exports = {}
    for study, fmt, out in (
        ("deploy-eager", "state", "eager-knee.pt"),
        ("deploy-eager", "onnx", "eager-knee.onnx"),
        ("deploy-eager", "pt2", "eager-knee.pt2"),
        ("deploy-ort", "onnx", "ort-knee.onnx"),
    ):
        doc, wall = cli(["export", study, "--trial", "knee", "--format", fmt, "--out", out], work, env)
        exports[out] = {**doc, "wall_s": wall}
        print(f"export {out}: diff {doc['max_abs_logit_diff']}", file=sys.stderr)

    runtimes = compare_runtimes(work / "eager-knee.pt", args.rounds, args.min_run_time)
    print(f"runtimes: {runtimes['median_ms']}", file=sys.stderr)

    benches = {}
    for out in ("eager-knee.pt", "ort-knee.onnx", "eager-knee.onnx"):
        benches[out] = [cli(["bench", "model", out], work, env)[0] for _ in range(args.repeats)]

    compared, _ = cli(["compare", "deploy-eager", "deploy-ort", "--out", "compare"], work, env)
    load_after = load_average()
    block = render(load_text(load_before, load_after), studies, exports, runtimes, benches, compared)
    print(block)
    append_record(args.record, block)


def render(load: str, studies: dict, exports: dict, runtimes: dict, benches: dict, compared: dict) -> str:
    """The record block: the runtimes side by side, export parity, `bench model` against the study, the knees."""
    import onnxruntime
    import torch

    med, speed = runtimes["median_ms"], runtimes["speedup_vs_eager"]
    heads = ",".join(map(str, runtimes["config"]["heads"]))
    side_by_side = markdown_table(
        [
            "runtime",
            "median of round medians (ms)",
            "per round (ms)",
            "speed-up vs eager",
            "max abs diff vs eager",
            "prepare (s)",
        ],
        [
            [
                n,
                f"{med[n]:.3f}",
                ", ".join(f"{v:.3f}" for v in runtimes["per_round"][n]),
                f"{speed[n]:.2f}x",
                f"{runtimes['max_abs_diff'][n]:.1e}",
                f"{runtimes['prepare_s'][n]:.1f}",
            ]
            for n in ("eager", "compile", "onnxruntime")
        ],
    )
    parity = markdown_table(
        [
            "file",
            "trial",
            "heads",
            "max abs logit diff",
            "test examples",
            "same prediction",
            "export wall (s)",
        ],
        [
            [
                out,
                f"#{d['trial']}",
                ",".join(map(str, d["heads"])),
                f"{d['max_abs_logit_diff']:.2e}",
                d["test_examples"],
                f"{d['prediction_agreement']:.1%}",
                f"{d['wall_s']:.1f}",
            ]
            for out, d in exports.items()
        ],
    )
    bench = markdown_table(
        [
            "file",
            "runtime",
            "study figure (ms) [stated interval]",
            "study runtime",
            "bench model (ms)",
            "ratio",
            "within",
            "same setup",
        ],
        [
            [
                out,
                b["runtime"],
                f"{b['study']['median_ms']:.3f} [{b['study']['low']:.3f}, {b['study']['high']:.3f}]",
                b["study"]["runtime"],
                f"{b['latency_ms']:.3f}",
                f"{b['ratio_to_study']:.2f}",
                "yes" if b["within_spread"] else "NO",
                "yes" if b["same_setup"] else "no",
            ]
            for out, runs in benches.items()
            for b in runs
        ],
    )
    knees = markdown_table(
        ["study", "device, runtime", "heads", "val accuracy", "latency (ms)", "front size"],
        [
            [
                k["study"],
                f"{k['device']}, {k['runtime']}",
                k["heads"],
                f"{k['val_accuracy']:.4f}",
                f"{k['latency_ms']:.3f}",
                sum(r["study"] == k["study"] for r in compared["rows"]),
            ]
            for k in compared["rows"]
            if k["knee"]
        ],
    )
    return record_block(
        f"knee of deploy-eager (trial #{runtimes['trial']}, d_model {runtimes['config']['d_model']}, "
        f"heads {heads}), batch {runtimes['batch']}, seq {runtimes['seq_len']}",
        [
            f"machine: {machine()}, 1 thread timed; torch {torch.__version__}, onnxruntime {onnxruntime.__version__}",
            f"load average (1 min) before/after: {load}",
            "studies (6 search trials + finalists, `study run --no-bench`): "
            + ", ".join(f"{n} ({s['runtime']}) {s['wall_s']:.0f} s" for n, s in studies.items()),
        ],
        [
            "### Runtimes side by side (one process, same trained model and batch, alternating rounds)",
            "",
            side_by_side,
            "",
            "### Export parity (the export's own check on the task's whole test split, float32)",
            "",
            parity,
            "",
            "### `explorer bench model` against the study's figure for the trial (fresh process each)",
            "",
            bench,
            "",
            "### `explorer compare deploy-eager deploy-ort`: the knees",
            "",
            knees,
        ],
    )


if __name__ == "__main__":
    main()
