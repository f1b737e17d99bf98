"""Modern heads in the analysis: bits per byte as a minimized quality, the (heads, kv_heads) answer with its
multi-head and multi-query contrasts, decoding time as the knee's axis, and the grouped-query rule."""

from __future__ import annotations

import dataclasses
import math

import pytest

from explorer.analysis import _gqa as gqa, rules_of_thumb
from explorer.analysis._groups import NOT_ENOUGH
from explorer.answer import answer, architecture_table, architectures, attention_kind, plan_finalists
from explorer.layout import ModelConfig
from explorer.storage import Retiming, TimingKind
from tests.fixtures import LM_SPEC as SPEC, latency, lm, lm_finalists, lm_search


def test_attention_kinds():
    assert attention_kind(ModelConfig(64, (8, 8))) == "multi-head"
    assert attention_kind(ModelConfig(64, (8, 8), kv_heads=(1, 1))) == "multi-query"
    assert attention_kind(ModelConfig(64, (8, 8), kv_heads=(2, 4))) == "grouped-query"
    assert attention_kind(ModelConfig(64, (8, 8), kv_heads=(8, 1))) == "mixed"
    assert attention_kind(ModelConfig(64, (1, 1))) == "multi-head"


def test_bits_per_byte_are_a_minimized_quality_with_intervals_on_their_own_scale():
    runs = [
        lm(i, 4, 2, 3.50 + d, 1.0, role="finalist", seed=1_000_000 + i)
        for i, d in enumerate((-0.02, 0, 0.02))
    ]
    (a,) = architectures(runs, "finalist")
    assert a.metric.name == "val_bpb" and a.quality.estimate == pytest.approx(3.50)
    assert a.quality.low < 3.50 < a.quality.high and a.quality.high > 1  # not squeezed into [0, 1]
    assert a.score == pytest.approx(-3.50) and a.rerun.width > a.quality.width
    (one,) = architectures(runs[:1], "finalist")
    # one run: its own standard error
    assert one.quality.width == pytest.approx(2 * 1.959964 * 0.01, rel=1e-3)
    row = architecture_table([a]).iloc[0]
    assert row["quality"] == pytest.approx(3.5) and math.isnan(row["val_accuracy"])
    assert row["decode_ms"] == pytest.approx(1.0, rel=0.05) and row["attention_kind"] == "grouped-query"


def test_the_knee_trades_bits_per_byte_against_decoding_time_and_lower_is_better():
    recs = lm_search(gqa_loss=0.0, gqa_cost=1.05)
    ans = answer(recs, SPEC)
    assert ans.cost_axis == "decode" and ans.evidence == "search"
    rec = ans.recommended
    assert attention_kind(rec.config) == "grouped-query"  # multi-head's bits at nearly multi-query's time
    best = max(ans.candidates, key=lambda a: a.score)
    assert best.quality.estimate == min(a.quality.estimate for a in ans.candidates)  # "best" is the lowest


def test_a_kv_plan_adds_multi_head_and_multi_query_at_the_knees_heads():
    for cost in (1.05, 1.6):  # the knee at 8 heads (its references coincide with 8 heads, next faster) or not
        plan = plan_finalists(lm_search(gqa_cost=cost), SPEC, top=1, seeds=2)
        knee = plan.knee.config
        layouts = {(r.config.heads, r.config.kv_per_layer) for r in plan.runs}
        assert (knee.heads, knee.heads) in layouts and (knee.heads, (1, 1)) in layouts
        assert len(plan.runs) == 2 * len(layouts)  # each layout once, with both seeds


def test_the_answer_states_what_grouping_saves_against_multi_head_attention():
    finals = lm_finalists()
    ans = answer(lm_search() + finals, SPEC)
    assert ans.evidence == "finalists" and ans.recommended.kv_heads == (2, 2)

    def named(label):  # a layout that is two alternatives is one row carrying both names
        return next(c for c in ans.contrasts if label in c.name)

    mha, mqa = named("multi-head attention"), named("multi-query attention")
    assert mha.other.kv_heads == (4, 4) and not mha.quality.significant()  # equal quality
    assert mha.cache_ratio == pytest.approx(2.0) and mha.decode_ratio == pytest.approx(2.0 / 1.1, rel=0.05)
    # multi-query: 0.2 bits per byte worse (differences are of scores, higher is better: minus bits per byte)
    assert mqa.quality.significant() and mqa.quality.diff < -0.15


def test_the_rule_is_supported_when_grouping_keeps_quality_at_near_multi_query_cost():
    v = gqa.gqa_rule(lm_search(gqa_loss=0.0, gqa_cost=1.05, noise=0.002))
    assert v.rule == gqa.GQA_RULE and v.verdict == "supported", v.evidence
    assert "bits per byte" in v.evidence and "decoding cost" in v.evidence


def test_the_rule_is_contradicted_when_grouping_costs_quality_or_decodes_like_multi_head():
    lossy = gqa.gqa_rule(lm_search(gqa_loss=0.5, noise=0.002))
    assert lossy.verdict == "contradicted" and "on quality" in lossy.evidence
    slow = gqa.gqa_rule(lm_search(gqa_cost=2.0, noise=0.002))
    assert slow.verdict == "contradicted" and "on decoding cost" in slow.evidence


def test_noisy_quality_leaves_a_stated_bound_and_missing_groups_are_not_enough_data():
    v = gqa.gqa_rule(lm_search(gqa_loss=0.03, noise=0.08, seed=0))
    assert v.verdict.startswith("no difference larger than"), v
    no_mqa = [r for r in lm_search() if r.config.kv_per_layer[0] != 1]
    assert gqa.gqa_rule(no_mqa).verdict == NOT_ENOUGH
    undecoded = [dataclasses.replace(r, decode=None) for r in lm_search()]
    assert gqa.gqa_rule(undecoded).verdict == NOT_ENOUGH and "[decode]" in gqa.gqa_rule(undecoded).evidence


def test_the_rule_reads_re_timed_decoding_where_the_study_has_it():
    # timed during the search: grouped-query looked as slow as MHA
    recs = lm_search(gqa_cost=2.0, noise=0.002)
    clean = [
        Retiming(
            r.key,
            k,
            latency(
                1.05
                if attention_kind(r.config) == "grouped-query"
                else (1.0 if r.config.kv_per_layer[0] == 1 else 2.0)
            ),
            TimingKind.DECODE,
        )
        for r in recs
        for k in range(3)
    ]
    v = gqa.gqa_rule(recs, clean)
    assert v.verdict == "supported" and "re-timed" in v.evidence


def test_the_classic_rules_speak_of_bits_per_byte_for_a_language_model():
    names = [v.rule for v in rules_of_thumb(lm_search())]
    assert names[0] == "One head loses quality (bits per byte)"
    dk = next(v for v in rules_of_thumb(lm_search()) if v.rule.startswith("d_k"))
    assert "bits per byte" in dk.evidence and "points" not in dk.evidence


def test_a_study_searches_key_value_heads_when_its_search_tried_grouped_layouts():
    from explorer.analysis import searches_kv
    from tests.fixtures import record

    assert searches_kv(lm_search())
    plain = [record(0, (2, 2), 0.8, 1.0), record(1, (4, 4), 0.85, 1.2)]
    assert not searches_kv(plain)
    grouped_finalist = dataclasses.replace(lm_search()[0], role="finalist")
    assert not searches_kv([*plain, grouped_finalist])  # only the search's layouts count
