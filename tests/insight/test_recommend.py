"""The head-count answer: the best evidence leads, alternatives are compared over seeds, confidence is measured."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.insight.recommend import answer, pick, resolve_trial, select_run
from explorer.search.spec import spec_from_dict
from tests.fixtures import record

SPEC = spec_from_dict(
    {"name": "r", "n_trials": 6, "task": {"name": "digits"}, "latency": {"device": "cpu"},
     "space": {"d_model": [64], "n_layers": [2], "heads": [1, 2, 4, 8], "min_dk": 1}}
)  # fmt: skip


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


def finalist_records(start: int, rows, seeds: int = 3, noise: float = 0.005):
    rng = np.random.default_rng(0)
    out, n = [], start
    for heads, acc, lat, label in rows:
        for s in range(seeds):
            out.append(record(n, heads, acc + rng.normal(0, noise), lat * (1 + rng.normal(0, 0.01)),
                              role="finalist", seed=1_000_000 + s, epochs=20, label=label))  # fmt: skip
            n += 1
    return out


def test_without_finalists_the_answer_is_the_search_knee_and_says_it_rests_on_single_runs():
    ans = answer(search_records(), SPEC)
    assert ans.evidence == "search" and ans.recommended.heads == (4, 4)
    assert ans.confidence is None and "one run per architecture" in ans.confidence_method
    assert any("explorer confirm r" in note for note in ans.notes)


def test_finalists_lead_the_answer_and_their_contrasts_are_tested_over_seeds():
    finals = finalist_records(
        10,
        [((4, 4), 0.95, 1.4, "knee"), ((1, 1), 0.70, 1.0, "1 head"), ((8, 8), 0.97, 2.4, "8 heads"),
         ((2, 2), 0.85, 1.2, "next faster")],
    )  # fmt: skip
    ans = answer(search_records() + finals, SPEC)
    assert ans.evidence == "finalists" and ans.recommended.heads == (4, 4)
    rec = ans.recommended
    assert rec.n == 3 and rec.numbers == (10, 11, 12)  # the headline is the finalists' mean, not a search run
    assert rec.accuracy.estimate == pytest.approx(np.mean([r.val_accuracy for r in finals[:3]]))
    by_name = {c.name.split(" (")[0]: c for c in ans.contrasts}
    one = by_name["1 head per layer"]
    assert one.other.heads == (1, 1) and one.accuracy.significant() and one.accuracy.diff < -0.2
    assert one.accuracy.low < one.accuracy.diff < one.accuracy.high < 0  # the whole interval is a loss
    eight = by_name["8 heads per layer"]
    assert eight.other.heads == (8, 8) and eight.accuracy.mde > 0
    assert eight.latency_ratio == pytest.approx(2.4 / 1.4, rel=0.05) and not eight.latency_tie
    assert by_name["next faster layout"].other.heads == (2, 2)
    assert 0.0 <= ans.confidence <= 1.0 and "bootstrap" in ans.confidence_method


def test_a_layout_that_is_two_alternatives_is_one_row_with_both_names():
    finals = finalist_records(10, [((4, 4), 0.95, 1.4, "knee"), ((1, 1), 0.70, 1.0, "1 head")])
    ans = answer(search_records() + finals, SPEC)
    assert [c.other.heads for c in ans.contrasts if c.other] == [(1, 1)]
    assert ans.contrasts[0].name == "1 head per layer; also the next faster layout"


def test_confidence_is_low_when_the_seeds_cannot_separate_the_candidates():
    close = finalist_records(
        10,
        [((4, 4), 0.90, 1.4, "knee"), ((2, 4), 0.90, 1.38, "front"), ((2, 2), 0.90, 1.36, "front")],
        noise=0.03,
    )
    clear = finalist_records(
        10,
        [((4, 4), 0.95, 1.4, "knee"), ((1, 1), 0.50, 1.0, "1 head"), ((8, 8), 0.96, 4.0, "8 heads")],
        noise=0.003,
    )
    assert answer(close, SPEC).confidence < answer(clear, SPEC).confidence


def test_layouts_the_data_cannot_tell_from_the_answer_are_named():
    """Same accuracy within the seeds' noise and a latency inside the timing noise: named as alike. A clear
    accuracy loss, or a clearly different latency, is not."""
    finals = finalist_records(
        10,
        [((4, 4), 0.90, 1.40, "knee"), ((2, 4), 0.90, 1.41, "front"), ((1, 1), 0.60, 1.39, "1 head"),
         ((8, 8), 0.90, 3.00, "8 heads")],
        noise=0.01,
    )  # fmt: skip
    ans = answer(finals, SPEC)
    rec = ans.recommended
    assert {a.heads for a in ans.alike} | {rec.heads} == {(4, 4), (2, 4)} and rec.heads not in {
        a.heads for a in ans.alike
    }
    from explorer.output.sections import answer_blocks

    text = str(answer_blocks(ans, SPEC))
    assert "As good as far as this data can tell" in text and f"{ans.alike[0].heads[0]},4 per layer" in text
    clear = answer(finalist_records(10, [((4, 4), 0.95, 1.4, "knee"), ((1, 1), 0.60, 1.0, "1 head")]), SPEC)
    assert clear.alike == () and "As good as far" not in str(answer_blocks(clear, SPEC))


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
    assert ans.recommended.heads == (4, 4)
    assert pick(ans, "most-accurate").heads == (8, 8) and pick(ans, "fastest").heads == (1, 1)
    run = select_run(records, ans.recommended)
    accs = sorted(r.val_accuracy for r in finals[:3])
    assert run.val_accuracy == accs[1]  # the median seed, not the luckiest
    assert resolve_trial(records, SPEC, "knee").number == run.number
    assert resolve_trial(records, SPEC, "2").heads == (4, 4)


def test_a_relations_answer_with_fewer_than_k_heads_says_why_from_the_same_runs():
    """k = 4 planted relations: one 1,1 run learned them (the fastest, so the knee), another did not; the report's
    relations section says why the answer has fewer than k heads, counting the runs that came near it."""
    from explorer.output.sections import relations_blocks

    rows = [((1, 1), 0.997, 1.0, 32), ((1, 1), 0.75, 1.3, 64), ((2, 2), 0.80, 1.4, 64), ((2, 2), 0.99, 1.1, 32),
            ((4, 4), 1.0, 1.5, 32), ((4, 4), 0.997, 1.8, 64), ((8, 8), 1.0, 2.0, 32), ((8, 8), 1.0, 2.5, 64)]  # fmt: skip
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
