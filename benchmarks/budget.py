"""What evidence would the answer need for a whole re-run to name a layout of the first run's class 9 times in 10?

``calibration.py`` measures the agreement of whole re-runs at the README's budget (5 units a layout) and at 10
units; neither reaches 90%. This script projects it to larger budgets from the same recorded runs, so the budget
the target needs is a figure rather than a guess. It works on the ladder (the uniform layouts every run measures;
a search's additions differ from run to run and cannot be pooled), with the library's rule and confidence
(:func:`explorer.insight.equivalence.choose`, :func:`explorer.insight.confidence.rerun_confidence`):

* the pool: every unit (one fold of one seed) of every recorded run, as a column of the ladder's accuracies on
  that unit, so the pairing of layouts on a unit is kept; each run's timing rounds likewise;
* a simulated run at a budget of ``k`` units: ``k`` columns drawn from a normal distribution with the pool's mean
  and covariance (clipped to [0, 1]), and the timing rounds of one recorded run drawn at random. A parametric
  draw, because drawing ``k`` of the pool's own columns would make two simulated runs share columns, and so agree
  more than two real ones, once ``k`` nears the pool's size; the bootstrap's figures are printed beside it;
* per budget: the agreement over ordered pairs of simulated runs (B's answer in A's class), the mean stated
  confidence, class sizes, answers, and class members whose pool mean is more than the margin below the best's;
* at 5 units the same figures from the recorded runs themselves, the check that the simulation reproduces them;
* minutes: the recorded median of a README run (5 units, its search included) plus, per 5 more units, the
  recorded median of ``explorer confirm --seeds 2`` adding them (a projection from stage times, not a measured run).

    python -m benchmarks.budget --record benchmarks/budget.md
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.calibration import decide, matrix, on_ladder
from benchmarks.common import append_record, command, commit, machine, markdown_table, stamp

RECORDS = Path(__file__).with_name("calibration.json")


def ladder(table: dict[str, Any]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The ladder's keys, scores (layouts x units) and times (layouts x rounds) of one candidate table."""
    rows = sorted((i for i, layout in enumerate(table["layouts"]) if on_ladder(layout)),
                  key=lambda i: table["layouts"][i]["heads"])  # fmt: skip
    names = [",".join(map(str, table["layouts"][i]["heads"])) for i in rows]
    return names, matrix(table["scores"])[rows], matrix(table["times"])[rows]


def pool(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Every recorded run's ladder columns and timing rounds (a run's grown table where it was grown)."""
    names, columns, times, readme, seconds, extend = None, [], [], [], [], []
    for entry in entries:
        for run in entry["runs"]:
            if "readme" not in run:
                continue
            keys, scores, rounds = ladder(run.get("extended", run["readme"]))
            if names is not None and keys != names:
                raise SystemExit(f"seed {run['seed']}: ladder {keys} differs from {names}")
            names = keys
            columns.extend(scores[:, j] for j in range(scores.shape[1]) if not np.isnan(scores[:, j]).any())
            times.append(rounds)
            readme.append(run["readme"])
            seconds.append(run["seconds"])
            if "extend_seconds" in run:
                extend.append(
                    run["extend_seconds"] / (len(run["extended"]["units"]) / len(run["readme"]["units"]) - 1)
                )
    return {"names": names, "columns": np.array(columns).T, "times": times, "readme": readme,
            "seconds": seconds, "extend": extend}  # fmt: skip


def agreement(decided: list[tuple[int, set[int]]]) -> float:
    pairs = [(a, b) for a in range(len(decided)) for b in range(len(decided)) if a != b]
    return float(np.mean([decided[b][0] in decided[a][1] for a, b in pairs]))


def simulate(data: dict[str, Any], units: int, runs: int, stated: int, margin: float, alpha: float, tie: float,
             bootstrap: bool, seed: int) -> dict[str, Any]:  # fmt: skip
    """``runs`` simulated runs of ``units`` units (see the module docstring); confidence stated by the first
    ``stated`` of them."""
    from explorer.insight.confidence import rerun_confidence
    from explorer.insight.equivalence import choose

    rng = np.random.default_rng(seed)
    cols = data["columns"]
    mean, cov = cols.mean(axis=1), np.cov(cols)
    decided, confidences = [], []
    for k in range(runs):
        if bootstrap:
            scores = cols[:, rng.integers(0, cols.shape[1], units)]
        else:
            scores = np.clip(rng.multivariate_normal(mean, cov, units).T, 0.0, 1.0)
        times = data["times"][rng.integers(0, len(data["times"]))]
        answer, classes = choose(scores, times, margin, alpha, tie)
        decided.append((answer, set(classes.members)))
        if k < stated:
            confidences.append(rerun_confidence(scores, times, classes.members, margin, alpha, tie, seed=k))
    low = mean.max() - margin
    return {
        "units": units,
        "agreement": agreement(decided),
        "confidence": float(np.mean(confidences)) if confidences else float("nan"),
        "size": float(np.mean([len(c) for _, c in decided])),
        "answers": np.bincount([a for a, _ in decided], minlength=len(mean)) / runs,
        "too_low": float(np.mean([any(mean[i] < low for i in c) for _, c in decided])),
    }


def recorded(data: dict[str, Any], margin: float, alpha: float, tie: float) -> dict[str, Any]:
    """The same figures from the recorded runs at the README's budget (their first 5 units)."""
    index = {name: i for i, name in enumerate(data["names"])}
    runs, decided = [], []
    for table in data["readme"]:
        r = decide(table, 1, 5, margin, alpha, tie, ladder=True)
        name = {layout["key"]: ",".join(map(str, layout["heads"])) for layout in table["layouts"]}
        decided.append((index[name[r["answer"]]], {index[name[m]] for m in r["class"]}))
        runs.append(r)
    return {"agreement": agreement(decided), "confidence": float(np.mean([r["confidence"] for r in runs])),
            "size": float(np.mean([len(c) for _, c in decided])), "runs": len(runs)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, nargs="+", default=[1, 2], help="calibration.json entries to pool")
    ap.add_argument("--units", type=int, nargs="+", default=[5, 10, 15, 20, 30, 40, 60])
    ap.add_argument("--runs", type=int, default=200, help="simulated runs per budget")
    ap.add_argument(
        "--stated", type=int, default=40, help="simulated runs per budget that state a confidence"
    )
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    entries = json.loads(RECORDS.read_text())
    chosen = [entries[i] for i in args.entries]
    spec = chosen[0]["spec"]
    margin, alpha, tie = spec["margin"], spec["alpha"], spec["tie"]
    data = pool(chosen)
    real = recorded(data, margin, alpha, tie)
    rows = []
    for units in args.units:
        sim = simulate(data, units, args.runs, args.stated, margin, alpha, tie, False, seed=units)
        boot = simulate(data, units, args.runs, 0, margin, alpha, tie, True, seed=units)
        minutes = (np.median(data["seconds"]) + (units / 5 - 1) * np.median(data["extend"])) / 60
        answers = ", ".join(
            f"{n} {p:.0%}" for n, p in zip(data["names"], sim["answers"], strict=True) if p >= 0.005
        )
        rows.append([units, f"{minutes:.1f}", f"{sim['agreement']:.0%}", f"{boot['agreement']:.0%}",
                     f"{sim['confidence']:.0%}", f"{sim['size']:.2f}", answers, f"{sim['too_low']:.0%}"])  # fmt: skip
    cols = data["columns"]
    means = ", ".join(f"{n} {m:.2%}" for n, m in zip(data["names"], cols.mean(axis=1), strict=True))
    dates = ", ".join(chosen[i]["date"] for i in range(len(chosen)))
    block = "\n".join([
        f"## The ladder's agreement by budget, from {real['runs']} recorded runs ({cols.shape[1]} units)",
        "",
        f"Recorded {stamp()} on {machine()}, in {time.perf_counter() - t0:.0f} s; command `{command()}`; commit "
        f"{commit()}. Pool: the calibration runs recorded {dates}; margin {margin * 100:g} point, alpha {alpha}, "
        f"latency tie {tie:.0%}; {args.runs} simulated runs per budget, {args.stated} of them stating a confidence.",
        "",
        f"Pool means (the truth the simulation draws around): {means}.",
        "",
        f"The recorded runs at 5 units, ladder only: agreement {real['agreement']:.0%}, mean stated confidence "
        f"{real['confidence']:.0%}, mean class size {real['size']:.2f}.",
        "",
        markdown_table(
            ["units a layout", "minutes (projected)", "agreement (simulated)", "agreement (bootstrap of the pool)",
             "mean stated confidence", "mean class size", "answers", "runs whose class holds a layout more than "
             "the margin below the best"], rows),  # fmt: skip
    ])  # fmt: skip
    print(block)
    append_record(args.record, block + "\n", title="# The budget the answer's agreement target needs\n\nWritten by "
                  "`python -m benchmarks.budget` (its docstring gives the method) from `calibration.json`.")  # fmt: skip


if __name__ == "__main__":
    main()
