"""What the answer's rule costs a user: how often it ships a layout worse than the margin, how often it ships the
layout a user with a latency budget wants, and the latency it leaves on the table.

Every figure is scored against a *truth*: the pooled means of the recorded whole re-runs of the quickstart
(``calibration.json``: every unit of every run, the ladder's 146-150 units a layout) and their pooled latency
ratios (the median within-round ratio to the slowest layout). For one decision:

* **beyond**: the answer's true mean is more than the margin below the true best's;
* **oracle hit**: the answer is truly within the margin and at most 5% slower than the fastest layout truly
  within the margin less the rule's edge (the oracle: a layout inside the edge's zone may be settled either way,
  so no rule with that edge owes it to the user);
* **latency regret**: the answer's true latency over the oracle's (1.00 at a hit with the oracle itself);
* **stated / observed**: the mean probability the rule stated that its answer is within the margin, against the
  share of answers truly within it;
* **agreement** (a diagnostic, not a goal): over ordered pairs of runs, how often two runs name the same layout;
* **runs**: finalist runs spent, of the budget;
* **decided**: the share of runs that end with the answer decided (every faster layout beyond the margin or at
  its edge), and **runs to a decision**: the mean runs spent by those that decided.

Two sources of runs, the rule and its allocation (:func:`explorer.answer._rule.next_cells`) the same for both:

* **replayed**: the recorded runs themselves, their cells revealed in the order the allocation asks for them; a
  run can spend no more units than it recorded (5 a layout, 10 for the runs grown to 2 replicates), and the
  recorded latencies are its own rounds;
* **simulated**: new runs drawn unit by unit from the pooled ladder's mean and covariance (so the pairing of
  layouts on a unit is kept), clipped to [0, 1], with the timing rounds of one recorded run drawn at random.

Settings: the quickstart (its pooled truth, where 8,8 is 0.65 points below 16,16 and 1.3x faster), and known
truths with other top patterns: 8,8 moved to 1.1 points below the best (just beyond a 1-point margin and much
faster: a rule that favours fast layouts pays here), 8,8 tied with 16,16, and several layouts near the top (4,4
and 8,8 0.5 and 0.25 points below 16,16: the oracle is 4,4).

Rules side by side: the rule before (a Bonferroni sum, rounds that grow by half), the same with the joint
statement, the joint statement with an indifference zone (``edge``, a share of the margin) and rounds sized
to what decides, and the chain (the default: the faster layouts tested in latency order, the answer the last
placed within; :mod:`explorer.answer._rule`), with a wider edge, or settling at a wider edge only once the
budget is spent (``settle``: compared, not adopted).

    python -m benchmarks.decisions --record benchmarks/decisions.md
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._earlier_rules import Variant, decide_as, next_cells_as
from benchmarks.common import append_record, command, commit, machine, markdown_table, stamp
from benchmarks.horizon import unit_key
from explorer.answer._rule import Rule as Settings

RECORDS = Path(__file__).with_name("calibration.json")
ORACLE_SLACK = 0.05  # an answer at most this much slower than the oracle counts as a hit


@dataclass(frozen=True)
class Rule:
    """A decision rule and its allocation: risk (1 - the probability asked), start units, units per round."""

    name: str
    risk: float
    start: int
    step: int
    adaptive: bool = True  # False: every layout gets the same units (the budget split evenly)
    grow: float = 0.0  # a round adds max(step, grow x the units the chosen layouts have): fewer looks
    edge: float = 0.0  # the indifference zone below the margin, as a share of the margin (0: none)
    joint: bool = False  # the joint statement over the rivals (False: the union bound, the rule before it)
    sized: bool = False  # rounds sized to what decides (False: rounds of step, or growing by grow)
    chain: bool = False  # layouts tested in latency order from the best (False: every layout at once)
    settle: float = 0.0  # the edge, as a share of the margin, the rule settles at when the budget is spent

    @property
    def variant(self) -> Variant:
        return Variant(joint=self.joint, chain=self.chain, sized=self.sized, grow=self.grow)

    def settings(self, margin: float, tie: float) -> Settings:
        """The rule's settings as the library takes them, at ``margin`` and latency ``tie``."""
        return Settings(margin, self.risk, tie, self.edge * margin, self.start, self.step)


def _heads(layout: dict[str, Any]) -> str:
    return ",".join(map(str, layout["heads"]))


def matrix(rows: list[list[float | None]]) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=float)


def load_runs(entries: list[int]) -> list[dict[str, Any]]:
    """The recorded runs of ``entries`` (a run's grown table where it has one), with their ladder rows."""
    history = json.loads(RECORDS.read_text())
    runs = []
    for i in entries:
        for run in history[i]["runs"]:
            if "readme" in run:
                runs.append(run.get("extended", run["readme"]) | {"seed": run["seed"]})
    return runs


def ladder_pool(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The ladder's pooled columns (complete units), timing rounds per run and latency ratios."""
    names: list[str] | None = None
    columns, rounds, logs = [], [], []
    for t in runs:
        rows = sorted(
            (i for i, lay in enumerate(t["layouts"]) if len(set(lay["heads"])) == 1),
            key=lambda i: t["layouts"][i]["heads"],
        )
        keys = [_heads(t["layouts"][i]) for i in rows]
        names = names or keys
        if keys != names:
            raise SystemExit(f"seed {t['seed']}: ladder {keys} differs from {names}")
        s, tm = matrix(t["scores"])[rows], matrix(t["times"])[rows]
        columns += [s[:, j] for j in range(s.shape[1]) if not np.isnan(s[:, j]).any()]
        rounds.append(tm)
        logs.append(np.log(tm) - np.log(tm[-1]))
    cols = np.array(columns).T
    latency = np.exp(np.nanmedian(np.concatenate(logs, axis=1), axis=1))
    return {
        "names": names,
        "mean": cols.mean(axis=1),
        "cov": np.cov(cols),
        "rounds": rounds,
        "latency": latency,
        "units": cols.shape[1],
        "columns": cols,
    }


def with_horizon_units(
    pool: dict[str, Any], paths: list[Path], epochs: int | None, only: bool = False
) -> dict[str, Any]:
    """``pool`` with the ladder's complete units at ``epochs`` from benchmarks/horizon.py records (the last entry
    of each) added to its columns, or (``only``) in place of them (the mean and covariance recomputed; latencies
    and timing rounds unchanged). A unit is a record's study seed and unit index (runs recorded before
    ``--seeds``: the spec's seed, 0)."""
    if epochs is None:
        raise SystemExit("--horizon needs --epochs")
    by: dict[tuple[int, Any], float] = {}
    for path in paths:
        for r in json.loads(path.read_text())[-1]["runs"]:
            if r["epochs"] == epochs:
                by[r["heads"], unit_key(r)] = r["val"]
    heads = [int(n.split(",")[0]) for n in pool["names"]]
    units = sorted({u for _, u in by})
    extra = [[by[h, u] for h in heads] for u in units if all((h, u) in by for h in heads)]
    if not extra:
        raise SystemExit(f"{', '.join(map(str, paths))}: no complete unit of the ladder at {epochs} epochs")
    cols = np.array(extra).T if only else np.concatenate([pool["columns"], np.array(extra).T], axis=1)
    return pool | {"mean": cols.mean(axis=1), "cov": np.cov(cols), "units": cols.shape[1], "columns": cols}


def pooled_truth(runs: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """Every layout's pooled mean over all recorded units, and its pooled latency ratio to 16,16 (median of its
    within-round log ratios), by layout name."""
    values: dict[str, list[float]] = {}
    logs: dict[str, list[float]] = {}
    for t in runs:
        names = [_heads(lay) for lay in t["layouts"]]
        s, tm = matrix(t["scores"]), matrix(t["times"])
        ref = names.index("16,16")
        for i, n in enumerate(names):
            values.setdefault(n, []).extend(s[i][~np.isnan(s[i])])
            logs.setdefault(n, []).extend(np.log(tm[i]) - np.log(tm[ref]))
    return (
        {n: float(np.mean(v)) for n, v in values.items()},
        {n: float(np.exp(np.nanmedian(v))) for n, v in logs.items()},
    )


def oracle(means: np.ndarray, latency: np.ndarray, margin: float) -> int:
    within = np.flatnonzero(means >= means.max() - margin)
    return int(within[np.argmin(latency[within])])


def run_rule(
    rule: Rule,
    draw: Any,
    layouts: int,
    times: np.ndarray,
    budget: int,
    margin: float,
    tie: float,
    limit: int | None = None,
) -> tuple[int, float, int, bool]:
    """One decision: cells revealed by ``draw(layout, unit)`` as the rule's allocation asks; returns the answer,
    its stated probability of being within the margin, the runs spent and whether it ended decided."""
    width = limit or budget
    scores = np.full((layouts, width), np.nan)
    spent = 0
    if not rule.adaptive:
        units = min(width, budget // layouts)
        for i in range(layouts):
            for u in range(units):
                scores[i, u] = draw(i, u)
        spent = layouts * units
    else:
        while True:
            cells = next_cells_as(rule.variant, scores, times, rule.settings(margin, tie), budget - spent)
            cells = [(i, u) for i, u in cells if u < width]
            if not cells:
                break
            for i, u in cells:
                scores[i, u] = draw(i, u)
            spent += len(cells)
    settings = rule.settings(margin, tie)
    d = decide_as(rule.variant, scores, times, settings)
    if not d.decided and rule.settle > rule.edge:
        d = decide_as(rule.variant, scores, times, settings.with_edge(rule.settle * margin))
    return d.answer, d.p_within[d.answer], spent, d.decided


def score(
    answers: list[int],
    stated: list[float],
    spent: list[int],
    means: np.ndarray,
    latency: np.ndarray,
    margin: float,
    decided: list[bool],
    edge: float = 0.0,
) -> dict[str, float]:
    best, o = means.max(), oracle(means, latency, margin - edge)
    a = np.array(answers)
    within = means[a] >= best - margin
    regret = latency[a] / latency[o]
    pairs = [(x, y) for x in range(len(a)) for y in range(len(a)) if x != y]
    return {
        "beyond": float(np.mean(~within)),
        "hit": float(np.mean(within & (regret <= 1 + ORACLE_SLACK))),
        "regret": float(np.mean(regret)),
        "stated": float(np.mean(stated)),
        "observed": float(np.mean(within)),
        "agreement": float(np.mean([a[x] == a[y] for x, y in pairs])) if pairs else float("nan"),
        "runs": float(np.mean(spent)),
        "decided": float(np.mean(decided)),
        "runs_decided": float(np.mean([n for n, d in zip(spent, decided, strict=True) if d]))
        if any(decided)
        else float("nan"),
        "n": len(a),
    }


def simulated_studies(
    pool: dict[str, Any], mean: np.ndarray, n: int, seed: int
) -> Iterator[tuple[Callable[[int, int], float], np.ndarray]]:
    """``n`` simulated studies of the pooled ladder with true means ``mean``: each a ``draw(layout, unit)`` that
    draws a unit's scores once from the pool's covariance (clipped to [0, 1], so the pairing is kept), and the
    timing rounds of one recorded run drawn at random. Use each study's draws before taking the next."""
    rng = np.random.default_rng(seed)
    chol = np.linalg.cholesky(pool["cov"] + 1e-12 * np.eye(len(mean)))
    for _ in range(n):
        cols: dict[int, np.ndarray] = {}

        def draw(i: int, u: int, cols: dict[int, np.ndarray] = cols) -> float:
            if u not in cols:
                cols[u] = np.clip(mean + chol @ rng.standard_normal(len(mean)), 0.0, 1.0)
            return float(cols[u][i])

        yield draw, pool["rounds"][rng.integers(len(pool["rounds"]))]


def simulated(
    rule: Rule,
    pool: dict[str, Any],
    mean: np.ndarray,
    budget: int,
    n: int,
    margin: float,
    tie: float,
    seed: int,
) -> dict[str, float]:
    answers, stated, spent, decided = [], [], [], []
    for draw, times in simulated_studies(pool, mean, n, seed):
        a, p, s, ok = run_rule(rule, draw, len(mean), times, budget, margin, tie)
        answers.append(a)
        stated.append(p)
        spent.append(s)
        decided.append(ok)
    return score(answers, stated, spent, mean, pool["latency"], margin, decided, rule.edge * margin)


def replayed(
    rule: Rule, runs: list[dict[str, Any]], budget_units: int, margin: float, tie: float, ladder: bool
) -> dict[str, float]:
    """The rule on each recorded run's own cells and rounds (its ladder only with ``ladder``), scored against
    the pooled truth of every run."""
    truth, lat = pooled_truth(runs)
    answers, stated, spent, means, latency, decided = [], [], [], [], [], []
    for t in runs:
        rows = [i for i, lay in enumerate(t["layouts"]) if not ladder or len(set(lay["heads"])) == 1]
        names = [_heads(t["layouts"][i]) for i in rows]
        s, tm = matrix(t["scores"])[rows], matrix(t["times"])[rows]
        a, p, n, ok = run_rule(
            rule,
            lambda i, u, s=s: float(s[i, u]),
            len(rows),
            tm,
            budget_units * len(rows),
            margin,
            tie,
            limit=s.shape[1],
        )
        answers.append(a)
        stated.append(p)
        spent.append(n)
        decided.append(ok)
        means.append(np.array([truth[x] for x in names]))
        latency.append(np.array([lat[x] for x in names]))
    # each run has its own layouts: score one at a time against the same pooled truth, then average
    parts = [
        score([a], [p], [n], m, la, margin, [ok], rule.edge * margin)
        for a, p, n, m, la, ok in zip(answers, stated, spent, means, latency, decided, strict=True)
    ]
    out = {
        k: float(np.mean([x[k] for x in parts]))
        for k in ("beyond", "hit", "regret", "stated", "observed", "runs", "decided")
    }
    out["runs_decided"] = (
        float(np.mean([n for n, ok in zip(spent, decided, strict=True) if ok]))
        if any(decided)
        else float("nan")
    )
    names_of = [
        [
            _heads(t["layouts"][i])
            for i in range(len(t["layouts"]))
            if not ladder or len(set(t["layouts"][i]["heads"])) == 1
        ]
        for t in runs
    ]
    picked = [names_of[k][a] for k, a in enumerate(answers)]
    pairs = [(x, y) for x in range(len(picked)) for y in range(len(picked)) if x != y]
    out["agreement"] = float(np.mean([picked[x] == picked[y] for x, y in pairs]))
    out["n"] = len(runs)
    out["answers"] = ", ".join(
        f"{k} x{picked.count(k)}" for k in sorted(set(picked), key=picked.count, reverse=True)
    )
    return out


RULES = [
    Rule("even split, P >= 0.95", 0.05, 0, 0, adaptive=False),
    Rule("adaptive, P >= 0.95, rounds of 2 units", 0.05, 3, 2),
    Rule("adaptive, P >= 0.95, rounds grow by half (the rule before)", 0.05, 3, 2, grow=0.5),
    Rule("adaptive, P >= 0.975, rounds grow by half", 0.025, 3, 2, grow=0.5),
    Rule("adaptive, P >= 0.9, rounds grow by half", 0.10, 3, 2, grow=0.5),
    Rule("joint, P >= 0.95, rounds grow by half", 0.05, 3, 2, grow=0.5, joint=True),
    Rule(
        "joint, P >= 0.95, edge 1/4, sized rounds (the rule before the chain)",
        0.05,
        3,
        2,
        edge=0.25,
        joint=True,
        sized=True,
    ),
    Rule("joint, P >= 0.95, edge 1/3, sized rounds", 0.05, 3, 2, edge=1 / 3, joint=True, sized=True),
    Rule("joint, P >= 0.95, edge 1/2, sized rounds", 0.05, 3, 2, edge=0.5, joint=True, sized=True),
    Rule(
        "chain, P >= 0.95, edge 1/4, sized rounds (the default)",
        0.05,
        3,
        2,
        edge=0.25,
        joint=True,
        sized=True,
        chain=True,
    ),
    Rule(
        "chain, P >= 0.95, edge 1/2, sized rounds", 0.05, 3, 2, edge=0.5, joint=True, sized=True, chain=True
    ),
    Rule(
        "chain, P >= 0.95, edge 1/4 settling at 1/2, sized rounds",
        0.05,
        3,
        2,
        edge=0.25,
        joint=True,
        sized=True,
        chain=True,
        settle=0.5,
    ),
    Rule(
        "joint, P >= 0.95, edge 1/4 settling at 1/2, sized rounds",
        0.05,
        3,
        2,
        edge=0.25,
        joint=True,
        sized=True,
        settle=0.5,
    ),
]


def _row(label: str, rule: Rule, r: dict[str, float], budget: str) -> list[Any]:
    return [
        label,
        rule.name,
        budget,
        f"{r['beyond']:.1%}",
        f"{r['hit']:.0%}",
        f"{r['regret']:.2f}",
        f"{r['stated']:.0%} / {r['observed']:.0%}",
        f"{r['agreement']:.0%}",
        f"{r['runs']:.1f}",
        f"{r['decided']:.0%}",
        "" if np.isnan(r["runs_decided"]) else f"{r['runs_decided']:.1f}",
        r.get("answers", ""),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, nargs="+", default=[1, 2], help="calibration.json entries to pool")
    ap.add_argument("--budgets", type=int, nargs="+", default=[5, 10, 20, 40, 80], help="units a layout")
    ap.add_argument("--runs", type=int, default=400, help="simulated runs per cell")
    ap.add_argument("--rules", type=int, nargs="+", help="indices into RULES (default: all)")
    ap.add_argument("--settings", nargs="+", help="simulated settings whose label starts with one of these")
    ap.add_argument("--no-replay", action="store_true", help="simulated runs only")
    ap.add_argument(
        "--horizon",
        type=Path,
        nargs="+",
        help="also pool the ladder's units of these benchmarks/horizon.py records (the last entry of each) at --epochs",
    )
    ap.add_argument("--epochs", type=int, help="with --horizon: the horizon whose runs are pooled")
    ap.add_argument(
        "--horizon-only",
        action="store_true",
        help="with --horizon: those units alone are the truth (the quickstart's at its grid's horizon)",
    )
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()
    t0 = time.perf_counter()
    history = json.loads(RECORDS.read_text())
    spec = history[args.entries[0]]["spec"]
    margin, tie = spec["margin"], spec["tie"]
    runs = load_runs(args.entries)
    pool = ladder_pool(runs)
    if args.horizon:  # trained units of the ladder, recorded by benchmarks/horizon.py, pooled with the runs'
        pool = with_horizon_units(pool, args.horizon, args.epochs, args.horizon_only)
    names = pool["names"]
    i8, i16 = names.index("8,8"), names.index("16,16")
    settings = {"quickstart (pooled truth)": pool["mean"]}
    far = pool["mean"].copy()
    far[i8] = far[i16] - 0.011
    settings["8,8 1.1 points below 16,16"] = far
    tied = pool["mean"].copy()
    tied[i8] = tied[i16]
    settings["8,8 tied with 16,16"] = tied
    near = pool["mean"].copy()
    near[names.index("4,4")] = near[i16] - 0.005
    near[i8] = near[i16] - 0.0025
    settings["near top: 4,4 and 8,8 0.5 and 0.25 points below 16,16"] = near
    if args.settings:
        settings = {k: v for k, v in settings.items() if any(k.startswith(p) for p in args.settings)}
    rules = [RULES[i] for i in args.rules] if args.rules else RULES
    rows = []
    for rule in rules:
        for label, ladder in (
            ()
            if args.no_replay
            else (
                ("recorded runs, all finalists", False),
                ("recorded runs, ladder", True),
            )
        ):
            r = replayed(rule, runs, 5, margin, tie, ladder)
            rows.append(_row(label, rule, r, "5 a layout (the README's)"))
        grown = [] if args.no_replay else [t for t in runs if len(t["units"]) >= 10]
        if grown:
            r = replayed(rule, grown, 10, margin, tie, True)
            rows.append(
                _row(f"recorded runs grown to 10 units ({len(grown)}), ladder", rule, r, "10 a layout")
            )
        for label, mean in settings.items():
            for units in args.budgets:
                r = simulated(rule, pool, mean, units * len(mean), args.runs, margin, tie, seed=units)
                rows.append(_row(f"simulated: {label}", rule, r, f"{units} a layout"))
        print(f"{rule.name}: done at {time.perf_counter() - t0:.0f} s", flush=True)
    truth = ", ".join(
        f"{n} {m:.2%} ({lat:.2f}x)" for n, m, lat in zip(names, pool["mean"], pool["latency"], strict=True)
    )
    header = [
        "runs",
        "rule",
        "budget (units)",
        "beyond the margin",
        "oracle hit",
        "mean latency regret",
        "stated / observed within",
        "agreement (same answer)",
        "runs spent",
        "decided",
        "runs to a decision (decided runs)",
        "answers",
    ]
    block = "\n".join(
        [
            f"## Decision rules scored against the pooled truth of {len(runs)} recorded runs"
            + (
                f": the ladder's {args.epochs}-epoch runs of {' and '.join(map(str, args.horizon))} alone"
                if args.horizon and args.horizon_only
                else f" and the ladder's {args.epochs}-epoch runs of {' and '.join(map(str, args.horizon))}"
                if args.horizon
                else ""
            ),
            "",
            f"Recorded {stamp()} on {machine()} in {time.perf_counter() - t0:.0f} s; command `{command()}`; commit "
            f"{commit()}. Margin {margin * 100:g} point, latency tie {tie:.0%}; {args.runs} simulated runs per cell; "
            f"truth: the ladder's pooled means over {pool['units']} units and latency ratios to the slowest "
            f"(median within-round ratio): {truth}.",
            "",
            markdown_table(header, rows),
        ]
    )
    print(block)
    append_record(
        args.record,
        block + "\n",
        title="# What the answer's rule costs a user\n\nWritten by "
        "`python -m benchmarks.decisions` (its docstring gives the method) from `calibration.json`.",
    )


if __name__ == "__main__":
    main()
