"""The report's sections as neutral blocks (:mod:`explorer.output.render`): the answer, the finalists, the rules
of thumb, the relations claim, early stopping and the study account, each from what :mod:`explorer.insight`
computes. Numbers are formatted here and only here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from explorer.insight import rules
from explorer.insight.account import StudyAccount
from explorer.insight.recommend import Answer, Contrast
from explorer.insight.relations import relations_claim
from explorer.insight.stats import kendall_tau
from explorer.insight.tables import Architecture, architectures
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
    "rules_blocks",
]


def pct(x: float | None) -> str:
    return "n/a" if x is None or pd.isna(x) else f"{x * 100:.2f}"


def num(x: float | None, fmt: str = ".3g") -> str:
    return "n/a" if x is None or pd.isna(x) else format(x, fmt)


def heads(heads: Sequence[int]) -> str:
    return ",".join(map(str, heads))


def _acc_text(a: Architecture) -> str:
    i = a.accuracy
    return f"{pct(i.estimate)}% [{pct(i.low)}, {pct(i.high)}]"


def _lat_text(a: Architecture) -> str:
    i = a.latency
    return f"{num(i.estimate)} ms [{num(i.low)}, {num(i.high)}]"


def _runs_text(a: Architecture, evidence: str) -> str:
    if evidence == "finalists":
        return f"mean of {a.n} seed{'s' * (a.n != 1)}, each trained until its accuracy stopped moving"
    return f"one run of {a.epochs:.0f} epochs"


def _arch_row(a: Architecture, evidence: str) -> dict[str, Any]:
    c = a.config
    return {
        "heads per layer": heads(c.heads),
        "d_k per layer": heads(c.d_k),
        "d_model": c.d_model,
        "layers": c.n_layers,
        "runs": a.n,
        "val acc (%), mean [95% interval]": _acc_text(a),
        "test acc (%)": pct(a.test_accuracy),
        "latency (ms) [95% interval for a new timing]": _lat_text(a),
        "params": f"{a.params:,}",
        "epochs": f"{a.epochs:.0f}" if evidence == "search" else f"{a.epochs:.1f} (mean)",
    }


def _contrast_row(c: Contrast) -> dict[str, Any]:
    if c.other is None:
        return {"alternative": c.name, "heads per layer": "", "val acc (%)": "", "vs recommended": c.note,
                "latency (ms)": "", "latency vs recommended": ""}  # fmt: skip
    if c.note:
        vs = c.note
    elif c.accuracy is not None:
        k = c.accuracy
        vs = f"{k.diff * 100:+.2f} points [{k.low * 100:+.2f}, {k.high * 100:+.2f}], p = {k.p_value:.2g}"
    else:
        vs = f"{c.accuracy_diff * 100:+.2f} points (single runs: no test)"
    lat = "within timing noise" if c.latency_tie else f"{c.latency_ratio:.2f}x"
    return {
        "alternative": c.name,
        "heads per layer": heads(c.other.heads),
        "val acc (%)": _acc_text(c.other),
        "vs recommended": vs,
        "latency (ms)": _lat_text(c.other),
        "latency vs recommended": lat if c.note == "" else "",
    }


def _contrast_sentence(c: Contrast) -> str:
    if c.other is None or c.note:
        return f"{c.name}: {c.note}."
    lat = (
        "at a latency within the timing noise"
        if c.latency_tie
        else f"at {c.latency_ratio:.2f}x the latency ({'slower' if c.latency_ratio > 1 else 'faster'})"
    )
    if c.accuracy is None:
        return f"{c.name} ({heads(c.other.heads)}): {c.accuracy_diff * 100:+.2f} points {lat} (single runs)."
    k = c.accuracy
    if k.significant():
        verdict = f"{'loses' if k.diff < 0 else 'gains'} {abs(k.diff) * 100:.2f} points (p = {k.p_value:.2g})"
    else:
        verdict = f"shows no difference larger than {k.bound * 100:.2f} points (p = {k.p_value:.2g})"
    return f"{c.name} ({heads(c.other.heads)}) {verdict}, {lat}."


def answer_blocks(ans: Answer, spec: StudySpec) -> list[tuple]:
    b: list[tuple] = [("h", 2, "The answer")]
    rec = ans.recommended
    if rec is None:
        return [*b, ("p", ["No recommendation: " + "; ".join(ans.notes) + "."])]
    c = rec.config
    b.append(("p", [
        ("b", f"Use {heads(c.heads)} heads per layer"),
        f" for the base model d_model {c.d_model}, {c.n_layers} layers (d_k {heads(c.d_k)}, {c.family} schedule): "
        f"{_acc_text(rec)} validation accuracy ({_runs_text(rec, ans.evidence)}; 95% interval), "
        f"{pct(rec.test_accuracy)}% test accuracy, and {_lat_text(rec)} per batch of {spec.latency.batch_size} "
        f"(median of {rec.latency.n} timing{'s' * (rec.latency.n != 1)}; 95% interval for a new timing), "
        f"{rec.params:,} parameters."
        + (f" Retrained with 3 fresh seeds, its mean validation accuracy should land in [{pct(rec.rerun.low)}, "
           f"{pct(rec.rerun.high)}]% (95% prediction interval)." if rec.n > 1 else ""),
    ]))  # fmt: skip
    if ans.confidence is not None:
        b.append(
            ("p", [("b", f"Confidence: {ans.confidence:.0%}. "), f"Measured as the {ans.confidence_method}."])
        )
    else:
        b.append(("p", [("b", "Confidence: "), ans.confidence_method + "."]))
    b.append(("p", ["What the alternatives at this width and depth cost or gain (other minus recommended; "
                    "differences of mean accuracy over seeds with a 95% t interval and a t test, the seed-to-seed "
                    "spread pooled over every architecture with several runs):"]))  # fmt: skip
    b.append(("table", pd.DataFrame([_contrast_row(x) for x in ans.contrasts])))
    b.append(("ul", [_contrast_sentence(x) for x in ans.contrasts]))
    for note in ans.notes:
        b.append(("p", [("b", "Note: "), note + "."]))
    if len(ans.per_base) > 1:
        rows = [
            {"d_model": d, "layers": n, "heads per layer": heads(a.heads), "d_k": heads(a.config.d_k),
             "val acc (%)": _acc_text(a), "latency (ms)": _lat_text(a), "trial": a.numbers[0]}
            for d, n, a in ans.per_base
        ]  # fmt: skip
        b.append(("p", ["The head-count answer for each width and depth the search tried (the knee of that "
                        "width and depth's search architectures; one run each):"]))  # fmt: skip
        b.append(("table", pd.DataFrame(rows)))
    return b


def _finalist_method(retimings: Sequence[Retiming]) -> str:
    timing = (
        f"{len({t.round for t in retimings})} interleaved rounds of re-timing every finalist, with nothing else "
        "running"
        if retimings
        else "the timing at the start of each run"
    )
    return (
        "Each run trained at a constant learning rate after its warm-up; when validation accuracy stopped rising by "
        "more than one binomial standard error for the spec's patience the rate was cut 10x, twice, and a third "
        f"plateau (or the cap) ended the run. Latencies come from {timing}."
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
    tau_text = ""
    if len(pairs) >= 3:
        tau, p = kendall_tau([x for x, _ in pairs], [y for _, y in pairs])
        tau_text = (
            f" Rank agreement between the search's short runs and these converged means, over the {len(pairs)} "
            f"finalists that were also searched: Kendall tau {tau:.2f} (p = {p:.2g})."
        )
    return [
        ("h", 3, "Finalists: retrained with fresh seeds until accuracy stopped moving"),
        ("p", [_finalist_method(retimings) + tau_text]),
        ("table", pd.DataFrame(rows)),
    ]


def rules_blocks(verdicts: Sequence[rules.RuleVerdict]) -> list[tuple]:
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
    ]  # fmt: skip


def relations_blocks(records: Sequence[TrialRecord], k: int) -> list[tuple]:
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
    b.append(("p", [claim.description]))
    if claim.held is not None:
        b.append(("p", [("b", f"The claim {'held' if claim.held else 'did not hold'} on this study"),
                        f" (accuracy cost below k heads: {'yes' if claim.accuracy_held else 'no'}; at least k heads "
                        f"specialized, covering the k relations: {'yes' if claim.specialization_held else 'no'})."]))  # fmt: skip
    return b


def early_stopping_blocks(acct: StudyAccount, spec: StudySpec, records: Sequence[TrialRecord]) -> list[tuple]:
    es = spec.early_stopping
    if not es.enabled:
        return [("p", ["Early stopping was off: every search trial trained its full budget."])]
    rungs = ", ".join(map(str, es.rungs(spec.task.epochs)))
    planned = acct.epochs_run + acct.epochs_saved
    share = acct.epochs_saved / planned if planned else 0.0
    finished = [r for r in records if r.role == "search" and r.finished and len(r.history) >= es.min_epochs]
    tau_text = ""
    if len(finished) >= 3:
        tau, p = kendall_tau(
            [r.history[es.min_epochs - 1] for r in finished], [r.val_accuracy for r in finished]
        )
        tau_text = (
            f" Among the {len(finished)} trials that ran to the end, accuracy at the first rung (epoch "
            f"{es.min_epochs}) ranks them like their final accuracy with Kendall tau {tau:.2f} (p = {p:.2g})."
        )
    return [("p", [
        f"Early stopping: a search trial may stop only at a rung (epochs {rungs}), and only when a different "
        "architecture that is at least as fast (latencies within their timing spread count as ties) was more "
        f"accurate at that epoch by more than the validation split's binomial noise allows (Bonferroni over the "
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
