"""Does a whole new run of the study give an answer the first one promised? ("holds up when re-run")

``benchmarks.rerun_check`` retrains the *recommended layout* with fresh seeds. This script re-runs the *whole study*:
the same spec with other study seeds (the sampler's seed and every trial's training seed), each exactly as the
README runs it (``explorer study run SPEC --workers 2``), in a fresh folder with its own latency cache. For
every ordered pair of runs (A, B) it asks what a user who acted on A's report would see in B's:

* the same layout, or one of the layouts A named as "as good as far as this data can tell";
* B's accuracy (mean over its 3 finalist seeds) inside the interval A gave for the mean of 3 fresh seeds;
* B's latency (median) inside the interval A gave for a new timing.

A run that names another layout is not by itself a failure: the report says beforehand that a new run may
pick one of the layouts it cannot tell apart. A pair where B's accuracy or latency falls outside A's interval
is what a user would call an answer that did not hold.

    python -m benchmarks.answer_stability studies/quickstart.toml --seeds 1 2 3 --record benchmarks/answer_stability.md
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    EXPLORER,
    append_json,
    append_record,
    command,
    commit,
    explorer_env,
    load_average,
    load_text,
    machine,
    markdown_table,
    stamp,
)


def respec(text: str, name: str, seed: int) -> str:
    """The spec's text with another study name and seed (every other line as written)."""
    text, n = re.subn(r'(?m)^name\s*=\s*"[^"]*"', f'name = "{name}"', text, count=1)
    if n != 1:
        raise SystemExit('the spec has no top-level `name = "..."` line to rename')
    text, n = re.subn(r"(?m)^seed\s*=\s*\d+", f"seed = {seed}", text, count=1)
    if n != 1:  # no seed line: the default (0) was used; add one after the name
        text = re.sub(r'(?m)^(name\s*=\s*"[^"]*".*)$', rf"\1\nseed = {seed}", text, count=1)
    return text


def run_one(spec_text: str, name: str, seed: int, workers: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"stability-{seed}-"))
    (folder / "studies").mkdir()
    study = f"{name}-seed{seed}"
    spec = folder / "studies" / f"{study}.toml"
    spec.write_text(respec(spec_text, study, seed))
    env = explorer_env(folder / "cache")
    cmd = [*EXPLORER, "study", "run", str(spec), "--workers", str(workers)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:  # recorded as a failed run, with its whole stderr kept for the traceback
        (folder / "stderr.log").write_text(done.stderr)
        last = next((line for line in reversed(done.stderr.splitlines()) if line.startswith("error:")), "")
        return {
            "seed": seed,
            "seconds": round(wall, 1),
            "failed": done.returncode,
            "error": last,
            "stderr": str(folder / "stderr.log"),
        }

    import explorer

    ans = explorer.recommend(study, f"sqlite:///{folder / 'studies' / study}.db")
    rec = ans.recommended
    if rec is None or ans.evidence != "finalists":
        raise SystemExit(f"seed {seed}: no finalist-backed recommendation (evidence: {ans.evidence})")
    return {
        "seed": seed,
        "seconds": round(wall, 1),
        "key": rec.key,
        "heads": list(rec.config.heads),
        "accuracy": [rec.quality.estimate, rec.quality.low, rec.quality.high],
        "rerun": [rec.rerun.low, rec.rerun.high],
        "latency": [rec.latency.estimate, rec.latency.low, rec.latency.high],
        "confidence": ans.confidence,
        "alike": [a.key for a in ans.alike],
        "alike_heads": [list(a.config.heads) for a in ans.alike],
        "runs": rec.n,
    }


def pairs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    runs = [r for r in runs if "failed" not in r]
    for a in runs:
        for b in runs:
            if a is b:
                continue
            out.append(
                {
                    "a": a["seed"],
                    "b": b["seed"],
                    "same": a["key"] == b["key"],
                    "named": b["key"] == a["key"] or b["key"] in a["alike"],
                    "accuracy_inside": a["rerun"][0] <= b["accuracy"][0] <= a["rerun"][1],
                    "latency_inside": a["latency"][1] <= b["latency"][0] <= a["latency"][2],
                }
            )
    return out


def heads(h: list[int]) -> str:
    return ",".join(map(str, h))


def render(result: dict[str, Any]) -> str:
    runs, ps = result["runs"], result["pairs"]
    rows = []
    for r in runs:
        if "failed" in r:
            error = f"the command failed (exit {r['failed']}): {r['error'] or 'see stderr'}"
            rows.append([r["seed"], error, "", "", "", "", "", f"{r['seconds'] / 60:.1f}"])
            continue
        acc, lat = r["accuracy"], r["latency"]
        rows.append(
            [
                r["seed"],
                heads(r["heads"]),
                f"{acc[0]:.2%} [{acc[1]:.2%}, {acc[2]:.2%}]",
                f"[{r['rerun'][0]:.2%}, {r['rerun'][1]:.2%}]",
                f"{lat[0]:.3g} [{lat[1]:.3g}, {lat[2]:.3g}]",
                "n/a" if r["confidence"] is None else f"{r['confidence']:.0%}",
                " or ".join(heads(h) for h in r["alike_heads"]) or "none",
                f"{r['seconds'] / 60:.1f}",
            ]
        )
    header = [
        "seed",
        "answer (heads per layer)",
        "accuracy, mean of 3 seeds [95%]",
        "3 fresh seeds should average",
        "latency ms [new timing, 95%]",
        "confidence",
        "as good as far as the data can tell",
        "minutes",
    ]
    lines = [
        f"## {result['study']}: {len(runs)} whole runs, study seeds {', '.join(str(r['seed']) for r in runs)}",
        "",
        f"Recorded {result['date']} on {result['machine']}; load average before/after "
        f"{load_text(result['load_before'], result['load_after'])}; "
        f"command `{result['command']}`; each run `explorer study run SPEC --workers {result['workers']}` in a "
        "fresh folder with an empty latency cache"
        + (f"; commit {result['commit']}" if result.get("commit") else "")
        + (
            f"; the runs recorded at {result['reused']} are kept and the new seeds added"
            if result.get("reused")
            else ""
        )
        + ".",
        "",
        markdown_table(header, rows),
    ]
    n = len(ps)
    same = sum(p["same"] for p in ps)
    named = sum(p["named"] for p in ps)
    acc_in = sum(p["accuracy_inside"] for p in ps)
    lat_in = sum(p["latency_inside"] for p in ps)
    both = sum(p["accuracy_inside"] and p["latency_inside"] for p in ps)
    lines += [
        "",
        f"Over the {n} ordered pairs (A's report, B's run): B names A's layout in {same}; A's layout or one A named "
        f"as alike in {named}; B's accuracy falls inside A's interval for 3 fresh seeds in {acc_in}; B's latency "
        f"inside A's interval for a new timing in {lat_in}; both in {both}.",
    ]
    misses = [p for p in ps if not (p["accuracy_inside"] and p["latency_inside"])]
    by_seed = {r["seed"]: r for r in runs}
    for p in misses:
        a, b = by_seed[p["a"]], by_seed[p["b"]]
        what = []
        if not p["accuracy_inside"]:
            what.append(f"accuracy {b['accuracy'][0]:.2%} outside [{a['rerun'][0]:.2%}, {a['rerun'][1]:.2%}]")
        if not p["latency_inside"]:
            what.append(
                f"latency {b['latency'][0]:.3g} ms outside [{a['latency'][1]:.3g}, {a['latency'][2]:.3g}]"
            )
        lines.append(
            f"- seed {p['b']} ({heads(b['heads'])}) against seed {p['a']}'s report: {'; '.join(what)}."
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec", type=Path)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--record", type=Path, help="append the result to this Markdown file (and its .json)")
    ap.add_argument(
        "--extend",
        action="store_true",
        help="keep the runs of the last recorded block (same study and workers) and add --seeds to them",
    )
    args = ap.parse_args()
    text = args.spec.read_text()
    name = re.search(r'(?m)^name\s*=\s*"([^"]*)"', text)
    if name is None:
        raise SystemExit(f'{args.spec}: no top-level `name = "..."` line')
    load_before = load_average()
    runs, reused = [], None
    if args.extend:
        raw = args.record.with_suffix(".json") if args.record else None
        if raw is None or not raw.exists():
            raise SystemExit("--extend needs --record with an earlier block to extend")
        last = json.loads(raw.read_text())[-1]
        if (last["study"], last["workers"]) != (name.group(1), args.workers):
            raise SystemExit(
                f"the last block is {last['study']} with {last['workers']} workers: nothing to extend"
            )
        runs, reused = list(last["runs"]), last["date"]
    for seed in [s for s in args.seeds if s not in {r["seed"] for r in runs}]:
        r = run_one(text, name.group(1), seed, args.workers)
        what = f"FAILED (stderr in {r['stderr']})" if "failed" in r else heads(r["heads"])
        print(f"seed {seed}: {what} in {r['seconds']:.0f} s", flush=True)
        runs.append(r)
    result = {
        "study": name.group(1),
        "date": stamp(),
        "machine": machine(),
        "command": command(),
        "workers": args.workers,
        "load_before": load_before,
        "load_after": load_average(),
        "runs": runs,
        "pairs": pairs(runs),
        "reused": reused,
        "commit": commit(),
    }
    text_out = render(result)
    print(text_out)
    if args.record:
        title = (
            "# Whole re-runs of a study: does a new run give the answer the first one promised?\n\n"
            "Written by `python -m benchmarks.answer_stability` (one block per check, appended); raw figures in the "
            ".json beside this file.\n"
        )
        append_record(args.record, text_out, title=title)
        append_json(args.record.with_suffix(".json"), result)


if __name__ == "__main__":
    main()
