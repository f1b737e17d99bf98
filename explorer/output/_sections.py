"""The report's later sections as neutral blocks (:mod:`explorer.output._render`): the rules of thumb, the
relations claim, early stopping and the study account, each from what :mod:`explorer.answer` computes (the
answer and its evidence: :mod:`explorer.output._answer_sections`).

Quality is spoken of in the task's own terms: validation accuracy in percent ("points") for a classification
task, validation bits per byte (a loss: lower is better) for a language model, where there is no accuracy to
speak of."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from explorer.analysis import ALPHA, GQA_RULE, MIN_ARCHS, MIN_SPEEDUP, RuleVerdict, relations_claim
from explorer.answer import Architecture, StudyAccount, UnitComparison, kendall_tau
from explorer.measurements import QualityMetric
from explorer.output._fmt import heads, is_bpb, pct
from explorer.output._render import Block, Bold, Bullets, Code, Heading, Para, Table
from explorer.spec import StudySpec
from explorer.storage import Role, TrialRecord


def rules_blocks(verdicts: Sequence[RuleVerdict], metric: QualityMetric | None = None) -> list[Block]:
    extra: list[Block] = []
    if metric is not None and is_bpb(metric):
        extra.append(
            Para(
                [
                    "Here quality is validation bits per byte (lower is better): the tests compare it as "
                    "such, differences are in bits per byte, and the material difference that stands in "
                    "for one accuracy point is 1% of the value."
                ],
            )
        )
    if any(v.rule == GQA_RULE for v in verdicts):
        extra.append(
            Para(
                [
                    "Grouped-query attention (Ainslie et al. 2023): grouped-query architectures (1 < "
                    "kv_heads < heads in every layer) against multi-head ones (kv_heads = heads) on quality, "
                    "within groups of equal width, depth and head width (it holds when the whole 95% "
                    "interval of what grouping loses is below the material difference), and against "
                    "multi-query ones (kv_heads = 1) on decoding time per token, compared on the log scale "
                    "(it holds when the whole 95% interval of the time ratio is below 1.25x). Supported when "
                    "both hold, contradicted when either is shown false."
                ],
            )
        )
    return [
        Heading(2, "Rules of thumb, checked on this study"),
        Table(
            pd.DataFrame([{"rule": v.rule, "verdict": v.verdict, "evidence": v.evidence} for v in verdicts]),
        ),
        Para([_rules_method(verdicts)]),
        *extra,
    ]


def _rules_method(verdicts: Sequence[RuleVerdict]) -> str:
    on_finalists = any(isinstance(v.comparison, UnitComparison) for v in verdicts)
    where = (
        "the finalist layouts, unit by unit: on each fold and seed every layout trained alike, so the mean of "
        "one side's layouts minus the other's is a paired difference; p: one-sided paired t test of the claimed "
        "direction over the units; interval: 95% t interval. A rule whose sides are not both among the "
        "finalists is not judged from the search's single short runs."
        if on_finalists
        else "the search's architectures (one run each; the study has no finalist runs), compared within groups "
        "of equal width and depth at the last epoch every compared architecture trained; p: stratified exact "
        "permutation test of the claimed direction; interval: stratified 95% bootstrap."
    )
    return (
        f"Method: {where} Supported: p <= {ALPHA}. Contradicted: the reverse holds at p <= {ALPHA} "
        "(for '8-16 heads suffice': more than 16 heads gain more than the answer's margin, the whole interval "
        "above it). Otherwise the largest difference the interval allows is stated. Merged heads: the study's "
        f"attention benchmark, at least {MIN_SPEEDUP:.2f}x faster than the serial loop and outside the "
        "timer's spread."
    )


def relations_blocks(records: Sequence[TrialRecord], k: int, rec: Architecture | None = None) -> list[Block]:
    claim = relations_claim(records, k)
    b: list[Block] = [Heading(2, f"One head per relation? (relations task, k = {k})")]
    g = claim.accuracy
    if g is None:
        acc = (
            f"Not enough data to compare architectures with at least {k} heads in every layer ({claim.n_at_least}) "
            f"against architectures with fewer ({claim.n_fewer}): each side needs {MIN_ARCHS}."
        )
    else:
        c = g.comparison
        acc = (
            f"At least {k} heads in every layer: {c.mean_a * 100:.2f}% mean validation accuracy ({c.n_a} "
            f"architectures); fewer than {k} in some layer: {c.mean_b * 100:.2f}% ({c.n_b}); difference "
            f"{c.diff * 100:+.2f} points, 95% interval [{c.low * 100:+.2f}, {c.high * 100:+.2f}], exact "
            f"permutation p = {c.p_value:.3g} (one-sided, after epoch {g.epoch}): "
            + ("fewer than k heads costs accuracy here." if claim.accuracy_held else "no clear cost shown.")
        )
    if claim.by_heads:
        acc += (
            " Validation accuracy of every architecture, by heads per layer: "
            + "; ".join(
                f"{heads(h)}: " + ", ".join(f"{v * 100:.1f}%" for v in vals) for h, vals in claim.by_heads
            )
            + "."
        )
    b.append(Para([acc]))
    if rec is not None and min(rec.heads) < k:
        b.append(Para([why_fewer_than_k(rec, k, claim.by_heads)]))
    b.append(Para([claim.description]))
    if claim.held is not None:
        b.append(
            Para(
                [
                    Bold(f"The claim {'held' if claim.held else 'did not hold'} on this study"),
                    f" (accuracy cost below k heads: {'yes' if claim.accuracy_held else 'no'}; at least k heads "
                    f"specialized, covering the k relations: {'yes' if claim.specialization_held else 'no'}).",
                ],
            )
        )
    return b


def why_fewer_than_k(
    rec: Architecture, k: int, by_heads: Sequence[tuple[tuple[int, ...], Sequence[float]]]
) -> str:
    """Why the answer has fewer than k heads in some layer, from the same runs the claim is tested on."""
    runs = [(min(h) >= k, v) for h, vals in by_heads for v in vals]
    best = max((v for m, v in runs if m), default=None)
    near = [sum(v >= rec.quality.estimate - 0.01 for m, v in runs if m == side) for side in (True, False)]
    total = [sum(m == side for m, _ in runs) for side in (True, False)]
    gap = (
        ""
        if best is None
        else (
            f", within 1 point of the best layout with at least {k} heads ({pct(best)}%)"
            if best - rec.quality.estimate <= 0.01
            else f", {(best - rec.quality.estimate) * 100:.2f} points below the best layout with at least {k} heads "
            f"({pct(best)}%), and faster"
        )
    )
    return (
        f"Why the answer has fewer than {k} heads in a layer: {heads(rec.heads)} at d_model {rec.config.d_model} "
        f"reached {pct(rec.quality.estimate)}% ({rec.n} run{'s' * (rec.n != 1)}){gap}. But {near[1]} of {total[1]} "
        f"runs with fewer than {k} heads came within 1 point of it, against {near[0]} of {total[0]} with at least "
        f"{k}: with fewer heads the relations are learned in some runs and not in others, which is the cost the "
        "test above measures. "
        + (
            "One run per layout cannot say how often this one learns them: `explorer confirm NAME --seeds 3` "
            "retrains the candidates on more seeds."
            if rec.n < 2
            else ""
        )
    )


def early_stopping_blocks(acct: StudyAccount, spec: StudySpec, records: Sequence[TrialRecord]) -> list[Block]:
    es = spec.early_stopping
    if not es.enabled:
        return [Para(["Early stopping was off: every search trial trained its full budget."])]
    rungs = ", ".join(map(str, es.rungs(spec.task.epochs)))
    planned = acct.epochs_run + acct.epochs_saved
    share = acct.epochs_saved / planned if planned else 0.0
    # (quality at the first rung, final quality) of the search trials that ran to the end
    finished = [
        (r.history[es.min_epochs - 1], r.quality)
        for r in records
        if r.role == Role.SEARCH and r.finished and r.quality is not None and len(r.history) >= es.min_epochs
    ]
    bpb = is_bpb(spec.metric)
    what = "bits per byte" if bpb else "accuracy"
    tau_text = ""
    if len(finished) >= 3:
        tau, p = kendall_tau([rung for rung, _ in finished], [final for _, final in finished])
        tau_text = (
            f" Among the {len(finished)} trials that ran to the end, {what} at the first rung (epoch "
            f"{es.min_epochs}) ranks them like their final {what} with Kendall tau {tau:.2f} (p = {p:.2g})."
        )
    floor = "the standard error of its per-window losses" if bpb else "the validation split's binomial noise"
    return [
        Para(
            [
                f"Early stopping: a search trial may stop only at a rung (epochs {rungs}), and only when a different "
                "architecture that is at least as fast (latencies within their timing spread count as ties) was "
                f"{'lower in validation bits per byte' if bpb else 'more accurate'} at that epoch by more than seed and "
                "split noise allow: that noise is estimated from the spread of all the search's values at that epoch, "
                f"never below {floor}, with a t critical value and Bonferroni over the peers compared and the trial's "
                f"rungs, so that, were the noise normal, a trial as good as its faster peers would be stopped with "
                f"probability at most {es.alpha:g}; "
                "other seeds of the same architecture are never compared with it. "
                f"{acct.stopped_early} trials stopped early, saving {acct.epochs_saved} of {planned} planned epochs "
                f"({share:.0%}).{tau_text}",
            ],
        )
    ]


def account_blocks(acct: StudyAccount, study: Sequence[Block] = ()) -> list[Block]:
    """The study account: ``study`` (what it ran, in a paragraph), then its trials by role and state, time and
    status, and the commands that reproduce and resume it."""
    s = ", ".join(f"{k} {v}" for k, v in sorted(acct.search_states.items()))
    f = ", ".join(f"{k} {v}" for k, v in sorted(acct.finalist_states.items())) or "none"
    closed = ", ".join(f"{k} {v}" for k, v in sorted(acct.closed.items())) or "none"
    failed = ", ".join(f"{k} {v}" for k, v in sorted(acct.failed.items())) or "none"
    return [
        Heading(2, "Study account"),
        *study,
        Bullets(
            [
                f"Task: {acct.task}; device(s): {', '.join(acct.devices) or 'not recorded'}",
                f"Search trials (total {acct.search_total}): {s}; finalist runs (every horizon): {f}",
                f"Over budget, pruned untrained: {acct.over_budget}; stopped early at a rung: {acct.stopped_early}",
                f"Architectures the sampler proposed again and the search skipped without training: "
                f"{acct.proposals_rejected}; trials given an untaken architecture at random after that: {acct.fallbacks}",
                f"Trials closed without running (beyond a total, or a configuration another trial held): {closed}",
                f"Failed trials: {failed}",
                f"Wall time: {acct.wall_time_s / 60:.1f} min (first start to last finish); time inside trials: "
                f"{acct.trial_time_s / 60:.1f} min",
                "Status: " + (f"partial ({acct.partial_reason})" if acct.partial else "finished"),
                "Files: trials.csv (every trial), architectures.csv (per architecture and role), pareto.csv, *.png",
            ],
        ),
        Para([f"Reproduce it{acct.reproduce_from}, or resume this study from its database:"]),
        Code(acct.reproduce if acct.reproduce == acct.resume else f"{acct.reproduce}\n{acct.resume}"),
    ]
