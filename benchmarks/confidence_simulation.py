"""How well does the answer's confidence match re-runs of studies whose truth is known?

Whole re-runs of a real study (``calibration.py``) test the confidence at one truth: the quickstart's. This script
simulates evidence grids from a known truth, so the check covers the cases a real task may hold: a clear best
layout, and a best tied with another. Each simulated study draws scores for five layouts on ``units`` units
(layout means + a unit effect every layout shares + each run's own noise) and three timing rounds, applies the
answer's rule (:func:`explorer.insight.equivalence.choose`) and states its confidence
(:func:`explorer.insight.confidence.rerun_confidence`). Over every ordered pair of simulated studies of one truth,
the observed agreement is the share in which study B's answer is a member of study A's class; it is set beside
the mean confidence the studies stated.

The truth is modelled on the quickstart's ladder (1, 2, 4, 8, 16 heads per layer): means 90.3, 92.3, 94.2,
96.4 - gap and 96.4%, a per-run spread of 1.4 points and a shared unit effect of 1 point (the digits pilot's
residual spread), latencies 3.0, 3.1, 3.0, 3.5, 4.5 ms; ``gap`` moves the 8-head layout from tied with the best
(0) to well behind it (1.9 points, the pilot's own gap).

    python -m benchmarks.confidence_simulation --record benchmarks/confidence_simulation.md
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.common import append_record, command, commit, machine, stamp

MEANS = np.array([0.903, 0.923, 0.942, 0.964, 0.964])  # 1, 2, 4, 8 (moved by the gap), 16 heads per layer
LATENCY = np.array([3.0, 3.1, 3.0, 3.5, 4.5])
RUN_SD, UNIT_SD, ROUND_SD, TIME_SD = 0.014, 0.01, 0.05, 0.02


def study(rng: np.random.Generator, gap: float, units: int) -> tuple[np.ndarray, np.ndarray]:
    means = MEANS.copy()
    means[3] -= gap
    scores = means[:, None] + rng.normal(0, UNIT_SD, units)[None, :] + rng.normal(0, RUN_SD, (5, units))
    times = LATENCY[:, None] * np.exp(rng.normal(0, ROUND_SD, 3))[None, :] * np.exp(rng.normal(0, TIME_SD, (5, 3)))
    return scores, times


def cell(gap: float, units: int, studies: int, margin: float, seed: int) -> dict[str, float]:
    from explorer.insight.confidence import rerun_confidence
    from explorer.insight.equivalence import choose

    rng = np.random.default_rng(seed)
    runs = []
    for k in range(studies):
        scores, times = study(rng, gap, units)
        answer, classes = choose(scores, times, margin, 0.05, 0.05)
        conf = rerun_confidence(scores, times, classes.members, margin, 0.05, 0.05, seed=k)
        runs.append((answer, set(classes.members), conf))
    pairs = [(a, b) for a in range(studies) for b in range(studies) if a != b]
    agree = float(np.mean([runs[b][0] in runs[a][1] for a, b in pairs]))
    return {"gap": gap, "units": units, "agreement": agree, "confidence": float(np.mean([r[2] for r in runs])),
            "class": float(np.mean([len(r[1]) for r in runs]))}  # fmt: skip


CONFIDENCE_METHOD = "simulated re-runs, explorer.insight.confidence"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gaps", type=float, nargs="+", default=[0.0, 0.005, 0.01, 0.015, 0.019])
    ap.add_argument("--units", type=int, nargs="+", default=[5, 10, 15])
    ap.add_argument("--studies", type=int, default=40, help="simulated studies per cell")
    ap.add_argument("--margin", type=float, default=0.01)
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = [cell(g, u, args.studies, args.margin, seed=int(1000 * g) + u) for u in args.units for g in args.gaps]
    lines = [
        f"\n## {args.studies} simulated studies per cell, margin {args.margin * 100:g} point",
        "",
        f"Recorded {stamp()} on {machine()}, in {time.perf_counter() - t0:.0f} s; command `{command()}`; commit "
        f"{commit()} (the confidence: {CONFIDENCE_METHOD}).",
        "",
        "| units | gap of 8 heads behind the best (points) | observed agreement | mean stated confidence | "
        "stated - observed | mean class size |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['units']} | {r['gap'] * 100:.1f} | {r['agreement']:.0%} | {r['confidence']:.0%} | "
                     f"{(r['confidence'] - r['agreement']) * 100:+.0f} | {r['class']:.2f} |")  # fmt: skip
    text = "\n".join(lines) + "\n"
    print(text)
    append_record(args.record, text.lstrip("\n"), title="# The answer's confidence against simulated re-runs of "
                  "known truth\n\nWritten by `python -m benchmarks.confidence_simulation` (its docstring gives the model).")  # fmt: skip


if __name__ == "__main__":
    main()
