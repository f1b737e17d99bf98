"""The report's lead: the answer and the trade-off it makes (how sure it is within the margin, its latency
against the best, the next faster layout and what would decide it), every candidate's verdict, what the
alternatives cost, and how the evidence behind it was gathered. Blocks for :mod:`explorer.output._render`,
from :class:`explorer.answer._answer.Answer` only: every figure here is one the answer computed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from explorer.answer import Answer, Architecture, Candidate, Contrast, CostAxis, Evidence, HorizonBy, Verdict
from explorer.measurements import QualityMetric
from explorer.output._fmt import (
    claim,
    epochs_text,
    heads,
    is_bpb,
    kv_text,
    latency_text,
    margin_text,
    mib,
    num,
    pct,
    prob,
    quality_column,
    quality_text,
    runs_text,
    score_diff_text,
)
from explorer.output._kv_sections import is_modern, layout_phrase, modern_figures, saving_blocks
from explorer.output._render import Block, Bold, Bullets, Code, Figure, Heading, Para, Table
from explorer.spec import StudySpec
from explorer.storage import Retiming, TimingKind, TrialRecord

_VERDICT_WORDS = {
    Verdict.BEST: "the best",
    Verdict.WITHIN: "within the margin",
    Verdict.BEYOND: "beyond the margin",
    Verdict.EDGE: "at the margin's edge",
    Verdict.UNDECIDED: "undecided",
    Verdict.UNTESTED: "not tested",
}


# a finalist's part in the plan as studies stored it before the name said what it is (the trade-off's "next
# faster layout" is the rule's, a different one)
_LABELS = {"next faster": "faster on the front"}


def _layout(a: Architecture, modern: bool) -> str:
    return kv_text(a) if modern else heads(a.heads)


def _units_text(ans: Answer) -> str:
    counts = sorted({c.arch.n for c in ans.verdicts})
    span = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]} to {counts[-1]}"
    return f"{span} paired runs a layout"


def _lead(ans: Answer, spec: StudySpec) -> Para:
    """The report's first paragraph, for a reader who knows no statistics: what to use, how sure, what it gains
    against the most accurate layout and, while the answer is open, what deciding it costs."""
    rec, best = ans.recommended, ans.best
    assert rec is not None
    modern = is_modern(ans, spec)
    c = rec.config
    use = f"{layout_phrase(rec) if modern else f'{heads(c.heads)} heads per layer'}"
    if ans.evidence is not Evidence.FINALISTS:
        return Para(
            [
                Bold(f"Provisional: {use}"),
                f" for the base model d_model {c.d_model}, {c.n_layers} layers: the knee of the search's "
                f"quality/latency front ({runs_text(rec, ans.evidence)} per architecture). Nothing was retrained on "
                "paired runs, so no probability is stated.",
            ]
        )
    assert best is not None
    margin = margin_text(rec.metric, ans.margin)
    head = Bold(f"Use {use}" if ans.decided else f"Not decided yet: {use} so far")
    spans: list[Any] = [
        head,
        f" (d_model {c.d_model}, {c.n_layers} layers). How sure: the paired runs give probability "
        f"{prob(ans.confidence)} that no other finalist beats it by more than {margin} of validation "
        f"{'bits per byte' if is_bpb(rec.metric) else 'accuracy'} (the study asks {_asked(ans)}). ",
    ]
    nxt = ans.next_faster
    if ans.contradicted:
        assert ans.check is not None
        spans.append(
            f"Runs trained {ans.check.long} epochs instead of {ans.check.epochs} contradict that verdict "
            "(the horizon check below). "
        )
    elif ans.decided:
        if nxt is None:
            spans.append("No finalist is faster. ")
        elif nxt.verdict is Verdict.WITHIN:  # decided beside it: the re-timing could not tell it faster
            spans.append(
                f"The next faster layout, {_layout(nxt.arch, modern)}, is within the margin too, but the re-timing "
                "rounds do not show it faster than the answer beyond the latency tie (they count as equally fast), so the "
                "more accurate of the two is the answer. "
            )
        else:
            spans.append(
                f"The next faster layout, {_layout(nxt.arch, modern)}, is shown to fall short of that "
                f"({_VERDICT_WORDS[nxt.verdict]}). "
            )
    elif ans.placed and nxt is not None:
        spans.append(
            f"The next faster layout, {_layout(nxt.arch, modern)}, is {_VERDICT_WORDS[nxt.verdict]}. "
        )
    if rec.key == best.key:
        spans.append("What it gains: it is the most accurate layout itself. ")
    else:
        vs = next(x.versus_best for x in ans.verdicts if x.arch.key == rec.key)
        ratio = next(x.latency_ratio for x in ans.verdicts if x.arch.key == best.key)
        diff = "" if vs is None else f", at {score_diff_text(rec.metric, vs)} ({_level(ans)} interval)"
        spans.append(
            f"What it gains: the answer is {num(ratio, '.2f')}x faster than the most accurate layout, "
            f"{_layout(best, modern)}{diff}. "
        )
    return Para(_trimmed(spans + _cost_spans(ans, spec)))


def _trimmed(spans: list[Any]) -> list[Any]:
    """``spans`` without the space after their last sentence."""
    return spans[:-1] + [spans[-1].rstrip()] if spans and isinstance(spans[-1], str) else spans


def _asked(ans: Answer) -> str:
    """The probability the rule asks, ``1 - risk``, as a percentage."""
    return f"{num(100 * (1 - ans.risk), '.3g')}%"


def _figures_para(ans: Answer, spec: StudySpec) -> list[Block]:
    """The answer's own figures: its shape, quality, latency and size, each as computed over its runs."""
    rec = ans.recommended
    assert rec is not None
    if is_modern(ans, spec):
        return [Para([Bold("The answer's figures:"), modern_figures(ans, spec)])]
    c = rec.config
    quality = "Cross-validated accuracy" if ans.evidence is Evidence.FINALISTS else "Validation accuracy"
    return [
        Para(
            [
                Bold("The answer's figures:"),
                f" d_model {c.d_model}, {c.n_layers} layers (d_k {heads(c.d_k)}, {c.family} schedule). {quality} "
                f"{quality_text(rec)} ({runs_text(rec, ans.evidence)}; 95% interval), {pct(rec.test_quality)}% test "
                f"accuracy (mean over its runs), {latency_text(rec)} per batch of {spec.latency.batch_size} (median "
                f"of {rec.latency.n} timing{'s' * (rec.latency.n != 1)}; 95% interval for a new timing), "
                f"{rec.params:,} parameters.",
            ],
        )
    ]


def _next_faster(ans: Answer, spec: StudySpec) -> list[Block]:
    """The layout just faster than the answer, and what would decide it."""
    nxt = ans.next_faster
    if nxt is None:
        return []
    spans: list[Any] = [
        f"The next faster layout, {_layout(nxt.arch, is_modern(ans, spec))}, is {num(1 / nxt.latency_ratio, '.2f')}x "
        f"faster than the answer, within the margin with probability {prob(nxt.p_within)} ({_VERDICT_WORDS[nxt.verdict]}"
        + (
            f": the best beats it by more than {_edge_words(ans)} with probability {prob(nxt.p_edge)}"
            if nxt.verdict is Verdict.EDGE
            else ""
        )
        + "). ",
    ]
    if nxt.verdict is Verdict.UNDECIDED and nxt.units_needed is not None:
        spans.append(
            f"At its measured gap and spread this comparison alone would be settled at about {nxt.units_needed} "
            "paired units; the gap moves as runs come in, so what deciding costs is the forecast above."
        )
    return [Para(spans)]


def _edge_words(ans: Answer) -> str:
    """``margin - edge`` in words: how far below the best a layout at the margin's edge is shown to be."""
    assert ans.best is not None
    return margin_text(ans.best.metric, ans.margin - ans.edge)


def _cost_spans(ans: Answer, spec: StudySpec) -> list[Any]:
    """While the answer is open, what deciding it costs at the study's pace (:meth:`Answer.cost_text`), and the
    command that runs it."""
    if ans.decided:
        return []
    if ans.contradicted:
        assert ans.check is not None
        return [
            f"What deciding costs: a study whose grid trains {ans.check.long} epochs: ",
            Code(ans.check.longer_study(spec.name)),
            ".",
        ]
    cost = ans.cost_text()
    if ans.to_decide is None:
        return [f"What deciding costs: {cost}."]
    return [
        f"What deciding costs: {cost}; ",
        Code(f"explorer confirm {spec.name} --until-decided --budget {ans.to_decide}"),
        " runs them.",
    ]


def _level(ans: Answer) -> str:
    return f"{num(100 * (1 - 2 * ans.risk), '.3g')}%"


def _groups(ans: Answer, spec: StudySpec) -> list[Block]:
    """The other finalists by verdict, as the table beside states them."""
    modern = is_modern(ans, spec)
    groups: dict[Verdict, list[Candidate]] = {}
    rec = ans.recommended.key if ans.recommended else None
    for c in ans.verdicts:
        if c.arch.key != rec:  # the answer is the lead's, not one of the others
            groups.setdefault(c.verdict, []).append(c)
    zone = "[answer] settle: the stage's runs or minutes are spent" if ans.settled else "[answer] edge"
    spans: list[Any] = []
    for verdict, words in (
        (Verdict.WITHIN, "Also within the margin (slower): "),
        (Verdict.UNDECIDED, "Undecided: "),
        (Verdict.EDGE, f"At the margin's edge ({zone}): "),
        (Verdict.UNTESTED, "Not tested (faster than the first layout not placed within): "),
        (Verdict.BEYOND, "Beyond the margin: "),
    ):
        if groups.get(verdict):
            spans += [Bold(words), ", ".join(_layout(c.arch, modern) for c in groups[verdict]) + ". "]
    return [Para(_trimmed(spans))] if spans else []


def reading_blocks(ans: Answer) -> list[Block]:
    """How to read this report: what the verdicts, the probabilities and the answer's rule mean, said once."""
    if ans.evidence is not Evidence.FINALISTS or ans.recommended is None:
        return []
    spans: list[Any] = [
        "Each finalist layout was trained on the same paired units (the same data, order and seed for every "
        "layout), so layouts are compared unit by unit. Each layout's probability of lying within the margin of "
        "the most accurate (the best) is computed jointly over every other finalist (a multivariate t posterior "
        f"of the paired differences on the units they share, {_units_text(ans)}, flat prior), so layouts that "
        "rise and fall together on the same units are charged once; it is never stated below one minus the sum "
        f"of the pairwise probabilities. A layout is within the margin when that probability reaches "
        f"{_asked(ans)}, beyond it when the best beats it by more than the margin with that probability (its "
        f"{_level(ans)} paired interval against the best lies wholly below minus the margin)"
    ]
    if ans.edge > 0 and ans.best is not None:
        zone = (
            "the indifference zone once the stage's runs or minutes were spent, [answer] settle; [answer] edge "
            "while it lasted"
            if ans.settled
            else "the indifference zone, [answer] edge"
        )
        spans.append(
            f", at the margin's edge when the best beats it by more than {_edge_words(ans)} with that probability "
            f"({zone}: it is not shown within the margin, and no affordable number of runs would show it, so it no "
            "longer holds the decision open)"
        )
    spans.append(
        ", and undecided otherwise. The layouts faster than the best are tested in order of latency, slowest "
        "first, each only once every slower one is placed within the margin (a fixed-sequence test: taking the "
        "fastest placed then risks no more than one test at "
        f"{num(100 * ans.risk, '.3g')}% would), and the answer is the fastest layout placed within the margin; "
        "the first faster layout not placed within ends the sequence and the faster ones are not tested. The "
        "answer is decided once that layout is beyond the margin or at its edge."
    )
    return [
        Heading(2, "How to read this report"),
        Para(spans),
        Para(
            [
                f"The answer's confidence is the {ans.confidence_method}. The method in full, with the evidence "
                "for each of its choices: docs/method.md in explorer's documentation."
            ]
        ),
    ]


def _verdict_row(c: Candidate, ans: Answer, modern: bool) -> dict[str, Any]:
    metric = c.arch.metric
    vs = c.versus_best
    return {
        "heads per layer": _layout(c.arch, modern),
        "verdict": _VERDICT_WORDS[c.verdict],
        quality_column(metric): quality_text(c.arch),
        f"vs the best, paired [{_level(ans)}]": "" if vs is None else score_diff_text(metric, vs),
        "P(within the margin)": prob(c.p_within),
        "latency vs the answer": "1.00x"
        if ans.recommended and c.arch.key == ans.recommended.key
        else num(c.latency_ratio, ".2f") + "x",
        "runs": c.arch.n,
    }


def _confidence(ans: Answer) -> list[Block]:
    if ans.confidence is None:
        return [Para([Bold("Confidence: "), ans.confidence_method + "."])]
    return [
        Para(
            [
                Bold(f"Confidence: {prob(ans.confidence)}"),
                f" that the answer is within the margin of the best: it is {claim(ans)} How this is computed: "
                "How to read this report, below.",
            ],
        )
    ]


def _collapsed(ans: Answer, modern: bool) -> list[Block]:
    if not ans.collapsed:
        return []
    by_key = {a.key: a for a in ans.candidates}
    items = [
        f"trial {c.number}: {_layout(by_key[c.key], modern) if c.key in by_key else c.key}, seed {c.seed}, "
        f"{num(c.value * (1 if is_bpb(ans.candidates[0].metric) else 100), '.2f')}"
        f"{'' if is_bpb(ans.candidates[0].metric) else '%'}, {num(c.shortfall * 100, '.1f')} points below what its "
        "layout and its unit predict"
        for c in ans.collapsed
    ]
    return [
        Para(
            [
                Bold(f"{len(items)} run(s) collapsed and are reported apart"),
                " (training failed: far below both its layout's other runs and the other layouts on its unit); "
                "they are in no mean, interval or test above:",
            ],
        ),
        Bullets(items),
    ]


def _contrast_row(c: Contrast, metric: QualityMetric, axis: CostAxis) -> dict[str, Any]:
    col = quality_column(metric)
    if c.other is None:
        return {
            "alternative": c.name,
            "heads per layer": "",
            col: "",
            "vs recommended": c.note,
            "latency (ms)": "",
            "latency vs recommended": "",
        }
    if c.note:
        vs = c.note
    elif c.quality is not None:
        vs = f"{score_diff_text(metric, c.quality)}, p = {c.quality.p_value:.2g}"
    else:
        vs = "single runs: no test"
    lat = "within the tie" if c.latency_tie else f"{c.latency_ratio:.2f}x"
    modern = c.other.config.kv_heads is not None or c.other.decode is not None
    return {
        "alternative": c.name,
        "heads per layer": _layout(c.other, modern),
        col: quality_text(c.other),
        "vs recommended": vs,
        "latency (ms)": latency_text(c.other, axis),
        "latency vs recommended": lat if c.note == "" else "",
    }


def _per_base(ans: Answer) -> list[Block]:
    if len(ans.per_base) <= 1:
        return []
    metric = ans.per_base[0][2].metric
    rows = [
        {
            "d_model": d,
            "layers": n,
            "heads per layer": heads(a.heads),
            "d_k": heads(a.config.d_k),
            quality_column(metric): quality_text(a),
            "latency (ms)": latency_text(a, ans.cost_axis),
            "trial": a.numbers[0],
        }
        for d, n, a in ans.per_base
    ]
    return [
        Para(
            [
                "The search's knee for each width and depth it tried (one run each; not the answer's "
                "evidence):"
            ],
        ),
        Table(pd.DataFrame(rows)),
    ]


_TRADE_OFF = "The trade-off: each finalist's paired difference from the most accurate layout, by latency."


def answer_blocks(ans: Answer, spec: StudySpec) -> list[Block]:
    """The answer section: first the lead (what to use, how sure, what it gains, what deciding costs), the
    trade-off figure and every finalist's verdict; then the answer's figures, the next faster layout, the
    confidence, collapsed runs, the alternatives and notes."""
    b: list[Block] = [Heading(2, "The answer")]
    figure = [Figure("evidence", _TRADE_OFF)] if ans.evidence is Evidence.FINALISTS else []
    if ans.recommended is None:
        why = ans.no_answer or "; ".join(ans.notes)
        b.append(Para([Bold("No answer: "), why + "."]))
        return b + [Para([Bold("Note: "), n + "."]) for n in ans.notes if n != why] + figure
    modern = is_modern(ans, spec)
    b.append(_lead(ans, spec))
    b.extend(figure)
    if ans.evidence is Evidence.FINALISTS:
        b.append(Table(pd.DataFrame([_verdict_row(c, ans, modern) for c in ans.verdicts])))
        b.extend(_groups(ans, spec))
    b.extend(_figures_para(ans, spec))
    if ans.evidence is Evidence.FINALISTS:
        b.extend(_next_faster(ans, spec))
    b.extend(_confidence(ans))
    b.extend(_collapsed(ans, modern))
    b.extend(saving_blocks(ans, spec))
    if ans.contrasts:
        metric = ans.recommended.metric
        b.append(
            Para(
                [
                    "What the named alternatives at this width and depth cost or gain against the answer "
                    "(other minus answer, paired on the runs both trained, 95% interval and p of one paired t statistic; "
                    "latency as the ratio within the re-timing rounds):"
                ],
            )
        )
        b.append(Table(pd.DataFrame([_contrast_row(x, metric, ans.cost_axis) for x in ans.contrasts])))
    for note in ans.notes:
        b.append(Para([Bold("Note: "), note + "."]))
    return b + _per_base(ans)


def _pct(x: float, bpb: bool) -> str:
    return f"{x:+.3f}" if bpb else f"{x * 100:+.2f}"


def _horizon_text(ans: Answer, bpb: bool) -> str:
    """How long the grid's runs trained, how the pilot chose it, and whether each run had flattened."""
    h = ans.horizon
    if h is None:
        return ""
    unit = "bits per byte" if bpb else "points"
    out = f" Every grid run trained the same {epochs_text(h.epochs)} (linear warm-up, then cosine decay to zero)"
    if not h.piloted:
        out += ", the spec's horizon (no pilot ran)."
    else:
        steps = []
        for d in h.doublings:  # a gain in bits per byte is bits saved
            if d.by is HorizonBy.COMPARISON:
                steps.append(
                    f"{d.long} epochs instead of {d.short} changed the paired difference between the pilot's "
                    f"layouts by {_pct(d.mean, bpb)} {unit} on average over {len(d.gains)} units (90% interval "
                    f"{_pct(d.lower, bpb)} to {_pct(d.upper, bpb)}): "
                    + (
                        "a change beyond the noise, so the horizon doubled"
                        if d.gained
                        else "no change beyond the noise"
                    )
                )
                continue
            steps.append(
                f"{d.long} epochs instead of {d.short} gained {_pct(d.mean, bpb)} {unit} on average over "
                f"{len(d.gains)} layout-unit pairs (one-sided 95% lower bound {_pct(d.lower, bpb)}): "
                + (
                    "a gain, so the horizon doubled"
                    if d.gained
                    else f"neither a gain beyond the noise nor one above {_pct(d.edge, bpb).lstrip('+')} {unit} "
                    "on average (the answer's edge)"
                )
            )
        by_comparison = any(d.by is HorizonBy.COMPARISON for d in h.doublings)
        out += (
            ", the horizon a pilot chose: the most accurate and the fastest finalist layouts trained the first "
            "units at the horizon and at twice it, and the horizon doubled while twice as long "
            + (
                "changed the comparison between them beyond the noise (the grid measures comparisons; a doubling "
                "that lifts every layout alike changes none)"
                if by_comparison
                else "gained (beyond the noise, or by more than the answer's edge on average)"
            )
            + ("; " if steps else "")
            + "; ".join(steps)
            + "."
        )
        if h.capped:
            last = h.doublings[-1]
            out += (
                f" The pilot stopped at its cap of {h.cap} epochs: its last doubling ({last.short} to {last.long}) "
                f"still gained, and {2 * h.cap} epochs were not tried."
            )
    if ans.unplateaued:
        names = ", ".join(
            f"{heads(a.heads)} ({n} of {m} runs)"
            for k, n, m in ans.unplateaued
            if (a := _arch(ans, k)) is not None
        )
        out += (
            f" Runs of {names} were still improving over the last quarter of their schedule (the best of the last "
            "quarter above the best before it by more than one binomial standard error): those layouts had not "
            "finished learning."
        )
    else:
        out += (
            " Every run had flattened: the best validation score of the last quarter of its schedule was within "
            "one binomial standard error of the best before it."
        )
    return out


def _arch(ans: Answer, key: str) -> Architecture | None:
    return next((a for a in ans.candidates if a.key == key), None)


def check_blocks(ans: Answer) -> list[Block]:
    """The horizon check: the deciding comparisons at the grid's horizon and at twice it."""
    c = ans.check
    if c is None or ans.evidence is not Evidence.FINALISTS:
        return []
    bpb = ans.recommended is not None and is_bpb(ans.recommended.metric)
    unit = "bits per byte" if bpb else "points"
    if not c.shifts:
        if not c.pending:
            what = "the answer is the best and no finalist is faster"
        elif not ans.decided:  # the stage checks a verdict once the grid reaches one
            what = f"the answer is still open, and its runs at {c.long} epochs come once the grid decides it"
        else:
            what = f"its runs at {c.long} epochs have not all finished"

        return [Para([Bold("Horizon check: "), f"nothing to compare: {what}."])]
    rows = []
    for s in c.shifts:
        who = _arch(ans, s.layout)
        rows.append(
            {
                "layout": (kv_text(who) if who.config.kv_heads is not None else heads(who.heads))
                if who
                else s.layout,
                "its verdict": _verdict_of(ans, s.layout),
                "paired units": s.units,
                f"below the best at {c.epochs} epochs [90%]": _interval(s.short, bpb),
                f"below the best at {c.long} epochs [90%]": _interval(s.long, bpb),
                "holds": "yes" if s.holds else "no",
            }
        )
    verdict = (
        "the longer runs do not contradict the verdict at the study's risk"
        if c.holds
        else "the longer runs contradict the verdict, so the answer is not decided"
    )
    crossed = [s for s in c.shifts if s.holds and s.crossed]
    if crossed:
        verdict += (
            "; at the longer horizon the mean of "
            + ", ".join(heads(a.heads) for s in crossed if (a := _arch(ans, s.layout)) is not None)
            + " lies on the other side of the margin, which these few units cannot show"
        )
    text = (
        f"The comparisons that decide the answer trained again at {c.long} epochs, twice the grid's {c.epochs}, "
        f"on the first paired units; how far each layout lies below the best ({unit}, best minus layout, paired "
        f"by unit, 90% t interval: each bound a one-sided test at the study's risk): {verdict}."
    )
    return [Para([Bold("Horizon check: "), text]), Table(pd.DataFrame(rows))]


def _verdict_of(ans: Answer, key: str) -> str:
    """A layout's verdict at the grid's horizon, as the answer's table writes it."""
    c = next((c for c in ans.verdicts if c.arch.key == key), None)
    return "" if c is None else _VERDICT_WORDS[c.verdict]


def _interval(row: tuple[float, float, float], bpb: bool) -> str:
    mean, lo, hi = row
    if bpb:
        return f"{mean:.3f} [{lo:.3f}, {hi:.3f}]"
    return f"{mean * 100:.2f} [{lo * 100:.2f}, {hi * 100:.2f}]"


def _timing_method(retimings: Sequence[Retiming]) -> str:
    rounds = {t.round for t in retimings}
    if not retimings:
        return "Latencies are the timings each run made before training."
    fresh = all(t.pid is not None for t in retimings) and len({t.pid for t in retimings}) == len(rounds)
    extra = (
        " (its forward pass and one decoding step alike)"
        if any(t.kind is TimingKind.DECODE for t in retimings)
        else ""
    )
    loads = [value for t in retimings if (value := t.latency.load) is not None]
    load = f" (1-minute load average {min(loads):.2f} to {max(loads):.2f} while timing)" if loads else ""
    return (
        f"Latencies come from {len(rounds)} interleaved rounds of re-timing every finalist{extra}, "
        f"{'each round in a fresh process, ' if fresh else ''}with none of the study's training running"
        f"{load}; layouts are compared by their time ratio within a round, so a drift of the machine between "
        "rounds cancels."
    )


def evidence_blocks(
    ans: Answer, spec: StudySpec, records: Sequence[TrialRecord], retimings: Sequence[Retiming] = ()
) -> list[Block]:
    """How the finalists were trained and timed, and their table."""
    if ans.evidence is not Evidence.FINALISTS:
        return []
    f = spec.finalists
    finals = list(ans.candidates)  # the runs the answer rests on (collapsed ones are reported apart)
    split = (
        f"{f.folds} stratified folds of the task's labelled examples (training and validation splits "
        "pooled; the test split kept apart), cut afresh for each replicate"
        if f.folds > 1
        else "the task's fixed split, once per seed"
    )
    spent = sum(a.n for a in finals)
    limit = f"{ans.budget} runs" + (f" or {num(ans.minutes, 'g')} minutes" if ans.minutes is not None else "")
    outcome = "the answer was decided" if ans.decided else "the answer is not decided"
    pace = "" if ans.pace_s is None else f", about {ans.pace_s:.1f} s of the stage's wall clock a run"
    method = (
        f"Every finalist layout was trained first on the same {f.start} units, then rounds of paired units, "
        "each sized to what the nearest open comparison needed, went only to the layouts whose comparisons "
        f"still decided the answer, until it was decided or the stage's budget ({limit}) was spent: {spent} "
        f"runs{pace}, and {outcome} (units: {split}). On a unit every layout "
        f"saw the same training examples in the same order from the same seed, so two layouts are compared "
        "unit by unit."
        + _horizon_text(ans, bool(finals) and is_bpb(finals[0].metric))
        + " "
        + _timing_method(retimings)
    )
    rows = []
    for a in finals:
        row = {
            "part": _LABELS.get(a.label or "", a.label or ""),
            "heads per layer": heads(a.heads),
            "d_k per layer": heads(a.config.d_k),
            "runs": a.n,
            quality_column(a.metric) + ", mean [95%]": quality_text(a),
            "test": num(a.test_quality, ".3f") if is_bpb(a.metric) else pct(a.test_quality),
            "latency (ms) [95% for a new timing]": latency_text(a),
        }
        if a.decode is not None:
            row["decoding (ms/token)"] = latency_text(a, CostAxis.DECODE)
            row["kv cache (MiB)"] = mib(a.kv_cache_bytes)
        rows.append(row | {"params": f"{a.params:,}"})
    return [
        Heading(3, f"Evidence: {len(finals)} layouts, {spent} paired runs"),
        Para([method]),
        Table(pd.DataFrame(rows)),
    ]
