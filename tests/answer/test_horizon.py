"""The finalists' horizon: the pilot that doubles it while twice as long still gains, each run's plateau, the
learning curves, and the check of the deciding comparisons at twice the horizon."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from optuna.trial import TrialState

from benchmarks.synthetic import N_VAL
from explorer.answer import HorizonBy, answer, at_horizon, choose_horizon, curve_plateaued, learning_curves
from explorer.answer._horizon import Horizon, check_horizon, run_plateaued, unplateaued
from explorer.errors import SpecError
from explorer.layout import Purpose, unit_seed
from explorer.spec import spec_from_dict
from tests.fixtures import record

SPEC = spec_from_dict(
    {
        "name": "h",
        "n_trials": 4,
        "task": {"name": "digits", "epochs": 5},
        "latency": {"device": "cpu"},
        "space": {"d_model": [64], "n_layers": [2], "heads": [2, 8]},
        "finalists": {
            "epochs": 10,
            "horizon_cap": 40,
            "folds": 5,
            "seeds": 2,
            "check_units": 3,
            "horizon_by": "gain",
        },
    }
)
BY_COMPARISON = dataclasses.replace(
    SPEC, finalists=dataclasses.replace(SPEC.finalists, horizon_by="comparison")
)
LAYOUTS = {(2, 2): 1.0, (8, 8): 2.0}  # heads -> latency (ms)


def run(n, heads, acc, epochs, unit, purpose=Purpose.GRID, state=TrialState.COMPLETE):
    """A finalist run of ``heads`` on grid unit ``unit`` at ``epochs`` epochs that ends at ``acc``."""
    return record(
        n,
        heads,
        acc,
        LAYOUTS[heads],
        role="finalist",
        seed=unit_seed(SPEC.seed, unit),
        epochs=epochs,
        label="ladder",
        purpose=purpose,
        state=state,
    )


def pilot(gains, units=3, start=1000, noise=0.002, layouts=LAYOUTS):
    """Pilot runs of ``layouts`` on ``units`` units: each horizon 10 * 2**k ends ``gains[k]`` above the one
    before it (gains[0] is the first horizon's accuracy above 0.80; a dict gives each layout its own gains), with
    a little unit-to-unit noise."""
    rng = np.random.default_rng(0)
    out, n = [], start
    for heads in layouts:
        for u in range(units):
            acc = 0.80 + rng.normal(0, 0.01)
            for k, gain in enumerate(gains[heads] if isinstance(gains, dict) else gains):
                acc += gain + rng.normal(0, noise)
                out.append(run(n, heads, acc, 10 * 2**k, u, Purpose.PILOT))
                n += 1
    return out


def test_without_pilot_runs_the_horizon_is_the_specs_first_and_not_chosen_until_the_pilot_runs():
    h = choose_horizon([], SPEC)
    assert (h.epochs, h.chosen, h.piloted, h.cap) == (10, False, False, 40)
    off = dataclasses.replace(SPEC, finalists=dataclasses.replace(SPEC.finalists, pilot=False))
    assert choose_horizon([], off).chosen  # pilot off: the spec's horizon is the grid's
    short = dataclasses.replace(SPEC, finalists=dataclasses.replace(SPEC.finalists, horizon_cap=15))
    h = choose_horizon([], short)  # twice the first horizon is past the cap: nothing for a pilot to try
    assert h.chosen and not h.piloted and h.epochs == 10


def test_the_horizon_doubles_while_twice_as_long_gains_and_stops_at_the_first_that_does_not():
    h = choose_horizon(pilot([0.0, 0.03, 0.0]), SPEC)  # 10 -> 20 gains 3 points, 20 -> 40 nothing
    assert h.chosen and h.piloted and h.epochs == 20 and not h.capped
    assert [(d.short, d.long, d.gained) for d in h.doublings] == [(10, 20, True), (20, 40, False)]
    assert h.doublings[0].mean == pytest.approx(0.03, abs=0.005) and len(h.doublings[0].gains) == 6
    assert h.check_epochs == 40


def test_a_mean_gain_above_the_edge_doubles_the_horizon_though_the_noise_hides_it():
    noisy = choose_horizon(pilot([0.0, 0.006, 0.0], noise=0.02), SPEC).doublings[0]
    # 0.6 points on average: worth training for
    assert noisy.lower < 0 < noisy.edge < noisy.mean and noisy.gained
    small = choose_horizon(pilot([0.0, 0.001, 0.0], noise=0.01), SPEC)
    assert small.doublings[0].lower < 0 and small.doublings[0].mean < small.doublings[0].edge
    assert not small.doublings[0].gained and small.epochs == 10
    # the answer's edge: a quarter of the 1-point margin
    assert small.doublings[0].edge == pytest.approx(0.0025)


def test_by_comparison_a_doubling_that_lifts_both_layouts_alike_keeps_the_first_horizon():
    h = choose_horizon(pilot([0.0, 0.03, 0.0], noise=0.002), BY_COMPARISON)  # both gain 3 points at 20
    assert h.chosen and h.epochs == 10 and len(h.doublings) == 1 and not h.doublings[0].gained
    assert h.doublings[0].by is HorizonBy.COMPARISON
    d = h.doublings[0]
    assert len(d.gains) == 3 and d.lower < 0 < d.upper  # one change of the comparison a unit, around zero
    # under "gain" the same runs double: every layout gained
    assert choose_horizon(pilot([0.0, 0.03, 0.0], noise=0.002), SPEC).epochs == 20


def test_by_comparison_a_doubling_that_changes_the_difference_doubles_either_way():
    closer = {(2, 2): [0.0, 0.03, 0.0], (8, 8): [0.0, 0.0, 0.0]}  # 2,2 catches up at 20, 40 changes nothing
    h = choose_horizon(pilot(closer, noise=0.002), BY_COMPARISON)
    assert h.chosen and h.epochs == 20 and [d.gained for d in h.doublings] == [True, False]
    assert abs(h.doublings[0].mean) == pytest.approx(0.03, abs=0.006)
    apart = {(2, 2): [0.0, 0.0, 0.0], (8, 8): [0.0, 0.03, 0.0]}  # the gap widens: the sign does not matter
    assert choose_horizon(pilot(apart, noise=0.002), BY_COMPARISON).epochs == 20


def test_by_comparison_one_pilot_layout_has_no_comparison_and_keeps_the_first_horizon():
    alone = choose_horizon(pilot([0.0, 0.03, 0.0], layouts={(8, 8): 2.0}), BY_COMPARISON)
    assert alone.chosen and alone.epochs == 10 and alone.doublings[0].gains == ()


def test_the_spec_refuses_an_unknown_horizon_criterion():
    with pytest.raises(SpecError, match="horizon_by"):
        spec_from_dict(
            {
                "name": "h",
                "task": {"name": "digits"},
                "space": {"d_model": [64], "n_layers": [2], "heads": [2, 8]},
                "finalists": {"horizon_by": "accuracy"},
            }
        )


def test_no_gain_keeps_the_first_horizon_and_a_gain_at_the_cap_is_said_to_be_capped():
    flat = choose_horizon(pilot([0.0, 0.0]), SPEC)
    assert flat.chosen and flat.epochs == 10 and len(flat.doublings) == 1
    capped = choose_horizon(pilot([0.0, 0.03, 0.03]), SPEC)  # 40 still gains over 20, and 80 is past the cap
    assert capped.chosen and capped.epochs == 40 and capped.capped


def test_the_pilot_is_pending_until_every_run_of_the_doubling_under_test_has_ended():
    runs = pilot([0.0, 0.03])  # 10 and 20 epochs: 20 gained, so 40 is next and not run yet
    h = choose_horizon(runs, SPEC)
    assert not h.chosen and h.epochs == 20 and len(h.doublings) == 1
    # a failed run ends its pair: the doubling is judged on the pairs both horizons finished
    failed = [
        dataclasses.replace(r, state=TrialState.FAIL) if r.number == runs[1].number else r for r in runs
    ]
    h2 = choose_horizon(failed, SPEC)
    assert len(h2.doublings[0].gains) == 5


def test_a_running_pilot_run_holds_the_choice():
    runs = pilot([0.0, 0.0])
    running = [dataclasses.replace(runs[-1], state=TrialState.RUNNING)]
    assert choose_horizon(runs, SPEC).chosen
    assert not choose_horizon(runs[:-1] + running, SPEC).chosen


def test_the_grid_keeps_the_chosen_horizons_runs_and_never_the_checks():
    runs = pilot([0.0, 0.03, 0.0])
    h = choose_horizon(runs, SPEC)
    grid = [r for r in at_horizon(runs, h) if r.role == "finalist"]
    assert grid and {r.epochs_planned for r in grid} == {20}
    fixed = Horizon(10, True)  # no pilot: every finalist run but the check's
    check = run(1, (2, 2), 0.9, 20, 0, Purpose.CHECK)
    kept = at_horizon([run(0, (2, 2), 0.9, 10, 0), check], fixed)
    assert [r.number for r in kept] == [0]


def test_a_run_plateaued_when_its_last_quarter_adds_no_more_than_one_standard_error():
    flat = record(0, (2, 2), 0.9, 1.0, history=(0.5, 0.8, 0.89, 0.9, 0.9, 0.9, 0.901, 0.9), role="finalist")
    rising = record(1, (2, 2), 0.9, 1.0, history=(0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9), role="finalist")
    assert run_plateaued(flat) is True and run_plateaued(rising) is False
    assert run_plateaued(record(2, (2, 2), 0.9, 1.0, history=(0.5, 0.9), role="finalist")) is None
    assert curve_plateaued(flat.history, N_VAL) is True and curve_plateaued(rising.history, None) is None
    # a run's own record wins: what the trial wrote when it finished
    assert run_plateaued(dataclasses.replace(rising, plateaued=True)) is True
    stalled = unplateaued([flat, rising], [flat.key])
    assert stalled == {flat.key: (1, 2)}


def test_a_curve_is_the_mean_over_runs_with_its_band_and_the_epoch_it_flattens():
    hist = [(0.5, 0.7, 0.9, 0.9, 0.9), (0.4, 0.8, 0.88, 0.9, 0.92)]
    runs = [record(i, (2, 2), h[-1], 1.0, history=h, epochs=5, role="finalist") for i, h in enumerate(hist)]
    (c,) = learning_curves(runs, [runs[0].key])
    assert c.runs == 2 and c.epochs == 5
    assert c.mean == pytest.approx((0.45, 0.75, 0.89, 0.9, 0.91))
    assert c.low[1] == pytest.approx(0.7) and c.high[1] == pytest.approx(0.8)
    # one binomial standard error of the best mean over two runs of N_VAL examples is about a point: 0.90 is
    # within it of 0.91, 0.89 is not
    assert c.plateau == 4


def grid_and_check(short_gap, long_gap, units=5):
    """8,8 the best; 2,2 below it by ``short_gap`` at 10 epochs on every unit and by ``long_gap`` at 20 on the
    first three (a little noise)."""
    rng = np.random.default_rng(1)
    out, n = [], 0
    for u in range(units):
        base = 0.95 + rng.normal(0, 0.005)
        out.append(run(n, (8, 8), base, 10, u))
        out.append(run(n + 1, (2, 2), base - short_gap + rng.normal(0, 0.002), 10, u))
        n += 2
    for u in range(3):
        base = 0.96 + rng.normal(0, 0.005)
        out.append(run(n, (8, 8), base, 20, u, Purpose.CHECK))
        out.append(run(n + 1, (2, 2), base - long_gap + rng.normal(0, 0.002), 20, u, Purpose.CHECK))
        n += 2
    return out


def test_the_check_holds_when_the_longer_runs_agree_and_fails_when_they_show_the_answer_beyond_the_margin():
    h = Horizon(10, True)
    seeds = [unit_seed(SPEC.seed, u) for u in range(3)]
    keys = {heads: record(0, heads, 0.9, 1.0).key for heads in LAYOUTS}
    ok = check_horizon(
        grid_and_check(0.004, 0.003), h, keys[8, 8], [("answer", keys[2, 2])], seeds, 0.01, 0.05
    )
    assert ok.holds and ok.shifts[0].units == 3 and ok.shifts[0].long[0] == pytest.approx(0.003, abs=0.003)
    bad = check_horizon(
        grid_and_check(0.004, 0.03), h, keys[8, 8], [("answer", keys[2, 2])], seeds, 0.01, 0.05
    )
    assert not bad.holds and bad.shifts[0].long[1] > 0.01  # shown more than the margin below the best
    # the next faster layout, not within the margin at the horizon, shown within it at twice the horizon
    nf = check_horizon(
        grid_and_check(0.03, 0.001), h, keys[8, 8], [("next faster", keys[2, 2])], seeds, 0.01, 0.05
    )
    assert not nf.holds and nf.shifts[0].long[2] < 0.01
    # a next faster layout within the margin at the horizon too (the re-timing could not tell it faster): the
    # longer runs placing it further within agree with its verdict, and showing it beyond contradict it
    tied = check_horizon(
        grid_and_check(0.004, 0.001), h, keys[8, 8], [("next faster", keys[2, 2])], seeds, 0.01, 0.05
    )
    assert tied.holds
    tied_beyond = check_horizon(
        grid_and_check(0.004, 0.03), h, keys[8, 8], [("next faster", keys[2, 2])], seeds, 0.01, 0.05
    )
    assert not tied_beyond.holds
    missing = check_horizon(
        grid_and_check(0.004, 0.003)[:-2], h, keys[8, 8], [("answer", keys[2, 2])], seeds, 0.01, 0.05
    )
    assert missing.pending
    # a layout the grid's rounds left off a unit has no pair there: the check reads the units it has, not pending
    records = grid_and_check(0.004, 0.003)
    off = [r for r in records if not (r.key == keys[2, 2] and r.seed == seeds[2] and r.epochs_planned == 10)]
    fewer = check_horizon(off, h, keys[8, 8], [("answer", keys[2, 2])], seeds, 0.01, 0.05)
    assert not fewer.pending and fewer.shifts[0].units == 2


def test_an_answer_the_longer_runs_contradict_is_not_decided_and_says_why():
    spec = dataclasses.replace(SPEC, finalists=dataclasses.replace(SPEC.finalists, pilot=False))
    search = [record(100 + i, h, 0.9, lat) for i, (h, lat) in enumerate(LAYOUTS.items())]
    holds = answer(search + grid_and_check(0.004, 0.003, units=10), spec)
    assert holds.recommended.heads == (2, 2) and holds.decided and holds.check.holds
    assert holds.horizon.epochs == 10 and not holds.horizon.piloted
    assert all(a.n == 10 for a in holds.candidates)  # the check's runs are in no mean
    broken = answer(search + grid_and_check(0.004, 0.03, units=10), spec)
    assert broken.recommended.heads == (2, 2) and not broken.decided and not broken.check.holds
    assert any("does not hold at 20 epochs" in n for n in broken.notes)
    doc = broken.to_dict()
    assert doc["decided"] is False and doc["horizon_check"]["shifts"][0]["holds"] is False


def test_check_units_0_in_a_spec_file_switches_the_horizon_check_off():
    """docs/spec.md: `0` skips the check; the reader takes it, and the contradicted verdict above stands."""
    document = {
        "name": "h",
        "n_trials": 4,
        "task": {"name": "digits", "epochs": 5},
        "latency": {"device": "cpu"},
        "space": {"d_model": [64], "n_layers": [2], "heads": [2, 8]},
        "finalists": {
            "epochs": 10,
            "horizon_cap": 40,
            "folds": 5,
            "seeds": 2,
            "check_units": 0,
            "pilot": False,
        },
    }
    spec = spec_from_dict(document)
    search = [record(100 + i, h, 0.9, lat) for i, (h, lat) in enumerate(LAYOUTS.items())]
    unchecked = answer(search + grid_and_check(0.004, 0.03, units=10), spec)
    assert spec.finalists.check_units == 0 and unchecked.check is None and unchecked.decided
    with pytest.raises(SpecError, match=r"'check_units' in \[finalists\] must be an integer >= 0"):
        spec_from_dict({**document, "finalists": {**document["finalists"], "check_units": -1}})


def test_the_pilot_trains_the_most_accurate_and_the_fastest_layouts_and_the_check_the_deciding_ones():
    from explorer.answer import check_runs, pilot_layouts, pilot_runs, plan_finalists

    spec = dataclasses.replace(
        SPEC, space=dataclasses.replace(SPEC.space, heads=(1, 2, 4, 8)), finalists=SPEC.finalists
    )
    rows = [((1, 1), 0.80, 1.0), ((2, 2), 0.86, 1.2), ((4, 4), 0.90, 1.5), ((8, 8), 0.88, 2.0)]
    search = [record(i, h, a, lat) for i, (h, a, lat) in enumerate(rows)]
    plan = plan_finalists(search, spec)
    times = np.array([[LAT[layout.config.heads]] * 2 for layout in plan.layouts])
    chosen = pilot_layouts(plan, search, times)
    assert {plan.layouts[i].config.heads for i in chosen} == {
        (4, 4),
        (1, 1),
    }  # the search's best, the fastest
    h = choose_horizon([], spec)
    runs = pilot_runs(plan, chosen, h, spec)
    assert {(r.epochs, r.purpose) for r in runs} == {(10, Purpose.PILOT), (20, Purpose.PILOT)}
    assert len(runs) == 2 * 2 * plan.start and {r.seed for r in runs} == {
        unit_seed(spec.seed, u) for u in range(plan.start)
    }
    # the grid at 10 epochs: 4,4 the best by a little, 2,2 within the margin and faster, 1,1 far below
    grid = plan.at(Horizon(10, True))

    def grid_runs(acc, noise):
        rng = np.random.default_rng(2)
        return [
            dataclasses.replace(r, val_accuracy=acc[r.config.heads] + rng.normal(0, noise), number=500 + n)
            for n, r in enumerate(
                record(
                    0,
                    layout.config.heads,
                    0.0,
                    LAT[layout.config.heads],
                    role="finalist",
                    epochs=10,
                    seed=unit_seed(spec.seed, u),
                    lr=layout.lr,
                    label=layout.label,
                )
                for layout in plan.layouts
                for u in range(5)
            )
        ]

    decided = grid_runs({(1, 1): 0.80, (2, 2): 0.895, (4, 4): 0.90, (8, 8): 0.89}, 0.001)
    assert answer(search + decided, spec).decided
    checks = check_runs(grid, decided, spec, times, Horizon(10, True))
    # the answer (2,2), the best (4,4) and the next faster layout (1,1), on the first 3 units at 20 epochs
    assert {r.config.heads for r in checks} == {(2, 2), (4, 4), (1, 1)}
    assert {(r.epochs, r.purpose) for r in checks} == {(20, Purpose.CHECK)}
    assert {r.seed for r in checks} == {unit_seed(spec.seed, u) for u in range(3)}
    # an open comparison (2,2 one margin's width below the best, measured too noisily to place) has no verdict
    # to check: the stage queues none of the check's runs until the grid decides
    open_ = grid_runs({(1, 1): 0.80, (2, 2): 0.89, (4, 4): 0.90, (8, 8): 0.89}, 0.02)
    assert not answer(search + open_, spec).decided
    assert check_runs(grid, open_, spec, times, Horizon(10, True)) == ()


def test_pilot_runs_at_the_chosen_horizon_are_grid_units():
    """The pilot's runs at the horizon it chose count as the grid's runs on their units (the rule reads them and
    the budget counts them); its runs at twice the horizon do not."""
    from explorer.answer import plan_finalists
    from explorer.answer._finalists import unit_grid

    search = [record(100 + i, h, 0.9, lat) for i, (h, lat) in enumerate(LAYOUTS.items())]
    plan = plan_finalists(search, SPEC)
    runs = pilot([0.0, 0.05, 0.0])  # 20 gains over 10, 40 not: the horizon is 20
    horizon = choose_horizon(runs, SPEC)
    assert horizon.chosen and horizon.epochs == 20
    grid = plan.at(horizon).grid(runs)
    assert {r.epochs_planned for r in grid if r.role == "finalist"} == {20}
    scores, ran = unit_grid(grid, plan.keys, SPEC)
    piloted = [i for i, layout in enumerate(plan.layouts) if layout.config.heads in LAYOUTS]
    assert len(piloted) == 2 and ran.shape[1] == 3  # the pilot's units, no unit of its longer runs
    assert ran[piloted].all() and not np.isnan(scores[piloted]).any()
    assert not ran[[i for i in range(len(plan.layouts)) if i not in piloted]].any()


LAT = {(1, 1): 1.0, (2, 2): 1.2, (4, 4): 1.5, (8, 8): 2.0}


def test_a_grid_run_at_a_horizon_the_pilot_tries_counts_as_its_run():
    """A study whose grid ran before pilots existed: its runs at the first horizon pair with the pilot's longer
    ones (the pilot queues no run the study already has)."""
    runs = pilot([0.0, 0.0])
    grid = [dataclasses.replace(r, purpose=Purpose.GRID) if r.epochs_planned == 10 else r for r in runs]
    h = choose_horizon(grid, SPEC)
    assert h.chosen and h.epochs == 10 and len(h.doublings[0].gains) == 6
    queued = [dataclasses.replace(r, state=TrialState.WAITING) if r.epochs_planned == 20 else r for r in grid]
    assert not choose_horizon(queued, SPEC).chosen  # queued runs of the doubling hold the choice


def test_the_report_and_the_answer_line_say_a_contradicted_verdict_is_no_decision():
    from explorer.cli._common import answer_line
    from explorer.output._answer_sections import check_blocks
    from explorer.output._fmt import claim

    spec = dataclasses.replace(SPEC, finalists=dataclasses.replace(SPEC.finalists, pilot=False))
    search = [record(100 + i, h, 0.9, lat) for i, (h, lat) in enumerate(LAYOUTS.items())]
    broken = answer(search + grid_and_check(0.004, 0.03, units=10), spec)
    assert broken.contradicted and broken.placed
    assert "the runs trained 20 epochs contradict that verdict" in claim(broken)
    line = answer_line("h", broken)
    assert "not decided: the verdict does not hold at 20 epochs" in line and "finalists.epochs=20" in line
    # one command names the longer study, wherever it is said (the answer line, the report, the stage's stop)
    assert (
        broken.check.longer_study("h") == "explorer study run SPEC --set name=h-20 --set finalists.epochs=20"
    )
    assert broken.check.longer_study("h") in line
    lead, table_block = check_blocks(broken)
    text, table = lead.spans[1], table_block.frame
    assert "contradict the verdict, so the answer is not decided" in text
    assert list(table["holds"]) == ["no"] and list(table["its verdict"]) == ["within the margin"]
    holds = answer(search + grid_and_check(0.004, 0.003, units=10), spec)
    text = check_blocks(holds)[0].spans[1]
    assert "do not contradict" in text and not holds.contradicted
