"""The head-count answer: the fastest layout placed within the margin of the best at the stated risk, every
other candidate's verdict and probability, collapsed runs set apart, no answer when nothing was learned."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from explorer.answer import answer, resolve_trial
from explorer.answer._pick import pick, select_run
from explorer.errors import ConfigError, NoAnswerError
from explorer.layout import unit_seed
from explorer.spec import spec_from_dict
from tests.fixtures import record

SPEC_DATA = {
    "name": "r",
    "n_trials": 6,
    "task": {"name": "digits"},
    "latency": {"device": "cpu"},
    "space": {"d_model": [64], "n_layers": [2], "heads": [1, 2, 4, 8], "min_dk": 1},
}
SPEC = spec_from_dict(SPEC_DATA)


def search_records():
    # (heads, accuracy, latency): one run each at the search budget
    rows = [
        ((1, 1), 0.60, 1.0),
        ((2, 2), 0.78, 1.2),
        ((4, 4), 0.84, 1.4),
        ((8, 8), 0.85, 2.4),
        ((2, 4), 0.80, 1.3),
    ]
    return [record(i, h, a, lat) for i, (h, a, lat) in enumerate(rows)]


def finalist_records(
    start: int, rows, seeds: int = 3, noise: float = 0.005, unit_sd: float = 0.0, seed: int = 0
):
    """Finalist runs of ``rows`` (heads, accuracy, latency, label) on ``seeds`` shared units: a unit's difficulty
    (sd ``unit_sd``) moves every layout alike, as a fold does; ``noise`` is each run's own."""
    rng = np.random.default_rng(seed)
    unit = rng.normal(0, unit_sd, seeds)
    out, n = [], start
    for heads, acc, lat, label in rows:
        for s in range(seeds):
            out.append(
                record(
                    n,
                    heads,
                    float(np.clip(acc + unit[s] + rng.normal(0, noise), 0, 1)),
                    lat * (1 + rng.normal(0, 0.01)),
                    role="finalist",
                    seed=unit_seed(0, s),
                    epochs=20,
                    label=label,
                    chance=0.1,
                )
            )
            n += 1
    return out


def test_without_finalists_the_answer_is_the_search_knee_and_says_it_rests_on_single_runs():
    ans = answer(search_records(), SPEC)
    assert ans.evidence == "search" and ans.recommended.heads == (4, 4)
    assert ans.confidence is None and "one run per architecture" in ans.confidence_method
    assert any("explorer confirm r" in note for note in ans.notes)
    assert ans.verdicts == () and ans.members == ()  # no class without paired runs


def test_the_answer_is_the_fastest_layout_placed_within_the_margin():
    """8,8 is the best; 4,4 is 0.2 points below it on every unit (within 1 point); 2,2 is 5 points below
    (beyond the margin); 2,4 sits 1 point below with a wide spread (undecided)."""
    finals = finalist_records(
        10,
        [
            ((8, 8), 0.950, 2.4, "8 heads"),
            ((4, 4), 0.948, 1.4, "knee"),
            ((2, 2), 0.90, 1.2, "next faster"),
            ((1, 1), 0.70, 1.0, "1 head"),
        ],
        seeds=10,
        noise=0.002,
        unit_sd=0.02,
    )
    wide = finalist_records(100, [((2, 4), 0.94, 1.3, "front")], seeds=10, noise=0.02, seed=1)
    ans = answer(search_records() + finals + wide, SPEC)
    verdict = {c.arch.heads: c.verdict for c in ans.verdicts}
    assert verdict == {
        (8, 8): "best",
        (4, 4): "within",
        (2, 2): "beyond",
        (1, 1): "beyond",
        (2, 4): "undecided",
    }
    assert ans.best.heads == (8, 8) and ans.recommended.heads == (4, 4)  # the faster of {8,8; 4,4}
    assert {a.heads for a in ans.members} >= {(4, 4)} and ans.decided is False  # 2,4 is faster and still open
    undecided = next(c for c in ans.verdicts if c.verdict == "undecided")
    assert undecided.units_needed is None or undecided.units_needed > 10  # more paired runs than it has
    four = next(c for c in ans.verdicts if c.arch.heads == (4, 4))
    assert four.p_within >= 1 - ans.risk and ans.confidence == four.p_within  # what placed it within
    two = next(c for c in ans.verdicts if c.arch.heads == (2, 2))
    best = next(c for c in ans.verdicts if c.verdict == "best")
    assert two.p_beyond >= 1 - ans.risk > two.p_within and math.isnan(best.p_beyond)
    assert two.versus_best.high < -ans.margin  # its interval at 1 - 2 risk lies wholly beyond the margin
    doc = ans.to_dict()["verdicts"]
    assert [d["p_within_margin"] for d in doc] == [c.p_within for c in ans.verdicts]
    from explorer.output._answer_sections import answer_blocks

    text = str(
        answer_blocks(ans, SPEC)
    )  # the trade-off leads: the answer against the best, the next faster one
    eight = next(c for c in ans.verdicts if c.arch.heads == (8, 8))
    assert f"the answer is {eight.latency_ratio:.2f}x faster than the most accurate layout, 8,8" in text
    assert "The next faster layout, 2,4" in text and "(undecided)" in text
    assert "Also within the margin (slower)" not in text  # the answer (4,4) is not one of the others


def test_pairing_by_unit_shows_what_unpaired_spreads_would_hide():
    """A unit effect of 3 points moves every layout alike: paired, 0.3 points is told from the 1-point margin;
    the same values unpaired would leave it undecided."""
    finals = finalist_records(
        10, [((8, 8), 0.95, 2.4, "8 heads"), ((4, 4), 0.947, 1.4, "knee")], seeds=8, noise=0.001, unit_sd=0.03
    )
    ans = answer(finals, SPEC)
    four = next(c for c in ans.verdicts if c.arch.heads == (4, 4))
    assert four.verdict == "within" and four.versus_best.sd < 0.005
    shuffled = [dataclasses.replace(r, seed=r.seed + 1000 * (r.heads == (4, 4))) for r in finals]
    unpaired = answer(shuffled, SPEC)  # no unit in common: nothing can be paired
    assert next(c for c in unpaired.verdicts if c.arch.heads == (4, 4)).verdict != "within"


def test_non_significance_is_not_within_the_margin():
    """Two noisy seeds 0.1 points apart are not significantly different, and still not called equivalent."""
    finals = finalist_records(
        10, [((8, 8), 0.95, 2.4, "8 heads"), ((4, 4), 0.949, 1.4, "knee")], seeds=2, noise=0.03
    )
    ans = answer(finals, SPEC)
    other = next(c for c in ans.verdicts if c.verdict != "best")
    assert not other.versus_best.significant() and other.verdict == "undecided"
    assert other.arch not in ans.members and ans.recommended == ans.best and not ans.decided


def test_a_collapsed_run_is_reported_apart_and_pooled_nowhere():
    finals = finalist_records(
        10,
        [((8, 8), 0.95, 2.4, "8 heads"), ((4, 4), 0.949, 1.4, "knee"), ((2, 2), 0.93, 1.2, "2 heads")],
        seeds=8,
        noise=0.003,
    )
    broken = dataclasses.replace(finals[9], val_accuracy=0.60, history=(0.5, 0.6))  # 4,4 on unit 1: collapsed
    finals[9] = broken
    ans = answer(finals, SPEC)
    assert [c.number for c in ans.collapsed] == [broken.number]
    four = next(a for a in ans.candidates if a.heads == (4, 4))
    assert four.n == 7 and broken.number not in four.numbers and four.quality.low > 0.9
    assert {a.heads for a in ans.members} >= {(8, 8), (4, 4)}
    from explorer.output._answer_sections import answer_blocks

    assert "collapsed and are reported apart" in str(answer_blocks(ans, SPEC))


def test_no_layout_beating_chance_is_no_answer_and_export_refuses_it():
    finals = [
        dataclasses.replace(r, chance=0.5)
        for r in finalist_records(
            10, [((8, 8), 0.50, 2.4, "8 heads"), ((4, 4), 0.49, 1.4, "knee")], seeds=5, noise=0.01
        )
    ]
    ans = answer(finals, SPEC)
    assert ans.recommended is None and "nothing was learned" in ans.no_answer and "epochs" in ans.no_answer
    with pytest.raises(NoAnswerError, match="no answer to export"):
        resolve_trial(finals, SPEC, "answer")
    from explorer.output._answer_sections import answer_blocks

    assert "No answer" in str(answer_blocks(ans, SPEC))


def test_finalists_lead_the_answer_and_their_contrasts_are_paired_by_unit():
    finals = finalist_records(
        10,
        [
            ((4, 4), 0.95, 1.4, "knee"),
            ((1, 1), 0.70, 1.0, "1 head"),
            ((8, 8), 0.97, 2.4, "8 heads"),
            ((2, 2), 0.85, 1.2, "next faster"),
        ],
        seeds=6,
    )
    ans = answer(search_records() + finals, SPEC)
    assert ans.evidence == "finalists" and ans.recommended.heads == (8, 8)  # 4,4 is 2 points below: worse
    rec = ans.recommended
    assert rec.n == 6 and rec.quality.estimate == pytest.approx(
        np.mean([r.val_accuracy for r in finals if r.heads == (8, 8)])
    )
    by_name = {c.name.split(" (")[0]: c for c in ans.contrasts}
    one = by_name["1 head per layer"]
    assert one.other.heads == (1, 1) and one.quality.significant() and one.quality.diff < -0.2
    assert one.quality.low < one.quality.diff < one.quality.high < 0  # the whole interval is a loss
    assert one.latency_ratio == pytest.approx(1.0 / 2.4, rel=0.05) and not one.latency_tie
    assert 0.0 <= ans.confidence <= 1.0 and "re-run" in ans.confidence_method


def test_a_layout_that_is_two_alternatives_is_one_row_with_both_names():
    finals = finalist_records(10, [((4, 4), 0.95, 1.4, "knee"), ((1, 1), 0.70, 1.0, "1 head")])
    ans = answer(search_records() + finals, SPEC)
    assert [c.other.heads for c in ans.contrasts if c.other] == [(1, 1)]
    assert ans.contrasts[0].name == "1 head per layer; also the next faster layout"


def test_confidence_is_low_when_the_runs_cannot_separate_the_candidates():
    close = finalist_records(
        10,
        [((4, 4), 0.90, 1.4, "knee"), ((2, 4), 0.90, 1.38, "front"), ((2, 2), 0.90, 1.36, "front")],
        noise=0.03,
    )
    clear = finalist_records(
        10,
        [((4, 4), 0.95, 1.4, "knee"), ((1, 1), 0.50, 1.0, "1 head"), ((8, 8), 0.96, 4.0, "8 heads")],
        noise=0.003,
        seeds=8,
    )
    assert answer(close, SPEC).confidence < answer(clear, SPEC).confidence


def test_contrasts_are_keyed_by_configuration_not_by_label():
    """Two finalists labelled 'knee' (the knee moved after a resume) are two configurations, never pooled."""
    finals = finalist_records(10, [((4, 4), 0.95, 1.4, "knee"), ((2, 4), 0.93, 1.3, "knee")])
    ans = answer(search_records() + finals, SPEC)
    assert sorted(a.heads for a in ans.candidates) == [(2, 4), (4, 4)] and all(
        a.n == 3 for a in ans.candidates
    )


def test_budgets_restrict_the_candidates():
    spec = spec_from_dict(SPEC.to_dict() | {"budgets": {"max_latency_ms": 1.25}})
    ans = answer(search_records(), spec)
    assert ans.recommended.latency.estimate <= 1.25
    none = answer(search_records(), spec_from_dict(SPEC.to_dict() | {"budgets": {"max_latency_ms": 0.1}}))
    assert none.recommended is None and none.evidence == "none"


def test_picks_and_the_run_that_stands_for_an_architecture():
    finals = finalist_records(
        10, [((4, 4), 0.95, 1.4, "knee"), ((8, 8), 0.96, 2.4, "front"), ((1, 1), 0.70, 1.0, "1 head")]
    )
    records = search_records() + finals
    ans = answer(records, SPEC)
    assert pick(ans, "most-accurate").heads == (8, 8) and pick(ans, "fastest").heads == (1, 1)
    run = select_run(records, ans.recommended)
    accs = sorted(r.val_accuracy for r in finals if r.heads == ans.recommended.heads)
    assert run.val_accuracy == accs[1]  # the median run, not the luckiest
    assert resolve_trial(records, SPEC, "answer").number == run.number
    assert resolve_trial(records, SPEC, "knee").number == run.number  # the old name, the same layout
    assert resolve_trial(records, SPEC, "2").heads == (4, 4)
    with pytest.raises(ConfigError, match="not answer"):
        resolve_trial(records, SPEC, "\u00b2")  # a superscript two: str.isdigit says yes, int() says no


def test_a_relations_answer_with_fewer_than_k_heads_says_why_from_the_same_runs():
    """k = 4 planted relations: one 1,1 run learned them (the fastest, so the knee), another did not; the report's
    relations section says why the answer has fewer than k heads, counting the runs that came near it."""
    from explorer.output._sections import relations_blocks

    rows = [
        ((1, 1), 0.997, 1.0, 32),
        ((1, 1), 0.75, 1.3, 64),
        ((2, 2), 0.80, 1.4, 64),
        ((2, 2), 0.99, 1.1, 32),
        ((4, 4), 1.0, 1.5, 32),
        ((4, 4), 0.997, 1.8, 64),
        ((8, 8), 1.0, 2.0, 32),
        ((8, 8), 1.0, 2.5, 64),
    ]
    records = [record(i, h, a, lat, d_model=d) for i, (h, a, lat, d) in enumerate(rows)]
    spec = spec_from_dict(SPEC.to_dict() | {"task": {"name": "relations", "options": {"n_relations": 4}}})
    rec = answer(records, spec).recommended
    assert rec.heads == (1, 1) and rec.config.d_model == 32
    text = str(relations_blocks(records, 4, rec))
    assert (
        "Why the answer has fewer than 4 heads in a layer: 1,1 at d_model 32 reached 99.70% (1 run)" in text
    )
    assert "within 1 point of the best layout with at least 4 heads (100.00%)" in text
    assert (
        "2 of 4 runs with fewer than 4 heads came within 1 point of it, against 4 of 4 with at least 4"
        in text
    )
    assert "explorer confirm" in text
    k_heads = answer([r for r in records if min(r.config.heads) >= 4], spec).recommended
    assert "Why the answer" not in str(relations_blocks(records, 4, k_heads))


def test_an_unbalanced_grid_is_read_without_a_warning_reaching_the_terminal():
    """With runs spent where they decide, most layouts skip most units (and one may have no run yet): the answer,
    its report blocks and the unit-by-unit rules read such a grid silently."""
    import warnings

    from explorer.answer import unit_comparison
    from explorer.output._answer_sections import answer_blocks

    full = finalist_records(
        10, [((8, 8), 0.95, 2.4, "8 heads"), ((4, 4), 0.947, 1.4, "knee")], seeds=9, noise=0.004
    )
    few = finalist_records(
        100, [((1, 1), 0.80, 1.0, "1 head"), ((2, 2), 0.85, 1.2, "2 heads")], seeds=3, noise=0.01
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ans = answer(full + few, SPEC)
        answer_blocks(ans, SPEC)
        compared = unit_comparison(
            ans.grid, ans.candidates, lambda c: c.heads[0] >= 4, lambda c: c.heads[0] < 4
        )
    assert (
        ans.grid.scores.shape[1] == 9 and np.isnan(ans.grid.scores).sum() == 12
    )  # 1,1 and 2,2: 3 of 9 units
    assert compared is not None and compared.diff.n == 3  # the units both sides ran


def test_the_answer_is_one_answer_with_a_candidate_for_each_layout():
    from explorer.answer import Answer, Candidate

    finals = finalist_records(10, [((8, 8), 0.95, 2.4, "8 heads"), ((4, 4), 0.948, 1.4, "knee")], seeds=6)
    ans = answer(finals, SPEC)
    assert isinstance(ans, Answer) and ans.evidence == "finalists"
    assert all(isinstance(c, Candidate) for c in ans.verdicts)
    assert {c.arch.heads for c in ans.verdicts} == {(8, 8), (4, 4)}
    assert ans.to_dict()["verdicts"][0]["verdict"] == ans.verdicts[0].verdict


def test_the_evidence_and_verdicts_are_enums_written_as_their_words():
    from explorer.answer import Evidence, Verdict

    finals = finalist_records(10, [((8, 8), 0.95, 2.4, "8 heads"), ((4, 4), 0.948, 1.4, "knee")], seeds=6)
    ans = answer(finals, SPEC)
    assert ans.evidence is Evidence.FINALISTS and Verdict.BEST in [c.verdict for c in ans.verdicts]
    doc = ans.to_dict()
    assert type(doc["evidence"]) is str and doc["evidence"] == "finalists"
    words = [v["verdict"] for v in doc["verdicts"]]
    assert [type(w) for w in words] == [str, str] and words == [c.verdict.value for c in ans.verdicts]
    assert "best" in words
    assert f"{Verdict.UNTESTED}" == str(Verdict.UNTESTED) == "untested" and str(Evidence.NONE) == "none"


def test_probabilities_are_written_without_claiming_more_than_was_computed():
    from explorer.answer import prob_text

    assert [prob_text(p) for p in (0.0, 0.004, 0.42, 0.9499, 0.95, 0.995, 1.0)] == [
        "below 1%",
        "below 1%",
        "42%",
        "94%",  # below the rule's 95%: never written as 95% (a report once said "95% ... (this one: 95%)")
        "95%",
        "above 99%",
        "above 99%",
    ]


def test_the_pace_of_the_stage_counts_the_time_some_run_was_training():
    import datetime as dt

    from explorer.answer import finalist_pace, minutes_text

    t0 = dt.datetime(2026, 12, 4, 12, 0, 0)

    def run(n, start, end):
        return record(
            n,
            (2, 2),
            0.9,
            1.0,
            role="finalist",
            started=t0 + dt.timedelta(seconds=start),
            completed=t0 + dt.timedelta(seconds=end),
        )

    # two workers: 0-10 and 5-15 overlap (15 s busy); a day later, 10 s more: 25 s for 3 runs
    runs = [run(1, 0, 10), run(2, 5, 15), run(3, 86_400, 86_410)]
    assert finalist_pace(runs) == 25 / 3
    assert finalist_pace(runs[:1]) is None  # one run says nothing of a pace
    assert minutes_text(30, 25 / 3) == "about 4 minutes" and minutes_text(6, 10.0) == "about 60 s"
    assert minutes_text(6, None) == ""


def test_once_the_stages_budget_is_spent_the_decision_settles_at_the_wider_edge():
    """4,4 is faster and 0.9 points below 8,8, measured tightly: not within the 1-point margin, not shown beyond
    the quarter-margin edge (0.75), but shown beyond half the margin: at the edge once the budget is spent."""
    import datetime as dt

    spec = spec_from_dict({**SPEC_DATA, "finalists": {"minutes": 1, "budget": 1000}})
    finals = finalist_records(
        10, [((8, 8), 0.950, 2.4, "8 heads"), ((4, 4), 0.941, 1.4, "knee")], seeds=12, noise=0.003, seed=1
    )
    t0 = dt.datetime(2026, 12, 5, 3, 0, 0)

    def timed(span_s: float):
        step = span_s / len(finals)
        return [
            dataclasses.replace(
                r,
                started=t0 + dt.timedelta(seconds=i * step),
                completed=t0 + dt.timedelta(seconds=(i + 1) * step),
            )
            for i, r in enumerate(finals)
        ]

    running = answer(search_records() + timed(30), spec)  # half the stage's minute: the edge is a quarter
    spent = answer(search_records() + timed(90), spec)  # past its minute: the edge is half the margin
    four = next(c for c in running.verdicts if c.arch.heads == (4, 4))
    assert not running.settled and four.verdict == "undecided" and not running.decided
    assert running.edge == pytest.approx(0.0025)
    late = next(c for c in spent.verdicts if c.arch.heads == (4, 4))
    assert spent.settled and spent.edge == pytest.approx(0.005)
    assert late.verdict == "edge" and spent.decided and spent.recommended.heads == (8, 8)
    assert late.p_edge >= 1 - spent.risk > late.p_within  # shown below half the margin, never within it
    assert spent.confidence == running.confidence  # the answer's own claim does not move
    assert spent.to_dict()["settled"] is True
    from explorer.output._answer_sections import answer_blocks

    assert "[answer] settle" in str(answer_blocks(spent, spec))
    assert "[answer] settle" not in str(answer_blocks(running, spec))


def test_a_note_names_two_layouts_that_differ_only_in_key_value_heads_apart():
    from types import SimpleNamespace

    from explorer.answer._recommend import _heads
    from explorer.layout import ModelConfig

    grouped = SimpleNamespace(config=ModelConfig(d_model=64, heads=(4, 4), kv_heads=(2, 2), head_dim=(8, 8)))
    multi = SimpleNamespace(config=ModelConfig(d_model=64, heads=(4, 4), head_dim=(8, 8)))
    assert (_heads(grouped), _heads(multi)) == ("4/2,4/2", "4,4")
