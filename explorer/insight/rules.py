"""The seed's rules of thumb checked against a study's own trials.

Each rule (SEED_SUMMARY.md, rule 5 and claim 4) becomes a comparison between groups of COMPLETE feasible trials
with the same width and depth, with a 95% interval; the verdict is "supported", "contradicted" or "not enough
data", always with the numbers behind it. Thresholds are the named constants in :mod:`explorer.insight.analysis`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from explorer.insight.analysis import (
    ACC_POINT,
    CONFIDENCE,
    DK_FLOOR,
    MIN_GROUP,
    MIN_SPEEDUP,
    NEGLIGIBLE_ACC,
    completed,
)

__all__ = ["NOT_ENOUGH", "Difference", "RuleVerdict", "compare", "rules_of_thumb"]

NOT_ENOUGH = "not enough data"
STRATA = (
    "d_model",
    "n_layers",
)  # comparisons are made within the same width and depth (same parameter count)


@dataclass(frozen=True)
class RuleVerdict:
    """One rule of thumb from the seed checked against this study's trials."""

    rule: str
    verdict: str  # "supported", "contradicted" or NOT_ENOUGH
    evidence: str
    numbers: dict[str, float]


@dataclass(frozen=True)
class Difference:
    """mean(a) - mean(b) of a metric over matched strata, with a 95% interval."""

    diff: float
    low: float
    high: float
    n_a: int
    n_b: int
    strata: int
    mean_a: float
    mean_b: float


def compare(
    df: pd.DataFrame, a: pd.Series, b: pd.Series, metric: str = "val_accuracy", strata: Sequence[str] = STRATA
) -> Difference | None:
    """Compare trials where mask ``a`` holds against those where ``b`` holds, within each stratum.

    Strata default to (d_model, depth): the same width and depth means the same parameter count, since the head
    count does not change it.
    A stratum counts when it holds at least MIN_GROUP trials of each kind; per stratum the Welch difference of
    means, combined across strata by inverse-variance weights, with a t interval on the smallest Welch df.
    None when no stratum qualifies.
    """
    ests, used_a, used_b = [], [], []
    for _, g in df.dropna(subset=[*strata, metric]).groupby(list(strata)):
        xa, xb = (
            g.loc[a.reindex(g.index, fill_value=False), metric],
            g.loc[b.reindex(g.index, fill_value=False), metric],
        )
        if len(xa) < MIN_GROUP or len(xb) < MIN_GROUP:
            continue
        va, vb = xa.var(ddof=1) / len(xa), xb.var(ddof=1) / len(xb)
        se2 = max(va + vb, 1e-12)
        dof = (
            se2**2 / (va**2 / (len(xa) - 1) + vb**2 / (len(xb) - 1)) if va + vb > 0 else len(xa) + len(xb) - 2
        )
        ests.append((xa.mean() - xb.mean(), se2, dof))
        used_a.append(xa)
        used_b.append(xb)
    if not ests:
        return None
    d, se2, dof = (np.array(v, dtype=float) for v in zip(*ests, strict=True))
    w = 1 / se2
    diff, half = (
        float((w * d).sum() / w.sum()),
        float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof.min()) / math.sqrt(w.sum())),
    )
    xa, xb = pd.concat(used_a), pd.concat(used_b)
    return Difference(
        diff, diff - half, diff + half, len(xa), len(xb), len(ests), float(xa.mean()), float(xb.mean())
    )


def _pts(x: float) -> str:
    return f"{x * 100:+.2f}"


def _difference_evidence(d: Difference, a: str, b: str, strata: Sequence[str] = STRATA) -> str:
    return (
        f"{a}: {d.mean_a * 100:.2f}% vs {b}: {d.mean_b * 100:.2f}% mean val accuracy (n = {d.n_a} vs {d.n_b} in "
        f"{d.strata} group(s) of equal {', '.join(strata)}); difference {_pts(d.diff)} points, "
        f"95% interval [{_pts(d.low)}, {_pts(d.high)}]"
    )


def _numbers(d: Difference | None, lat: Difference | None) -> dict[str, float]:
    out: dict[str, float] = {}
    if d is not None:
        out.update(acc_diff_pts=d.diff * 100, acc_low_pts=d.low * 100, acc_high_pts=d.high * 100)
        out.update(n_a=d.n_a, n_b=d.n_b, strata=d.strata)
    if lat is not None:
        out.update(latency_diff_ms=lat.diff, latency_low_ms=lat.low, latency_high_ms=lat.high)
    return out


def _harm_rule(
    rule: str,
    c: pd.DataFrame,
    good: pd.Series,
    bad: pd.Series,
    names: tuple[str, str],
    strata: Sequence[str] = STRATA,
) -> RuleVerdict:
    """Claim: ``bad`` trials are less accurate than ``good`` ones within the same strata."""
    good_name, bad_name = names
    d, lat = compare(c, good, bad, strata=strata), compare(c, good, bad, "latency_ms", strata)
    if d is None:
        return RuleVerdict(
            rule,
            NOT_ENOUGH,
            f"needs >= {MIN_GROUP} trials each of {good_name} and {bad_name} with the same {', '.join(strata)}; "
            f"the study has {int(good.sum())} and {int(bad.sum())} in all",
            {"n_a": int(good.sum()), "n_b": int(bad.sum())},
        )
    ev = _difference_evidence(d, good_name, bad_name, strata)
    if d.low > 0:
        return RuleVerdict(rule, "supported", ev + ": the interval lies above 0", _numbers(d, lat))
    if d.high < NEGLIGIBLE_ACC:
        return RuleVerdict(
            rule,
            "contradicted",
            ev
            + f": the interval lies below +{NEGLIGIBLE_ACC * 100:.1f} points, so any effect is negligible or reversed",
            _numbers(d, lat),
        )
    return RuleVerdict(
        rule, NOT_ENOUGH, ev + ": the interval spans 0, more trials are needed", _numbers(d, lat)
    )


def rules_of_thumb(df: pd.DataFrame, bench: Sequence[Mapping[str, Any]] | None = None) -> list[RuleVerdict]:
    """Check the seed's rules of thumb on the COMPLETE feasible trials (and the study's bench table)."""
    c = completed(df)
    for col in ("heads_max", "heads_min", "dk_min", "family", *STRATA):
        if col not in c:
            c = c.assign(**{col: np.nan})
    multi = c["heads_min"] >= 2
    out = [
        _harm_rule("One head loses accuracy", c, multi, c["heads_max"] == 1, ("multi-head", "one head")),
        # Multi-head trials only, so the one-head penalty does not masquerade as a d_k effect.
        _harm_rule(
            f"d_k below {DK_FLOOR} hurts",
            c,
            multi & (c["dk_min"] >= DK_FLOOR),
            multi & (c["dk_min"] < DK_FLOOR),
            (f"multi-head, d_k >= {DK_FLOOR}", f"multi-head, d_k < {DK_FLOOR}"),
        ),
    ]
    rule = "8-16 heads suffice (more than 16 brings little)"
    mid, many = c["heads_max"].between(8, 16), c["heads_max"] > 16
    d, lat = compare(c, many, mid), compare(c, many, mid, "latency_ms")
    if d is None:
        out.append(
            RuleVerdict(
                rule,
                NOT_ENOUGH,
                f"needs >= {MIN_GROUP} trials each with 8-16 and with more than 16 "
                f"heads (most heads in any layer) at the same d_model and depth; the study has "
                f"{int(mid.sum())} and {int(many.sum())}",
                {"n_a": int(many.sum()), "n_b": int(mid.sum())},
            )
        )
    else:
        ev = _difference_evidence(d, "> 16 heads", "8-16 heads")
        if d.high < ACC_POINT:
            out.append(
                RuleVerdict(
                    rule,
                    "supported",
                    ev + f": the gain is below {ACC_POINT * 100:.0f} point",
                    _numbers(d, lat),
                )
            )
        elif d.low > ACC_POINT:
            out.append(
                RuleVerdict(
                    rule,
                    "contradicted",
                    ev + f": the gain exceeds {ACC_POINT * 100:.0f} point",
                    _numbers(d, lat),
                )
            )
        else:
            out.append(
                RuleVerdict(
                    rule,
                    NOT_ENOUGH,
                    ev + f": the interval spans {ACC_POINT * 100:.0f} point",
                    _numbers(d, lat),
                )
            )
    inc, other = c["family"] == "increasing", c["family"].isin(["uniform", "decreasing"])
    # Same width, depth and largest layer: increasing 4->16 against uniform 16 and decreasing 16->4.
    out.append(
        _harm_rule(
            "More heads deep than shallow",
            c,
            inc,
            other,
            ("increasing", "uniform/decreasing"),
            (*STRATA, "heads_max"),
        )
    )
    out.append(_bench_rule(bench))
    return out


def _bench_rule(bench: Sequence[Mapping[str, Any]] | None) -> RuleVerdict:
    """Claim: the merged computation of all heads beats the serial loop over heads (from the bench table)."""
    rule = "Merged heads are faster"
    t = pd.DataFrame(list(bench or []))
    if t.empty or not {"impl", "median_ms"} <= set(t) or not {"serial", "merged"} <= set(t["impl"]):
        return RuleVerdict(
            rule, NOT_ENOUGH, "the study recorded no attention benchmark with serial and merged rows", {}
        )
    row = {i: g.iloc[0] for i, g in t.groupby("impl")}
    s, m = row["serial"], row["merged"]
    iqr = lambda r: float(r.get("iqr_ms", 0.0) or 0.0)  # noqa: E731
    speedup = float(s["median_ms"] / m["median_ms"])
    nums = {"serial_ms": float(s["median_ms"]), "merged_ms": float(m["median_ms"]), "speedup": speedup}
    if "fused" in row:
        nums["fused_speedup"] = float(s["median_ms"] / row["fused"]["median_ms"])
    ev = (
        f"serial loop {s['median_ms']:.3g} ms (IQR {iqr(s):.2g}) vs merged {m['median_ms']:.3g} ms "
        f"(IQR {iqr(m):.2g}): {speedup:.2f}x"
    )
    apart = m["median_ms"] + iqr(m) / 2 < s["median_ms"] - iqr(s) / 2
    if speedup >= MIN_SPEEDUP and apart:
        return RuleVerdict(
            rule, "supported", ev + f", at least {MIN_SPEEDUP:.2f}x and outside the spread", nums
        )
    if speedup <= 1.0:
        return RuleVerdict(rule, "contradicted", ev + ": merged is not faster here", nums)
    return RuleVerdict(
        rule, NOT_ENOUGH, ev + f": faster by less than {MIN_SPEEDUP:.2f}x or within the spread", nums
    )
