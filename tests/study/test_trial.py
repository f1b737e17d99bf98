"""A trial's life, one trial at a time: what a trial stores, how it stops at a rung or over budget, and which
it closes without training (beyond the total, a configuration another trial holds, the wrong stage)."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from optuna.trial import TrialState, create_trial

import explorer.measure._evaluate as evaluate_module
import explorer.study._trial as trial_module
from explorer.layout import FinalistRun, ModelConfig, search_seed
from explorer.spec import _fidelity as fidelity, load_spec
from explorer.storage import Role, arch_key, load_records
from explorer.study import StudyRunPlan
from explorer.study._trial import ClosedTrial, Objective, TrialFailed
from explorer.study._workers import enqueue_runs
from tests.fixtures import latency, plan_study, write_tiny_spec

CATCH = (TrialFailed, ClosedTrial)


def open_tiny(tmp_path, **spec: Any) -> StudyRunPlan:
    """The plan of a tiny digits study with no early stopping unless asked: its study created, nothing run."""
    spec.setdefault("early", False)
    return plan_study(load_spec(write_tiny_spec(tmp_path, **spec)), f"sqlite:///{tmp_path / 's.db'}")


def objective(plan: StudyRunPlan, **kw: Any) -> Objective:
    """The search's objective in this process (weights are not kept: no store)."""
    context = plan.context.opened(plan.storage_url, None)
    return Objective(plan.study.optuna_study, plan.spec, context, **kw)


def points(plan: StudyRunPlan, n: int) -> list[Any]:
    """The first ``n`` architectures of the study's space, with the parameters that sample them."""
    space = plan.context.space
    return [p for p, _ in zip(space.points(), range(n), strict=False)]


def run(plan: StudyRunPlan, obj: Objective, *params: dict[str, Any]) -> list[optuna.trial.FrozenTrial]:
    """Enqueue a trial for each of ``params`` and run them; return every trial of the study."""
    for p in params:
        plan.study.optuna_study.enqueue_trial(p)
    plan.study.optuna_study.optimize(obj, n_trials=len(params), catch=CATCH)
    return plan.study.optuna_study.get_trials()


def test_a_trial_stores_its_architecture_and_measurements(tmp_path, one_thread):
    plan = open_tiny(tmp_path, epochs=2)
    point = points(plan, 1)[0]
    (t,) = run(plan, objective(plan), point.params)
    assert t.state == TrialState.COMPLETE
    a = t.user_attrs
    assert (a["role"], a["proposal"], a["seed"]) == ("search", "enqueued", search_seed(0, t.number))
    assert a["heads"] == list(point.config.heads) and a["d_model"] == point.config.d_model
    assert a["epochs_planned"] == 2 and len(a["history"]) == 2 and a["val_size"] == 270
    assert a["params"] > 0 and a["flops"] > 0 and a["latency_ms"] > 0 and a["device"].startswith("cpu (")
    # the objective values are the last validation accuracy and the measured latency
    assert t.values == [a["history"][-1], a["latency_ms"]] == [a["val_accuracy"], a["latency"]["median_ms"]]
    (record,) = load_records(plan.study.optuna_study)
    assert record.key == arch_key(point.config, point.lr) and record.state is TrialState.COMPLETE


def test_a_trial_over_budget_is_pruned_before_any_training(tmp_path, monkeypatch):
    monkeypatch.setattr(evaluate_module, "fit", lambda *a, **k: pytest.fail("an over-budget trial trains"))
    plan = open_tiny(tmp_path, extra="\n[budgets]\nmax_params = 10\n")
    (t,) = run(plan, objective(plan), points(plan, 1)[0].params)
    a = t.user_attrs
    assert t.state == TrialState.PRUNED and a["stop"] == "over budget before training (params)"
    assert a["history"] == [] and a["feasible"] is False
    assert a["constraints"] == {"params": pytest.approx(a["params"] - 10)} and a["params"] > 10


def test_a_faster_better_peer_stops_a_trial_at_its_first_rung(tmp_path, monkeypatch, one_thread):
    """At each rung the objective hands the rule the search trials that have reached it; a stop prunes the trial
    there with the rule's reason and its history so far."""
    plan = open_tiny(tmp_path, epochs=3, early=True)  # rungs at epochs 1 and 2
    peer_point, point = points(plan, 2)
    space = plan.context.space
    peer = create_trial(
        state=TrialState.COMPLETE,
        params=peer_point.params,
        distributions={k: space.distributions[k] for k in peer_point.params},
        values=[0.95, 0.01],
        user_attrs={"role": "search", "history": [0.9, 0.95, 0.95], "latency": latency(0.01).to_dict()},
    )
    plan.study.optuna_study.add_trial(peer)
    seen = []

    def verdict(epoch: int, accuracy: float, n_val: int, key: str, *args: Any, **kw: Any) -> fidelity.Verdict:
        seen.append((epoch, n_val, key, [(p.number, p.key, p.latency_ms, p.history) for p in args[2]]))
        return fidelity.Verdict(True, "beaten")

    monkeypatch.setattr(trial_module, "dominated_at_rung", verdict)
    trials = run(plan, objective(plan), point.params)
    t = trials[-1]
    assert t.state == TrialState.PRUNED and t.user_attrs["stop"] == "beaten"
    assert len(t.user_attrs["history"]) == 1  # stopped at the first rung, not trained on
    key = arch_key(point.config, point.lr)
    assert seen == [(1, 270, key, [(0, arch_key(peer_point.config, peer_point.lr), 0.01, (0.9, 0.95, 0.95))])]


def test_trials_beyond_the_total_or_holding_a_taken_configuration_close_untrained(tmp_path, one_thread):
    plan = open_tiny(tmp_path, epochs=1)
    first, second = points(plan, 2)
    trials = run(plan, objective(plan, total=2), first.params, first.params, second.params, second.params)
    assert [t.state for t in trials] == [
        TrialState.COMPLETE,
        TrialState.FAIL,
        TrialState.COMPLETE,
        TrialState.FAIL,
    ]
    assert trials[1].user_attrs["duplicate_of"] == 0 and "history" not in trials[1].user_attrs
    assert trials[3].user_attrs["surplus"] is True and "history" not in trials[3].user_attrs


def test_the_finalist_stage_runs_queued_runs_with_their_seed_and_closes_the_rest(tmp_path, one_thread):
    plan = open_tiny(tmp_path, epochs=1, finalists=True)
    config = ModelConfig(d_model=16, heads=(2,), min_dk=4, mlp_ratio=2.0)
    enqueue_runs(plan.study, [FinalistRun(config, 3e-3, seed, "knee") for seed in (7, 8)])
    finals = plan.study.stage_study("finalist")  # the companion study, NAME/finalists
    assert finals.study_name == "tiny/finalists" and not plan.study.optuna_study.get_trials()
    finals.enqueue_trial(points(plan, 1)[0].params)  # a search trial: not this stage's
    context = plan.context.opened(plan.storage_url, None)
    finals.optimize(Objective(finals, plan.spec, context, stage=Role.FINALIST), n_trials=3, catch=CATCH)
    runs, stray = finals.get_trials()[:2], finals.get_trials()[2]
    assert [t.state for t in runs] == [TrialState.COMPLETE] * 2
    assert [t.user_attrs["seed"] for t in runs] == [7, 8] and all(
        t.user_attrs["role"] == "finalist" for t in runs
    )
    # the finalist schedule: [finalists] epochs (twice the search's in the tiny spec), no rung
    assert [len(t.user_attrs["history"]) for t in runs] == [2, 2]
    assert stray.state == TrialState.FAIL and stray.user_attrs["surplus"] is True
