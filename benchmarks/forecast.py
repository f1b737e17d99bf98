"""Whether the forecast of what deciding costs is calibrated: how often a study that goes on decides within the
budget the forecast names (its 80th percentile), which should be about 80% (the target band: 70-90%, neither
timid nor rash).

Each study starts as the finalist stage does, every layout on its first units, then asks
:func:`explorer.answer._forecast.forecast` for the runs that decide it, and goes on under the product's own rounds
(:func:`explorer.answer._rule.next_cells`) until the rule decides or the forecast's cap is spent. Two sources:

* **simulated**: studies drawn unit by unit from the pooled ladder of the recorded quickstart runs
  (``calibration.json``: mean and covariance, so the pairing of layouts on a unit is kept), with the timing rounds
  of one recorded run drawn at random, in the settings of benchmarks/decisions.py (the pooled truth, 8,8 moved
  just beyond the margin, 8,8 tied with 16,16, several layouts near the top);
* **recorded**: the recorded runs grown to 10 units a layout, their cells revealed in the order the rounds ask for
  them; a run whose recorded units end before it decides is censored (scored only when it had already spent more
  than the forecast named: then it missed whatever came next).

Per setting: the studies scored; the share whose forecast named a budget; of those, the share decided within the
forecast's 80th percentile (**within P80**, the figure the target is for) and within its median; of the studies
whose forecast named none ("no affordable budget decides it"), the share that indeed did not decide within the
cap; over all studies, the share decided within the budget named (none named: a miss) and the share that decided
at all within the cap; and the median of the runs spent against the median forecast.

    python -m benchmarks.forecast --record benchmarks/forecast.md
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import append_record, command, commit, machine, markdown_table, stamp
from benchmarks.decisions import ladder_pool, load_runs, matrix, simulated_studies, with_horizon_units
from explorer.answer._forecast import CAP_BUDGETS, forecast
from explorer.answer._rule import Rule, decide, next_cells

START, STEP, EDGE = (
    3,
    2,
    0.25,
)  # the quickstart's first units, the rounds' step, the edge as a share of the margin
BUDGET_UNITS = 5  # the stage's budget, units a layout (the forecast's cap is CAP_BUDGETS times it)


def go_on(
    scores: np.ndarray, ran: np.ndarray, draw: Any, times: np.ndarray, rule: Rule, cap: int, limit: int | None
):
    """Run the product's rounds from ``scores`` until decided or ``cap`` runs more; (runs spent, decided, censored:
    the cells ran out first)."""
    x, r, spent = scores.copy(), ran.copy(), 0
    while True:
        cells = next_cells(x, times, rule, cap - spent, r)
        if limit is not None and any(u >= limit for _, u in cells):
            return spent, False, True
        if not cells:
            return spent, decide(x, times, rule).decided, False
        width = max(u for _, u in cells) + 1
        if width > x.shape[1]:
            x = np.hstack([x, np.full((len(x), width - x.shape[1]), np.nan)])
            r = np.hstack([r, np.zeros((len(r), width - r.shape[1]), dtype=bool)])
        for i, u in cells:
            x[i, u], r[i, u] = draw(i, u), True
        spent += len(cells)


def one(
    draw: Any, layouts: int, times: np.ndarray, rule: Rule, limit: int | None = None
) -> dict[str, Any] | None:
    """One study: its first units, the forecast there, then the study going on; None when already decided."""
    scores = np.array([[draw(i, u) for u in range(START)] for i in range(layouts)])
    ran = np.ones_like(scores, dtype=bool)
    budget = BUDGET_UNITS * layouts
    found = forecast(scores, times, ran, rule, budget)
    if found is None or found.likely == 0:
        return None
    spent, decided, censored = go_on(scores, ran, draw, times, rule, found.cap, limit)
    return {"forecast": found, "spent": spent, "decided": decided, "censored": censored}


def summarize(studies: list[dict[str, Any]]) -> dict[str, Any]:
    """The scores of a setting's studies (see the module docstring)."""
    scored = [s for s in studies if not s["censored"] or s["spent"] > (s["forecast"].likely or 0)]
    named = [s for s in scored if s["forecast"].likely is not None]
    unaffordable = [s for s in scored if s["forecast"].likely is None]

    def share(group: list[dict[str, Any]], hit: Any) -> float:
        return float(np.mean([hit(s) for s in group])) if group else float("nan")

    def within(runs: Any) -> Any:
        return lambda s: s["decided"] and runs(s) is not None and s["spent"] <= runs(s)

    return {
        "n": len(scored),
        "censored": len(studies) - len(scored),
        "named": share(scored, lambda s: s["forecast"].likely is not None),
        "p80": share(named, within(lambda s: s["forecast"].likely)),
        "p50": share(named, within(lambda s: s["forecast"].median)),
        "unaffordable_right": share(unaffordable, lambda s: not s["decided"]),
        "all_p80": share(scored, within(lambda s: s["forecast"].likely)),
        "decided": share(scored, lambda s: s["decided"]),
        "spent": float(np.median([s["spent"] for s in scored if s["decided"]] or [np.nan])),
        "median": float(np.nanmedian([s["forecast"].median or np.nan for s in named] or [np.nan])),
        "likely": float(np.nanmedian([s["forecast"].likely or np.nan for s in named] or [np.nan])),
    }


def simulated(pool: dict[str, Any], mean: np.ndarray, rule: Rule, n: int, seed: int) -> list[dict[str, Any]]:
    out = []
    for draw, times in simulated_studies(pool, mean, n, seed):
        study = one(draw, len(mean), times, rule)
        if study is not None:
            out.append(study)
    return out


def recorded(runs: list[dict[str, Any]], rule: Rule) -> list[dict[str, Any]]:
    out = []
    for t in runs:
        rows = [i for i, lay in enumerate(t["layouts"]) if len(set(lay["heads"])) == 1]
        s, tm = matrix(t["scores"])[rows], matrix(t["times"])[rows]
        study = one(lambda i, u, s=s: float(s[i, u]), len(rows), tm, rule, limit=s.shape[1])
        if study is not None:
            out.append(study)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, nargs="+", default=[1, 2], help="calibration.json entries to pool")
    ap.add_argument("--runs", type=int, default=40, help="simulated studies per setting")
    ap.add_argument("--settings", nargs="+", help="simulated settings whose label starts with one of these")
    ap.add_argument(
        "--horizon",
        type=Path,
        nargs="+",
        help="the truth: the ladder's units of these benchmarks/horizon.py records (the last entry of each) at "
        "--epochs alone (the quickstart's at its grid's horizon); latencies from the recorded runs",
    )
    ap.add_argument("--epochs", type=int, help="with --horizon: the horizon whose runs are the truth")
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    runs = load_runs(args.entries)
    pool = ladder_pool(runs)
    if args.horizon:
        pool = with_horizon_units(pool, args.horizon, args.epochs, only=True)
    names = pool["names"]
    i4, i8, i16 = names.index("4,4"), names.index("8,8"), names.index("16,16")
    margin, tie = 0.01, 0.05
    rule = Rule(margin, 0.05, tie, EDGE * margin, START, STEP)
    settings = {"quickstart (pooled truth)": pool["mean"]}
    far = pool["mean"].copy()
    far[i8] = far[i16] - 0.011
    settings["8,8 1.1 points below 16,16"] = far
    tied = pool["mean"].copy()
    tied[i8] = tied[i16]
    settings["8,8 tied with 16,16"] = tied
    near = pool["mean"].copy()
    near[i4], near[i8] = near[i16] - 0.005, near[i16] - 0.0025
    settings["near top: 4,4 and 8,8 0.5 and 0.25 points below 16,16"] = near
    if args.settings:
        settings = {k: v for k, v in settings.items() if any(k.startswith(p) for p in args.settings)}
    rows, every = [], []
    for k, (label, mean) in enumerate(settings.items()):
        studies = simulated(pool, mean, rule, args.runs, seed=k)
        every += studies
        rows.append((f"simulated: {label}", summarize(studies)))
        print(f"{label}: done at {time.perf_counter() - t0:.0f} s", flush=True)
    grown = [] if args.horizon else [t for t in runs if len(t["units"]) >= 10]
    if grown:
        rows.append((f"recorded runs grown to 10 units ({len(grown)})", summarize(recorded(grown, rule))))
    rows.append(("every simulated study", summarize(every)))

    def pct(x: float) -> str:
        return "" if x != x else f"{x:.0%}"

    def num(x: float) -> str:
        return "" if x != x else f"{x:.0f}"

    table = markdown_table(
        [
            "studies",
            "scored (censored)",
            "a budget named",
            "within P80",
            "within median",
            "unaffordable, and undecided within the cap",
            "within P80, all",
            "decided",
            "runs spent (median)",
            "forecast median / P80 (median)",
        ],
        [
            (
                label,
                f"{r['n']} ({r['censored']})",
                pct(r["named"]),
                pct(r["p80"]),
                pct(r["p50"]),
                pct(r["unaffordable_right"]),
                pct(r["all_p80"]),
                pct(r["decided"]),
                num(r["spent"]),
                f"{num(r['median'])} / {num(r['likely'])}",
            )
            for label, r in rows
        ],
        "lrrrrrrrrr",
    )
    block = (
        f"## {stamp()}\n\n"
        f"Recorded {stamp()} on {machine()} in {time.perf_counter() - t0:.0f} s; command `{command()}`; commit "
        f"{commit()}. The product's rule (margin 1 point, risk 5%, latency tie 5%, edge {EDGE:g} of the margin, "
        f"{START} first units, rounds of at least {STEP}); the forecast taken once every layout has its first "
        f"units, its cap {CAP_BUDGETS} x a budget of {BUDGET_UNITS} units a layout; {args.runs} simulated studies "
        f"per setting (a setting whose first units already decide is left out)"
        + (
            f"; truth: the ladder's {pool['units']} units at {args.epochs} epochs in "
            f"{' and '.join(map(str, args.horizon))}"
            if args.horizon
            else ""
        )
        + f".\n\n{table}\n"
    )
    print(block)
    append_record(
        args.record,
        block,
        title="# Forecast: does a study decide within the budget its forecast names?\n\n"
        "`benchmarks/forecast.py` (see its docstring). Target: 70-90% within the forecast's 80th percentile. New "
        "runs append a dated block (`--record benchmarks/forecast.md`).\n",
    )


if __name__ == "__main__":
    main()
