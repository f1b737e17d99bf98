"""The report's sections as neutral blocks (:mod:`explorer.output.render`): the answer, the finalists, the rules
of thumb, the relations claim, early stopping and the study account, each from what :mod:`explorer.insight`
computes. Numbers are formatted here and only here.

Quality is spoken of in the task's own terms: validation accuracy in percent ("points") for a classification
task, validation bits per byte (a loss: lower is better) for a language model, where there is no accuracy to
speak of."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from explorer.engine.measures import QualityMetric
from explorer.insight import rules
from explorer.insight.account import StudyAccount
from explorer.insight.recommend import Answer, Contrast
from explorer.insight.relations import relations_claim
from explorer.insight.stats import kendall_tau
from explorer.insight.tables import Architecture, architectures
from explorer.output.fmt import (
    diff_text,
    heads,
    is_bpb,
    kv_text,
    latency_text,
    mib,
    num,
    pct,
    quality_column,
    quality_text,
    runs_text,
)
from explorer.output.kv_sections import is_modern, modern_headline, saving_blocks
from explorer.search.record import Retiming, TrialRecord
from explorer.search.spec import StudySpec

__all__ = [
    "account_blocks",
    "answer_blocks",
    "early_stopping_blocks",
    "finalist_blocks",
    "heads",
    "num",
    "pct",
    "relations_blocks",
    "why_fewer_than_k",
    "rules_blocks",
]


def _arch_row(a: Architecture, evidence: str) -> dict[str, Any]:
    c = a.config
    row: dict[str, Any] = {"heads per layer": heads(c.heads)}
    if c.kv_heads is not None or a.decode is not None:
        row["heads/kv heads per layer"] = kv_text(a)
    row |= {"d_k per layer": heads(c.d_k), "d_model": c.d_model, "layers": c.n_layers, "runs": a.n}
    if is_bpb(a.metric):
        row |= {"val bits/byte, mean [95% interval]": quality_text(a),
                "test bits/byte": num(a.test_quality, ".3f")}  # fmt: skip
    else:
        row |= {"val acc (%), mean [95% interval]": quality_text(a), "test acc (%)": pct(a.test_accuracy)}
    row["latency (ms) [95% interval for a new timing]"] = latency_text(a)
    if a.decode is not None:
        row["decoding (ms/token) [95% interval]"] = latency_text(a, "decode")
        row["kv cache (MiB)"] = mib(a.kv_cache_bytes)
    row["params"] = f"{a.params:,}"
    row["epochs"] = f"{a.epochs:.0f}" if evidence == "search" else f"{a.epochs:.1f} (mean)"
    return row


def _contrast_row(c: Contrast, metric: QualityMetric, axis: str = "latency") -> dict[str, Any]:
    col = quality_column(metric)
    if c.other is None:
        return {"alternative": c.name, "heads per layer": "", col: "", "vs recommended": c.note,
                "latency (ms)": "", "latency vs recommended": ""}  # fmt: skip
    if c.note:
        vs = c.note
    elif c.quality is not None:
        k = c.quality
        vs = f"{diff_text(metric, k.diff, k.low, k.high)}, p = {k.p_value:.2g}"
    else:
        vs = f"{diff_text(metric, c.quality_diff)} (single runs: no test)"
    lat = "within timing noise" if c.latency_tie else f"{c.latency_ratio:.2f}x"
    layout = (
        kv_text(c.other) if c.other.config.kv_heads is not None or c.other.decode else heads(c.other.heads)
    )
    return {
        "alternative": c.name,
        "heads per layer": layout,
        col: quality_text(c.other),
        "vs recommended": vs,
        "latency (ms)": latency_text(c.other, axis),
        "latency vs recommended": lat if c.note == "" else "",
    }


def _contrast_sentence(c: Contrast, metric: QualityMetric, axis: str = "latency") -> str:
    if c.other is None or c.note:
        return f"{c.name}: {c.note}."
    what = "decoding time" if axis == "decode" else "latency"
    lat = (
        f"at a {what} within the timing noise"
        if c.latency_tie
        else f"at {c.latency_ratio:.2f}x the {what} ({'slower' if c.latency_ratio > 1 else 'faster'})"
    )
    if c.quality is None:
        return f"{c.name} ({heads(c.other.heads)}): {diff_text(metric, c.quality_diff)} {lat} (single runs)."
    k = c.quality
    if k.significant():
        worse = k.diff > 0 if is_bpb(metric) else k.diff < 0
        size = f"{abs(k.diff):.3f} bits per byte" if is_bpb(metric) else f"{abs(k.diff) * 100:.2f} points"
        verdict = f"{'loses' if worse else 'gains'} {size} (p = {k.p_value:.2g})"
    else:
        bound = f"{k.bound:.3f} bits per byte" if is_bpb(metric) else f"{k.bound * 100:.2f} points"
        verdict = f"shows no difference larger than {bound} (p = {k.p_value:.2g})"
    return f"{c.name} ({heads(c.other.heads)}) {verdict}, {lat}."


def answer_blocks(ans: Answer, spec: StudySpec) -> list[tuple]:
    b: list[tuple] = [("h", 2, "The answer")]
    rec = ans.recommended
    if rec is None:
        return [*b, ("p", ["No recommendation: " + "; ".join(ans.notes) + "."])]
    c = rec.config
    metric, axis = rec.metric, ans.cost_axis
    if is_modern(ans, spec):
        b.append(("p", modern_headline(ans, spec)))
    else:
        b.append(("p", [
            ("b", f"Use {heads(c.heads)} heads per layer"),
            f" for the base model d_model {c.d_model}, {c.n_layers} layers (d_k {heads(c.d_k)}, {c.family} schedule): "
            f"{quality_text(rec)} validation accuracy ({runs_text(rec, ans.evidence)}; 95% interval), "
            f"{pct(rec.test_accuracy)}% test accuracy, and {latency_text(rec)} per batch of {spec.latency.batch_size} "
            f"(median of {rec.latency.n} timing{'s' * (rec.latency.n != 1)}; 95% interval for a new timing), "
            f"{rec.params:,} parameters."
            + (f" Retrained with 3 fresh seeds, its mean validation accuracy should land in [{pct(rec.rerun.low)}, "
               f"{pct(rec.rerun.high)}]% (95% prediction interval)." if rec.n > 1 else ""),
        ]))  # fmt: skip
    if ans.alike:
        names = " or ".join(kv_text(a) if is_modern(ans, spec) else heads(a.heads) for a in ans.alike)
        what = "bits-per-byte" if is_bpb(metric) else "accuracy"
        b.append(("p", [("b", "As good as far as this data can tell: "),
                        f"{names} per layer (no {what} difference at p < 0.05 over seeds, latency within the timing "
                        "noise); a new run of the whole study may name one of them instead."]))  # fmt: skip
    if ans.confidence is not None:
        b.append(
            ("p", [("b", f"Confidence: {ans.confidence:.0%}. "), f"Measured as the {ans.confidence_method}."])
        )
    else:
        b.append(("p", [("b", "Confidence: "), ans.confidence_method + "."]))
    b.extend(saving_blocks(ans, spec))
    what = "validation bits per byte" if is_bpb(metric) else "accuracy"
    cost = " Latency is decoding time per token, the study's objective." if axis == "decode" else ""
    b.append(("p", ["What the alternatives at this width and depth cost or gain (other minus recommended; "
                    f"differences of mean {what} over seeds with a 95% t interval and a t test, the seed-to-seed "
                    f"spread pooled over every architecture with several runs):{cost}"]))  # fmt: skip
    b.append(("table", pd.DataFrame([_contrast_row(x, metric, axis) for x in ans.contrasts])))
    b.append(("ul", [_contrast_sentence(x, metric, axis) for x in ans.contrasts]))
    for note in ans.notes:
        b.append(("p", [("b", "Note: "), note + "."]))
    if len(ans.per_base) > 1:
        rows = [
            {"d_model": d, "layers": n, "heads per layer": heads(a.heads), "d_k": heads(a.config.d_k),
             quality_column(metric): quality_text(a), "latency (ms)": latency_text(a, axis), "trial": a.numbers[0]}
            for d, n, a in ans.per_base
        ]  # fmt: skip
        b.append(("p", ["The head-count answer for each width and depth the search tried (the knee of that "
                        "width and depth's search architectures; one run each):"]))  # fmt: skip
        b.append(("table", pd.DataFrame(rows)))
    return b


def _finalist_method(retimings: Sequence[Retiming], metric: QualityMetric | None = None) -> str:
    rounds = {t.round for t in retimings}
    fresh = all(t.pid is not None for t in retimings) and len({t.pid for t in retimings}) == len(rounds)
    timing = (
        f"{len(rounds)} interleaved rounds of re-timing every finalist, "
        f"{'each round in a fresh process, ' if fresh else ''}with nothing else running"
        if retimings
        else "the timing at the start of each run"
    )
    if any(t.kind == "decode" for t in retimings):
        timing += " (its forward pass and one decoding step alike)"
    stall = (
        "validation bits per byte stopped falling by more than 0.2%"
        if metric is not None and is_bpb(metric)
        else "validation accuracy stopped rising by more than one binomial standard error"
    )
    return (
        f"Each run trained at a constant learning rate after its warm-up; when {stall} for the spec's patience "
        f"the rate was cut 10x, twice, and a third plateau (or the cap) ended the run. Latencies come from {timing}."
    )


def finalist_blocks(
    ans: Answer, records: Sequence[TrialRecord], retimings: Sequence[Retiming] = ()
) -> list[tuple]:
    if ans.evidence != "finalists":
        return []
    finals = architectures(records, "finalist", retimings=retimings)
    rows = [
        {"part": a.label or "", **_arch_row(a, "finalists"), "trials": ", ".join(map(str, a.numbers))}
        for a in finals
    ]
    search = {a.key: a for a in architectures(records, "search")}
    pairs = [(search[a.key].accuracy.estimate, a.accuracy.estimate) for a in finals if a.key in search]
    bpb = bool(finals) and is_bpb(finals[0].metric)
    tau_text = ""
    if len(pairs) >= 3:
        tau, p = kendall_tau([x for x, _ in pairs], [y for _, y in pairs])
        tau_text = (
            f" Rank agreement between the search's short runs and these converged means, over the {len(pairs)} "
            f"finalists that were also searched: Kendall tau {tau:.2f} (p = {p:.2g})."
        )
    return [
        (
            "h",
            3,
            f"Finalists: retrained with fresh seeds until {'the loss' if bpb else 'accuracy'} stopped moving",
        ),
        ("p", [_finalist_method(retimings, finals[0].metric if finals else None) + tau_text]),
        ("table", pd.DataFrame(rows)),
    ]


def rules_blocks(verdicts: Sequence[rules.RuleVerdict], metric: QualityMetric | None = None) -> list[tuple]:
    extra = []
    if metric is not None and is_bpb(metric):
        extra.append(("p", ["Here quality is validation bits per byte (lower is better): the tests compare it as "
                            "such, differences are in bits per byte, and the material difference that stands in "
                            "for one accuracy point is 1% of the value."]))  # fmt: skip
    if any(v.rule.startswith("Grouped-query") for v in verdicts):
        extra.append(("p", ["Grouped-query attention (Ainslie et al. 2023): grouped-query architectures (1 < "
                            "kv_heads < heads in every layer) against multi-head ones (kv_heads = heads) on quality, "
                            "within groups of equal width, depth and head width (it holds when the whole 95% "
                            "interval of what grouping loses is below the material difference), and against "
                            "multi-query ones (kv_heads = 1) on decoding time per token, compared on the log scale "
                            "(it holds when the whole 95% interval of the time ratio is below 1.25x). Supported when "
                            "both hold, contradicted when either is shown false."]))  # fmt: skip
    return [
        ("h", 2, "Rules of thumb, checked on this study"),
        ("table", pd.DataFrame([{"rule": v.rule, "verdict": v.verdict, "evidence": v.evidence} for v in verdicts])),
        ("p", [f"Method: the search's architectures (one run each), compared within groups of equal width and depth "
               "at the last epoch every compared architecture trained, so runs stopped early neither drop out nor "
               "bias the groups; where the search lacks a side (one head per layer is a single architecture at one width "
               "and depth), the finalist runs instead, each a fresh seed trained to its plateau. p: stratified exact permutation test of the claimed direction (labels permuted "
               "within each group; Monte Carlo where the splits are too many); interval: stratified 95% bootstrap. "
               f"Supported: p <= {rules.ALPHA}. Contradicted: the reverse holds at p <= {rules.ALPHA} (for '8-16 heads "
               "suffice': more than 16 heads gain over one point, the whole interval above it). Otherwise the "
               "largest difference the interval allows is stated. Merged heads: the study's attention benchmark, at "
               f"least {rules.MIN_SPEEDUP:.2f}x faster than the serial loop and outside the timer's spread."]),
    ] + extra  # fmt: skip


def relations_blocks(records: Sequence[TrialRecord], k: int, rec: Architecture | None = None) -> list[tuple]:
    claim = relations_claim(records, k)
    b: list[tuple] = [("h", 2, f"One head per relation? (relations task, k = {k})")]
    g = claim.accuracy
    if g is None:
        acc = (f"Not enough data to compare architectures with at least {k} heads in every layer ({claim.n_at_least}) "
               f"against architectures with fewer ({claim.n_fewer}): each side needs {rules.MIN_ARCHS}.")  # fmt: skip
    else:
        c = g.comparison
        acc = (f"At least {k} heads in every layer: {c.mean_a * 100:.2f}% mean validation accuracy ({c.n_a} "
               f"architectures); fewer than {k} in some layer: {c.mean_b * 100:.2f}% ({c.n_b}); difference "
               f"{c.diff * 100:+.2f} points, 95% interval [{c.low * 100:+.2f}, {c.high * 100:+.2f}], exact "
               f"permutation p = {c.p_value:.3g} (one-sided, after epoch {g.epoch}): "
               + ("fewer than k heads costs accuracy here." if claim.accuracy_held else "no clear cost shown."))  # fmt: skip
    if claim.by_heads:
        acc += (
            " Validation accuracy of every architecture, by heads per layer: "
            + "; ".join(
                f"{heads(h)}: " + ", ".join(f"{v * 100:.1f}%" for v in vals) for h, vals in claim.by_heads
            )
            + "."
        )
    b.append(("p", [acc]))
    if rec is not None and min(rec.heads) < k:
        b.append(("p", [why_fewer_than_k(rec, k, claim.by_heads)]))
    b.append(("p", [claim.description]))
    if claim.held is not None:
        b.append(("p", [("b", f"The claim {'held' if claim.held else 'did not hold'} on this study"),
                        f" (accuracy cost below k heads: {'yes' if claim.accuracy_held else 'no'}; at least k heads "
                        f"specialized, covering the k relations: {'yes' if claim.specialization_held else 'no'})."]))  # fmt: skip
    return b


def why_fewer_than_k(
    rec: Architecture, k: int, by_heads: Sequence[tuple[tuple[int, ...], Sequence[float]]]
) -> str:
    """Why the answer has fewer than k heads in some layer, from the same runs the claim is tested on."""
    runs = [(min(h) >= k, v) for h, vals in by_heads for v in vals]
    best = max((v for m, v in runs if m), default=None)
    near = [sum(v >= rec.quality.estimate - 0.01 for m, v in runs if m == side) for side in (True, False)]
    total = [sum(m == side for m, _ in runs) for side in (True, False)]
    gap = "" if best is None else (
        f", within 1 point of the best layout with at least {k} heads ({pct(best)}%)"
        if best - rec.quality.estimate <= 0.01 else
        f", {(best - rec.quality.estimate) * 100:.2f} points below the best layout with at least {k} heads "
        f"({pct(best)}%), and faster"
    )  # fmt: skip
    return (f"Why the answer has fewer than {k} heads in a layer: {heads(rec.heads)} at d_model {rec.config.d_model} "
            f"reached {pct(rec.quality.estimate)}% ({rec.n} run{'s' * (rec.n != 1)}){gap}. But {near[1]} of {total[1]} "
            f"runs with fewer than {k} heads came within 1 point of it, against {near[0]} of {total[0]} with at least "
            f"{k}: with fewer heads the relations are learned in some runs and not in others, which is the cost the "
            "test above measures. "
            + ("One run per layout cannot say how often this one learns them: `explorer confirm NAME --seeds 3` "
               "retrains the candidates with fresh seeds." if rec.n < 2 else ""))  # fmt: skip


def early_stopping_blocks(acct: StudyAccount, spec: StudySpec, records: Sequence[TrialRecord]) -> list[tuple]:
    es = spec.early_stopping
    if not es.enabled:
        return [("p", ["Early stopping was off: every search trial trained its full budget."])]
    rungs = ", ".join(map(str, es.rungs(spec.task.epochs)))
    planned = acct.epochs_run + acct.epochs_saved
    share = acct.epochs_saved / planned if planned else 0.0
    finished = [r for r in records if r.role == "search" and r.finished and len(r.history) >= es.min_epochs]
    bpb = is_bpb(spec.metric)
    what = "bits per byte" if bpb else "accuracy"
    tau_text = ""
    if len(finished) >= 3:
        tau, p = kendall_tau([r.history[es.min_epochs - 1] for r in finished], [r.quality for r in finished])
        tau_text = (
            f" Among the {len(finished)} trials that ran to the end, {what} at the first rung (epoch "
            f"{es.min_epochs}) ranks them like their final {what} with Kendall tau {tau:.2f} (p = {p:.2g})."
        )
    better = (
        "lower in validation bits per byte by more than the standard errors of the two losses allow (each from "
        "the spread of the per-window losses)"
        if bpb
        else "more accurate at that epoch by more than the validation split's binomial noise allows"
    )
    return [("p", [
        f"Early stopping: a search trial may stop only at a rung (epochs {rungs}), and only when a different "
        "architecture that is at least as fast (latencies within their timing spread count as ties) was "
        f"{better} (Bonferroni over the "
        f"peers compared, family-wise alpha {es.alpha:g}); other seeds of the same architecture never count. "
        f"{acct.stopped_early} trials stopped early, saving {acct.epochs_saved} of {planned} planned epochs "
        f"({share:.0%}).{tau_text}",
    ])]  # fmt: skip


def account_blocks(acct: StudyAccount) -> list[tuple]:
    s = ", ".join(f"{k} {v}" for k, v in sorted(acct.search_states.items()))
    f = ", ".join(f"{k} {v}" for k, v in sorted(acct.finalist_states.items())) or "none"
    closed = ", ".join(f"{k} {v}" for k, v in sorted(acct.closed.items())) or "none"
    failed = ", ".join(f"{k} {v}" for k, v in sorted(acct.failed.items())) or "none"
    return [
        ("h", 2, "Study account"),
        ("ul", [
            f"Task: {acct.task}; device(s): {', '.join(acct.devices) or 'not recorded'}",
            f"Search trials (total {acct.search_total}): {s}; finalist runs: {f}",
            f"Over budget, pruned untrained: {acct.over_budget}; stopped early at a rung: {acct.stopped_early}",
            f"Architectures the sampler proposed again and the search skipped without training: "
            f"{acct.proposals_rejected}; trials given an untaken architecture at random after that: {acct.fallbacks}",
            f"Trials closed without running (beyond a total, or a configuration another trial held): {closed}",
            f"Failed trials: {failed}",
            f"Wall time: {acct.wall_time_s / 60:.1f} min (first start to last finish); time inside trials: "
            f"{acct.trial_time_s / 60:.1f} min",
            "Status: " + (f"partial ({acct.partial_reason})" if acct.partial else "finished"),
            "Files: trials.csv (every trial), architectures.csv (per architecture and role), pareto.csv, *.png",
        ]),
        ("p", ["Reproduce, or resume this study from its database:"]),
        ("code", f"{acct.reproduce}\n{acct.resume}"),
    ]  # fmt: skip
