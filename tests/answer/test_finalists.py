"""The finalist plan: the search's knee, its neighbours and the reference layouts, on a grid of units (folds of
replicates) whose seeds every layout shares and two study seeds never share."""

from __future__ import annotations

import dataclasses

import numpy as np

from explorer.answer import plan_finalists
from explorer.answer._finalists import evidence_units
from explorer.spec import spec_from_dict
from tests.fixtures import record


def finalist_seeds(spec, seeds):
    return [u.seed for u in evidence_units(spec, seeds)]


SPEC = spec_from_dict(
    {
        "name": "f",
        "n_trials": 6,
        "task": {"name": "digits"},
        "latency": {"device": "cpu"},
        "space": {"d_model": [64], "n_layers": [2], "heads": [2, 4, 16, 32], "min_dk": 2},
        "finalists": {"top": 2, "seeds": 3},
    }
)


def search():
    rows = [
        ((2, 2), 0.78, 1.2),
        ((4, 4), 0.84, 1.4),
        ((2, 4), 0.82, 1.3),
        ((32, 32), 0.85, 3.0),
        ((16, 4), 0.6, 2.0),
    ]
    return [record(i, h, a, lat) for i, (h, a, lat) in enumerate(rows)]


def test_plan_has_the_knee_its_neighbour_and_the_references_each_with_fresh_seeds():
    plan = plan_finalists(search(), SPEC)
    by_label = {}
    for run in plan.runs:
        by_label.setdefault(run.label, set()).add((run.config.heads, run.seed))
    assert plan.knee.heads == (4, 4)
    seeds = finalist_seeds(SPEC, 3)[: SPEC.finalists.start]  # every layout first trains on the first units
    assert by_label["knee"] == {((4, 4), s) for s in seeds}
    assert len({h for h, _ in by_label["front"]}) == 1  # top 2: the knee and its nearest front neighbour
    assert by_label["1 head"] == {((1, 1), s) for s in seeds}  # outside the searched counts: a reference
    assert by_label["8 heads"] == {((8, 8), s) for s in seeds}
    assert {h for h, _ in by_label.get("faster on the front", set())} <= {(2, 4)}
    start = SPEC.finalists.start
    layouts = {r.config.key() for r in plan.runs}
    assert all(run.lr == 1e-3 for run in plan.runs) and len(plan.runs) == start * len(layouts)
    assert len(plan.layouts) == len(layouts) and plan.budget == SPEC.finalists.units * len(
        layouts
    ) == 15 * len(layouts)


def test_units_cover_every_fold_of_each_replicate_and_two_study_seeds_share_no_seed():
    units = evidence_units(SPEC, 3)
    assert [(u.fold, u.folds) for u in units] == [(f, 5) for _ in range(3) for f in range(5)]
    assert len({u.fold_seed for u in units}) == 3  # each replicate cuts its folds afresh
    other = evidence_units(dataclasses.replace(SPEC, seed=1), 3)
    assert not {u.seed for u in units} & {u.seed for u in other}
    assert not {u.fold_seed for u in units} & {u.fold_seed for u in other}
    # more replicates later add units and change none of the first ones (a confirm run extends the grid)
    assert evidence_units(SPEC, 5)[:15] == units


def test_a_reference_that_is_already_a_finalist_is_planned_once():
    rows = [((8, 8), 0.86, 1.4), ((2, 2), 0.70, 1.0), ((32, 32), 0.87, 3.0)]
    plan = plan_finalists([record(i, h, a, lat) for i, (h, a, lat) in enumerate(rows)], SPEC)
    assert plan.knee.heads == (8, 8)
    keys = [run.config.key() for run in plan.runs]
    assert len(keys) == SPEC.finalists.start * len(set(keys))  # every architecture once, on its first units
    assert "8 heads" not in {run.label for run in plan.runs}  # the knee is already 8 heads per layer


def test_overrides_and_an_empty_search():
    plan = plan_finalists(search(), SPEC, top=1, seeds=5)
    assert {run.seed for run in plan.runs} == set(finalist_seeds(SPEC, 5))
    assert "front" not in {run.label for run in plan.runs}
    empty = plan_finalists([], SPEC)
    assert empty.runs == () and empty.knee is None and empty.notes


def test_the_ladder_adds_every_head_count_of_the_space_at_the_knees_base_and_can_be_switched_off():
    seeds = set(finalist_seeds(SPEC, 3)[: SPEC.finalists.start])
    plan = plan_finalists(search(), SPEC)
    runs = {}
    for run in plan.runs:
        runs.setdefault(run.config.heads, set()).add(run.seed)
    for h in SPEC.space.heads:  # 2, 4, 16, 32 heads in each layer, whatever the search found
        assert runs[(h, h)] == seeds
    assert {run.config.d_model for run in plan.runs} == {64}
    assert next(r.label for r in plan.runs if r.config.heads == (16, 16)) == "16 heads"

    off = spec_from_dict(SPEC.to_dict() | {"finalists": SPEC.to_dict()["finalists"] | {"ladder": False}})
    assert not off.finalists.ladder
    heads = {run.config.heads for run in plan_finalists(search(), off).runs}
    assert (16, 16) not in heads and (2, 2) not in heads  # neither searched near the knee nor a reference
    assert {(4, 4), (1, 1), (8, 8)} <= heads


def test_the_ladder_keeps_to_the_knees_d_k_floor():
    rows = [((4, 4), 0.84, 1.4), ((2, 2), 0.78, 1.2), ((1, 4), 0.80, 1.3)]
    floor = [record(i, h, a, lat) for i, (h, a, lat) in enumerate(rows)]
    floor = [dataclasses.replace(r, config=dataclasses.replace(r.config, min_dk=16)) for r in floor]
    heads = {run.config.heads for run in plan_finalists(floor, SPEC).runs}
    assert {(2, 2), (4, 4)} <= heads
    # 16 and 32 heads make d_k 4 and 2: under the knee's floor of 16 (the test above plans them at floor 1)
    assert not {(16, 16), (32, 32)} & heads


def test_a_budget_below_the_start_units_starts_every_layout_on_what_it_holds():
    small = spec_from_dict(
        SPEC.to_dict() | {"finalists": SPEC.to_dict()["finalists"] | {"seeds": 2, "folds": 1}}
    )
    plan = plan_finalists(search(), small)
    layouts = {r.config.key() for r in plan.runs}
    assert plan.budget == 2 * len(layouts) and plan.start == 2 < small.finalists.start
    assert len(plan.runs) == plan.budget  # every layout on the 2 units the budget holds, none left out


def test_the_plan_lists_its_layouts_and_the_first_runs_on_each():
    from explorer.answer import FinalistPlan

    plan = plan_finalists(search(), SPEC)
    assert isinstance(plan, FinalistPlan) and plan.knee is not None and plan.knee.heads == (4, 4)
    assert len(plan.keys) == len(plan.layouts) and {r.label for r in plan.runs} == {
        r.label for r in plan.layouts
    }
    assert len(plan.runs) == plan.start * len(plan.layouts)


def test_finalist_times_lays_out_each_layouts_retimings_by_round_on_its_axis():
    from explorer.answer._finalists import finalist_times
    from explorer.storage import Retiming, TimingKind
    from tests.fixtures import latency

    timed = [
        Retiming("a", 0, latency(1.0)),
        Retiming("a", 1, latency(1.5)),
        Retiming("b", 1, latency(2.0)),
        Retiming("b", 0, latency(9.0), kind=TimingKind.DECODE),
    ]
    forward = finalist_times(["a", "b", "c"], timed)
    assert forward.shape == (3, 2) and forward[0].tolist() == [1.0, 1.5] and forward[1, 1] == 2.0
    assert np.isnan(forward[1, 0]) and np.isnan(forward[2]).all()
    assert finalist_times(["b"], timed, axis="decode").tolist() == [[9.0]]


def test_next_runs_spends_at_most_what_is_left_on_the_plans_layouts():
    from explorer.answer import next_runs
    from explorer.answer._finalists import finalist_times

    plan = plan_finalists(search(), SPEC)
    times = finalist_times(plan.keys, [])
    first = next_runs(plan, [], SPEC, times, left=4)
    assert 0 < len(first) <= 4 and {r.label for r in first} <= {r.label for r in plan.layouts}
    assert next_runs(plan, [], SPEC, times, left=0) == ()


def test_each_cost_axis_reads_its_column_of_the_architecture_table():
    from explorer.answer import CostAxis, architecture_table, architectures, cost_axis
    from tests.fixtures import LM_SPEC, lm_search

    assert (cost_axis(SPEC), cost_axis(LM_SPEC)) == (CostAxis.LATENCY, CostAxis.DECODE)
    table = architecture_table(architectures(lm_search(), "search"))
    for column in (axis.column for axis in CostAxis):
        assert table[column].notna().all(), column


def test_the_stage_outlook_counts_the_open_comparisons_and_forecasts_from_two_units_a_layout(monkeypatch):
    import explorer.answer._finalists as finalists
    from explorer.answer import Outlook, stage_outlook
    from explorer.answer._forecast import forecast
    from explorer.answer._rule import Rule

    rng = np.random.default_rng(1)
    scores = np.array([0.95 + rng.normal(0, 0.01, 6), 0.943 + rng.normal(0, 0.01, 6)])
    times = np.array([[2.0], [1.0]])
    a = SPEC.answer
    plan = finalists.FinalistPlan((), None, budget=40)
    rule = Rule(a.margin_for(True), a.risk, a.latency_tie, a.edge_for(True), SPEC.finalists.start, 2)
    expected = forecast(scores, times, ~np.isnan(scores), rule, 40)
    outlook = {}
    for name, grid in (("open", scores), ("one unit", scores[:, :1]), ("decided", scores[:1])):
        monkeypatch.setattr(finalists, "unit_grid", lambda *_, grid=grid: (grid, ~np.isnan(grid)))
        outlook[name] = stage_outlook(plan, [], SPEC, times[: len(grid)])
    assert isinstance(outlook["open"], Outlook) and outlook["open"].open == 1
    assert outlook["open"].forecast == expected
    assert outlook["open"].runs == expected.likely and expected.likely > 0
    assert outlook["one unit"].forecast is None and outlook["one unit"].runs is None  # no spread yet
    assert outlook["decided"].open == 0 and outlook["decided"].runs == 0  # the best alone: decided


def test_rounds_timed_on_a_busy_machine_are_left_out_where_the_others_time_every_layout():
    from explorer.answer import busy_rounds, rule_times
    from explorer.measurements import LatencyResult
    from explorer.storage import Retiming

    def timing(key, r, ms, load):
        lat = LatencyResult(ms, 0.1, 64, 16, 1, "cpu (test)", "float32", 10, load=load, cpus=2)
        return Retiming(key, r, lat)

    quiet = [timing("a", 0, 2.0, 0.5), timing("b", 0, 1.0, 0.5)]
    busy = [timing("a", 1, 1.0, 3.5), timing("b", 1, 2.0, 0.5)]  # one timing of round 1 under load 3.5 on 2
    assert busy_rounds(quiet + busy) == {1}
    times, rounds, left_out = rule_times(["a", "b"], quiet + busy)
    assert rounds == {1} and left_out and times.tolist() == [[2.0], [1.0]]
    # when the busy rounds are all there is, they are kept and said to be busy
    times, rounds, left_out = rule_times(["a", "b"], busy)
    assert rounds == {1} and not left_out and times.tolist() == [[1.0], [2.0]]
    assert busy_rounds(quiet) == set()


def test_the_next_round_size_is_what_the_rule_would_queue(monkeypatch):
    import explorer.answer._finalists as finalists
    from explorer.answer import next_round_size
    from explorer.answer._rule import Rule, smallest_round

    rng = np.random.default_rng(3)
    scores = np.array([0.95 + rng.normal(0, 0.01, 6), 0.943 + rng.normal(0, 0.01, 6)])
    times = np.array([[2.0], [1.0]])
    monkeypatch.setattr(finalists, "unit_grid", lambda *_: (scores, ~np.isnan(scores)))
    a = SPEC.answer
    rule = Rule(a.margin_for(True), a.risk, a.latency_tie, a.edge_for(True), SPEC.finalists.start, 2)
    want = smallest_round(scores, times, rule)
    assert next_round_size(finalists.FinalistPlan((), None), [], SPEC, times) == want == 2
