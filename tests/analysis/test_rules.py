"""Rules of thumb on architecture-level data: exact permutation tests, verdicts that say what the data allows."""

from __future__ import annotations

import numpy as np
import pytest
from optuna.trial import TrialState
from scipy import stats

from explorer.analysis import _rules as rules
from explorer.storage import load_records
from tests.fixtures import make_study, record

LAYOUTS = [
    (1, 1),
    (1, 1),  # one head (two learning rates: two configurations)
    (2, 2),
    (4, 4),
    (2, 4),
    (4, 2),  # multi-head, d_k >= 16
    (8, 8),
    (16, 16),
    (8, 16),
    (16, 8),
    (2, 8),
    (8, 2),
    (4, 8),
    (8, 4),  # d_k < 16, 8-16 heads
    (32, 32),
    (16, 32),
    (32, 16),
    (8, 32),
    (32, 8),  # more than 16 heads
]


def study(one_head=0.70, small_dk=0.80, many_gain=0.0, inc_gain=0.01, seed=0):
    """Architectures at d_model 64, 2 layers, one run each, with planted effects and 0.2-point noise."""
    rng = np.random.default_rng(seed)
    out = []
    for i, heads in enumerate(LAYOUTS):
        if max(heads) == 1:
            acc = one_head
        else:
            acc = 0.85 if min(64 // h for h in heads) >= 16 else small_dk
            acc += many_gain * (max(heads) > 16) + inc_gain * (heads[0] < heads[1])
        r = record(i, heads, acc + rng.normal(0, 0.002), 1.0 + 0.01 * sum(heads))
        out.append(r.__class__(**{**r.__dict__, "lr": 1e-3 * (1 + i)}))  # every row its own configuration
    return out


def verdicts(records, bench=None):
    return {v.rule.split()[0] + v.rule.split()[1]: v for v in rules.rules_of_thumb(records, bench)}


def test_planted_effects_are_supported():
    v = verdicts(study())
    assert v["Onehead"].verdict == "supported" and v["Onehead"].comparison.diff > 0.1
    assert v["d_kbelow"].verdict == "supported"
    assert v["8-16heads"].verdict == "supported"  # more than 16 heads gains nothing here (0.85 vs ~0.85)
    assert v["Moreheads"].verdict == "supported"  # increasing +1 point, 0.2-point noise


def test_effects_the_other_way_are_contradicted():
    v = verdicts(study(one_head=0.95, small_dk=0.90, many_gain=0.05, inc_gain=-0.05))
    assert v["Onehead"].verdict == "contradicted" and "reverse holds" in v["Onehead"].evidence
    assert v["d_kbelow"].verdict == "contradicted"
    assert v["8-16heads"].verdict == "contradicted"  # more than 16 heads gains over a point
    assert v["Moreheads"].verdict == "contradicted"


def test_no_effect_is_a_stated_bound_not_a_verdict_the_data_cannot_carry():
    v = verdicts(study(one_head=0.85, small_dk=0.85, inc_gain=0.0))
    for key in ("Onehead", "d_kbelow"):
        assert v[key].verdict.startswith("no difference larger than"), v[key]
        assert "detectable" in v[key].evidence
    bound = float(v["Onehead"].verdict.split()[-2])
    assert bound == pytest.approx(v["Onehead"].comparison.bound * 100, abs=0.051)  # X is the interval's reach
    assert v["Moreheads"].verdict != "supported"


def test_missing_groups_are_not_enough_data_and_only_those():
    only_multi = [r for r in study() if max(r.heads) > 1]
    v = verdicts(only_multi)
    assert v["Onehead"].verdict == rules.NOT_ENOUGH and "0 in all" not in v["Onehead"].evidence
    assert v["d_kbelow"].verdict != rules.NOT_ENOUGH
    assert v["Mergedheads"].verdict == rules.NOT_ENOUGH  # no bench recorded


def test_a_heads_only_study_reads_one_head_from_the_finalist_runs():
    """At one width and depth one head per layer is a single architecture: the finalists' seeds decide."""
    search = [r for r in study() if max(r.heads) > 1] + [record(50, (1, 1), 0.7, 1.0)]
    runs = [
        (60 + i, heads, acc + 0.004 * i)
        for i, (heads, acc) in enumerate([((1, 1), 0.80)] * 3 + [((4, 4), 0.90)] * 3 + [((8, 8), 0.91)] * 3)
    ]
    finals = [record(n, h, a, 1.0, role="finalist", seed=1_000_000 + n) for n, h, a in runs]
    v = verdicts(search + finals)["Onehead"]
    assert v.verdict == "supported" and "finalist runs" in v.evidence
    res = stats.permutation_test(
        ([a for _, h, a in runs if h != (1, 1)], [a for _, h, a in runs if h == (1, 1)]),
        lambda x, y: np.mean(x) - np.mean(y),
        alternative="greater",
        permutation_type="independent",
        n_resamples=np.inf,
    )
    assert v.comparison.p_value == pytest.approx(res.pvalue) and v.comparison.n_b == 3
    assert verdicts(search)["Onehead"].verdict == rules.NOT_ENOUGH  # without the finalists: one architecture


def test_the_verdict_agrees_with_an_exact_permutation_test():
    recs = study()
    g, n_a, n_b = rules.group_comparison(recs, lambda c: min(c.heads) >= 2, lambda c: max(c.heads) == 1)
    a = [r.val_accuracy for r in recs if min(r.heads) >= 2]
    b = [r.val_accuracy for r in recs if max(r.heads) == 1]
    res = stats.permutation_test(
        (a, b),
        lambda x, y: np.mean(x) - np.mean(y),
        alternative="greater",
        permutation_type="independent",
        n_resamples=np.inf,
    )
    assert g.comparison.exact and g.comparison.p_value == pytest.approx(res.pvalue)
    assert (n_a, n_b) == (len(a), len(b)) and g.epoch == 10


def test_stopped_runs_are_compared_where_every_architecture_still_ran():
    recs = study()
    stopped = record(99, (1, 1), 0.2, 0.9, state=TrialState.PRUNED, history=(0.15, 0.2, 0.25), lr=0.5)
    g, *_ = rules.group_comparison([*recs, stopped], lambda c: min(c.heads) >= 2, lambda c: max(c.heads) == 1)
    assert g.epoch == 3 and g.comparison.n_b == 3  # read at epoch 3; the stopped one-head run is counted


def test_merged_heads_rule_from_bench():
    def bench(merged):
        return [
            {"impl": "serial", "median_ms": 12.4, "iqr_ms": 0.3},
            {"impl": "merged", "median_ms": merged, "iqr_ms": 0.1},
            {"impl": "fused", "median_ms": 2.5, "iqr_ms": 0.1},
        ]

    v = verdicts(study(), bench(3.1))["Mergedheads"]  # the tutorial's own figures
    assert v.verdict == "supported" and v.numbers["speedup"] == pytest.approx(4.0)
    assert verdicts(study(), bench(13.0))["Mergedheads"].verdict == "contradicted"
    assert verdicts(study(), bench(12.3))["Mergedheads"].verdict.startswith("no difference larger than")


def test_rules_on_a_synthetic_study_find_the_planted_truth():
    v = verdicts(load_records(make_study(200, seed=3)))
    assert v["Onehead"].verdict == "supported"
    assert v["d_kbelow"].verdict == "supported"
    assert all(x.verdict != rules.NOT_ENOUGH for k, x in v.items() if k != "Mergedheads")


def test_a_rule_on_the_search_is_supported_at_p_at_most_alpha_and_needs_min_archs_a_side():
    from explorer.analysis import ALPHA, MIN_ARCHS, RuleVerdict

    harm = ("One head", "d_k below")  # the rules that compare two groups of the search one way
    seen = set()
    for planted in (study(), study(one_head=0.85, small_dk=0.85, inc_gain=0.0)):  # effects, then none
        every = rules.rules_of_thumb(planted, None)
        assert every and all(isinstance(v, RuleVerdict) for v in every)
        for v in (v for v in every if v.rule.startswith(harm)):
            assert (v.comparison.p_value <= ALPHA) == (v.verdict == "supported"), v
            seen.add(v.verdict == "supported")
    assert seen == {True, False}
    one_head = [r for r in study() if max(r.heads) == 1]
    assert len(one_head) == MIN_ARCHS  # the planted study has just enough one-head architectures
    v = verdicts([r for r in study() if r.number != one_head[0].number])["Onehead"]
    assert v.verdict == rules.NOT_ENOUGH and f"needs >= {MIN_ARCHS} architectures" in v.evidence


def test_the_d_k_rule_splits_the_multi_head_layouts_at_the_tutorials_floor():
    from explorer.analysis import DK_FLOOR

    v = verdicts(study())["d_kbelow"]
    assert v.rule.startswith(f"d_k below {DK_FLOOR}") and v.verdict == "supported"
    assert f"d_k >= {DK_FLOOR}" in v.evidence and f"d_k < {DK_FLOOR}" in v.evidence


def test_merged_heads_must_be_at_least_the_minimum_speedup_faster():
    from explorer.analysis import MIN_SPEEDUP

    def bench(merged_ms):
        return [
            {"impl": "serial", "median_ms": 10.0, "iqr_ms": 0.01},
            {"impl": "merged", "median_ms": merged_ms, "iqr_ms": 0.01},
        ]

    assert verdicts(study(), bench(10.0 / (MIN_SPEEDUP + 0.02)))["Mergedheads"].verdict == "supported"
    below = verdicts(study(), bench(10.0 / (MIN_SPEEDUP - 0.02)))["Mergedheads"]
    assert below.verdict.startswith("no difference larger than")  # faster, outside the spread, but not enough


def _space(heads, d_model=64, min_dk=4, families=("uniform", "increasing", "decreasing")):
    from explorer.output._report import space_layouts
    from explorer.spec import spec_from_dict

    spec = spec_from_dict(
        {
            "name": "s",
            "n_trials": 4,
            "task": {"name": "digits"},
            "latency": {"device": "cpu"},
            "space": {
                "d_model": [d_model],
                "n_layers": [2],
                "heads": list(heads),
                "min_dk": min_dk,
                "families": list(families),
            },
        }
    )
    return space_layouts(spec)


def test_a_rule_the_space_cannot_test_is_not_applicable_and_says_why():
    small = _space([1, 2, 4, 8, 16])  # at most 16 heads at d_model 64 with d_k >= 4
    v = {x.rule.split()[0]: x for x in rules.rules_of_thumb(study(), None, space=small)}
    assert v["8-16"].verdict == "not applicable"
    assert v["8-16"].evidence == (
        "the space holds no layout with more than 16 heads (at most 16 heads a layer at d_model 64 with d_k >= 4)"
    )
    assert v["One"].verdict == "supported"  # the space holds both sides: judged as before
    uniform = _space([1, 2, 4, 8, 16], families=("uniform",))
    v = {x.rule.split()[0]: x for x in rules.rules_of_thumb(study(), None, space=uniform)}
    assert v["More"].verdict == "not applicable"
    assert v["More"].evidence == (
        "the space holds no layout with increasing (at most 16 heads a layer at d_model 64 with d_k >= 4, "
        "uniform schedules only)"
    )
    # a space with room for more than 16 heads is judged, not set aside
    wide = _space([8, 16, 32], d_model=128)
    v = {x.rule.split()[0]: x for x in rules.rules_of_thumb(study(), None, space=wide)}
    assert v["8-16"].verdict != "not applicable"
