"""Confirmation of the finalists: the plan, resuming after an interruption, and the statistics of the rows."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from explorer.engine.config import LatencyConfig, valid_heads
from explorer.insight import confirm as cf
from explorer.insight.analysis import mean_ci
from explorer.search.spec import load_spec
from explorer.search.study import prepare_study, run_study
from tests.fixtures import write_tiny_spec as write_spec

FAST_TIMING = LatencyConfig(batch_size=16, threads=1, min_run_time=0.01)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def handle(tmp_path_factory):
    """A real 3-trial study on digits; short heartbeats and no attention bench keep it to a few seconds."""
    tmp = tmp_path_factory.mktemp("confirm-study")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EXPLORER_HEARTBEAT_INTERVAL", "1")
        h = prepare_study(load_spec(write_spec(tmp, n_trials=3, early=False)), f"sqlite:///{tmp}/tiny.db")
        h.study.set_user_attr("bench", [])  # the objective skips the attention bench when one is recorded
        run_study(h, device="cpu")
        yield h


@pytest.mark.slow
def test_finalists_references_and_seeds(handle):
    cands = cf.finalists(handle, top=2)
    knee = cands[0]
    assert knee.role == "knee" and knee.trial is not None
    assert [c.role for c in cands].count("knee") == 1 and len({c.config for c in cands}) == len(cands)
    finals = [c for c in cands if c.role != "reference"]
    assert 1 <= len(finals) <= 2
    refs = {c.label: c.model_cfg for c in cands if c.role == "reference"}
    d, depth, floor = knee.model_cfg.d_model, knee.model_cfg.n_layers, knee.model_cfg.min_dk
    for label, h in (("1 head", 1), ("8 heads", 8)):
        duplicate = any(c.model_cfg.heads == (h,) * depth and c.model_cfg.d_model == d for c in finals)
        if h in valid_heads(d, floor) and not duplicate:
            assert refs[label].heads == (h,) * depth and refs[label].d_model == d
        else:
            assert label not in refs

    plan = cf.confirm_plan(handle, cands, seeds=3)
    assert plan == cf.confirm_plan(handle, cands, seeds=3)  # fixed RNG: the same order every time
    assert len(plan) == 3 * len(cands)
    for r in range(3):  # every round runs every candidate once, with that round's seed
        rnd = plan[r * len(cands) : (r + 1) * len(cands)]
        assert {c.config for c, _ in rnd} == {c.config for c in cands} and len({s for _, s in rnd}) == 1
    search_seeds = {t.user_attrs["seed"] for t in handle.study.get_trials()}
    assert not {s for _, s in plan} & search_seeds


class Interrupt(Exception):
    pass


@pytest.mark.slow
def test_confirm_resumes_after_an_interruption(handle):
    seen = []

    def stop_after_two(done, total, row):
        seen.append((done, total, row["config"], row["seed"]))
        if len(seen) == 2:
            raise Interrupt

    with pytest.raises(Interrupt):
        cf.confirm(handle, top=2, seeds=2, device="cpu", on_progress=stop_after_two, latency=FAST_TIMING)
    stored = cf.confirm_rows(handle.study)
    assert len(stored) == 2 and [(r["config"], r["seed"]) for r in stored] == [s[2:] for s in seen]

    resumed = []
    df = cf.confirm(handle, top=2, seeds=2, device="cpu", latency=FAST_TIMING,
                    on_progress=lambda d, t, r: resumed.append((d, t)))  # fmt: skip
    total = seen[0][1]
    assert [d for d, _ in resumed] == list(range(3, total + 1))  # only the missing jobs ran
    assert len(df) == total and not df.duplicated(["config", "seed"]).any()
    assert cf.confirm_rows(handle.study)[:2] == stored  # finished rows are kept as they were
    n_configs = len(cf.finalists(handle, top=2))
    assert (df.groupby("config")["seed"].nunique() == 2).all() and df["config"].nunique() == n_configs
    assert df["val_accuracy"].between(0, 1).all() and (df["latency_ms"] > 0).all()

    again = cf.confirm(handle, top=2, seeds=2, device="cpu", latency=FAST_TIMING,
                       on_progress=lambda *a: pytest.fail("nothing is left to run"))  # fmt: skip
    assert len(again) == total

    summary = cf.confirm_summary(df)
    assert summary["role"].iloc[0] == "knee" and (summary["n"] == 2).all()


def rows(label: str, role: str, val: list[float], latency: list[float]) -> list[dict]:
    return [
        {"config": f"cfg-{label}", "label": label, "role": role, "trial": None, "d_model": 32, "heads": "4",
         "seed": i, "val_accuracy": v, "test_accuracy": v - 0.01, "latency_ms": lat}
        for i, (v, lat) in enumerate(zip(val, latency, strict=True))
    ]  # fmt: skip


def test_summary_intervals_and_welch_tests():
    data = (
        rows("fewer", "finalist", [0.80, 0.81, 0.79], [1.0, 1.1, 0.9])
        + rows("knee", "knee", [0.90, 0.91, 0.92], [1.02, 0.98, 1.0])
        + rows("alike", "reference", [0.905, 0.915, 0.91], [2.0, 2.1, 1.9])
        + rows("once", "reference", [0.5], [3.0])
    )
    summary = cf.confirm_summary(data)
    assert list(summary["label"]) == ["knee", "fewer", "alike", "once"]  # knee first, then finalists
    knee = summary.iloc[0]
    assert knee["val_accuracy_mean"] == pytest.approx(0.91)
    assert (knee["val_accuracy_ci_low"], knee["val_accuracy_ci_high"]) == pytest.approx(
        mean_ci([0.90, 0.91, 0.92])
    )
    assert np.isnan(summary.iloc[3]["val_accuracy_ci_low"])  # one seed: no interval

    diff = cf.significant_differences(data).set_index(["label", "metric"])
    want = stats.ttest_ind([0.80, 0.81, 0.79], [0.90, 0.91, 0.92], equal_var=False)
    assert diff.loc[("fewer", "val_accuracy"), "p_value"] == pytest.approx(want.pvalue)
    assert diff.loc[("fewer", "val_accuracy"), "difference"] == pytest.approx(-0.11)
    assert diff.loc[("fewer", "val_accuracy"), "significant"]
    assert not diff.loc[("fewer", "latency_ms"), "significant"]  # same speed within noise
    assert (
        not diff.loc[("alike", "val_accuracy"), "significant"]
        and diff.loc[("alike", "latency_ms"), "significant"]
    )
    assert (
        np.isnan(diff.loc[("once", "val_accuracy"), "p_value"])
        and not diff.loc[("once", "val_accuracy"), "significant"]
    )
    assert cf.significant_differences(rows("x", "finalist", [0.5, 0.6], [1.0, 1.0])).empty  # no knee rows
