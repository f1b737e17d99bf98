"""Records -> tables: architectures as the unit, intervals inside their range, no figure counted twice."""

from __future__ import annotations

import numpy as np
import pytest
from optuna.trial import TrialState

from explorer.answer import architecture_table, architectures, common_epoch, csv_ready, trials_table
from tests.fixtures import latency, record


def test_runs_of_one_architecture_are_averaged_and_different_architectures_are_not():
    recs = [
        record(0, (4, 4), 0.80, 1.0, role="finalist", seed=1),
        record(1, (4, 4), 0.84, 1.1, role="finalist", seed=2),
        record(2, (4, 4), 0.82, 1.05, role="finalist", seed=3),
        record(3, (2, 2), 0.70, 0.8, role="finalist", seed=1),
        record(4, (2, 2), 0.72, 0.82, role="finalist", seed=2),
        record(5, (8, 8), 0.90, 2.0),  # a search trial: another role
    ]
    archs = {a.heads: a for a in architectures(recs, "finalist")}
    assert set(archs) == {(4, 4), (2, 2)}
    four = archs[(4, 4)]
    assert four.n == 3 and four.seeds == (1, 2, 3) and four.numbers == (0, 1, 2)
    assert four.quality.estimate == pytest.approx(0.82)
    assert 0 < four.quality.low < 0.82 < four.quality.high < 1
    assert four.rerun.width > four.quality.width  # a new 3-seed mean varies more than the mean is known
    assert four.latency.low < 1.05 < four.latency.high and four.latency.estimate == pytest.approx(1.05)
    assert "pooled" in four.quality.method  # seed spread pooled over both finalists (3 df)


@pytest.mark.parametrize("values", [[1.0, 1.0, 1.0], [0.0, 0.0], [1.0]])
def test_accuracy_intervals_never_leave_0_to_100_percent(values):
    recs = [record(i, (4, 4), v, 1.0, role="finalist", seed=i, history=(v,)) for i, v in enumerate(values)]
    (a,) = architectures(recs, "finalist")
    assert 0 <= a.quality.low <= a.quality.estimate <= a.quality.high <= 1
    assert a.quality.width > 0 and 0 <= a.rerun.low and a.rerun.high <= 1


def test_a_cached_latency_reused_by_several_runs_is_one_measurement():
    """Three runs that all read one cached figure carry no spread between timings: the interval must come from
    that one measurement's own block times, not be a zero-width interval from three copies."""
    same = latency(1.0, "2025-01-01T12:00:00+00:00", spread=0.05)
    recs = [record(i, (4, 4), 0.8, 1.0, seed=i) for i in range(3)]
    recs = [r.__class__(**{**r.__dict__, "latency": same}) for r in recs]
    (a,) = architectures(recs, "search")
    assert a.latency.n == 1 and "block times" in a.latency.method
    assert a.latency.low < 1.0 < a.latency.high and a.latency.width > 0.05


def test_accuracy_at_a_common_epoch_includes_runs_stopped_early():
    full = record(0, (4, 4), 0.9, 1.0, epochs=6)
    stopped = record(1, (1, 1), 0.5, 0.5, epochs=6, state=TrialState.PRUNED, history=(0.3, 0.4))
    assert [a.heads for a in architectures([full, stopped], "search")] == [(4, 4)]  # final: COMPLETE only
    at2 = {a.heads: a.values for a in architectures([full, stopped], "search", epoch=2)}
    assert at2 == {(4, 4): (full.history[1],), (1, 1): (0.4,)}
    assert common_epoch([full, stopped]) == 2
    over_budget = record(2, (8, 8), 0.0, 9.0, state=TrialState.PRUNED, history=())
    assert common_epoch([full, stopped, over_budget]) == 2  # untrained trials do not drag it to 0


def test_tables_keep_tuples_and_the_csv_edge_writes_strings():
    recs = [
        record(0, (4, 2), 0.8, 1.0),
        record(1, (1, 1), 0.5, 0.5, state=TrialState.FAIL, fail_reason="diverged"),
    ]
    t = trials_table(recs)
    assert t.loc[0, "heads"] == (4, 2) and t.loc[0, "d_k"] == (16, 32) and t.loc[1, "state"] == "FAIL"
    out = csv_ready(t)
    assert out.loc[0, "heads"] == "4,2" and out.loc[0, "d_k"] == "16,32"
    a = architecture_table(architectures(recs))
    assert list(a["heads"]) == [(4, 2)] and a.loc[0, "heads_max"] == 4 and a.loc[0, "dk_min"] == 16
    assert np.isclose(a.loc[0, "val_accuracy"], recs[0].val_accuracy)


def test_architectures_summarizes_the_runs_of_one_configuration():
    from explorer.answer import Architecture

    runs = [record(i, (4, 4), 0.8 + 0.01 * i, 1.0, role="finalist", seed=100 + i) for i in range(3)]
    (arch,) = architectures(runs, "finalist")
    assert isinstance(arch, Architecture) and arch.heads == (4, 4)
    assert arch.numbers == (0, 1, 2) and arch.seeds == (100, 101, 102)
    assert arch.values == pytest.approx((0.8, 0.81, 0.82))


def test_decode_only_keeps_the_decoding_retimings():
    from explorer.answer import decode_only
    from explorer.storage import Retiming, TimingKind

    forward, decode = Retiming("a", 0, latency(1.0)), Retiming("a", 0, latency(2.0), kind=TimingKind.DECODE)
    assert decode_only([forward, decode, forward]) == [decode]


def test_quality_margin_is_one_accuracy_point_or_one_percent_of_the_bits_per_byte():
    from explorer.answer import quality_margin
    from explorer.measurements import QUALITY_METRICS

    accuracy, bpb = QUALITY_METRICS["classification"], QUALITY_METRICS["language_model"]
    assert quality_margin(accuracy, 0.5) == quality_margin(accuracy, 0.9) == pytest.approx(0.01)
    assert quality_margin(bpb, 3.0) == pytest.approx(0.03) and quality_margin(bpb, 1.0) == pytest.approx(0.01)
