"""The analysis functions on hand-made tables and synthetic studies whose right answers are known.

``make_study`` (also used by test_report.py and benchmarks/report_scale.py) builds a study with a known
structure: accuracy falls sharply at one head, rises with the head count up to 8 and is flat beyond, drops when
d_k < 16, and grows with d_model; latency grows with d_model, depth and (slightly) the head count.
"""

from __future__ import annotations

import math

import numpy as np
import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState, create_trial

from explorer.insight import analysis as an
from explorer.insight import rules
from tests.fixtures import make_study


def table(**cols) -> pd.DataFrame:
    """A COMPLETE, feasible trials table from columns (numbers filled in)."""
    df = pd.DataFrame(cols)
    df["number"] = range(len(df))
    df["state"] = "COMPLETE"
    df["feasible"] = True
    return df


# --- trials table -------------------------------------------------------------------------------------------


def test_trials_table_flattens_every_state():
    study = make_study(30, states={"FAIL": 2, "PRUNED": 3, "RUNNING": 1}, max_latency_ms=2.0)
    df = an.trials_table(study)
    assert len(df) == 36
    assert df["state"].value_counts().to_dict() == {"COMPLETE": 30, "PRUNED": 3, "FAIL": 2, "RUNNING": 1}
    row = df.iloc[0]
    heads = [int(x) for x in row["heads"].split(",")]
    assert row["heads_max"] == max(heads) and row["heads_min"] == min(heads)
    assert row["dk_min"] == row["d_model"] // max(heads)
    assert {
        "param_d_model",
        "param_lr",
        "value_val_accuracy",
        "value_latency_ms",
        "constraint_latency",
    } <= set(df)
    assert (df["feasible"] == (df["constraint_latency"].fillna(0) <= 0)).all()
    assert df.loc[df.state == "FAIL", "fail_reason"].str.contains("nan").all()
    assert df["duration_s"].iloc[0] == pytest.approx(8.0)


# --- Pareto front and hypervolume ---------------------------------------------------------------------------


def test_pareto_front_drops_dominated_infeasible_and_failed():
    df = table(val_accuracy=[0.9, 0.8, 0.95, 0.85, 0.99], latency_ms=[1.0, 2.0, 3.0, 1.0, 0.5])
    df.loc[4, "feasible"] = False  # would dominate everything
    df.loc[3, "state"] = "FAIL"
    front = an.pareto_front(df)
    assert front["number"].tolist() == [0, 2]  # 1 is dominated by 0; sorted fastest first


def test_pareto_front_three_objectives():
    df = table(val_accuracy=[0.9, 0.9, 0.8], latency_ms=[1.0, 1.0, 0.5], params=[100, 50, 100])
    assert sorted(an.pareto_front(df, ("val_accuracy", "latency_ms", "params"))["number"]) == [1, 2]


@pytest.mark.parametrize(
    ("points", "ref", "expected"),
    [
        ([[0.5, 0.5]], (1, 1), 0.25),
        ([[0, 0.5], [0.5, 0]], (1, 1), 0.75),  # union of two rectangles 0.5 + 0.5 - 0.25 overlap
        ([[0, 0.5], [0.5, 0], [0.6, 0.6]], (1, 1), 0.75),  # a dominated point adds nothing
        ([[0.2, 0.2], [2, 0]], (1, 1), 0.64),  # points beyond the reference are ignored
        ([], (1, 1), 0.0),
        ([[0.0, 0.0]], (1.1, 1.1), 1.21),
    ],
)
def test_hypervolume_2d_hand_computed(points, ref, expected):
    assert an.hypervolume_2d(np.array(points), ref) == pytest.approx(expected)


def test_hypervolume_history_is_monotone_and_ends_at_the_front():
    df = an.trials_table(make_study(60, max_latency_ms=1.5))
    hist = an.hypervolume_history(df)
    assert len(hist) == 60
    assert (np.diff(hist["hypervolume"]) >= -1e-12).all()
    c = an.completed(df)
    final = an.hypervolume_2d(an.normalize(an.pareto_front(df), c), an.HV_REFERENCE)
    assert hist["hypervolume"].iloc[-1] == pytest.approx(final)
    assert 0 < final <= 1.21


# --- knee ---------------------------------------------------------------------------------------------------


def test_knee_is_the_corner_of_an_l_shaped_front():
    # Fast-but-poor, a corner point, slow-but-best: the corner is far from the chord.
    front = table(val_accuracy=[0.50, 0.89, 0.90], latency_ms=[1.0, 1.1, 10.0])
    assert an.knee(front)["number"] == 1


def test_knee_on_a_convex_front_picks_the_bulge():
    lat = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    acc = np.array([0.5, 0.8, 0.87, 0.89, 0.9])  # diminishing returns, bend at latency 2
    assert an.knee(table(val_accuracy=acc, latency_ms=lat))["number"] == 1


def test_knee_with_one_or_two_points():
    assert an.knee(table(val_accuracy=[0.9], latency_ms=[1.0]))["number"] == 0
    two = table(val_accuracy=[0.80, 0.90], latency_ms=[1.0, 2.0])
    assert an.knee(two)["number"] == 1  # equidistant on the front itself: the more accurate wins the tie
    # With the study's ranges as the scale, the gap that is small relative to its range gives way.
    wide_acc = table(val_accuracy=[0.1, 0.8, 0.9], latency_ms=[1.0, 1.0, 2.0])
    assert an.knee(two, bounds=wide_acc)["number"] == 0  # 10 of 80 accuracy points buy all the latency range
    wide_lat = table(val_accuracy=[0.8, 0.9, 0.9], latency_ms=[1.0, 2.0, 100.0])
    assert an.knee(two, bounds=wide_lat)["number"] == 1  # 1 of 99 ms buys the whole accuracy range


def test_knee_with_collinear_front_falls_back_to_utopia_distance():
    front = table(val_accuracy=[0.6, 0.7, 0.8], latency_ms=[1.0, 2.0, 3.0])
    assert an.knee(front)["number"] == 1  # all on the chord: the middle point is the closest to utopia


# --- recommendation -----------------------------------------------------------------------------------------


def _rec_table() -> pd.DataFrame:
    return table(
        val_accuracy=[0.70, 0.90, 0.91, 0.95, 0.60],
        latency_ms=[1.0, 1.5, 1.6, 5.0, 3.0],
        test_accuracy=[0.69, 0.89, 0.90, 0.94, 0.6],
        latency_iqr_ms=[0.1] * 5,
        params=[1000, 2000, 2000, 8000, 500],
        d_model=[64, 64, 64, 128, 64],
        n_layers=[2] * 5,
        heads=["1,1", "4,4", "4,8", "8,8", "2,2"],
        d_k=["64,64", "16,16", "16,8", "16,16", "32,32"],
        family=["uniform", "uniform", "increasing", "uniform", "uniform"],
    )


def test_recommend_without_budgets():
    rec = an.recommend(_rec_table())
    assert rec.most_accurate.number == 3 and rec.fastest.number == 0
    assert rec.knee.number in (1, 2)
    assert rec.knee.heads in ("4,4", "4,8") and rec.front_size == 4
    assert rec.knee.n_close == 1  # the other of trials 1 and 2
    assert rec.confidence == "low"  # no repeated configuration backs it
    assert "within 1 point" in rec.statement


def test_recommend_respects_budgets():
    rec = an.recommend(_rec_table(), {"max_latency_ms": 2.0, "min_val_accuracy": 0.8})
    assert rec.most_accurate.number == 2 and rec.fastest.number == 1
    assert rec.n_candidates == 2 and rec.notes
    none = an.recommend(_rec_table(), {"max_latency_ms": 0.1})
    assert none.knee is None and "budgets" in none.statement


def test_recommend_on_synthetic_study_prefers_several_heads():
    df = an.trials_table(make_study(150, seed=1))
    rec = an.recommend(df)
    assert rec.most_accurate.val_accuracy == pytest.approx(an.completed(df)["val_accuracy"].max())
    assert rec.fastest.latency_ms == pytest.approx(an.completed(df)["latency_ms"].min())
    assert "1" not in rec.knee.heads.split(",")  # one head never sits at the knee of this structure
    assert rec.knee.test_accuracy == pytest.approx(rec.knee.val_accuracy - 0.005)


# --- effects ------------------------------------------------------------------------------------------------


def test_effect_table_numbers():
    df = table(
        val_accuracy=[0.8, 0.9, 1.0, 0.5, 0.7],
        latency_ms=[1.0, 1.0, 1.0, 2.0, 2.0],
        heads_max=[4, 4, 4, 8, 8],
        family=["uniform"] * 4 + ["increasing"],
        d_model=[64] * 5,
    )
    eff = an.effect_table(df, "heads_max")
    r = eff.set_index("heads_max").loc[4]
    assert (
        r["n"] == 3
        and r["val_accuracy_mean"] == pytest.approx(0.9)
        and r["val_accuracy_std"] == pytest.approx(0.1)
    )
    half = 4.302653 * 0.1 / math.sqrt(3)  # t(0.975, 2)
    assert r["val_accuracy_ci_low"] == pytest.approx(0.9 - half, rel=1e-5)
    assert r["latency_ms_ci_high"] == pytest.approx(1.0)
    uniform = an.effect_table(df, "heads")  # uniform schedules only
    assert uniform.set_index("heads_max").loc[8, "n"] == 1
    assert math.isnan(uniform.set_index("heads_max").loc[8, "val_accuracy_ci_low"])
    fam = an.effect_table(df, "family", by=None)
    assert set(fam["family"]) == {"uniform", "increasing"}


def test_effect_table_recovers_the_synthetic_head_curve():
    eff = an.effect_table(an.trials_table(make_study(300, seed=2)), "heads")
    at256 = eff[eff.d_model == 256].set_index("heads_max")["val_accuracy_mean"]
    assert at256.loc[1] < at256.loc[2] < at256.loc[8]


# --- rules of thumb -----------------------------------------------------------------------------------------


def _rule_table(one_head_acc: float, n: int = 6, dk_small_acc: float | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    small = dk_small_acc or 0.9
    kinds = [  # heads_max, heads_min, dk_min, family, mean val accuracy
        (1, 1, 64, "uniform", one_head_acc),
        (4, 4, 16, "uniform", 0.90),
        (16, 16, 4, "uniform", small),
        (32, 32, 2, "uniform", small),
        (8, 2, 8, "increasing", 0.91),
        (8, 8, 8, "uniform", 0.90),
    ]
    rows = []
    for k in range(n):
        noise = rng.normal(0, 0.003)
        for hmax, hmin, dk, fam, acc in kinds:
            trend = 0.001 * k if fam == "increasing" else 0.0  # keeps the groups' variances unequal
            rows.append(
                dict(heads_max=hmax, heads_min=hmin, dk_min=dk, family=fam, val_accuracy=acc + noise + trend)
            )
    df = table(**{k: [r[k] for r in rows] for k in rows[0]})
    return df.assign(d_model=64, n_layers=2, latency_ms=1.0 + 0.01 * df["heads_max"])


def _verdicts(df, bench=None) -> dict[str, rules.RuleVerdict]:
    return {v.rule.split()[0] + v.rule.split()[1]: v for v in rules.rules_of_thumb(df, bench)}


def test_rules_supported():
    v = _verdicts(_rule_table(0.80, dk_small_acc=0.85))
    assert v["Onehead"].verdict == "supported"
    assert v["Onehead"].numbers["acc_diff_pts"] > 5
    assert v["d_kbelow"].verdict == "supported"
    assert v["8-16heads"].verdict == "supported"  # 32 heads gain nothing over 16
    assert v["Moreheads"].verdict == "supported"  # increasing beats uniform by ~1 point


def test_rules_contradicted():
    df = _rule_table(0.95)  # one head is the best here
    df.loc[df.heads_max == 32, "val_accuracy"] += 0.05  # more than 16 heads pays off
    df.loc[df.family == "increasing", "val_accuracy"] -= 0.05
    v = _verdicts(df)
    assert v["Onehead"].verdict == "contradicted"
    assert v["8-16heads"].verdict == "contradicted"
    assert v["Moreheads"].verdict == "contradicted"


def test_rules_not_enough_data():
    df = _rule_table(0.80, n=2)  # two trials per group is below MIN_GROUP
    verdicts = rules.rules_of_thumb(df)
    assert [v.verdict for v in verdicts] == [rules.NOT_ENOUGH] * 5
    assert "needs >= 3" in verdicts[0].evidence
    # Groups at different widths are never compared.
    df = _rule_table(0.80)
    df.loc[df.heads_max == 1, "d_model"] = 128
    assert rules.rules_of_thumb(df)[0].verdict == rules.NOT_ENOUGH


def test_merged_heads_rule_from_bench():
    rows = [
        {"impl": "serial", "median_ms": 12.4, "iqr_ms": 0.3},
        {"impl": "merged", "median_ms": 3.1, "iqr_ms": 0.1},
        {"impl": "fused", "median_ms": 2.5, "iqr_ms": 0.1},
    ]
    v = _verdicts(_rule_table(0.8), rows)["Mergedheads"]
    assert v.verdict == "supported" and v.numbers["speedup"] == pytest.approx(4.0)
    rows[1]["median_ms"] = 13.0
    assert _verdicts(_rule_table(0.8), rows)["Mergedheads"].verdict == "contradicted"
    rows[1]["median_ms"] = 12.0  # 3% faster: within noise
    assert _verdicts(_rule_table(0.8), rows)["Mergedheads"].verdict == rules.NOT_ENOUGH


def test_rules_on_synthetic_study():
    v = _verdicts(an.trials_table(make_study(400, seed=3)))
    assert v["Onehead"].verdict == "supported"
    assert v["d_kbelow"].verdict == "supported"


# --- account ------------------------------------------------------------------------------------------------


def test_study_account_partial_and_masked(tmp_path):
    study = make_study(10, states={"RUNNING": 1, "PRUNED": 2, "FAIL": 1}, n_trials_target=20)
    url = "postgresql://alice:s3cret@db.example:5432/explorer"
    acc = an.study_account(study, an.trials_table(study), url)
    assert acc.states == {"COMPLETE": 10, "PRUNED": 2, "FAIL": 1, "RUNNING": 1}
    assert acc.partial and "RUNNING" in acc.partial_reason and "12 of the spec's 20" in acc.partial_reason
    assert acc.early_stopped == 2 and acc.epochs_saved == 12
    assert "s3cret" not in acc.resume and "***" in acc.resume
    assert acc.resume.startswith("explorer study resume synthetic --storage")
    assert acc.reproduce.startswith("explorer study run studies/synthetic.toml")
    assert acc.wall_time_s == pytest.approx(10 * 13 + 8)  # first start to the last end (FAIL trial 13)
    done = make_study(5)
    assert not an.study_account(done, an.trials_table(done)).partial


def test_param_importances_fixed_seed_and_too_few():
    study = make_study(40)
    a, why = an.param_importances(study)
    b, _ = an.param_importances(study)
    assert why == "" and set(a["objective"]) == {"val_accuracy", "latency_ms"}
    pd.testing.assert_frame_equal(a, b)
    top = a[a.objective == "latency_ms"].sort_values("importance").iloc[-1]["param"]
    assert top == "d_model"
    few, why = an.param_importances(make_study(3))
    assert few.empty and "needs >= 10" in why


def test_trials_table_leaves_out_surplus_trials():
    study = optuna.create_study(directions=["maximize", "minimize"])
    study.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"surplus": True}))
    study.add_trial(create_trial(state=TrialState.FAIL, user_attrs={"fail_reason": "diverged: nan"}))
    df = an.trials_table(study)
    assert df["number"].tolist() == [1] and df["state"].tolist() == ["FAIL"]
