"""Does a whole re-run of the study name a layout of the first run's answer class, as often as the report says?

Each run is the README's first command on the quickstart spec with another study seed (the sampler's, every
training seed, every fold cut: the seed blocks of :mod:`explorer.layout._units` are disjoint), in a fresh folder
with an empty latency cache: ``explorer study run studies/quickstart.toml --workers 2`` then ``explorer report
quickstart --json``. With ``--extend K`` the run then adds replicates with ``explorer confirm quickstart --seeds K``
(same folds and seeds for the first replicates, the same timing rounds), so one run holds the README's evidence
and more of it.

For every run the candidate table is committed (``calibration.json``): every finalist layout's score on every
unit, its timings by round, the answer, its class and confidence. From those tables the record computes, for the
README's evidence (the first ``seeds`` replicates of the spec) and for every larger number of replicates (the
decision figures a user pays for, beyond-margin rate, oracle hit and latency regret, are scored on the same
tables by ``benchmarks/decisions.py``):

* over ordered pairs of runs (A, B): how often B's answer is a member of A's class (the layouts A placed within
  the margin; a diagnostic of stability, not the rule's goal);
* the mean stated figure beside it, and per run A its figure against the share of other runs whose answer its
  class contains (the figure is the rule's own: the answer's probability of lying within the margin under
  today's rule, a re-run agreement under the rule the runs of 2026-12-02 were recorded with);
* class sizes and the answers' frequencies;
* whether any class holds a layout whose *pooled* mean (over every run's every unit) is more than the margin
  below the pooled best's.

The answers at the README's level are recomputed offline from the tables with the library's rule
(:func:`explorer.answer._rule.decide`) and checked against the live reports, so other decision rules and
margins can be replayed from the committed tables (``--replay``; ``--entries I J`` pools the runs of several
recorded entries, e.g. two blocks of seeds).

    python -m benchmarks.calibration --seeds 1 2 3 4 5 6 7 8 9 10 --record benchmarks/calibration.md
    python -m benchmarks.calibration --replay benchmarks/calibration.json --record benchmarks/calibration.md
    python -m benchmarks.calibration --replay benchmarks/calibration.json --entries 1 2 --record benchmarks/calibration.md
    python -m benchmarks.calibration --grow benchmarks/calibration.json --folders '/tmp/calibration-*' \
        --extend 2 --record benchmarks/calibration.md

``--grow`` takes the runs of the last recorded entry, runs ``explorer confirm quickstart --seeds K`` in each
run's folder (still on disk, found by its seed in ``--folders``) and records the larger evidence beside the
README's: the same studies with more replicates, so what more units buy is read off like for like.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    EXPLORER,
    ROOT,
    append_json,
    append_record,
    command,
    commit,
    explorer_env,
    load_average,
    machine,
    stamp,
)

SPEC = ROOT / "studies" / "quickstart.toml"


def _explorer(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = explorer_env(folder / "cache")
    return subprocess.run([*EXPLORER, *args], cwd=folder, env=env, capture_output=True, text=True)


def _with_seed(text: str, seed: int) -> str:
    out, n = re.subn(r"(?m)^seed\s*=\s*\d+", f"seed = {seed}", text, count=1)
    if n != 1:
        raise SystemExit("the spec has no top-level `seed = N` line to change")
    return out


def _table(folder: Path, name: str) -> dict[str, Any]:
    """The candidate table of the study in ``folder``: what every decision rule needs, replayable offline."""
    import explorer

    ans = explorer.recommend(name, f"sqlite:///{folder / 'studies' / name}.db")
    if ans.grid is None:
        raise SystemExit(f"{folder}: the answer rests on no finalist runs ({ans.evidence})")
    keys = list(ans.grid.keys)
    by_key = {a.key: a for a in ans.candidates}
    times = ans.times if ans.times is not None else np.full((len(keys), 1), np.nan)
    return {
        "layouts": [{"key": k, "heads": list(by_key[k].heads), "label": by_key[k].label} for k in keys],
        "units": list(ans.grid.seeds),
        "scores": [[None if math.isnan(v) else float(v) for v in row] for row in ans.grid.scores],
        "times": [[None if math.isnan(v) else float(v) for v in row] for row in times],
        "collapsed": [c.number for c in ans.collapsed],
        "answer": ans.recommended.key if ans.recommended else None,
        "class": [a.key for a in ans.members],
        "confidence": ans.confidence,
        "epochs": None if ans.horizon is None else ans.horizon.epochs,  # the grid's horizon
        "check_holds": None if ans.check is None else ans.check.holds,
    }


def run_one(spec: Path, name: str, seed: int, extend: int | None) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"calibration-{seed}-"))
    (folder / "studies").mkdir()
    (folder / "studies" / spec.name).write_text(_with_seed(spec.read_text(), seed))
    t0 = time.perf_counter()
    steps = [("study", "run", f"studies/{spec.name}", "--workers", "2"), ("report", name, "--json")]
    for step in steps:
        done = _explorer(folder, *step)
        if done.returncode != 0:
            return {
                "seed": seed,
                "failed": done.returncode,
                "step": " ".join(step),
                "error": done.stderr.strip().splitlines()[-1:] or [""],
            }
    out = {"seed": seed, "seconds": round(time.perf_counter() - t0, 1), "readme": _table(folder, name)}
    out["report"] = json.loads(done.stdout)["answer"]["answer"]["key"]
    if extend:
        _extend(out, folder, name, extend)
    return out


def _extend(run: dict[str, Any], folder: Path, name: str, extend: int) -> None:
    """Add replicates to the run's study in ``folder`` (``explorer confirm --seeds extend``) and its table."""
    t1 = time.perf_counter()
    done = _explorer(folder, "confirm", name, "--seeds", str(extend), "--workers", "2")
    if done.returncode != 0:
        run["extend_failed"] = done.stderr.strip().splitlines()[-1:]
    else:
        run["extended"] = _table(folder, name)
        run["extend_seconds"] = round(time.perf_counter() - t1, 1)


def grow(result: dict[str, Any], pattern: str, name: str, extend: int) -> dict[str, Any]:
    """The recorded ``result`` with every run's study extended in its folder (see the module docstring)."""
    folders = {int(Path(f).name.split("-")[1]): Path(f) for f in glob.glob(pattern)}
    runs = []
    for r in result["runs"]:
        r = dict(r)
        if "readme" in r and r["seed"] in folders:
            _extend(r, folders[r["seed"]], name, extend)
            print(
                f"seed {r['seed']}: extended to {extend} replicates in {r.get('extend_seconds', 0):.0f} s",
                flush=True,
            )
        runs.append(r)
    return result | {"runs": runs, "extend": extend, "grown_from": result.get("date")}


# --------------------------------------------------------------------------------------------- analysis


def matrix(rows: list[list[float | None]]) -> np.ndarray:
    """A recorded table's rows as a float array (NaN where the record holds None)."""
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)


def on_ladder(layout: dict[str, Any]) -> bool:
    """Whether a recorded layout is on the ladder: the same head count in every layer."""
    return len(set(layout["heads"])) == 1


def decide(
    table: dict[str, Any],
    replicates: int,
    folds: int,
    margin: float,
    risk: float,
    tie: float,
    confidence: bool = True,
    ladder: bool = False,
) -> dict[str, Any]:
    """The answer, the layouts placed within the margin and the answer's stated probability of ``table`` from
    its first ``replicates`` replicates' units (only its uniform layouts, the ladder, with ``ladder``: what the
    rule gives without the layouts a search added)."""
    from explorer.answer import decide as rule

    rows = [i for i, layout in enumerate(table["layouts"]) if not ladder or on_ladder(layout)]
    scores = matrix(table["scores"])[rows, : replicates * folds]
    times = matrix(table["times"])[rows]
    keys = [table["layouts"][i]["key"] for i in rows]
    d = rule(scores, times, margin, risk, tie)
    return {
        "answer": keys[d.answer],
        "class": [keys[i] for i in d.members] or [keys[d.answer]],
        "best": keys[d.best],
        "confidence": d.p_within[d.answer] if confidence else None,
    }


def analyse(runs: list[dict[str, Any]], spec: Any, margin: float | None = None) -> dict[str, Any]:
    """Agreement, calibration, class sizes and pooled truth, at every number of replicates the runs hold (with
    the spec's margin, or ``margin``: a replay of the same runs under another margin)."""
    f, a = spec.finalists, spec.answer
    margin = a.margin_for(True) if margin is None else margin
    ok = [r for r in runs if "readme" in r]
    levels = {f.seeds: [r["readme"] for r in ok]}  # the README's evidence: exactly what its reports said
    if ok and all("extended" in r for r in ok):
        most = min(len(r["extended"]["units"]) for r in ok) // f.folds
        for k in range(1, most + 1):
            levels.setdefault(k, [r["extended"] for r in ok])
    check = [
        decide(r["readme"], f.seeds, f.folds, a.margin_for(True), a.risk, a.latency_tie, confidence=False)
        for r in ok
    ]
    mismatch = [r["seed"] for r, c in zip(ok, check, strict=True) if c["answer"] != r["readme"]["answer"]]
    pooled = _pooled_means([r.get("extended", r["readme"]) for r in ok])
    best = max(pooled.values())
    out: dict[str, Any] = {"mismatch": mismatch, "pooled": pooled, "levels": {}, "ladder": {}}
    for (k, tables), ladder in [(item, flag) for item in sorted(levels.items()) for flag in (False, True)]:
        decided = [decide(t, k, f.folds, margin, a.risk, a.latency_tie, ladder=ladder) for t in tables]
        pairs = [(x, y) for x in range(len(decided)) for y in range(len(decided)) if x != y]
        hits = [decided[y]["answer"] in decided[x]["class"] for x, y in pairs]
        per_run = [
            np.mean([decided[y]["answer"] in d["class"] for y in range(len(decided)) if y != x])
            for x, d in enumerate(decided)
        ]
        too_low = sorted({key for d in decided for key in d["class"] if pooled[key] < best - margin})
        out["ladder" if ladder else "levels"][k] = {
            "runs": decided,
            "agreement": float(np.mean(hits)) if hits else math.nan,
            "pairs": len(pairs),
            "hits": int(sum(hits)),
            "confidence": float(np.mean([d["confidence"] for d in decided])),
            "per_run": [float(p) for p in per_run],
            "sizes": [len(d["class"]) for d in decided],
            "answers": _counts(d["answer"] for d in decided),
            "too_low": too_low,
        }
    return out


def _pooled_means(tables: list[dict[str, Any]]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for t in tables:
        for layout, row in zip(t["layouts"], t["scores"], strict=True):
            sums.setdefault(layout["key"], []).extend(v for v in row if v is not None)
    return {k: float(np.mean(v)) for k, v in sums.items()}


def _counts(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


# --------------------------------------------------------------------------------------------- record


def _name(key: str, runs: list[dict[str, Any]]) -> str:
    for r in runs:
        for t in (r.get("readme"), r.get("extended")):
            for layout in (t or {}).get("layouts", []):
                if layout["key"] == key:
                    return ",".join(map(str, layout["heads"]))
    return key


def _level_table(levels: dict[Any, dict[str, Any]], folds: int, name: Any) -> list[str]:
    lines = [
        "| replicates (units) | agreement: B's answer in A's class | mean stated confidence | class sizes "
        "| answers | class members more than the margin below the pooled best |",
        "|---|---|---|---|---|---|",
    ]
    for k, lv in levels.items():
        answers = ", ".join(f"{name(a)} x{n}" for a, n in lv["answers"].items())
        low = ", ".join(name(x) for x in lv["too_low"]) or "none"
        lines.append(
            f"| {k} ({int(k) * folds}) | {lv['hits']} of {lv['pairs']} ({lv['agreement']:.0%}) | "
            f"{lv['confidence']:.0%} | {', '.join(map(str, lv['sizes']))} | {answers} | {low} |"
        )
    return lines


def _per_run(levels: dict[Any, dict[str, Any]], runs: list[dict[str, Any]]) -> list[str]:
    """Each run's stated confidence beside the share of the other runs whose answer its class holds."""
    seeds = [r["seed"] for r in runs if "readme" in r]
    out = []
    for k, lv in levels.items():
        pairs = ", ".join(
            f"seed {s}: {d['confidence']:.0%} / {p:.0%}"
            for s, d, p in zip(seeds, lv["runs"], lv["per_run"], strict=True)
        )
        out.append(
            f"Per run at {k} replicate(s), stated confidence / share of the other runs' answers in its class: "
            f"{pairs}."
        )
    return out


def _yes(value: bool | None) -> str:
    return "" if value is None else "yes" if value else "no"


def render(result: dict[str, Any]) -> str:
    runs, an, spec = result["runs"], result["analysis"], result["spec"]
    name = lambda k: _name(k, runs)  # noqa: E731
    lines = [
        f"\n## {len(runs)} whole re-runs of the quickstart, study seeds "
        f"{', '.join(str(r['seed']) for r in runs)}",
        "",
        f"Recorded {result['date']} on {result['machine']}; load average before/after "
        f"{result['load_before']:.2f}/{result['load_after']:.2f}; command `{result['command']}`; commit "
        f"{result.get('commit', 'unknown')}. Each run: `explorer study run studies/quickstart.toml --workers 2` "
        f"and `explorer report quickstart --json` in a fresh folder with an empty latency cache"
        + (
            f", then `explorer confirm quickstart --seeds {result['extend']} --workers 2`"
            if result.get("extend")
            else ""
        )
        + f". Margin {spec['margin'] * 100:g} point(s), risk {spec.get('risk', spec.get('alpha'))}, latency tie "
        f"{spec['tie']:.0%}, {spec['folds']} folds; the README's study trains {spec['seeds']} replicate(s).",
        "",
    ]
    if "replayed" in result:
        rp = result["replayed"]
        lines += [
            f"**Replayed** {rp['date']} with `{rp['command']}` at commit {rp['commit']}: the tables below are "
            "recomputed from the recorded candidate tables by that commit's rule and confidence"
            + (
                f", with a margin of {spec['margin'] * 100:g} point(s)"
                if result.get("margin_replayed")
                else ""
            )
            + (f", pooling the runs recorded {', '.join(rp['pooled'])}" if rp.get("pooled") else "")
            + "; the per-seed table gives what each run's live report said (runs recorded under an earlier "
            "rule may name another answer there).",
            "",
        ]
    failed = [r for r in runs if "readme" not in r]
    if failed:
        lines += [f"- seed {r['seed']} failed at `{r.get('step')}`: {r.get('error')}" for r in failed] + [""]
    lines += [
        "| seed | README answer | its class | confidence | grid horizon (epochs) | horizon check holds | minutes "
        "(study + report) | minutes to extend |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        if "readme" in r:
            t = r["readme"]
            conf = "n/a" if t["confidence"] is None else f"{t['confidence']:.0%}"
            ext = f"{r['extend_seconds'] / 60:.1f}" if "extend_seconds" in r else ""
            lines.append(
                f"| {r['seed']} | {name(t['answer'])} | {' '.join(name(k) for k in t['class'])} | {conf} | "
                f"{t.get('epochs') or ''} | {_yes(t.get('check_holds'))} | {r['seconds'] / 60:.1f} | {ext} |"
            )
    lines += ["", *_level_table(an["levels"], spec["folds"], name), "", *_per_run(an["levels"], runs)]
    lines += [
        "",
        "The same rule on the ladder alone (the uniform layouts every run measures; the layouts a run's "
        "search added left out):",
        "",
        *_level_table(an["ladder"], spec["folds"], name),
    ]
    pooled = ", ".join(f"{name(k)} {v:.2%}" for k, v in sorted(an["pooled"].items(), key=lambda kv: -kv[1]))
    lines += [
        "",
        f"Pooled means over every run's every unit (the benchmark's best estimate of each layout): {pooled}.",
        "The README-level answers recomputed offline from the tables match the live reports"
        + (" in every run." if not an["mismatch"] else f" except seeds {an['mismatch']}."),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--spec", type=Path, default=SPEC, help="the study spec (default: the README's quickstart)"
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 11)))
    ap.add_argument(
        "--extend", type=int, help="then add replicates up to this many (explorer confirm --seeds)"
    )
    ap.add_argument("--replay", type=Path, help="analyse the runs recorded in this JSON instead of running")
    ap.add_argument(
        "--entries",
        type=int,
        nargs="+",
        default=[-1],
        help="with --replay: the records (indices into the JSON list) whose runs are pooled (default: the last)",
    )
    ap.add_argument(
        "--grow", type=Path, help="extend the last runs recorded in this JSON (with --extend, --folders)"
    )
    ap.add_argument(
        "--folders", default="/tmp/calibration-*", help="where --grow finds the runs' folders (a glob)"
    )
    ap.add_argument(
        "--margin", type=float, help="replay with this margin (accuracy points) instead of the spec's"
    )
    ap.add_argument("--record", type=Path, help="append the result to this Markdown file (and its .json)")
    args = ap.parse_args()
    from explorer.spec import load_spec

    spec = load_spec(args.spec)
    load_before = load_average()
    if args.replay:
        history = json.loads(args.replay.read_text())
        picked = [history[i] for i in args.entries]
        result = dict(picked[-1], runs=[r for p in picked for r in p["runs"]])
        result["replayed"] = {
            "date": stamp(),
            "command": command(),
            "commit": commit(),
            "pooled": [p["date"] for p in picked] if len(picked) > 1 else None,
        }
    elif args.grow:
        if not args.extend:
            raise SystemExit("--grow needs --extend K: the replicates each study should have")
        result = grow(json.loads(args.grow.read_text())[-1], args.folders, spec.name, args.extend)
        result |= {
            "date": stamp(),
            "machine": machine(),
            "command": command(),
            "commit": commit(),
            "load_before": load_before,
        }
    else:
        runs = []
        for seed in args.seeds:
            r = run_one(args.spec, spec.name, seed, args.extend)
            print(f"seed {seed}: {r.get('report', 'FAILED')} in {r.get('seconds', 0):.0f} s", flush=True)
            runs.append(r)
        result = {
            "date": stamp(),
            "machine": machine(),
            "command": command(),
            "commit": commit(),
            "extend": args.extend,
            "runs": runs,
            "load_before": load_before,
        }
    if not args.replay:
        result["load_after"] = load_average()
    margin = None if args.margin is None else args.margin / 100
    result["margin_replayed"] = margin is not None
    result["spec"] = {
        "margin": spec.answer.margin_for(True) if margin is None else margin,
        "risk": spec.answer.risk,
        "tie": spec.answer.latency_tie,
        "folds": spec.finalists.folds,
        "seeds": spec.finalists.seeds,
    }
    result["analysis"] = analyse(result["runs"], spec, margin)
    text = render(result)
    print(text)
    if args.record and not args.replay:
        append_json(args.record.with_suffix(".json"), {k: v for k, v in result.items() if k != "analysis"})
    append_record(
        args.record,
        text.lstrip("\n"),
        title="# Calibration: whole re-runs of the README's study\n\n"
        "Written by `python -m benchmarks.calibration`; raw candidate tables in `calibration.json`.",
    )


if __name__ == "__main__":
    main()
