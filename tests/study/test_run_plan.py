"""A run is planned once (explorer.study._run_plan): on one `explorer study run`, every check runs exactly once and the
device, the task and the space are resolved once in the command's process; a spawned worker rebuilds its plan's
process-local parts from the portable form and checks nothing again."""

from __future__ import annotations

import pickle
import sys
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from optuna.trial import TrialState

import explorer.data._registry as tasks_module
import explorer.measure._device as device_module
import explorer.model._runtime as runtime_module
import explorer.storage._storage as storage_module
import explorer.study._capacity as capacity_module
import explorer.study._code_record as code_module
import explorer.study._rerun as rerun_module
import explorer.study._run_options as options_module
import explorer.study._run_plan as plan_module
import explorer.study._runs  # noqa: F401 - imported before counting: its defaults (RunOptions()) are made on import
import explorer.study._user_code_check as usercode_module
import explorer.study._workers as workers_module
from explorer.cli import main
from explorer.errors import ConfigError, DeviceError
from explorer.spec import SearchSpace, load_spec
from explorer.study import RunOptions, StopReason, Study, StudyRunPlan, plan_run
from explorer.study._run_plan import PortableStudyRunPlan
from tests.fixtures import write_tiny_spec

# Every check a run makes, by the name explorer's modules hold it under, and where it is defined. (The timing
# functions of explorer.measure also check the runtime they are handed at every measurement, as public functions of
# their own: calls from explorer are not the run's and are not counted.)
CHECKS: dict[str, Any] = {
    "check_total": options_module,
    "check_total_reaches": options_module,
    "resolve_storage_url": storage_module,
    "check_rerun": plan_module,
    "check_same_meaning": rerun_module,
    "check_user_model": usercode_module,
    "check_code": code_module,
    "check_runtime": runtime_module,
    "check_study_fits": capacity_module,
}
# What a process of a run resolves (the space is counted as it is built: SearchSpace.__init__).
RESOLVED: dict[str, Any] = {"resolve_device": device_module, "load_task": tasks_module}


def _wrap_everywhere(
    monkeypatch: pytest.MonkeyPatch, name: str, original: Callable[..., Any], seen: Counter
) -> None:
    """Count the calls of ``original`` under ``name`` in every explorer module that holds it, made from outside
    explorer.measure and explorer.model (the timing functions check their runtime on every measurement)."""

    def counting(*args: Any, **kwargs: Any) -> Any:
        if not sys._getframe(1).f_globals["__name__"].startswith(("explorer.measure.", "explorer.model.")):
            seen[name] += 1
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if module.__name__.startswith("explorer") and getattr(module, name, None) is original:
            monkeypatch.setattr(module, name, counting)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """How often each check ran, each resolution was made and RunOptions was checked, since the fixture began."""
    seen: Counter = Counter()
    for name, module in {**CHECKS, **RESOLVED}.items():
        _wrap_everywhere(monkeypatch, name, getattr(module, name), seen)
    for cls, method, name in (
        (RunOptions, "__post_init__", "RunOptions"),
        (SearchSpace, "__init__", "space"),
    ):
        original = getattr(cls, method)

        def counting(
            self: Any, *args: Any, _original: Any = original, _name: str = name, **kwargs: Any
        ) -> Any:
            seen[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, method, counting)
    return seen


def _study_run(spec: Any, url: str, *args: str) -> None:
    cmd = [
        "study",
        "run",
        str(spec),
        "--storage",
        url,
        "--device",
        "cpu",
        "--no-bench",
        "--no-finalists",
        *args,
    ]
    result = CliRunner().invoke(main, cmd)
    assert result.exit_code == 0, result.output


def test_one_study_run_checks_each_input_once_and_resolves_device_task_and_space_once(
    tmp_path, calls, one_thread
):
    spec = write_tiny_spec(tmp_path, n_trials=1, epochs=1)
    url = f"sqlite:///{tmp_path / 's.db'}"
    _study_run(spec, url)  # a new study: nothing stored to compare with, no user code recorded before
    once = {
        "RunOptions",
        "check_total",
        "check_total_reaches",
        "resolve_storage_url",
        "check_rerun",
        "check_user_model",
        "check_runtime",
        "check_study_fits",
        "resolve_device",
        "load_task",
        "space",
    }
    assert calls == Counter(dict.fromkeys(once, 1)), calls
    calls.clear()
    _study_run(spec, url, "--n-trials", "2")  # the same study again: compared with the stored spec and code
    assert calls == Counter(dict.fromkeys(once | {"check_same_meaning", "check_code"}, 1)), calls
    assert Study.open("tiny", url).spec.n_trials == 2
    calls.clear()
    result = CliRunner().invoke(main, ["study", "resume", "tiny", "--storage", url, "--n-trials", "3"])
    assert result.exit_code == 0, result.output
    resumed = {
        "RunOptions",
        "check_total",
        "resolve_storage_url",
        "check_code",
        "resolve_device",
        "load_task",
        "space",
        "check_runtime",
        "check_study_fits",
        "check_total_reaches",
    }
    # from the database alone: no spec file to compare
    assert calls == Counter(dict.fromkeys(resumed, 1)), calls


def test_a_spawned_worker_rebuilds_its_plan_without_checking_anything(tmp_path, calls, one_thread):
    spec = load_spec(write_tiny_spec(tmp_path, n_trials=1, epochs=1))
    plan = plan_run(spec, RunOptions(workers=2), f"sqlite:///{tmp_path / 's.db'}")
    portable = pickle.loads(pickle.dumps(plan.portable(plan.device)))  # as a spawned process receives it
    assert isinstance(portable, PortableStudyRunPlan) and portable.device == torch.device("cpu")
    calls.clear()
    out: list[Any] = []
    # the worker's whole path
    workers_module._worker_main(portable, "search", 1, SimpleNamespace(put=out.append))
    assert out == [(None, "")]  # the stage done: no stop reason
    # the task's tensors are all it loads; no check, no resolution
    assert calls == Counter(load_task=1), calls
    assert Study.open("tiny", plan.storage_url).optuna_study.trials[0].state is TrialState.COMPLETE


def test_the_plan_holds_the_final_spec_the_device_and_the_deadline(tmp_path):
    spec = load_spec(write_tiny_spec(tmp_path, n_trials=3, epochs=1))
    plan = plan_run(spec, RunOptions(timeout=60, device="cpu"), f"sqlite:///{tmp_path / 's.db'}", n_trials=5)
    assert isinstance(plan, StudyRunPlan) and (plan.total, plan.timeout, plan.total_from) == (
        5,
        60,
        "--n-trials",
    )
    assert plan.device.type == "cpu" and plan.context.store is not None and plan.deadline is not None
    assert plan.spec.n_trials == 5 and plan.study.writable
    # the stored total changes only when the run starts (run_planned)
    assert Study.open(plan.name, plan.storage_url).spec.n_trials == 3


def test_a_refused_plan_writes_nothing(tmp_path):
    spec = load_spec(write_tiny_spec(tmp_path, n_trials=1, epochs=1))
    url = f"sqlite:///{tmp_path / 's.db'}"
    with pytest.raises(ConfigError, match="--n-trials must be at least 1"):
        plan_run(spec, RunOptions(), url, n_trials=0)
    with pytest.raises(DeviceError):
        plan_run(spec, RunOptions(device="tpu"), url)
    assert not (tmp_path / "s.db").exists()
    with pytest.raises(ConfigError, match="--workers must be at least 1"):
        RunOptions(workers=0)  # options are checked as they are made


def test_stop_reasons_are_values():
    assert {r.value for r in StopReason} == {
        "timeout",
        "exhausted",
        "failures",
        "duplicates",
        "budget",
        "minutes",
        "horizon",
    }
