"""Planted relations: does the study's verdict agree with an exact permutation test on the same runs?

A relations study plants k relations (``n_relations`` in its spec), so layouts with at least k heads in every
layer should be more accurate. This script reads a finished relations study and checks the report's claim
(explorer.analysis._relations_claim) against a permutation test written here independently: every relabelling of the
architectures within each width (the strata the report uses) is enumerated with ``itertools``, and p is the share
of relabellings whose weighted mean difference is at least the observed one. It also states what the study
recommends and whether that layout has at least k heads in every layer.

    python -m benchmarks.relations_check relations [--storage URL] [--record benchmarks/relations_check.md]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

from benchmarks.common import append_record, machine, record_block


def exact_stratified_p(strata: list[tuple[list[float], list[float]]]) -> tuple[float, float, int]:
    """(observed statistic, one-sided p for 'a > b', relabellings enumerated), with the report's weights
    n_a n_b / (n_a + n_b) per stratum and ties counted as at least as extreme (within 1e-12)."""

    def stat(split: list[tuple[list[float], list[float]]]) -> float:
        num = den = 0.0
        for a, b in split:
            w = len(a) * len(b) / (len(a) + len(b))
            num += w * (sum(a) / len(a) - sum(b) / len(b))
            den += w
        return num / den

    observed = stat(strata)
    per_stratum = []
    for a, b in strata:
        pooled = a + b
        per_stratum.append(
            [
                ([pooled[i] for i in pick], [pooled[i] for i in range(len(pooled)) if i not in pick])
                for pick in itertools.combinations(range(len(pooled)), len(a))
            ]
        )
    values = [stat(list(split)) for split in itertools.product(*per_stratum)]
    extreme = sum(v >= observed - 1e-12 for v in values)
    return observed, extreme / len(values), len(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("study")
    ap.add_argument("--storage")
    ap.add_argument("--record", type=Path)
    args = ap.parse_args()

    import explorer
    from explorer.analysis import relations_claim
    from explorer.answer import answer
    from explorer.output import why_fewer_than_k

    data = explorer.load(args.study, args.storage)
    spec = data.study.spec
    k = int(spec.task.options.get("n_relations", 4))
    claim = relations_claim(data.records, k)
    if claim.accuracy is None:
        sys.exit(
            f"{args.study}: the report has no accuracy comparison (n >= k: {claim.n_at_least}, fewer: "
            f"{claim.n_fewer}); nothing to check."
        )
    g = claim.accuracy
    strata = [(list(a), list(b)) for a, b in g.values]
    observed, p, n = exact_stratified_p(strata)
    agree_p = abs(p - g.comparison.p_value) < 1e-9
    held_here = p <= 0.05
    rec = answer(data.records, spec, data.report_input().retimings).recommended
    rec_ok = rec is not None and min(rec.config.heads) >= k
    devices = ", ".join(sorted({r.latency.device for r in data.records if r.latency is not None})) or "?"
    why = "" if rec is None or rec_ok else why_fewer_than_k(rec, k, claim.by_heads)
    rows = [
        f"width {s[0]}: >= {k} heads {', '.join(f'{v:.3f}' for v in a)}; fewer {', '.join(f'{v:.3f}' for v in b)}"
        for s, (a, b) in zip(g.strata, strata, strict=True)
    ]
    text = record_block(
        f"study {args.study!r}, k = {k}",
        [
            f"machine: {machine()}; the study ran on {devices}, {len(data.records)} trials "
            f"({', '.join(sorted({r.state.name for r in data.records}))})",
            f"architectures (validation accuracy after epoch {g.epoch}): " + "; ".join(rows),
            f"the report: difference {g.comparison.diff * 100:+.1f} points, p = {g.comparison.p_value:.4g} "
            f"({'exact' if g.comparison.exact else 'Monte Carlo'}); accuracy half of the claim "
            f"{'held' if claim.accuracy_held else 'not shown'}; specialization half "
            f"{'held' if claim.specialization_held else 'not shown' if claim.specialization_held is False else 'unknown'}",
            f"this script's exact enumeration ({n} relabellings within widths): statistic {observed * 100:+.1f} "
            f"points, p = {p:.4g}: {'the same p' if agree_p else 'a DIFFERENT p'}, verdict "
            f"{'agrees' if held_here == bool(claim.accuracy_held) else 'DISAGREES'}",
            f"recommended: {'none' if rec is None else ','.join(map(str, rec.config.heads))} heads per layer at "
            f"d_model {None if rec is None else rec.config.d_model}: "
            f"{'at least' if rec_ok else 'FEWER than'} k = {k} in every layer"
            + ("" if rec_ok or rec is None else "; the report's relations section says why (why_text below)"),
            *([f"why_text: {why}"] if why else []),
        ],
    )
    print(text)
    append_record(args.record, text)


if __name__ == "__main__":
    main()
